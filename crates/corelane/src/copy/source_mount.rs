//! What the kernel honours of a source entry's metadata on the mount it is read from.
//!
//! A FUSE mount (user-mountable through setuid fusermount) or removable media reports
//! whatever owner, mode and device numbers its owner likes. Where that mount is `nosuid`, the
//! kernel does not honour its set-id bits or file capabilities; where it is `nodev`, its
//! device nodes do not open. A copy on an ordinary file system would honour them: a
//! root-owned setuid program with the user's contents, a world-writable node for a disk. So
//! the copy keeps only what the kernel honoured on the source: on a `nosuid` mount no set-id
//! bits on files and no `security.capability` (each counted as not kept), on a `nodev` mount
//! no device nodes (each listed as skipped, saying why).
//!
//! FUSE is treated as `nosuid,nodev` whatever its flags say: its daemon invents every
//! attribute, and a FUSE mount made in a user namespace is not honoured by the kernel for the
//! init namespace's root even without those flags. FUSE-reported owners are kept (as `cp -a`
//! does): an owner grants the named user rights over the copy, not its forger, and the
//! attributes that would carry privilege to the forger are the ones dropped here.
//!
//! Directories keep their set-group-ID bit: on a directory it only passes the group on to new
//! entries, which the kernel does on a `nosuid` mount too.

use std::os::fd::AsFd;
use std::path::Path;

use rustix::fs::StatVfsMountFlags;

use super::preserve::{LossKind, Losses};

/// Whether statfs(2)'s `f_type` is FUSE's (fuse and fuseblk alike).
#[allow(clippy::unnecessary_cast)] // the two types differ between architectures
fn is_fuse(fs_type: rustix::fs::FsWord) -> bool {
    fs_type == libc::FUSE_SUPER_MAGIC as rustix::fs::FsWord
}

/// Why a mount's set-id bits, capabilities and device nodes are not honoured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Distrust {
    /// Mounted `nosuid` and/or `nodev`.
    Flags,
    /// A FUSE file system: its daemon says what the attributes are.
    Fuse,
    /// fstatfs(2) failed: nothing is known, so nothing is honoured.
    Unknown(rustix::io::Errno),
}

/// The mount a source directory (or a file mounted on its own) is read from, as fstatfs(2)
/// of its descriptor tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SourceMount {
    /// The entry's device (st_dev): entries of a directory on the same device are on its mount.
    dev: u64,
    nosuid: bool,
    nodev: bool,
    why: Distrust,
}

impl SourceMount {
    /// The mount of the open file or directory `fd` on device `dev`.
    pub(crate) fn read(fd: impl AsFd, dev: u64) -> SourceMount {
        match rustix::fs::fstatfs(fd) {
            Ok(stat) => {
                let flags = StatVfsMountFlags::from_bits_retain(stat.f_flags as u64);
                Self::from_statfs(dev, is_fuse(stat.f_type), flags)
            }
            Err(e) => SourceMount { dev, nosuid: true, nodev: true, why: Distrust::Unknown(e) },
        }
    }

    /// From statfs(2): whether it is FUSE, and the mount flags.
    fn from_statfs(dev: u64, fuse: bool, flags: StatVfsMountFlags) -> SourceMount {
        if fuse {
            return SourceMount { dev, nosuid: true, nodev: true, why: Distrust::Fuse };
        }
        let nosuid = flags.contains(StatVfsMountFlags::NOSUID);
        let nodev = flags.contains(StatVfsMountFlags::NODEV);
        SourceMount { dev, nosuid, nodev, why: Distrust::Flags }
    }

    /// The mount of an entry of a directory on this mount, open as `fd` on device `dev`: the
    /// same one, unless the entry is on another device (a file mount, FUSE's included); then
    /// its own.
    pub(crate) fn of_entry(self, fd: impl AsFd, dev: u64) -> SourceMount {
        if dev == self.dev {
            self
        } else {
            Self::read(fd, dev)
        }
    }

    /// Why the kernel does not honour `what` on this mount.
    fn why(self, what: &str) -> String {
        match self.why {
            Distrust::Flags => {
                let flag = if what.starts_with("device") { "nodev" } else { "nosuid" };
                format!("the source is on a {flag} mount, where the kernel does not honour {what}")
            }
            Distrust::Fuse => format!(
                "the source is on FUSE, whose attributes are whatever its daemon says: {what} \
                 from it are not recreated"
            ),
            Distrust::Unknown(e) => format!(
                "the source's mount flags cannot be read ({e}), so {what} from it are not \
                 recreated"
            ),
        }
    }

    /// `mode` (the bits the copy would give) without the set-id bits of a file on a `nosuid`
    /// mount, counting the loss when it had any. Directories keep theirs (see the module).
    pub(crate) fn honoured_mode(
        self,
        mode: u32,
        directory: bool,
        shown: &Path,
        losses: &Losses,
    ) -> u32 {
        const SET_ID: u32 = 0o6000;
        if !self.nosuid || directory || mode & SET_ID == 0 {
            return mode;
        }
        losses.record(LossKind::SetId, shown, || self.why("set-id bits"));
        mode & !SET_ID
    }

    /// Whether `security.capability` read from this mount may be given to the copy; if not,
    /// the loss is counted.
    pub(crate) fn keeps_capability(self, shown: &Path, losses: &Losses) -> bool {
        if self.nosuid {
            losses.record(LossKind::Capability, shown, || self.why("file capabilities"));
        }
        !self.nosuid
    }

    /// Why a device node on this mount is not recreated, if it is not.
    pub(crate) fn device_skip(self) -> Option<String> {
        self.nodev.then(|| self.why("device nodes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FUSE reports what its daemon likes, nosuid or not: nothing privileged is taken from it.
    #[test]
    fn fuse_is_distrusted_whatever_its_flags() {
        let fuse = SourceMount::from_statfs(7, true, StatVfsMountFlags::empty());
        let losses = Losses::default();
        assert_eq!(fuse.honoured_mode(0o4755, false, Path::new("f"), &losses), 0o755);
        assert!(!fuse.keeps_capability(Path::new("f"), &losses));
        assert!(fuse.device_skip().is_some_and(|why| why.contains("FUSE")));
        let report = losses.report();
        assert_eq!(report.len(), 2, "{report:?}");
        assert!(report[0].why.contains("FUSE"), "{report:?}");
    }

    #[test]
    fn fuse_is_known_by_its_magic_number() {
        assert!(is_fuse(0x6573_5546) && !is_fuse(0x0102_1994));
    }

    #[test]
    fn flags_decide_on_other_file_systems() {
        let losses = Losses::default();
        let plain = SourceMount::from_statfs(7, false, StatVfsMountFlags::empty());
        assert_eq!(plain.honoured_mode(0o6755, false, Path::new("f"), &losses), 0o6755);
        assert!(plain.keeps_capability(Path::new("f"), &losses) && plain.device_skip().is_none());
        assert!(losses.report().is_empty());
        let nosuid = SourceMount::from_statfs(7, false, StatVfsMountFlags::NOSUID);
        assert_eq!(nosuid.honoured_mode(0o2775, true, Path::new("d"), &losses), 0o2775);
        assert_eq!(nosuid.honoured_mode(0o755, false, Path::new("f"), &losses), 0o755);
        assert!(losses.report().is_empty(), "no set-id bits, nothing lost");
        assert_eq!(nosuid.honoured_mode(0o2755, false, Path::new("f"), &losses), 0o755);
        assert!(nosuid.device_skip().is_none());
        let nodev = SourceMount::from_statfs(7, false, StatVfsMountFlags::NODEV);
        assert!(nodev.device_skip().is_some_and(|why| why.contains("nodev mount")));
        assert_eq!(losses.report()[0].kind, LossKind::SetId);
    }
}
