//! Reading a file a user named (a plan, a revert file, a saved run, an inventory): a regular
//! file or a pipe (`<(…)`), opened without waiting on a FIFO's writer or taking a terminal,
//! and never more than a cap read; a device, socket or directory is refused.

use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Why a named file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadCappedError {
    #[error("{0}")]
    Io(#[from] io::Error),
    /// A device, socket or directory: refused before a byte is read from it.
    #[error("not a regular file or pipe")]
    NotRegular,
    #[error("larger than {0} bytes")]
    TooLarge(u64),
}

/// The bytes of the regular file or pipe at `path`, at most `max` of them. A FIFO nobody
/// writes to reads as empty at once.
pub fn read_capped(path: &Path, max: u64) -> Result<Vec<u8>, ReadCappedError> {
    use rustix::fs::OFlags;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlags::NONBLOCK | OFlags::NOCTTY).bits() as i32)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    if std::os::unix::fs::FileTypeExt::is_fifo(&kind) {
        // Opened without waiting for a writer; now read as a pipe is: to its writer's end.
        rustix::fs::fcntl_setfl(&file, OFlags::empty()).map_err(io::Error::from)?;
    } else if !kind.is_file() {
        return Err(ReadCappedError::NotRegular);
    }
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(ReadCappedError::TooLarge(max));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_regular_file_within_the_cap_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plan.toml");
        std::fs::write(&file, b"0123456789").unwrap();
        assert_eq!(read_capped(&file, 10).unwrap(), b"0123456789");
        assert!(matches!(read_capped(&file, 9), Err(ReadCappedError::TooLarge(9))));
        // A FIFO with no writer would block a plain open forever: here it reads as empty.
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        assert_eq!(read_capped(&fifo, 1 << 20).unwrap(), b"");
        // A pipe with a writer (`<(…)`) is read to its end, within the cap.
        let writer = std::thread::spawn({
            let fifo = fifo.clone();
            // A reader that found no writer yet and left makes this write EPIPE: write again.
            move || loop {
                match std::fs::write(&fifo, vec![b'x'; 100_000]) {
                    Err(e) if e.kind() == io::ErrorKind::BrokenPipe => continue,
                    done => return done,
                }
            }
        });
        let read = loop {
            match read_capped(&fifo, 1 << 20).unwrap() {
                bytes if bytes.is_empty() => std::thread::yield_now(), // the writer is not there yet
                bytes => break bytes,
            }
        };
        writer.join().unwrap().unwrap();
        assert_eq!(read.len(), 100_000);
        // A device never ends; a directory is no input.
        for named in [Path::new("/dev/zero"), dir.path()] {
            let got = read_capped(named, 1 << 20);
            assert!(matches!(got, Err(ReadCappedError::NotRegular)), "{named:?}: {got:?}");
        }
        assert!(matches!(read_capped(&dir.path().join("absent"), 1), Err(ReadCappedError::Io(_))));
    }
}
