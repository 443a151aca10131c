//! A private tmpfs for the copy lab, mounted and unmounted by the lab itself (or a directory
//! in /dev/shm when mounting is not possible, which the report says). Mount points are named
//! `corelane-lab-copy-<pid>-<start>-<random>` (see [`WorkDir`]) so that a later run can unmount those of a killed run.

use std::path::{Path, PathBuf};
use std::process::Command;

use corelane::child_output::{self, printable, Limits};

use crate::workdir::WorkDir;
use crate::LabError;

/// A scratch directory on tmpfs, removed (and unmounted) when dropped.
#[derive(Debug)]
pub struct Scratch {
    pub path: PathBuf,
    pub mounted: bool,
    /// Why this is not a private mount, when it is not.
    pub note: Option<String>,
    pub options: String,
}

/// Unmounts scratch mounts of killed runs (their PID is gone or reused); returns their paths. Only
/// mount points directly in `$TMPDIR`, where [`Scratch::mount`] makes them: a mount another
/// user made elsewhere under a name like ours (a FUSE mount in their home) is left alone.
pub fn remove_stale_mounts() -> Vec<String> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    remove_stale_mounts_listed(&mounts, &std::env::temp_dir())
}

/// `remove_stale_mounts` for the mount table `mounts` (read earlier: the names in it may
/// have changed since) and the directory `tmp`.
fn remove_stale_mounts_listed(mounts: &str, tmp: &Path) -> Vec<String> {
    mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter(|mp| Path::new(mp).parent() == Some(tmp))
        .filter(|mp| {
            let Some(rest) = Path::new(mp)
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix(crate::workdir::prefix("copy").as_str()))
            else {
                return false;
            };
            // Dead: its PID gone, or (names with a start time) now another process's.
            corelane::fs::run_is_dead(rest) == Some(true)
        })
        .filter(|mp| unmount_here(Path::new(mp)).is_ok())
        .map(|mp| {
            let _ = std::fs::remove_dir(mp);
            mp.to_string()
        })
        .collect()
}

/// Unmounts the mount at `path` itself, never what a symlink put at that name points to
/// (umount2's UMOUNT_NOFOLLOW; the `umount` command resolved the name and followed it).
/// A user with FUSE can make a killed run's name their own mount, detach it and leave a
/// symlink there between the read of /proc/mounts and this call.
fn unmount_here(path: &Path) -> std::io::Result<()> {
    Ok(rustix::mount::unmount(path, rustix::mount::UnmountFlags::NOFOLLOW)?)
}

impl Scratch {
    /// Mounts a tmpfs of `size_bytes` with extra mount `options` (e.g. `huge=always`) on a
    /// fresh private mount point; falls back to a fresh private directory in /dev/shm.
    pub fn mount(size_bytes: u64, options: &str) -> Result<Self, LabError> {
        let mut opts = format!("size={size_bytes},mode=0700");
        if !options.is_empty() {
            opts.push(',');
            opts.push_str(options);
        }
        let fallback = |why: String| -> Result<Self, LabError> {
            let path = WorkDir::create_in(Path::new("/dev/shm"), "copy")?.keep();
            Ok(Self { path, mounted: false, note: Some(why), options: String::new() })
        };
        if !rustix::process::geteuid().is_root() {
            return fallback("not root: using /dev/shm instead of a private tmpfs".into());
        }
        let path = WorkDir::create("copy")?.keep();
        let mut mount = Command::new("mount");
        mount.args(["-t", "tmpfs", "-o", &opts, "corelane-lab"]).arg(&path);
        let out = child_output::run(&mut mount, None, &Limits::REPLY);
        match out {
            Ok(o) if o.status.success() => {
                Ok(Self { path, mounted: true, note: None, options: opts })
            }
            Ok(o) => {
                let _ = std::fs::remove_dir(&path);
                fallback(format!(
                    "mount -o {opts} failed: {}; using /dev/shm",
                    printable(&String::from_utf8_lossy(&o.stderr), 2000)
                ))
            }
            Err(e) => {
                let _ = std::fs::remove_dir(&path);
                fallback(format!("cannot run mount: {e}; using /dev/shm"))
            }
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.mounted {
            let _ = unmount_here(&self.path);
            let _ = std::fs::remove_dir(&self.path);
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mount named like a killed run's scratch but outside `$TMPDIR` (another user's FUSE
    /// mount, say) was unmounted and its directory removed; it is now left alone.
    #[test]
    fn a_stale_looking_mount_outside_tmpdir_is_left_alone() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: mounting a tmpfs needs root");
            return;
        }
        let home = tempfile::tempdir_in("/dev/shm").unwrap();
        let name = format!("{}999999999-planted", crate::workdir::prefix("copy"));
        let mp = home.path().join(name);
        std::fs::create_dir(&mp).unwrap();
        let ok =
            Command::new("mount").args(["-t", "tmpfs", "-o", "size=1m", "t"]).arg(&mp).status();
        assert!(ok.unwrap().success());
        let removed = remove_stale_mounts();
        let still = std::fs::read_to_string("/proc/mounts").unwrap().contains(mp.to_str().unwrap());
        let _ = Command::new("umount").arg(&mp).status();
        assert!(!removed.iter().any(|r| Path::new(r) == mp), "{removed:?}");
        assert!(still && mp.is_dir());
    }

    /// The cleanup ran `umount NAME` on a name read from /proc/mounts earlier; umount
    /// resolves the name, so a symlink swapped in there (the other user's lazily detached FUSE
    /// mount's name) had root unmount whatever mount it pointed to. Now the name itself is
    /// unmounted or nothing is.
    #[test]
    fn a_stale_mount_point_swapped_for_a_symlink_is_not_followed() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: mounting a tmpfs needs root");
            return;
        }
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let (tmp, victim) = (dir.path().join("tmp"), dir.path().join("victim"));
        std::fs::create_dir_all(&tmp).unwrap();
        std::fs::create_dir(&victim).unwrap();
        let ok =
            Command::new("mount").args(["-t", "tmpfs", "-o", "size=1m", "t"]).arg(&victim).status();
        assert!(ok.unwrap().success());
        std::fs::write(victim.join("kept"), b"x").unwrap();
        // A killed run's mount point as /proc/mounts listed it, now a symlink to the victim.
        let name = tmp.join(format!("{}999999999-swapped", crate::workdir::prefix("copy")));
        std::os::unix::fs::symlink(&victim, &name).unwrap();
        // And a killed run's mount point that is still one: that is unmounted and removed.
        let real = tmp.join(format!("{}999999999-real", crate::workdir::prefix("copy")));
        std::fs::create_dir(&real).unwrap();
        let ok =
            Command::new("mount").args(["-t", "tmpfs", "-o", "size=1m", "t"]).arg(&real).status();
        assert!(ok.unwrap().success());
        let listed = format!(
            "t {} tmpfs rw,relatime 0 0\nt {} tmpfs rw,relatime 0 0\n",
            name.display(),
            real.display()
        );

        let removed = remove_stale_mounts_listed(&listed, &tmp);
        let still_mounted = victim.join("kept").exists();
        let _ = Command::new("umount").arg(&victim).status();
        assert!(still_mounted, "the symlink's target was unmounted");
        assert_eq!(removed, [real.display().to_string()]);
        assert!(!real.exists(), "the stale mount point is removed");
        assert!(std::fs::symlink_metadata(&name).unwrap().file_type().is_symlink());
    }

    #[test]
    fn mounts_and_removes_a_private_tmpfs() {
        let scratch = Scratch::mount(16 << 20, "").unwrap();
        assert!(scratch.path.is_dir());
        std::fs::write(scratch.path.join("x"), b"x").unwrap();
        let path = scratch.path.clone();
        let mounted = scratch.mounted;
        drop(scratch);
        assert!(!path.exists(), "{} left behind (mounted: {mounted})", path.display());
    }
}
