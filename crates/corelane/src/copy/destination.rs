//! The destination is written under a temporary name beside it and renamed over it only when
//! complete, so a failure or Ctrl-C never leaves a half-written file under the real name and an
//! existing destination stays exactly as it was.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{Mode, OFlags};

use super::CreateCall;
use crate::sys::file;

/// A temporary file that becomes the destination on [`commit`](Self::commit) and is removed
/// if dropped before.
#[derive(Debug)]
pub(crate) struct TempDestination {
    temp: PathBuf,
    target: PathBuf,
    fd: OwnedFd,
    committed: bool,
}

fn temp_name(target: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    target.with_file_name(format!(".{name}.corelane-{}-{n}", std::process::id()))
}

impl TempDestination {
    pub(crate) fn create(target: &Path, create: CreateCall, direct: bool) -> io::Result<Self> {
        let temp = temp_name(target);
        let fd = match (create, direct) {
            // creat(2) takes no flags, so O_DIRECT always goes through open(2).
            (CreateCall::Creat, false) => file::creat(&temp, 0o600)?,
            _ => {
                let mut flags = OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC;
                if direct {
                    flags |= OFlags::DIRECT;
                }
                rustix::fs::open(&temp, flags, Mode::from_raw_mode(0o600))?
            }
        };
        Ok(Self { temp, target: target.to_path_buf(), fd, committed: false })
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub(crate) fn temp_path(&self) -> &Path {
        &self.temp
    }

    /// Makes the file durable when asked, then renames it over the destination.
    pub(crate) fn commit(mut self, fsync: bool) -> io::Result<()> {
        if fsync {
            rustix::fs::fsync(&self.fd)?;
        }
        std::fs::rename(&self.temp, &self.target)?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for TempDestination {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_before_commit_leaves_nothing() {
        let dir = std::env::temp_dir().join(format!("corelane-dest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("out");
        std::fs::write(&target, b"old").unwrap();
        for create in [CreateCall::Creat, CreateCall::Open] {
            let temp = TempDestination::create(&target, create, false).unwrap();
            rustix::io::write(temp.fd(), b"new data").unwrap();
            drop(temp);
        }
        assert_eq!(std::fs::read(&target).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        let temp = TempDestination::create(&target, CreateCall::Open, false).unwrap();
        rustix::io::write(temp.fd(), b"new").unwrap();
        temp.commit(true).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
