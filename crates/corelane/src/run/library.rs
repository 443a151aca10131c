//! The preloaded library's file: a private copy that no other user can plant or swap.
//!
//! ld.so opens LD_PRELOAD by path, in every process the program starts, so the path must stay
//! ours for the program's whole life. A memfd path (/proc/self/fd/N) would follow exec only
//! while every process keeps fd N open (daemons close their fds); a file beside the binary is
//! only as safe as every directory above it. So: a fresh directory under /tmp (never $TMPDIR,
//! which the environment chooses) created 0700 by us, checked through its fd, the file
//! created in it O_EXCL|O_NOFOLLOW mode 0500, and both removed when the run ends. /tmp
//! itself must be owned by root or us and, if others may write to it, sticky (so they cannot
//! rename our directory away). A run killed before it could remove them leaves them; the
//! next run removes those of dead runs ([`remove_dead_runs`]), its name telling a dead run
//! from a live one even when the PID was reused (it holds the run's start time).

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};

/// The file name ld.so sees, and the name the library looks for in LD_PRELOAD.
pub const FILE_NAME: &str = super::abi::LIBRARY_FILE_NAME;

/// The private directories' names begin so, then `<pid>-<start time>-<random>`.
pub const DIR_PREFIX: &str = "corelane-run-";

/// Removes the private directories under /tmp of runs that are dead (killed, so their
/// directory was never removed): only the caller's, mode 0700, holding at most the library,
/// never through a symlink (see [`crate::fs::remove_dead_runs`]). Returns their names.
pub fn remove_dead_runs() -> std::io::Result<Vec<String>> {
    crate::fs::remove_dead_runs(
        Path::new("/tmp"),
        DIR_PREFIX,
        &[0o700],
        crate::fs::Contents::Named(&[FILE_NAME]),
    )
}

/// The written copy; removed (file and directory) on drop.
#[derive(Debug)]
pub struct PrivateLibrary {
    base: OwnedFd,
    dir: OwnedFd,
    dir_name: String,
    path: PathBuf,
}

fn refuse(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, what)
}

/// Opens `path` as a directory without following a symlink and checks that another user can
/// neither own it nor rename entries in it.
fn open_safe_dir(path: &Path) -> io::Result<OwnedFd> {
    let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY;
    let fd = rustix::fs::open(path, flags, Mode::empty())?;
    let st = rustix::fs::fstat(&fd)?;
    let me = rustix::process::geteuid().as_raw();
    if st.st_uid != 0 && st.st_uid != me {
        return Err(refuse(format!("{} is owned by another user", path.display())));
    }
    let others_write = st.st_mode & 0o022 != 0;
    let sticky = st.st_mode & 0o1000 != 0;
    if others_write && !sticky {
        return Err(refuse(format!("{} is writable by others and not sticky", path.display())));
    }
    Ok(fd)
}

impl PrivateLibrary {
    /// Writes `bytes` to a fresh private file under /tmp.
    pub fn write(bytes: &[u8]) -> io::Result<Self> {
        Self::write_under(Path::new("/tmp"), bytes)
    }

    /// As [`write`](Self::write), under `base` (tests use their own directory).
    pub fn write_under(base_path: &Path, bytes: &[u8]) -> io::Result<Self> {
        let base = open_safe_dir(base_path)?;
        let (pid, start) = (std::process::id(), crate::fs::own_start());
        let mut attempt = 0;
        let dir_name = loop {
            let name = format!("{DIR_PREFIX}{pid}-{start}-{:016x}", fastrand::u64(..));
            match rustix::fs::mkdirat(&base, name.as_str(), Mode::from_raw_mode(0o700)) {
                Ok(()) => break name,
                Err(rustix::io::Errno::EXIST) if attempt < 16 => attempt += 1,
                Err(e) => return Err(e.into()),
            }
        };
        let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY;
        let dir = match rustix::fs::openat(&base, dir_name.as_str(), flags, Mode::empty()) {
            Ok(dir) => dir,
            Err(e) => {
                let _ = rustix::fs::unlinkat(&base, dir_name.as_str(), AtFlags::REMOVEDIR);
                return Err(e.into());
            }
        };
        let library = Self { path: base_path.join(&dir_name).join(FILE_NAME), base, dir, dir_name };
        library.fill(bytes)?;
        Ok(library)
    }

    fn fill(&self, bytes: &[u8]) -> io::Result<()> {
        let st = rustix::fs::fstat(&self.dir)?;
        if st.st_uid != rustix::process::geteuid().as_raw() || st.st_mode & 0o077 != 0 {
            return Err(refuse(format!("{} is not ours alone", self.path.display())));
        }
        let flags =
            OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::WRONLY;
        let file = rustix::fs::openat(&self.dir, FILE_NAME, flags, Mode::from_raw_mode(0o500))?;
        let mut done = 0;
        while done < bytes.len() {
            match rustix::io::write(&file, &bytes[done..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => done += n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// The path for LD_PRELOAD (no ':' or space in it).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PrivateLibrary {
    fn drop(&mut self) {
        let _ = rustix::fs::unlinkat(&self.dir, FILE_NAME, AtFlags::empty());
        let _ = rustix::fs::unlinkat(&self.base, self.dir_name.as_str(), AtFlags::REMOVEDIR);
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn private_copy_is_ours_alone_and_removed_on_drop() {
        let base = tempfile::tempdir().unwrap();
        let lib = PrivateLibrary::write_under(base.path(), b"\x7fELF...").unwrap();
        assert_eq!(std::fs::read(lib.path()).unwrap(), b"\x7fELF...");
        let dir_mode =
            std::fs::metadata(lib.path().parent().unwrap()).unwrap().permissions().mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        drop(lib);
        assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_base_others_may_rename_in_is_refused() {
        let base = tempfile::tempdir().unwrap();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = PrivateLibrary::write_under(base.path(), b"x").unwrap_err();
        assert!(err.to_string().contains("not sticky"), "{err}");
        let link = base.path().join("link");
        std::os::unix::fs::symlink("/tmp", &link).unwrap();
        assert!(PrivateLibrary::write_under(&link, b"x").is_err());
    }
}
