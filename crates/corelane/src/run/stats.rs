//! The counters the preloaded library keeps for `corelane run`: one sealed memfd of fixed size,
//! a header and one record per process (pid, delegated calls per kind, its syscall threads'
//! CPU time). The layout is the library's (`corelane-preload/src/stats.rs`). The program can
//! write this memory, so the reader treats it as hostile: it reads the fixed size with pread
//! (the seals forbid shrinking, and pread could not fault anyway), bounds every count and
//! index, and saturates every sum.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use rustix::fs::{MemfdFlags, SealFlags};
use serde::Serialize;

const MAGIC: u64 = super::abi::stats::MAGIC;
const HEADER: usize = 64;
const RECORD: usize = super::abi::stats::RECORD;
/// At most this many processes are counted; more run, uncounted.
pub const MAX_RECORDS: usize = 256;
const SIZE: usize = HEADER + RECORD * MAX_RECORDS;
const MAX_THREADS: usize = 16;
/// The lowest fd number the counters are moved to.
const HIGH_FD: i32 = 100;
/// The kinds, in the library's order.
const KINDS: [&str; 11] = [
    "send",
    "recv",
    "read",
    "write",
    "accept",
    "connect",
    "poll",
    "epoll_wait",
    "sendfile",
    "close",
    "other",
];

/// Calls the syscall threads ran, per kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Delegated {
    pub send: u64,
    pub recv: u64,
    pub read: u64,
    pub write: u64,
    pub accept: u64,
    pub connect: u64,
    pub poll: u64,
    pub epoll_wait: u64,
    pub sendfile: u64,
    pub close: u64,
    pub other: u64,
}

impl Delegated {
    fn add(&mut self, kind: usize, n: u64) {
        let field = match KINDS.get(kind) {
            Some(&"send") => &mut self.send,
            Some(&"recv") => &mut self.recv,
            Some(&"read") => &mut self.read,
            Some(&"write") => &mut self.write,
            Some(&"accept") => &mut self.accept,
            Some(&"connect") => &mut self.connect,
            Some(&"poll") => &mut self.poll,
            Some(&"epoll_wait") => &mut self.epoll_wait,
            Some(&"sendfile") => &mut self.sendfile,
            Some(&"close") => &mut self.close,
            _ => &mut self.other,
        };
        *field = field.saturating_add(n);
    }

    pub fn total(&self) -> u64 {
        [
            self.send,
            self.recv,
            self.read,
            self.write,
            self.accept,
            self.connect,
            self.poll,
            self.epoll_wait,
            self.sendfile,
            self.close,
            self.other,
        ]
        .iter()
        .fold(0u64, |a, &b| a.saturating_add(b))
    }
}

/// What the library reported, summed over the processes that loaded it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaneReport {
    pub delegated: Delegated,
    /// Processes that loaded the library (each claimed a record; at most [`MAX_RECORDS`]).
    pub processes: u64,
    pub syscall_threads: u64,
    /// The syscall threads' CPU time (CLOCK_THREAD_CPUTIME_ID; the SQPOLL thread's
    /// schedstat runtime in the uring lane), as last recorded.
    pub syscall_thread_cpu_ns: u64,
    /// Processes whose lane came up as each [`LaneMode`] (indexed by its number).
    pub lane_modes: [u64; 5],
}

/// How a process's lane came up, as the library records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneMode {
    Threads = 1,
    UringSqpoll = 2,
    /// The kernel refused SQPOLL: a plain io_uring, entered by the program's threads.
    UringPlain = 3,
    /// No io_uring: the threads lane ran instead.
    UringUnavailable = 4,
}

/// The shared area: created before the program starts, read after it ends.
#[derive(Debug)]
pub struct SharedStats {
    fd: OwnedFd,
}

impl SharedStats {
    /// A sealed memfd of the fixed size, inherited by the program (not close-on-exec).
    pub fn create() -> io::Result<Self> {
        let fd = rustix::fs::memfd_create("corelane-run-stats", MemfdFlags::ALLOW_SEALING)?;
        rustix::fs::ftruncate(&fd, SIZE as u64)?;
        let mut header = [0u8; 8];
        header.copy_from_slice(&MAGIC.to_le_bytes());
        rustix::io::pwrite(&fd, &header, 0)?;
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
        // Out of the way of the low fds programs expect to be theirs (socket activation
        // passes listeners from fd 3 on); inherited by the program, so not close-on-exec.
        let fd = rustix::io::fcntl_dupfd_cloexec(&fd, HIGH_FD)?;
        rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::empty())?;
        Ok(Self { fd })
    }

    /// The fd number the program inherits, and the (device, inode) it must still be
    /// (CORELANE_STATS's `FD:DEV:INO`).
    pub fn identity(&self) -> io::Result<(RawFd, u64, u64)> {
        let stat = rustix::fs::fstat(&self.fd)?;
        Ok((self.fd.as_raw_fd(), stat.st_dev, stat.st_ino))
    }

    /// Reads the area once, whatever the program wrote there.
    pub fn read(&self) -> io::Result<LaneReport> {
        let mut bytes = vec![0u8; SIZE];
        let mut done = 0;
        while done < SIZE {
            match rustix::io::pread(self.fd.as_fd(), &mut bytes[done..], done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(parse(&bytes[..done]))
    }
}

fn word(bytes: &[u8], offset: usize) -> u64 {
    bytes.get(offset..offset + 8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_ne_bytes)
}

/// Sums the records of an area's bytes; anything out of bounds counts as zero.
pub fn parse(bytes: &[u8]) -> LaneReport {
    let mut report = LaneReport::default();
    if word(bytes, 0) != MAGIC {
        return report;
    }
    let claimed = word(bytes, 8).min(MAX_RECORDS as u64) as usize;
    report.processes = claimed as u64;
    for index in 0..claimed {
        let base = HEADER + index * RECORD;
        let threads = word(bytes, base + 8).min(MAX_THREADS as u64);
        report.syscall_threads = report.syscall_threads.saturating_add(threads);
        for kind in 0..KINDS.len() {
            report.delegated.add(kind, word(bytes, base + 16 + kind * 8));
        }
        let mode = word(bytes, base + 16 + (KINDS.len() + MAX_THREADS) * 8);
        if let Some(n) = report.lane_modes.get_mut(mode as usize) {
            *n += 1;
        }
        for t in 0..threads as usize {
            let ns = word(bytes, base + 16 + KINDS.len() * 8 + t * 8);
            report.syscall_thread_cpu_ns = report.syscall_thread_cpu_ns.saturating_add(ns);
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(bytes: &mut [u8], offset: usize, value: u64) {
        bytes[offset..offset + 8].copy_from_slice(&value.to_ne_bytes());
    }

    #[test]
    fn hostile_area_is_bounded_and_saturates() {
        let mut bytes = vec![0xffu8; SIZE];
        put(&mut bytes, 0, MAGIC);
        let report = parse(&bytes);
        assert_eq!(report.processes, MAX_RECORDS as u64);
        assert_eq!(report.syscall_threads, (MAX_RECORDS * MAX_THREADS) as u64);
        assert_eq!(report.delegated.send, u64::MAX);
        assert_eq!(report.syscall_thread_cpu_ns, u64::MAX);
        assert_eq!(report.lane_modes, [0; 5], "an unknown lane word counts nowhere");
        // Short, empty, or foreign areas read as nothing.
        assert_eq!(parse(&bytes[..10]).processes, 0);
        assert_eq!(parse(&[]), LaneReport::default());
        put(&mut bytes, 0, 7);
        assert_eq!(parse(&bytes), LaneReport::default());
    }

    #[test]
    fn one_record_sums_its_kinds() {
        let mut bytes = vec![0u8; SIZE];
        put(&mut bytes, 0, MAGIC);
        put(&mut bytes, 8, 1);
        put(&mut bytes, HEADER + 8, 2); // two threads
        put(&mut bytes, HEADER + 16, 5); // send
        put(&mut bytes, HEADER + 16 + 9 * 8, 3); // close
        put(&mut bytes, HEADER + 16 + 11 * 8, 100);
        put(&mut bytes, HEADER + 16 + 12 * 8, 50);
        put(&mut bytes, HEADER + 16 + 13 * 8, 999); // a third thread's, not counted
        put(&mut bytes, HEADER + 16 + 27 * 8, LaneMode::UringPlain as u64);
        let r = parse(&bytes);
        assert_eq!(r.lane_modes, [0, 0, 0, 1, 0]);
        assert_eq!((r.delegated.send, r.delegated.close, r.delegated.total()), (5, 3, 8));
        assert_eq!((r.processes, r.syscall_threads, r.syscall_thread_cpu_ns), (1, 2, 150));
    }

    #[test]
    fn the_area_cannot_be_shrunk_under_the_reader() {
        let stats = SharedStats::create().unwrap();
        assert!(rustix::fs::ftruncate(&stats.fd, 10).is_err());
        assert_eq!(stats.read().unwrap(), LaneReport::default());
    }
}
