//! Private work directories for the lab: configs for root-run peers, a C peer compiled and
//! run as root, scratch files. Made as mkdtemp makes them (tempfile's `Builder::tempdir`): a
//! random name, mode 0700 whatever the umask, and the mkdir itself must succeed, so a directory another user prepared
//! under /tmp (with planted configs, binaries or symlinks) is never adopted.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

    /// Starts the process that removes this directory if the lab is killed (see [`Remover`]);
    /// `None` when it cannot start (the next run's [`remove_stale_trees`] then removes it).
    pub fn remover(&self) -> Option<Remover> {
        let exe = crate::corelane_exe().ok()?;
        let mut cmd = Command::new(exe);
        cmd.args(["guard", "--remove-on-close"]).arg(self.path());
        // Its own process group: a Ctrl-C at the terminal is the lab's to handle, not its.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null());
        child.spawn().ok().map(|child| Remover { child })
    }
}

/// A `corelane guard --remove-on-close DIR` the lab started: it outlives a killed lab (no
/// parent-death signal), sees the pipe from the lab close, and removes the lab's directory
/// once the programs in it have ended (see [`remove_when_closed`]). Dropped while the lab
/// lives (which removes the directory itself), it is ended and reaped, by its PID.
#[derive(Debug)]
pub struct Remover {
    child: Child,
}

impl Drop for Remover {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long a remover tries, once the lab is gone: the programs the lab started end within
/// seconds of their parent-death signal and may write in the directory until then.
const REMOVER_TRIES_FOR: Duration = Duration::from_secs(60);

/// What `corelane guard --remove-on-close DIR` does: waits for `input` to close (the lab
/// holds the other end), then, if the run that made `dir` is dead (its name says which, see
/// `corelane::fs::run_is_dead`), removes it whole through descriptors, trying again while
/// its programs still write there. Returns whether it removed `dir`; a living run's
/// directory, or a name not the lab's, stays.
pub fn remove_when_closed(dir: &Path, input: impl Read) -> Result<bool, LabError> {
    let mut input = input;
    let _ = std::io::copy(&mut input, &mut std::io::sink());
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name().and_then(|n| n.to_str()))
    else {
        return Ok(false);
    };
    // `corelane-lab-<what>-` then the run's `<pid>-<start>-<random>` (no dash in the random).
    let run = name.rsplitn(4, '-').take(3).map(|p| p.len() + 1).sum::<usize>() - 1;
    let prefix = &name[..name.len().saturating_sub(run)];
    if !prefix.starts_with("corelane-lab-") {
        return Ok(false);
    }
    let end = Instant::now() + REMOVER_TRIES_FOR;
    loop {
        let tried = corelane::fs::remove_dead_run(
            parent,
            name,
            prefix,
            &TREE_MODES,
            corelane::fs::Contents::Tree,
        );
        match tried {
            Ok(removed) => return Ok(removed),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) if Instant::now() >= end => {
                return Err(LabError::io(format!("cannot remove {}", dir.display()), e))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(250)),
        }
    }
}

/// The modes of the lab's directories that hold trees: private (0700), traversable for the
/// web servers' workers (0711), served (0755).
const TREE_MODES: [u32; 3] = [0o700, 0o711, 0o755];

/// Removes `what`'s work directories that killed runs left in `$TMPDIR`, whole: as
/// [`remove_stale`] does, for directories holding programs' own directories (a web server's
/// files, Spark's local and work directories), every level opened without following a
/// symlink. Returns their paths.
pub fn remove_stale_trees(what: &str) -> Vec<PathBuf> {
    let tmp = std::env::temp_dir();
    let removed = corelane::fs::remove_dead_runs(
        &tmp,
        &prefix(what),
        &TREE_MODES,
        corelane::fs::Contents::Tree,
    );
    removed.unwrap_or_default().into_iter().map(|name| tmp.join(name)).collect()
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

    /// A remover leaves a living run's directory alone when its input closes, and removes a
    /// dead run's tree.
    #[test]
    fn a_remover_removes_only_a_dead_runs_directory() {
        let alive = WorkDir::create("remover").unwrap();
        std::fs::create_dir(alive.path().join("sub")).unwrap();
        assert!(!remove_when_closed(alive.path(), std::io::empty()).unwrap());
        assert!(alive.path().join("sub").exists());
        let tmp = std::env::temp_dir();
        let dead = tmp.join(format!("{}4000000000-1-t{}", prefix("remover"), std::process::id()));
        std::fs::create_dir_all(dead.join("spark-t/local-driver")).unwrap();
        std::fs::set_permissions(&dead, std::fs::Permissions::from_mode(0o711)).unwrap();
        std::fs::write(dead.join("spark-t/local-driver/f"), "x").unwrap();
        assert!(remove_when_closed(&dead, std::io::empty()).unwrap());
        assert!(!dead.exists());
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
