//! The destination is written as a temporary file beside it and put in place only when
//! complete, so a failure or Ctrl-C never leaves a half-written file under the real name and an
//! existing destination stays exactly as it was.
//!
//! Where the file system offers it, the temporary file is unnamed (O_TMPFILE) and linked in
//! under the destination's name at the end (linkat): one directory entry made instead of a
//! create and a rename, and nothing to clean up even after SIGKILL. When the destination
//! already exists, linkat refuses, and the copy is linked under a temporary name and renamed
//! over it, which replaces it atomically.
//!
//! All of it happens in the destination directory's descriptor (`fs::Dir`), opened once by
//! `open_destination` or reached by the tree copy from the destination root: every create,
//! link, rename and removal is one name in that descriptor, never a path looked up again.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::OFlags;

use super::{CopyError, CreateCall};
use crate::fs::{random_name, Dir};

/// A temporary file that becomes the entry `name` of the held directory `dir` on
/// [`commit`](Self::commit), and is removed if dropped before. Every name it creates, links,
/// renames or removes is one name in `dir`: nothing it does goes through a path.
#[derive(Debug)]
pub(crate) struct TempDestination<'d> {
    dir: &'d Dir,
    name: &'d OsStr,
    /// The temporary name; `None` while the file is unnamed (O_TMPFILE) or fresh.
    temp: Option<OsString>,
    fd: OwnedFd,
    /// Created under the destination's own name, which did not exist (see `create`).
    fresh: bool,
    committed: bool,
}

/// Opens where a copy the user named goes: `dst` itself when it is an existing directory
/// (the copy is `name` in it), else `dst`'s directory (the copy is `dst`'s last name). The one
/// time the destination path is trusted: everything after goes through the returned
/// descriptor. A `dst` that is a symlink to a directory is refused unless `follow`: a symlink
/// where a directory is expected (say, planted in a shared directory) would carry a root copy
/// anywhere on the system. Returns the directory, the name in it and the path shown.
pub(crate) fn open_destination(
    dst: &Path,
    name: &OsStr,
    follow: bool,
) -> Result<(Dir, OsString, PathBuf), CopyError> {
    match Dir::open(dst, follow) {
        Ok(dir) => return Ok((dir, name.to_os_string(), dst.join(name))),
        // O_DIRECTORY|O_NOFOLLOW on a symlink fails with ENOTDIR (or ELOOP).
        Err(e)
            if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR))
                && std::fs::symlink_metadata(dst).is_ok_and(|m| m.is_symlink())
                && dst.is_dir() =>
        {
            return Err(CopyError::DestinationSymlink(dst.into()))
        }
        // Not a directory (yet): the copy is the last name of `dst`.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)) => {}
        Err(e) => return Err(CopyError::io(format!("cannot open {}", dst.display()), e)),
    }
    let parent = match dst.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let own = dst.file_name().ok_or_else(|| CopyError::DestinationNotDirectory(dst.into()))?;
    let dir = Dir::open(parent, true).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENOTDIR) => CopyError::DestinationDirMissing(parent.into()),
        _ => CopyError::io(format!("cannot open {}", parent.display()), e),
    })?;
    Ok((dir, own.to_os_string(), dst.to_path_buf()))
}

/// The process's umask, read once from /proc/self/status (umask(2) can only be read by
/// setting it, which races with other threads creating files).
pub(crate) fn umask() -> Option<u32> {
    static UMASK: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *UMASK.get_or_init(|| {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with("Umask:"))?;
        u32::from_str_radix(line.split_whitespace().nth(1)?, 8).ok()
    })
}

/// The permission bits a copy may give: the source's, without set-user-ID and set-group-ID
/// (and without the sticky bit on anything but a directory). corelane never keeps ownership
/// (the copy belongs to whoever runs it), so keeping those bits would let a root copy of
/// another user's setuid file mint a root-owned setuid program, as `cp` without `-p` avoids.
pub(crate) fn granted_mode(source_mode: u32, directory: bool) -> u32 {
    let dropped = if directory { 0o6000 } else { 0o7000 };
    source_mode & 0o7777 & !dropped
}

/// Whether creating a file with `mode` yields exactly `mode` (the umask strips none of its
/// bits, and it has no set-id or sticky bits that creation may drop), so no fchmod is needed.
pub(crate) fn creation_keeps(mode: u32) -> bool {
    mode & 0o7000 == 0 && umask().is_some_and(|u| mode & u == 0)
}

impl<'d> TempDestination<'d> {
    /// Creates the temporary file for the entry `name` of `dir` with permission bits `mode`
    /// (subject to the umask).
    ///
    /// `fresh_ok`: when the destination does not exist, write it under its own name
    /// (O_CREAT|O_EXCL) and remove it if the copy fails. Nothing that existed can be damaged
    /// and a failure or Ctrl-C leaves nothing; only a crash mid-copy could leave a partial
    /// file under the final name, as `cp` would. Tree copies use this: on tmpfs with two
    /// lanes, linking in thousands of unnamed files serialises on the directory and cost
    /// 0.19 s instead of 0.13 s for 20,000 files of 4 KiB (`cp -r`: 0.25 s).
    pub(crate) fn create(
        dir: &'d Dir,
        name: &'d OsStr,
        create: CreateCall,
        direct: bool,
        mode: u32,
        fresh_ok: bool,
    ) -> io::Result<Self> {
        // Every create is O_EXCL|O_NOFOLLOW in the held directory: nothing that exists, and
        // no symlink planted at the name, is ever opened for writing.
        let mut flags = OFlags::WRONLY;
        if direct {
            flags |= OFlags::DIRECT;
        }
        let made = |temp, fd, fresh| Self { dir, name, temp, fd, fresh, committed: false };
        if fresh_ok {
            match dir.create_file(name, flags, mode) {
                Ok(fd) => return Ok(made(None, fd, true)),
                // It exists: replace it atomically below.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        if create == CreateCall::Open {
            match dir.create_unnamed(flags, mode) {
                Ok(fd) => return Ok(made(None, fd, false)),
                // EOPNOTSUPP/EISDIR/EINVAL: no O_TMPFILE here; use a named temporary file.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
                    ) => {}
                Err(e) => return Err(e),
            }
        }
        // creat(2) is open(O_CREAT|O_WRONLY|O_TRUNC) with no way to add O_EXCL or
        // O_NOFOLLOW, so it would follow a symlink planted at the name and truncate its target
        // as root. `--create creat` therefore makes creat's call through openat(2) with those
        // two flags added: the same file creation, without the hole.
        if create == CreateCall::Creat {
            flags |= OFlags::TRUNC;
        }
        let temp = random_name(name);
        let fd = dir.create_file(&temp, flags, mode)?;
        Ok(made(Some(temp), fd, false))
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// A path that reads the temporary file (for --verify): its own descriptor's
    /// /proc/self/fd entry, named or not, so it is the file written whatever its name holds.
    pub(crate) fn read_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    /// Makes the file durable when asked, then puts it in place under the destination's name,
    /// in the same held directory (linkat, or renameat over an existing entry).
    pub(crate) fn commit(mut self, fsync: bool) -> io::Result<()> {
        if fsync {
            rustix::fs::fsync(&self.fd)?;
        }
        if self.fresh {
            self.committed = true;
            return Ok(());
        }
        if self.temp.is_none() {
            match self.dir.link_unnamed(self.fd.as_fd(), self.name) {
                Ok(()) => {
                    self.committed = true;
                    return Ok(());
                }
                // The destination exists: link under a temporary name and rename over it.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let temp = random_name(self.name);
                    self.dir.link_unnamed(self.fd.as_fd(), &temp)?;
                    self.temp = Some(temp);
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(temp) = &self.temp {
            self.dir.rename(temp, self.dir, self.name)?;
        }
        self.committed = true;
        Ok(())
    }
}

impl Drop for TempDestination<'_> {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        // Only while the name still holds the file this copy made: a name another user put in
        // its place meanwhile is theirs.
        if let Some(temp) = &self.temp {
            let _ = self.dir.remove_if_same(temp, self.fd.as_fd());
        } else if self.fresh {
            // Created exclusively by this copy a moment ago: a partial copy must not stay.
            let _ = self.dir.remove_if_same(self.name, self.fd.as_fd());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_before_commit_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap().keep();
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("out");
        std::fs::write(&target, b"old").unwrap();
        let held = Dir::open(&dir, false).unwrap();
        let out = OsStr::new("out");
        for create in [CreateCall::Creat, CreateCall::Open] {
            let temp = TempDestination::create(&held, out, create, false, 0o600, false).unwrap();
            rustix::io::write(temp.fd(), b"new data").unwrap();
            drop(temp);
        }
        assert_eq!(std::fs::read(&target).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        let temp =
            TempDestination::create(&held, out, CreateCall::Open, false, 0o600, false).unwrap();
        rustix::io::write(temp.fd(), b"new").unwrap();
        temp.commit(true).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn fresh_files_vanish_on_failure_and_existing_ones_are_never_touched() {
        let dir = tempfile::tempdir().unwrap().keep();
        std::fs::create_dir_all(&dir).unwrap();
        let new = dir.join("new");
        let held = Dir::open(&dir, false).unwrap();
        let (new_name, old_name) = (OsStr::new("new"), OsStr::new("old"));
        let temp =
            TempDestination::create(&held, new_name, CreateCall::Open, false, 0o600, true).unwrap();
        rustix::io::write(temp.fd(), b"partial").unwrap();
        drop(temp);
        assert!(!new.exists(), "a failed fresh copy must not stay");
        let old = dir.join("old");
        std::fs::write(&old, b"old").unwrap();
        let temp =
            TempDestination::create(&held, old_name, CreateCall::Open, false, 0o600, true).unwrap();
        rustix::io::write(temp.fd(), b"partial").unwrap();
        drop(temp);
        assert_eq!(std::fs::read(&old).unwrap(), b"old", "an existing file goes the atomic way");
        let temp =
            TempDestination::create(&held, new_name, CreateCall::Open, false, 0o600, true).unwrap();
        rustix::io::write(temp.fd(), b"done").unwrap();
        temp.commit(false).unwrap();
        assert_eq!(std::fs::read(&new).unwrap(), b"done");
        let mut names: Vec<_> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert_eq!(names, ["new", "old"]);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
