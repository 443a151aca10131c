//! The counters `corelane run` reads: a sealed memfd it creates and names by fd number in
//! CORELANE_STATS_FD. Each process that loads the library claims one fixed record (pid, calls
//! per kind, its syscall threads' CPU time). The layout is `corelane::run::stats`'s; its
//! reader bounds everything, since the program can write here too.

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use core::sync::atomic::{AtomicPtr, AtomicU64};

use crate::exec::*;
use crate::ffi::*;
use crate::lane::{self, Outcome, MAX_THREADS};

const MAGIC: u64 = u64::from_le_bytes(*b"clstats1");
const HEADER: usize = 64;
const RECORD: usize = 256;
const MAX_RECORDS: usize = 256;
const SIZE: usize = HEADER + RECORD * MAX_RECORDS;
const KINDS: usize = 11;

#[repr(C)]
struct Header {
    magic: AtomicU64,
    claimed: AtomicU64,
}

#[repr(C)]
struct Record {
    pid: AtomicU64,
    threads: AtomicU64,
    counts: [AtomicU64; KINDS],
    cpu_ns: [AtomicU64; MAX_THREADS],
    /// 1 threads; 2 io_uring with SQPOLL; 3 io_uring without (refused); 4 no io_uring
    /// (threads ran instead).
    lane: AtomicU64,
}

const _: () = assert!(core::mem::size_of::<Record>() <= RECORD);

static BASE: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());
static MINE: AtomicPtr<Record> = AtomicPtr::new(core::ptr::null_mut());

/// Maps the area named by `fd` if it is one `corelane run` made (large enough, our magic).
pub fn map(fd: c_int) {
    // SAFETY: lseek takes no pointers.
    if unsafe { lseek(fd, 0, SEEK_END) } < SIZE as i64 {
        return;
    }
    // SAFETY: a fresh shared mapping of `SIZE` bytes of a file at least that long (sealed
    // against shrinking by its creator, so no access faults).
    let base = unsafe { mmap(core::ptr::null_mut(), SIZE, PROT_READ_WRITE, MAP_SHARED, fd, 0) };
    if base == MAP_FAILED {
        return;
    }
    // SAFETY: the header lies at the start of the mapping, which is aligned to a page.
    let header = unsafe { &*(base as *const Header) };
    if header.magic.load(Acquire) == MAGIC {
        BASE.store(base.cast(), Release);
        claim_record();
    }
}

/// Claims this process's record (at load and again in a forked child).
pub fn claim_record() {
    let base = BASE.load(Acquire);
    MINE.store(core::ptr::null_mut(), Release);
    if base.is_null() {
        return;
    }
    // SAFETY: `base` is the mapping made in `map`, kept for the life of the process.
    let header = unsafe { &*(base as *const Header) };
    let index = header.claimed.fetch_add(1, Relaxed) as usize;
    if index >= MAX_RECORDS {
        return;
    }
    // SAFETY: record `index` lies inside the mapping (index < MAX_RECORDS) and is aligned.
    let record = unsafe { base.add(HEADER + index * RECORD) } as *mut Record;
    // SAFETY: as above; the record is ours alone from now on.
    let r = unsafe { &*record };
    // SAFETY: getpid has no preconditions.
    r.pid.store(unsafe { getpid() } as u64, Relaxed);
    MINE.store(record, Release);
}

fn mine() -> Option<&'static Record> {
    let record = MINE.load(Acquire);
    // SAFETY: non-null only when it points at our record in the process-long mapping.
    (!record.is_null()).then(|| unsafe { &*record })
}

pub fn set_lane(mode: u64) {
    if let Some(r) = mine() {
        r.lane.store(mode, Relaxed);
    }
}

pub fn set_threads(count: usize) {
    if let Some(r) = mine() {
        r.threads.store(count as u64, Relaxed);
    }
}

/// Counts one call a syscall thread ran (a declined call is not counted: the caller made it).
pub fn count(op: u32, outcome: &Outcome) {
    if outcome.direct {
        return;
    }
    let kind = match op {
        SEND | SENDMSG => 0,
        RECV | RECVMSG => 1,
        READ | READV => 2,
        WRITE | WRITEV => 3,
        ACCEPT => 4,
        CONNECT => 5,
        POLL => 6,
        EPOLL => 7,
        SENDFILE => 8,
        CLOSE => 9,
        _ => 10,
    };
    if let Some(r) = mine() {
        r.counts[kind].fetch_add(1, Relaxed);
    }
}

/// Called by syscall thread `n` itself, now and then and before it sleeps.
pub fn record_thread_cpu(n: usize) {
    let mut ts = Timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out pointer.
    if unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
        store_cpu(n, &ts);
    }
}

fn store_cpu(n: usize, ts: &Timespec) {
    if let Some(r) = mine() {
        let ns = (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64);
        r.cpu_ns[n % MAX_THREADS].store(ns, Relaxed);
    }
}

/// At exit (exit(3), return from main): every syscall thread's CPU time, exact to this moment.
pub extern "C" fn record_at_exit() {
    if let Some(ns) = crate::uring::sqpoll_cpu_ns() {
        if let Some(r) = mine() {
            r.cpu_ns[0].store(ns, Relaxed);
        }
    }
    for (n, thread) in lane::thread_ids() {
        let mut clock: c_int = 0;
        let mut ts = Timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `thread` is a live syscall thread (they never exit while the lane runs);
        // both out pointers are valid.
        let ok = unsafe {
            pthread_getcpuclockid(thread, &mut clock) == 0 && clock_gettime(clock, &mut ts) == 0
        };
        if ok {
            store_cpu(n, &ts);
        }
    }
}
