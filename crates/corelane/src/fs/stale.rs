//! Directories left in /tmp by runs that were killed (`corelane-run-…`, `corelane-lab-…`),
//! removed by a later run through descriptors only: the base opened once, each candidate
//! opened `O_DIRECTORY|O_NOFOLLOW` in it (a symlink is never followed), checked through that
//! descriptor to be the caller's and of a mode such a run makes, its files unlinked in that
//! descriptor and the directory itself in the base's. Another user's directory, a symlink, a
//! directory holding a subdirectory (unless the caller allows a tree: each subdirectory is
//! opened the same way, to a bounded depth), or one whose run lives, stays.
//!
//! A run's name holds its PID and, since PIDs are reused, its start time (field 22 of
//! /proc/PID/stat): `PREFIX<pid>-<start>-<random>`. A run is dead when no process has that
//! PID, or the one that has it started at another time. Names of the older form
//! `PREFIX<pid>-<random>` are dead when the PID is gone.

use std::io;
use std::path::Path;

use rustix::fs::{AtFlags, Mode, OFlags};

/// What a stale directory may hold; it is removed only if that is all it holds.
#[derive(Debug, Clone, Copy)]
pub enum Contents<'a> {
    /// At most these names (files).
    Named(&'a [&'a str]),
    /// Any files (no subdirectory).
    Files,
    /// Files and directories to a depth of [`TREE_DEPTH`] (a lab's private directory with a
    /// program's own directories in it), every subdirectory opened in its parent's
    /// descriptor `O_NOFOLLOW`: a symlink in the tree is unlinked, never followed.
    Tree,
}

/// How deep a [`Contents::Tree`] is removed (Spark's block manager nests files 6 deep).
pub const TREE_DEPTH: usize = 16;
/// The most entries read from one directory of a stale run.
const MAX_ENTRIES: usize = 1 << 16;

/// The start time of process `pid` in clock ticks after boot (field 22 of /proc/PID/stat),
/// `None` when there is no such process.
pub fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The comm (field 2) may hold spaces and `)`: count after the last `)`.
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

/// This process's start time, for the names of the directories it makes.
pub fn own_start() -> u64 {
    process_start(std::process::id()).unwrap_or(0)
}

/// Whether the run that named a directory `<pid>-<start>-<random>` (or `<pid>-<random>`) is
/// dead; `None` when the name is of neither form.
pub fn run_is_dead(rest: &str) -> Option<bool> {
    let parts: Vec<&str> = rest.splitn(3, '-').collect();
    let pid: u32 = parts.first()?.parse().ok()?;
    match parts.as_slice() {
        [_, start, _] if start.bytes().all(|b| b.is_ascii_digit()) => {
            let start: u64 = start.parse().ok()?;
            Some(process_start(pid) != Some(start))
        }
        [_, _] | [_, _, _] => Some(!Path::new(&format!("/proc/{pid}")).exists()),
        _ => None,
    }
}

/// Removes the directories in `base` named `prefix` + a dead run's suffix (see
/// [`run_is_dead`]) that are this user's, of one of `modes`, and hold nothing but `contents`;
/// returns their names.
pub fn remove_dead_runs(
    base: &Path,
    prefix: &str,
    modes: &[u32],
    contents: Contents<'_>,
) -> io::Result<Vec<String>> {
    let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY;
    let base = rustix::fs::open(base, flags, Mode::empty())?;
    let mut removed = Vec::new();
    // At most this many entries are looked at (a /tmp can hold millions).
    for entry in rustix::fs::Dir::read_from(&base)?.take(1 << 20) {
        let Ok(entry) = entry else { break };
        let Ok(name) = entry.file_name().to_str() else { continue };
        let Some(rest) = name.strip_prefix(prefix) else { continue };
        if run_is_dead(rest) == Some(true) && remove_one(&base, name, modes, contents).is_ok() {
            removed.push(name.to_owned());
        }
    }
    Ok(removed)
}

/// Removes the one directory `base/name` as [`remove_dead_runs`] would (its name `prefix` +
/// a dead run's suffix, this user's, of one of `modes`, holding nothing but `contents`):
/// `Ok(true)` when it was removed, `Ok(false)` when its run still lives or the name is not a
/// run's, an error when it could not be removed (yet: a program may still be writing in it).
pub fn remove_dead_run(
    base: &Path,
    name: &str,
    prefix: &str,
    modes: &[u32],
    contents: Contents<'_>,
) -> io::Result<bool> {
    let Some(rest) = name.strip_prefix(prefix) else { return Ok(false) };
    if run_is_dead(rest) != Some(true) || name.contains('/') {
        return Ok(false);
    }
    let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY;
    let base = rustix::fs::open(base, flags, Mode::empty())?;
    remove_one(&base, name, modes, contents).map(|()| true)
}

fn remove_one(
    base: &rustix::fd::OwnedFd,
    name: &str,
    modes: &[u32],
    contents: Contents<'_>,
) -> io::Result<()> {
    let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY;
    let dir = rustix::fs::openat(base, name, flags, Mode::empty())?;
    let st = rustix::fs::fstat(&dir)?;
    let mine = st.st_uid == rustix::process::geteuid().as_raw();
    if !mine || !modes.contains(&(st.st_mode & 0o7777)) {
        return Err(io::ErrorKind::PermissionDenied.into());
    }
    match contents {
        Contents::Named(names) => {
            for file in names {
                let _ = rustix::fs::unlinkat(&dir, *file, AtFlags::empty());
            }
        }
        Contents::Files => {
            for file in entries(&dir, 4096)? {
                // Not AT_REMOVEDIR: a subdirectory stays, and so does this directory.
                let _ = rustix::fs::unlinkat(&dir, file.as_c_str(), AtFlags::empty());
            }
        }
        Contents::Tree => empty_tree(&dir, TREE_DEPTH)?,
    }
    Ok(rustix::fs::unlinkat(base, name, AtFlags::REMOVEDIR)?)
}

/// The names in `dir` (at most `cap`), `.` and `..` left out.
fn entries(dir: &rustix::fd::OwnedFd, cap: usize) -> io::Result<Vec<std::ffi::CString>> {
    Ok(rustix::fs::Dir::read_from(dir)?
        .take(cap)
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_owned())
        .filter(|n| n.as_bytes() != b"." && n.as_bytes() != b"..")
        .collect())
}

/// Unlinks everything in `dir`, going down `depth` more levels: each name is unlinked as a
/// file (a symlink is such a name), and one that is a directory opened in `dir` with
/// `O_NOFOLLOW`, emptied and removed. What cannot be removed stays (its parent then too). A
/// subdirectory that vanishes meanwhile (a program removing its own, as Spark's JVMs do as
/// they end) is already what was wanted.
fn empty_tree(dir: &rustix::fd::OwnedFd, depth: usize) -> io::Result<()> {
    use rustix::io::Errno;
    let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY;
    for name in entries(dir, MAX_ENTRIES)? {
        if rustix::fs::unlinkat(dir, name.as_c_str(), AtFlags::empty()) != Err(Errno::ISDIR)
            || depth == 0
        {
            continue;
        }
        let sub = match rustix::fs::openat(dir, name.as_c_str(), flags, Mode::empty()) {
            Err(Errno::NOENT) => continue,
            opened => opened?,
        };
        empty_tree(&sub, depth - 1)?;
        match rustix::fs::unlinkat(dir, name.as_c_str(), AtFlags::REMOVEDIR) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    const PREFIX: &str = "corelane-run-";
    const FILE: &str = "libcorelane_preload.so";

    fn made(base: &Path, name: &str, mode: u32) -> std::path::PathBuf {
        let dir = base.join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(FILE), b"\x7fELF").unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
        dir
    }

    #[test]
    fn only_our_private_directories_of_dead_runs_go_and_no_symlink_is_followed() {
        let base = tempfile::tempdir().unwrap();
        let (me, start) = (std::process::id(), own_start());
        let dead_pid = 4_000_000_000u32;
        let dead = made(base.path(), &format!("{PREFIX}{dead_pid}-1-0123456789abcdef"), 0o700);
        let old_dead = made(base.path(), &format!("{PREFIX}{dead_pid}-0123456789abcdef"), 0o700);
        // Our PID with another start time: a run whose PID we reused.
        let reused =
            made(base.path(), &format!("{PREFIX}{me}-{}-00000000000000aa", start + 1), 0o700);
        let live = made(base.path(), &format!("{PREFIX}{me}-{start}-00000000000000bb"), 0o700);
        let old_live = made(base.path(), &format!("{PREFIX}{me}-00000000000000cc"), 0o700);
        let open = made(base.path(), &format!("{PREFIX}{dead_pid}-2-00000000000000dd"), 0o755);
        // A symlink planted at a dead run's name, to a directory holding a file of that name.
        let target = made(base.path(), "elsewhere", 0o700);
        let link = base.path().join(format!("{PREFIX}{dead_pid}-3-00000000000000ee"));
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let mut removed =
            remove_dead_runs(base.path(), PREFIX, &[0o700], Contents::Named(&[FILE])).unwrap();
        removed.sort();
        let name = |p: &Path| p.file_name().unwrap().to_str().unwrap().to_owned();
        let mut expected = vec![name(&dead), name(&old_dead), name(&reused)];
        expected.sort();
        assert_eq!(removed, expected);
        for kept in [&live, &old_live, &open, &target] {
            assert!(kept.join(FILE).exists(), "{kept:?} was touched");
        }
        assert!(link.symlink_metadata().unwrap().is_symlink());
    }

    /// Another user's directory under a dead run's name stays (root only: chown).
    #[test]
    fn another_users_directory_is_left_alone() {
        if !rustix::process::geteuid().is_root() {
            return eprintln!("skipped: not root (the test gives a directory to another user)");
        }
        let base = tempfile::tempdir().unwrap();
        let theirs = made(base.path(), &format!("{PREFIX}4000000000-1-0123456789abcdef"), 0o700);
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let removed = remove_dead_runs(base.path(), PREFIX, &[0o700], Contents::Files).unwrap();
        assert!(removed.is_empty() && theirs.join(FILE).exists());
    }

    #[test]
    fn a_directory_holding_a_subdirectory_stays() {
        let base = tempfile::tempdir().unwrap();
        let dir = made(base.path(), &format!("{PREFIX}4000000000-1-0123456789abcdef"), 0o700);
        std::fs::create_dir(dir.join("sub")).unwrap();
        let removed = remove_dead_runs(base.path(), PREFIX, &[0o700], Contents::Files).unwrap();
        assert!(removed.is_empty() && dir.join("sub").exists());
        std::fs::remove_dir(dir.join("sub")).unwrap();
        let removed = remove_dead_runs(base.path(), PREFIX, &[0o700], Contents::Files).unwrap();
        assert_eq!(removed.len(), 1);
        assert!(!dir.exists());
    }

    /// A tree (a lab's private directory with Spark's directories in it) goes whole when the
    /// caller allows one; a symlink in it is unlinked, and what it points to stays.
    #[test]
    fn a_tree_goes_whole_and_no_symlink_in_it_is_followed() {
        let base = tempfile::tempdir().unwrap();
        let name = format!("{PREFIX}4000000000-1-0123456789abcdef");
        let dir = made(base.path(), &name, 0o711);
        let deep = dir.join("spark-t/local-worker-1/blockmgr-x/0a");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("shuffle_0_0_0.data"), b"x").unwrap();
        let outside = made(base.path(), "elsewhere", 0o700);
        std::os::unix::fs::symlink(&outside, dir.join("spark-t/link")).unwrap();
        let live = format!("{PREFIX}{}-{}-00000000000000bb", std::process::id(), own_start());
        let live_dir = made(base.path(), &live, 0o711);
        let allowed = [0o700, 0o711];
        assert!(!remove_dead_run(base.path(), &live, PREFIX, &allowed, Contents::Tree).unwrap());
        assert!(remove_dead_run(base.path(), &name, PREFIX, &allowed, Contents::Files).is_err());
        assert!(deep.exists(), "a Files removal went into a subdirectory");
        assert!(remove_dead_run(base.path(), &name, PREFIX, &allowed, Contents::Tree).unwrap());
        assert!(!dir.exists());
        assert!(outside.join(FILE).exists() && live_dir.join(FILE).exists());
    }

    #[test]
    fn start_times_are_read_and_names_of_other_forms_are_not_runs() {
        assert!(own_start() > 0);
        assert_eq!(process_start(4_000_000_000), None);
        assert_eq!(run_is_dead("notapid-1-x"), None);
        assert_eq!(run_is_dead("12"), None);
        assert_eq!(run_is_dead(&format!("{}-{}-x", std::process::id(), own_start())), Some(false));
    }
}
