//! Private work directories for the lab: configs for root-run peers, a C peer compiled and
//! run as root, scratch files. Made as mkdtemp makes them (tempfile's `Builder::tempdir`): a
//! random name, mode 0700 whatever the umask, and the mkdir itself must succeed, so a directory another user prepared
//! under /tmp (with planted configs, binaries or symlinks) is never adopted.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::LabError;

/// A fresh private directory, removed with its contents when dropped.
#[derive(Debug)]
pub struct WorkDir(tempfile::TempDir);

impl WorkDir {
    /// Creates `$TMPDIR/corelane-lab-<what>-<pid>-<start>-<random>` (`<start>`: this
    /// process's start time, so a later run tells it from a run that reused the PID).
    pub fn create(what: &str) -> Result<Self, LabError> {
        Self::create_in(&std::env::temp_dir(), what)
    }

    /// Creates `<parent>/corelane-lab-<what>-<pid>-<start>-<random>`.
    pub fn create_in(parent: &Path, what: &str) -> Result<Self, LabError> {
        Self::made(parent, what, 0o700)
    }

    /// Creates `$TMPDIR/corelane-lab-<what>-<pid>-<random>` readable by every user (0755
    /// under the umask), made the same way: for what a server serves after it gives up root
    /// (nothing secret goes there; nobody else can write there).
    pub fn create_served(what: &str) -> Result<Self, LabError> {
        Self::made(&std::env::temp_dir(), what, 0o755)
    }

    fn made(parent: &Path, what: &str, mode: u32) -> Result<Self, LabError> {
        tempfile::Builder::new()
            .prefix(&format!(
                "{}{}-{}-",
                prefix(what),
                std::process::id(),
                corelane::fs::own_start()
            ))
            .permissions(std::fs::Permissions::from_mode(mode))
            .tempdir_in(parent)
            .map(Self)
            .map_err(|e| {
                LabError::io(
                    format!(
                        "cannot create a private work directory in {} (set TMPDIR to a writable directory)",
                        parent.display()
                    ),
                    e,
                )
            })
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// Hands the directory over to a caller that removes it itself (e.g. after an unmount).
    pub fn keep(self) -> std::path::PathBuf {
        self.0.keep()
    }
}

/// Removes `what`'s work directories in `$TMPDIR` left by runs that were killed (their
/// controller is gone, or its PID now another process's): only this user's directories of the
/// modes the lab makes, holding files only, through descriptors (never following a symlink,
/// see `corelane::fs::remove_dead_runs`). Scratch mounts are unmounted first by
/// `copy::remove_stale_mounts`; a directory still mounted on is not empty and stays.
pub fn remove_stale(what: &str) -> Vec<std::path::PathBuf> {
    let tmp = std::env::temp_dir();
    let removed = corelane::fs::remove_dead_runs(
        &tmp,
        &prefix(what),
        &[0o700, 0o755],
        corelane::fs::Contents::Files,
    );
    removed.unwrap_or_default().into_iter().map(|name| tmp.join(name)).collect()
}

/// The name prefix of `what`'s work directories, followed by the creating PID and a dash.
pub fn prefix(what: &str) -> String {
    format!("corelane-lab-{what}-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// A killed run's directory goes; a symlink planted under the same kind of name, and the
    /// directory it points to, stay.
    #[test]
    fn stale_directories_of_dead_runs_are_removed_but_no_symlink_is_followed() {
        let what = format!("stale{}", std::process::id());
        let tmp = std::env::temp_dir();
        let dead = tmp.join(format!("{}4000000000-x", prefix(&what)));
        std::fs::create_dir(&dead).unwrap();
        std::fs::set_permissions(&dead, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(dead.join("f"), "x").unwrap();
        let target = tempfile::tempdir().unwrap();
        let link = tmp.join(format!("{}4000000001-y", prefix(&what)));
        std::os::unix::fs::symlink(target.path(), &link).unwrap();
        let alive = WorkDir::create(&what).unwrap();
        std::fs::write(alive.path().join("f"), "x").unwrap();
        // Our own PID with another start time: a dead controller whose PID was reused.
        let me = std::process::id();
        let reused = tmp.join(format!("{}{me}-{}-z", prefix(&what), corelane::fs::own_start() + 1));
        std::fs::create_dir(&reused).unwrap();
        std::fs::set_permissions(&reused, std::fs::Permissions::from_mode(0o700)).unwrap();
        let mut removed = remove_stale(&what);
        removed.sort();
        let mut expected = vec![dead.clone(), reused.clone()];
        expected.sort();
        assert_eq!(removed, expected);
        assert!(!dead.exists() && !reused.exists());
        assert!(alive.path().join("f").exists() && target.path().exists());
        std::fs::remove_file(&link).unwrap();
    }

    #[test]
    fn is_private_random_and_removed() {
        let a = WorkDir::create("t").unwrap();
        let b = WorkDir::create("t").unwrap();
        assert_ne!(a.path(), b.path());
        let meta = std::fs::metadata(a.path()).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o700);
        assert_eq!(meta.uid(), rustix::process::geteuid().as_raw());
        let path = a.path().to_owned();
        drop(a);
        assert!(!path.exists());
    }

    /// What the old fixed `corelane-lab-<pid>` name allowed: another user creates the
    /// directory first (world-writable, with a planted file) and the lab adopts it. The
    /// name is now unpredictable and never one that exists already.
    #[test]
    fn a_precreated_directory_is_not_adopted() {
        let parent = tempfile::tempdir().unwrap();
        let planted = parent.path().join(format!("{}{}", prefix("t"), std::process::id()));
        std::fs::create_dir(&planted).unwrap();
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::write(planted.join("nginx.conf"), "planted").unwrap();
        for _ in 0..64 {
            let dir = WorkDir::create_in(parent.path(), "t").unwrap();
            assert_ne!(dir.path(), planted);
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        }
        assert_eq!(std::fs::read_to_string(planted.join("nginx.conf")).unwrap(), "planted");
    }
}
