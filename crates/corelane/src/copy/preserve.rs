//! What a copy keeps of its source beyond the bytes (cp's `--preserve` names), and what it
//! could not keep on the destination: said once per kind with a count, never silently.
//!
//! Ownership decides the set-id bits: a copy keeps set-user-ID, set-group-ID (and a file's
//! sticky bit) only when it also kept the owner, as `cp -a` does; otherwise a root copy of
//! another user's setuid program would be a root setuid program. The source's mount decides
//! too: see `source_mount.rs`.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use serde::Serialize;

/// The attributes a copy keeps, by cp's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Preserve {
    /// Permission bits (set-id bits only with the owner).
    pub mode: bool,
    /// Owner and group: as root, or where they are the caller's own.
    pub ownership: bool,
    /// Access and modification times of files, directories, symlinks and special files.
    pub timestamps: bool,
    /// Hard links: the second and later names of an inode are linked, not copied.
    pub links: bool,
    /// Extended attributes (user., trusted., security.) and POSIX ACLs (the
    /// system.posix_acl_access/default attributes).
    pub xattr: bool,
}

impl Preserve {
    /// What `corelane copy` keeps by default: mode (without set-id bits) and times.
    pub const DEFAULT: Preserve =
        Preserve { mode: true, ownership: false, timestamps: true, links: false, xattr: false };
    /// `--preserve=all`, part of `-a`.
    pub const ALL: Preserve =
        Preserve { mode: true, ownership: true, timestamps: true, links: true, xattr: true };
    /// Nothing: the starting point of a `--preserve=LIST`.
    pub const NONE: Preserve =
        Preserve { mode: false, ownership: false, timestamps: false, links: false, xattr: false };
    /// `-p` and a bare `--preserve`: cp's mode,ownership,timestamps.
    pub const BASIC: Preserve =
        Preserve { mode: true, ownership: true, timestamps: true, links: false, xattr: false };

    /// Every kind in either.
    pub fn with(self, other: Preserve) -> Preserve {
        Preserve {
            mode: self.mode || other.mode,
            ownership: self.ownership || other.ownership,
            timestamps: self.timestamps || other.timestamps,
            links: self.links || other.links,
            xattr: self.xattr || other.xattr,
        }
    }

    /// The kinds of `self` not in `other` (`--no-preserve`).
    pub fn without(self, other: Preserve) -> Preserve {
        Preserve {
            mode: self.mode && !other.mode,
            ownership: self.ownership && !other.ownership,
            timestamps: self.timestamps && !other.timestamps,
            links: self.links && !other.links,
            xattr: self.xattr && !other.xattr,
        }
    }

    /// Whether a loss of `kind` counts against the copy (it was asked for).
    pub fn wants(self, kind: LossKind) -> bool {
        match kind {
            LossKind::Ownership => self.ownership,
            LossKind::Xattr | LossKind::Acl | LossKind::Capability => self.xattr,
            LossKind::SetId => self.mode && self.ownership,
        }
    }
}

impl Default for Preserve {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Parses cp's comma-separated list: mode, ownership, timestamps, links, xattr, context (an
/// xattr, security.selinux, kept with them) and all.
impl FromStr for Preserve {
    type Err = String;

    fn from_str(list: &str) -> Result<Self, Self::Err> {
        let mut out = Preserve::NONE;
        for name in list.split(',') {
            match name.trim() {
                "mode" => out.mode = true,
                "ownership" => out.ownership = true,
                "timestamps" => out.timestamps = true,
                "links" => out.links = true,
                "xattr" | "context" => out.xattr = true,
                "all" => out = Preserve::ALL,
                other => {
                    return Err(format!(
                        "unknown attribute `{other}`: choose from mode, ownership, timestamps, \
                         links, xattr, context, all (comma-separated)"
                    ))
                }
            }
        }
        Ok(out)
    }
}

/// `--reflink`: share the source's extents (FICLONE) instead of copying the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reflink {
    /// Share where the file system can (btrfs, xfs, bcachefs), copy elsewhere (cp's default
    /// since coreutils 9.0).
    #[default]
    Auto,
    /// Share or fail: the copy must cost no data blocks.
    Always,
    /// Always copy the data (copy_file_range is not used where it would share extents).
    Never,
}

impl FromStr for Reflink {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Reflink::Auto),
            "always" => Ok(Reflink::Always),
            "never" => Ok(Reflink::Never),
            _ => Err(format!("unknown --reflink `{s}`: choose auto, always or never")),
        }
    }
}

/// A kind of attribute the destination could not keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LossKind {
    /// Owner or group (not root, and not the caller's own).
    Ownership,
    /// Extended attributes (no support on the destination, or not permitted).
    Xattr,
    /// POSIX ACLs, or an ACL type the destination does not know (NFSv4, rich ACLs).
    Acl,
    /// Set-user-ID and set-group-ID bits of a file read from a mount where the kernel does not
    /// honour them (`nosuid`, FUSE): the copy would honour them.
    #[serde(rename = "set-id")]
    SetId,
    /// `security.capability` (file capabilities) read from such a mount, for the same reason.
    Capability,
}

impl LossKind {
    const ALL: [LossKind; 5] = [
        LossKind::Ownership,
        LossKind::Xattr,
        LossKind::Acl,
        LossKind::SetId,
        LossKind::Capability,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LossKind::Ownership => "ownership",
            LossKind::Xattr => "xattr",
            LossKind::Acl => "acl",
            LossKind::SetId => "set-id",
            LossKind::Capability => "capability",
        }
    }

    /// The `--no-preserve` kind that stops asking for what was lost, and so accepts the loss.
    pub fn accepted_by(self) -> &'static str {
        match self {
            LossKind::Ownership => "ownership",
            LossKind::Xattr | LossKind::Acl | LossKind::Capability => "xattr",
            LossKind::SetId => "mode",
        }
    }
}

/// What could not be kept of one kind: how many entries, the first one met and why.
#[derive(Debug, Clone, Serialize)]
pub struct NotKept {
    pub kind: LossKind,
    pub entries: u64,
    pub example: PathBuf,
    pub why: String,
}

/// Losses counted across lanes: an atomic per kind, the first example kept once. Only a loss
/// touches it, so the lanes never wait on each other here in a copy that keeps everything.
#[derive(Debug, Default)]
pub(crate) struct Losses {
    counts: [AtomicU64; LossKind::ALL.len()],
    first: [OnceLock<(PathBuf, String)>; LossKind::ALL.len()],
}

impl Losses {
    pub(crate) fn record(&self, kind: LossKind, path: &Path, why: impl FnOnce() -> String) {
        let i = kind as usize;
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        if self.first[i].get().is_none() {
            let _ = self.first[i].set((path.to_path_buf(), why()));
        }
    }

    pub(crate) fn report(&self) -> Vec<NotKept> {
        LossKind::ALL
            .into_iter()
            .filter_map(|kind| {
                let entries = self.counts[kind as usize].load(Ordering::Relaxed);
                let (example, why) = self.first[kind as usize].get()?.clone();
                (entries > 0).then_some(NotKept { kind, entries, example, why })
            })
            .collect()
    }
}

/// The effective user ID, read once (a tree copy asks for every entry).
pub(crate) fn euid() -> u32 {
    static EUID: OnceLock<u32> = OnceLock::new();
    *EUID.get_or_init(|| rustix::process::geteuid().as_raw())
}

/// Whether this process may try to give an entry owned by `uid` that owner: root may; anyone
/// else only for their own files (the kernel still decides about the group).
pub(crate) fn may_own(uid: u32) -> bool {
    let me = euid();
    me == 0 || me == uid
}

/// Why ownership could not be kept when `may_own` says no.
pub(crate) fn not_root_why() -> String {
    "not root: entries of other users become the caller's (run as root, or pass \
     --no-preserve=ownership)"
        .into()
}

/// Where to give an owner: a file this copy holds open, or an entry it created, by its name
/// in a directory it holds (not followed).
#[derive(Debug, Clone, Copy)]
pub(crate) enum OwnerTarget<'a> {
    Fd(std::os::fd::BorrowedFd<'a>),
    Node(&'a crate::fs::Node),
}

/// Gives the copy the source's owner and group where this process may; counts a loss where it
/// may not or the kernel refuses. Returns whether both were kept (and so set-id bits may be).
pub(crate) fn keep_owner(
    target: OwnerTarget<'_>,
    uid: u32,
    gid: u32,
    shown: &Path,
    losses: &Losses,
) -> bool {
    // -1 means "unchanged" to chown(2), never an owner to give.
    if uid == u32::MAX || gid == u32::MAX {
        return false;
    }
    // No shortcut when the source is already the caller's: an entry created in a set-group-ID
    // directory (the destination's parent, say) takes that directory's group, not the caller's.
    if !may_own(uid) {
        losses.record(LossKind::Ownership, shown, not_root_why);
        return false;
    }
    let (owner, group) =
        (Some(rustix::fs::Uid::from_raw(uid)), Some(rustix::fs::Gid::from_raw(gid)));
    let done = match target {
        OwnerTarget::Fd(fd) => rustix::fs::fchown(fd, owner, group).map_err(Into::into),
        OwnerTarget::Node(node) => node.chown(uid, gid),
    };
    match done {
        Ok(()) => true,
        Err(e) => {
            losses.record(LossKind::Ownership, shown, || {
                format!("cannot give owner {uid}:{gid} ({e}; a group the caller is not in?)")
            });
            false
        }
    }
}

/// The permission bits a copy gives. With the owner kept, the source's bits exactly (set-id
/// included, as `cp -a`); without it, no set-id bits (nor a file's sticky bit). Without
/// `mode`, the source's rwx bits under the umask, as cp does for a new file.
pub(crate) fn kept_mode(source_mode: u32, directory: bool, mode: bool, owner_kept: bool) -> u32 {
    let bits = if owner_kept {
        source_mode & 0o7777
    } else {
        super::destination::granted_mode(source_mode, directory)
    };
    if mode {
        bits
    } else {
        bits & 0o777 & !super::destination::umask().unwrap_or(0o022)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cp_names_parse() {
        let p: Preserve = "mode,ownership".parse().unwrap();
        assert_eq!(p, Preserve { mode: true, ownership: true, ..Preserve::NONE });
        assert_eq!("all".parse::<Preserve>().unwrap(), Preserve::ALL);
        assert!("links, xattr".parse::<Preserve>().unwrap().links);
        assert!("context".parse::<Preserve>().unwrap().xattr);
        let err = "mode,acl".parse::<Preserve>().unwrap_err();
        assert!(err.contains("`acl`") && err.contains("timestamps"), "{err}");
    }

    #[test]
    fn no_preserve_takes_kinds_away() {
        let p = Preserve::ALL.without("ownership,xattr".parse().unwrap());
        assert_eq!(p, Preserve { ownership: false, xattr: false, ..Preserve::ALL });
        assert!(!p.wants(LossKind::Acl) && !p.wants(LossKind::Ownership));
        assert_eq!(Preserve::ALL.without("all".parse().unwrap()), Preserve::NONE);
        assert!(Preserve::DEFAULT.with("links".parse().unwrap()).links);
    }

    /// A loss names the `--no-preserve` kind that accepts it, and that kind stops asking.
    #[test]
    fn every_loss_is_accepted_by_a_no_preserve_kind() {
        for kind in LossKind::ALL {
            let less: Preserve = kind.accepted_by().parse().unwrap();
            assert!(Preserve::ALL.wants(kind), "{kind:?}");
            assert!(!Preserve::ALL.without(less).wants(kind), "{kind:?}");
        }
    }

    #[test]
    fn reflink_names_parse() {
        assert_eq!("always".parse::<Reflink>(), Ok(Reflink::Always));
        assert!("sometimes".parse::<Reflink>().unwrap_err().contains("auto, always or never"));
    }

    #[test]
    fn set_id_bits_follow_the_owner() {
        assert_eq!(kept_mode(0o104755, false, true, true), 0o4755);
        assert_eq!(kept_mode(0o104755, false, true, false), 0o755);
        assert_eq!(kept_mode(0o043775, true, true, true), 0o3775);
        assert_eq!(kept_mode(0o043775, true, true, false), 0o1775);
    }

    #[test]
    fn losses_are_counted_per_kind_with_the_first_example() {
        let losses = Losses::default();
        losses.record(LossKind::Xattr, Path::new("a"), || "no support".into());
        losses.record(LossKind::Xattr, Path::new("b"), || unreachable!("only the first"));
        let report = losses.report();
        assert_eq!(report.len(), 1);
        assert_eq!((report[0].kind, report[0].entries), (LossKind::Xattr, 2));
        assert_eq!(report[0].example, Path::new("a"));
    }
}
