//! Reading a file a user named (a plan, a revert file, a saved run, an inventory): a regular
//! file or a pipe (`<(…)`), and never more than a cap read. Its type is decided first, through
//! an `O_PATH` descriptor (fstat), so a device, socket or directory is refused before it is
//! ever opened for reading (opening a device can have side effects); the file is then
//! reopened for reading through that very descriptor (`/proc/self/fd/N`, the same inode, so
//! nothing swapped in at the path meanwhile is opened). A FIFO is opened without waiting for
//! a writer and without taking a terminal; one whose writer stays silent is given up after
//! [`PIPE_SILENCE`].

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::{FileType, Mode, OFlags};

/// How long a pipe may stay silent before its reading is given up.
pub const PIPE_SILENCE: Duration = Duration::from_secs(10);

/// Why a named file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadCappedError {
    #[error("{0}")]
    Io(#[from] io::Error),
    /// A device, socket or directory: refused before it is opened for reading.
    #[error("not a regular file or pipe")]
    NotRegular,
    #[error("larger than {0} bytes")]
    TooLarge(u64),
    /// A pipe whose writer sent nothing (and did not close it) for this many seconds.
    #[error("a pipe whose writer sent nothing for {0} s (and kept it open): give a file, or a command that ends")]
    Silent(u64),
}

/// The bytes of the regular file or pipe at `path`, at most `max` of them. A FIFO nobody
/// writes to reads as empty at once; one whose writer stays silent for `PIPE_SILENCE` (10 s) is
/// refused.
pub fn read_capped(path: &Path, max: u64) -> Result<Vec<u8>, ReadCappedError> {
    read_capped_within(path, max, PIPE_SILENCE)
}

fn read_capped_within(
    path: &Path,
    max: u64,
    silence: Duration,
) -> Result<Vec<u8>, ReadCappedError> {
    let handle = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
        .map_err(io::Error::from)?;
    let kind =
        FileType::from_raw_mode(rustix::fs::fstat(&handle).map_err(io::Error::from)?.st_mode);
    let fifo = match kind {
        FileType::RegularFile => false,
        FileType::Fifo => true,
        _ => return Err(ReadCappedError::NotRegular),
    };
    // Reopened through the held descriptor: the inode just checked, whatever the path is now.
    let reopen = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&handle));
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let file = rustix::fs::open(reopen.as_str(), flags, Mode::empty()).map_err(io::Error::from)?;
    let same = rustix::fs::fstat(&file).map_err(io::Error::from)?;
    let held = rustix::fs::fstat(&handle).map_err(io::Error::from)?;
    if (same.st_dev, same.st_ino) != (held.st_dev, held.st_ino) {
        return Err(ReadCappedError::NotRegular);
    }
    let bytes = read_bounded(&file, max, fifo.then_some(silence))?;
    if bytes.len() as u64 > max {
        return Err(ReadCappedError::TooLarge(max));
    }
    Ok(bytes)
}

/// Reads to the end or to `max + 1` bytes; with `silence`, waits at most that long at a time
/// for a pipe's next bytes.
fn read_bounded(
    file: &OwnedFd,
    max: u64,
    silence: Option<Duration>,
) -> Result<Vec<u8>, ReadCappedError> {
    let limit = usize::try_from(max.saturating_add(1)).unwrap_or(usize::MAX);
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    while bytes.len() < limit {
        let want = chunk.len().min(limit - bytes.len());
        match rustix::io::read(file, &mut chunk[..want]) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => {
                let Some(silence) = silence else {
                    return Err(io::Error::from(rustix::io::Errno::AGAIN).into());
                };
                wait_readable(file, silence)?;
            }
            Err(e) => return Err(io::Error::from(e).into()),
        }
    }
    Ok(bytes)
}

/// Waits until `file` can be read (or its writer closed it), at most `silence`.
fn wait_readable(file: &OwnedFd, silence: Duration) -> Result<(), ReadCappedError> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let deadline = Instant::now() + silence;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReadCappedError::Silent(silence.as_secs()));
        }
        let timeout = Timespec::try_from(left).unwrap_or(Timespec { tv_sec: 1, tv_nsec: 0 });
        let mut fds = [PollFd::new(file, PollFlags::IN)];
        match poll(&mut fds, Some(&timeout)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => {}
            Ok(_) => return Ok(()),
            Err(e) => return Err(io::Error::from(e).into()),
        }
    }
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

    /// A FIFO whose writer opened it and stays silent is given up after the bound, naming
    /// why; the old reader waited for as long as the writer lived.
    #[test]
    fn a_silent_writer_is_given_up_after_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        // The writer opens the FIFO (waiting for a reader) and then says nothing.
        let mut writer = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("exec 3>{}; sleep 30", fifo.display()))
            .spawn()
            .unwrap();
        let start = Instant::now();
        let mut got = read_capped_within(&fifo, 1 << 20, Duration::from_millis(300));
        // Until the writer's open is done, the FIFO reads as empty: try again, bounded.
        while matches!(&got, Ok(b) if b.is_empty()) && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
            got = read_capped_within(&fifo, 1 << 20, Duration::from_millis(300));
        }
        let _ = writer.kill();
        let _ = writer.wait();
        assert!(matches!(got, Err(ReadCappedError::Silent(0))), "{got:?}");
        assert!(start.elapsed() < Duration::from_secs(11));
    }

    /// A device's type is read through O_PATH before any open for reading: inotify sees no
    /// open of it (O_PATH opens are not reported), where the old reader opened it first.
    #[test]
    fn a_device_is_refused_without_being_opened() {
        use rustix::fs::inotify;
        if !rustix::process::geteuid().is_root() {
            return eprintln!("skipped: not root (the test makes a device node)");
        }
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("zero");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &node,
            FileType::CharacterDevice,
            Mode::from_raw_mode(0o600),
            rustix::fs::makedev(1, 5),
        )
        .unwrap();
        let watch =
            inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC).unwrap();
        inotify::add_watch(&watch, &node, inotify::WatchFlags::OPEN).unwrap();
        assert!(matches!(read_capped(&node, 1 << 20), Err(ReadCappedError::NotRegular)));
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 1024];
        let mut events = inotify::Reader::new(&watch, &mut buf);
        assert!(events.next().is_err(), "the device was opened");
        // The watch works: a plain open is seen.
        drop(std::fs::File::open(&node).unwrap());
        assert!(events.next().is_ok(), "inotify saw no open at all");
    }
}
