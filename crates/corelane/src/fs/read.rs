//! Reading a file a user named (a plan, a revert file, a saved run, an inventory): a regular
//! file only, opened without waiting on a FIFO's writer, and never more than a cap read.

use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Why a named file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadCappedError {
    #[error("{0}")]
    Io(#[from] io::Error),
    /// A FIFO, device, socket or directory: refused before a byte is read from it.
    #[error("not a regular file")]
    NotRegular,
    #[error("larger than {0} bytes")]
    TooLarge(u64),
}

/// The bytes of the regular file at `path`, at most `max` of them.
pub fn read_capped(path: &Path, max: u64) -> Result<Vec<u8>, ReadCappedError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)?;
    if !file.metadata()?.is_file() {
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
        // A FIFO with no writer would block a plain open forever; a device never ends.
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        for named in [fifo.as_path(), Path::new("/dev/zero"), dir.path()] {
            let got = read_capped(named, 1 << 20);
            assert!(matches!(got, Err(ReadCappedError::NotRegular)), "{named:?}: {got:?}");
        }
        assert!(matches!(read_capped(&dir.path().join("absent"), 1), Err(ReadCappedError::Io(_))));
    }
}
