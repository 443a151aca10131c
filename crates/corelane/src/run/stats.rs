//! The counters the preloaded library keeps for `corelane run`: one sealed memfd of fixed size,
//! a header and one record per process (pid, delegated calls per kind, its syscall threads'
//! CPU time and ids, how its lane came up, and when and why it stopped carrying). The layout
//! is [`super::abi::stats`], compiled by the library too. The program can write this memory,
//! so the reader treats it as hostile: it reads the fixed size with pread (the seals forbid
//! shrinking, and pread could not fault anyway), bounds every count and index, and saturates
//! every sum.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use rustix::fs::{MemfdFlags, SealFlags};
use serde::Serialize;

use super::abi::{self, stats as layout, KINDS, MAX_THREADS};

/// At most this many processes are counted; more run, uncounted.
pub const MAX_RECORDS: usize = layout::MAX_RECORDS;

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
    fn fields(&mut self) -> [&mut u64; KINDS.len()] {
        [
            &mut self.send,
            &mut self.recv,
            &mut self.read,
            &mut self.write,
            &mut self.accept,
            &mut self.connect,
            &mut self.poll,
            &mut self.epoll_wait,
            &mut self.sendfile,
            &mut self.close,
            &mut self.other,
        ]
    }

    fn add(&mut self, counts: &[u64; KINDS.len()]) {
        for (field, n) in self.fields().into_iter().zip(counts) {
            *field = field.saturating_add(*n);
        }
    }

    pub fn total(&self) -> u64 {
        let mut copy = self.clone();
        copy.fields().into_iter().fold(0u64, |a, b| a.saturating_add(*b))
    }
}

/// How a process's lane came up, as the library records it ([`abi::lane_mode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneMode {
    Threads = abi::lane_mode::THREADS as isize,
    UringSqpoll = abi::lane_mode::URING_SQPOLL as isize,
    /// The kernel refused SQPOLL: a plain io_uring, entered by the program's threads.
    UringPlain = abi::lane_mode::URING_PLAIN as isize,
    /// No io_uring: the threads lane ran instead.
    UringUnavailable = abi::lane_mode::URING_UNAVAILABLE as isize,
}

/// One process's record, bounded: at most [`MAX_THREADS`] threads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessRecord {
    /// The process (0 when the word is no PID).
    pub pid: u32,
    pub threads: usize,
    pub counts: [u64; KINDS.len()],
    /// Each syscall thread's CPU time as it last recorded it.
    pub cpu_ns: [u64; MAX_THREADS],
    /// An [`abi::lane_mode`] word.
    pub lane: u64,
    /// An [`abi::off_reason`] word, 0 while the lane carries.
    pub off_reason: u64,
    /// CLOCK_MONOTONIC ns at which the lane stopped carrying.
    pub off_at_ns: u64,
    /// An [`abi::rights_change`] word.
    pub rights_change: u64,
    pub rebuilt: u64,
    pub sqpoll_tid: u32,
    pub thread_tids: [u32; MAX_THREADS],
    /// Calls its threads made themselves on a contended syscall CPU.
    pub in_place: u64,
}

impl ProcessRecord {
    /// Each of its syscall threads: its index, its id (0: unknown) and the comm prefix the
    /// kernel shows for it (`cl-sys-`, or `iou-sqp-` for an SQPOLL thread).
    pub fn thread_ids(&self) -> impl Iterator<Item = (usize, u32, &'static str)> + '_ {
        let sqpoll = self.lane == abi::lane_mode::URING_SQPOLL;
        (0..self.threads).map(move |t| match (sqpoll, t) {
            (true, 0) => (0, self.sqpoll_tid, "iou-sqp-"),
            _ => (t, self.thread_tids[t], "cl-sys-"),
        })
    }
}

/// A process whose lane stopped carrying.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneOff {
    pub pid: u32,
    /// An [`abi::off_reason`] word (non-zero).
    pub reason: u64,
    /// An [`abi::rights_change`] word, 0 for none.
    pub change: u64,
    /// CLOCK_MONOTONIC ns at which it stopped.
    pub at_ns: u64,
}

/// What the library reported, summed over the processes that loaded it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaneReport {
    pub delegated: Delegated,
    /// Processes that loaded the library (each claimed a record; at most [`MAX_RECORDS`]).
    pub processes: u64,
    pub syscall_threads: u64,
    /// The syscall threads' CPU time as they last recorded it (CLOCK_THREAD_CPUTIME_ID; the
    /// SQPOLL thread's schedstat runtime in the uring lane).
    pub syscall_thread_cpu_ns: u64,
    /// Processes whose lane came up as each [`LaneMode`] (indexed by its number).
    pub lane_modes: [u64; abi::lane_mode::COUNT],
    /// The processes whose lane stopped carrying, in the order they claimed their records.
    pub lane_off: Vec<LaneOff>,
    /// Times the carriers were rebuilt after a change every thread followed, summed.
    pub rebuilt: u64,
    /// Calls the program's threads made themselves because several processes' syscall
    /// threads contended for the syscall CPU (the threads lane stepped aside), summed.
    pub in_place: u64,
}

/// A copy of `fd` (close-on-exec) out of the program's way: the lowest free number from
/// [`layout::HIGH_FD`] on. A program's fds are the lowest free numbers (socket activation
/// passes listeners from fd 3 on), so it gets the numbers it would get without `corelane run`.
/// (Not the highest below 1024: memcached's own suite hung at its connection limit with the
/// area there.)
fn high_copy(fd: &OwnedFd) -> io::Result<OwnedFd> {
    Ok(rustix::io::fcntl_dupfd_cloexec(fd, layout::HIGH_FD)?)
}

/// The shared area: created before the program starts, read while it runs and after.
#[derive(Debug)]
pub struct SharedStats {
    fd: OwnedFd,
}

impl SharedStats {
    /// A sealed memfd of the fixed size, inherited by the program (not close-on-exec).
    pub fn create() -> io::Result<Self> {
        let fd = rustix::fs::memfd_create("corelane-run-stats", MemfdFlags::ALLOW_SEALING)?;
        rustix::fs::ftruncate(&fd, layout::SIZE as u64)?;
        rustix::io::pwrite(&fd, &layout::MAGIC.to_le_bytes(), layout::HEADER_MAGIC as u64)?;
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
        // Inherited by the program, so not close-on-exec.
        let fd = high_copy(&fd)?;
        rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::empty())?;
        Ok(Self { fd })
    }

    /// The fd number the program inherits.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The value of [`abi::ENV_STATS`]: `FD:DEV:INO`, so the library can check that the fd
    /// number it is given is still this memfd.
    pub fn env_value(&self) -> io::Result<String> {
        let st = rustix::fs::fstat(&self.fd)?;
        Ok(format!("{}:{}:{}", self.raw_fd(), st.st_dev, st.st_ino))
    }

    /// The area's bytes as they are now, whatever the program wrote there.
    pub fn read_bytes(&self) -> io::Result<Vec<u8>> {
        let mut bytes = vec![0u8; layout::SIZE];
        let mut done = 0;
        while done < layout::SIZE {
            match rustix::io::pread(self.fd.as_fd(), &mut bytes[done..], done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        bytes.truncate(done);
        Ok(bytes)
    }

    /// Reads the area once and sums it.
    pub fn read(&self) -> io::Result<LaneReport> {
        Ok(parse(&self.read_bytes()?))
    }
}

impl AsFd for SharedStats {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn word(bytes: &[u8], offset: usize) -> u64 {
    bytes.get(offset..offset + 8).and_then(|b| b.try_into().ok()).map_or(0, u64::from_ne_bytes)
}

fn word32(bytes: &[u8], offset: usize) -> u32 {
    bytes.get(offset..offset + 4).and_then(|b| b.try_into().ok()).map_or(0, u32::from_ne_bytes)
}

fn record(bytes: &[u8], base: usize) -> ProcessRecord {
    let at = |offset: usize| word(bytes, base + offset);
    let mut r = ProcessRecord {
        pid: u32::try_from(at(layout::PID)).unwrap_or(0),
        threads: at(layout::THREADS).min(MAX_THREADS as u64) as usize,
        lane: at(layout::LANE),
        off_reason: at(layout::OFF_REASON),
        off_at_ns: at(layout::OFF_AT_NS),
        rights_change: at(layout::RIGHTS_CHANGE),
        rebuilt: at(layout::REBUILT),
        sqpoll_tid: u32::try_from(at(layout::SQPOLL_TID)).unwrap_or(0),
        in_place: at(layout::IN_PLACE),
        ..ProcessRecord::default()
    };
    for (kind, count) in r.counts.iter_mut().enumerate() {
        *count = at(layout::COUNTS + kind * 8);
    }
    for t in 0..MAX_THREADS {
        r.cpu_ns[t] = at(layout::CPU_NS + t * 8);
        r.thread_tids[t] = word32(bytes, base + layout::THREAD_TIDS + t * 4);
    }
    r
}

/// The records of an area's bytes (at most [`MAX_RECORDS`]); anything out of bounds reads as
/// zero, and an area without the magic has none.
pub fn records(bytes: &[u8]) -> Vec<ProcessRecord> {
    if word(bytes, layout::HEADER_MAGIC) != layout::MAGIC {
        return Vec::new();
    }
    let claimed = word(bytes, layout::HEADER_CLAIMED).min(MAX_RECORDS as u64) as usize;
    (0..claimed).map(|i| record(bytes, layout::HEADER + i * layout::RECORD)).collect()
}

/// Sums the records of an area's bytes.
pub fn parse(bytes: &[u8]) -> LaneReport {
    let mut report = LaneReport::default();
    for r in records(bytes) {
        report.processes += 1;
        report.syscall_threads += r.threads as u64;
        report.delegated.add(&r.counts);
        if let Some(n) = report.lane_modes.get_mut(r.lane as usize) {
            *n += 1;
        }
        for ns in &r.cpu_ns[..r.threads] {
            report.syscall_thread_cpu_ns = report.syscall_thread_cpu_ns.saturating_add(*ns);
        }
        report.rebuilt = report.rebuilt.saturating_add(r.rebuilt);
        report.in_place = report.in_place.saturating_add(r.in_place);
        if r.off_reason != 0 {
            let off = LaneOff {
                pid: r.pid,
                reason: r.off_reason,
                change: r.rights_change,
                at_ns: r.off_at_ns,
            };
            report.lane_off.push(off);
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: usize = layout::SIZE;

    fn put(bytes: &mut [u8], offset: usize, value: u64) {
        bytes[offset..offset + 8].copy_from_slice(&value.to_ne_bytes());
    }

    fn area(records: u64) -> Vec<u8> {
        let mut bytes = vec![0u8; SIZE];
        put(&mut bytes, layout::HEADER_MAGIC, layout::MAGIC);
        put(&mut bytes, layout::HEADER_CLAIMED, records);
        bytes
    }

    #[test]
    fn hostile_area_is_bounded_and_saturates() {
        let mut bytes = vec![0xffu8; SIZE];
        put(&mut bytes, layout::HEADER_MAGIC, layout::MAGIC);
        let report = parse(&bytes);
        assert_eq!(report.processes, MAX_RECORDS as u64);
        assert_eq!(report.syscall_threads, (MAX_RECORDS * MAX_THREADS) as u64);
        assert_eq!(report.delegated.send, u64::MAX);
        assert_eq!(report.delegated.total(), u64::MAX);
        assert_eq!(report.syscall_thread_cpu_ns, u64::MAX);
        assert_eq!(report.rebuilt, u64::MAX);
        assert_eq!(report.in_place, u64::MAX);
        assert_eq!(report.lane_off.len(), MAX_RECORDS, "one per record at most");
        assert_eq!(report.lane_off[0].pid, 0, "a word past u32 is no pid");
        assert_eq!(
            report.lane_modes,
            [0; abi::lane_mode::COUNT],
            "an unknown lane word counts nowhere"
        );
        let r = &records(&bytes)[0];
        assert_eq!((r.sqpoll_tid, r.thread_tids[15]), (0, u32::MAX));
        // Short, empty, or foreign areas read as nothing; the old format's magic too.
        assert_eq!(parse(&bytes[..10]).processes, 0);
        assert_eq!(parse(&[]), LaneReport::default());
        put(&mut bytes, 0, u64::from_le_bytes(*b"clstats1"));
        assert_eq!(parse(&bytes), LaneReport::default());
    }

    #[test]
    fn one_record_is_read_at_the_abis_offsets() {
        let mut bytes = area(1);
        let at = |offset: usize| layout::HEADER + offset;
        put(&mut bytes, at(layout::PID), 4242);
        put(&mut bytes, at(layout::THREADS), 2);
        put(&mut bytes, at(layout::COUNTS), 5); // send
        put(&mut bytes, at(layout::COUNTS + 9 * 8), 3); // close
        put(&mut bytes, at(layout::CPU_NS), 100);
        put(&mut bytes, at(layout::CPU_NS + 8), 50);
        put(&mut bytes, at(layout::CPU_NS + 16), 999); // a third thread's, not counted
        put(&mut bytes, at(layout::LANE), abi::lane_mode::THREADS);
        put(&mut bytes, at(layout::OFF_REASON), abi::off_reason::RIGHTS_CHANGED);
        put(&mut bytes, at(layout::OFF_AT_NS), 7_000_000);
        put(&mut bytes, at(layout::RIGHTS_CHANGE), abi::rights_change::CAPSET);
        put(&mut bytes, at(layout::REBUILT), 2);
        put(&mut bytes, at(layout::IN_PLACE), 11);
        bytes[at(layout::THREAD_TIDS + 4)..at(layout::THREAD_TIDS + 8)]
            .copy_from_slice(&4244u32.to_ne_bytes());
        let r = parse(&bytes);
        assert_eq!(r.lane_modes[LaneMode::Threads as usize], 1);
        assert_eq!((r.delegated.send, r.delegated.close, r.delegated.total()), (5, 3, 8));
        assert_eq!((r.processes, r.syscall_threads, r.syscall_thread_cpu_ns), (1, 2, 150));
        let off = LaneOff { pid: 4242, reason: 1, change: 2, at_ns: 7_000_000 };
        assert_eq!((r.lane_off, r.rebuilt, r.in_place), (vec![off], 2, 11));
        let threads: Vec<_> = records(&bytes)[0].thread_ids().collect();
        assert_eq!(threads, [(0, 0, "cl-sys-"), (1, 4244, "cl-sys-")]);
    }

    #[test]
    fn the_carriers_per_cpu_words_are_theirs_alone() {
        // What the carriers count per CPU after the records (and the program may scribble
        // over) changes nothing the reader reports.
        let mut bytes = area(1);
        put(&mut bytes, layout::HEADER + layout::THREADS, 1);
        let before = parse(&bytes);
        bytes[layout::CPU_WORDS..].fill(0xff);
        assert_eq!(parse(&bytes), before);
        assert_eq!(parse(&bytes[..layout::CPU_WORDS]), before, "an area without them reads alike");
    }

    #[test]
    fn an_sqpoll_records_thread_is_its_poller() {
        let mut bytes = area(1);
        put(&mut bytes, layout::HEADER + layout::THREADS, 1);
        put(&mut bytes, layout::HEADER + layout::LANE, abi::lane_mode::URING_SQPOLL);
        put(&mut bytes, layout::HEADER + layout::SQPOLL_TID, 77);
        let threads: Vec<_> = records(&bytes)[0].thread_ids().collect();
        assert_eq!(threads, [(0, 77, "iou-sqp-")]);
    }

    #[test]
    fn the_area_cannot_be_shrunk_under_the_reader() {
        let stats = SharedStats::create().unwrap();
        assert!(rustix::fs::ftruncate(&stats.fd, 10).is_err());
        assert_eq!(stats.read().unwrap(), LaneReport::default());
        let st = rustix::fs::fstat(&stats.fd).unwrap();
        let expected = format!("{}:{}:{}", stats.raw_fd(), st.st_dev, st.st_ino);
        assert_eq!(stats.env_value().unwrap(), expected);
        assert!(stats.raw_fd() >= layout::HIGH_FD);
    }

    /// The area is out of the low numbers a program expects to be its own, and inherited.
    #[test]
    fn the_area_is_out_of_the_programs_way() {
        let stats = SharedStats::create().unwrap();
        assert!(stats.raw_fd() >= layout::HIGH_FD, "{}", stats.raw_fd());
        let flags = rustix::io::fcntl_getfd(&stats.fd).unwrap();
        assert!(!flags.contains(rustix::io::FdFlags::CLOEXEC), "inherited by the program");
    }
}
