//! The threads lane: one request slot per application thread, syscall threads pinned to the
//! syscall CPUs that run what the slots ask and hand back result and errno.
//!
//! Waiting. A delegated call never blocks (see `exec.rs`), so it takes microseconds: the caller
//! spins briefly (a futex sleep and wake-up costs about as much as the call itself), then sleeps
//! on the slot's futex; it spins not at all when it shares a CPU with a syscall thread (spinning
//! would only delay the thread it waits for). A syscall thread spins a little after its last
//! request (a server's next call usually follows at once), then sleeps on its doorbell futex.
//! Every sleep is a Dekker pair of sequentially consistent flags, so no wake-up is lost.
//! A caller that waits a second for a request the thread has not even taken cancels it, runs
//! the call itself and turns the lane off for the process: a failing lane never becomes a hang.

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use core::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize};
use std::cell::Cell;

use crate::abi::off_reason::CARRIER_STALLED;
use crate::abi::op::{SEND, WRITE};
use crate::abi::{lane_mode, MAX_THREADS};
use crate::exec::Outcome;
use crate::state::{self, LANE, LANE_IDLE, LANE_RUNNING, LANE_STARTING};
use crate::stats;
use crate::sys::*;
use crate::uring;

pub const MAX_SLOTS: usize = 1024;
const WORDS: usize = MAX_SLOTS / 64;
const CALLER_SPIN: u32 = 4000;
const THREAD_SPIN: u32 = 20000;

const FREE: u32 = 0;
const POSTED: u32 = 1;
const RUNNING: u32 = 2;
const DONE: u32 = 3;
const CANCELLED: u32 = 4;

#[repr(C, align(64))]
struct Slot {
    state: AtomicU32,
    waiter: AtomicU32,
    op: AtomicU32,
    err: AtomicU32,
    flags: AtomicU32,
    args: [AtomicU64; 6],
    ret: AtomicI64,
}

struct Worker {
    pending: [AtomicU64; WORDS],
    bell: AtomicU32,
    sleeping: AtomicU32,
    thread: AtomicUsize,
}

pub static CPUS: [AtomicU32; MAX_THREADS] = [const { AtomicU32::new(0) }; MAX_THREADS];
pub static THREADS: AtomicUsize = AtomicUsize::new(0);
pub static CALLER_SPINS: AtomicBool = AtomicBool::new(true);
/// The lane asked for: the library's syscall threads, or io_uring (falls back to threads).
pub static WANT_URING: AtomicBool = AtomicBool::new(false);
static URING_RUNNING: AtomicBool = AtomicBool::new(false);
/// The library's syscall threads serve this process (the threads lane, or uring's fallback).
static THREADS_RUNNING: AtomicBool = AtomicBool::new(false);
/// Each syscall thread's id, written by the thread as it starts.
static THREAD_TIDS: [AtomicU32; MAX_THREADS] = [const { AtomicU32::new(0) }; MAX_THREADS];
/// Counts the lane's starts: a thread compares its descriptor table with the carriers' once
/// per start.
static EPOCH: AtomicU32 = AtomicU32::new(1);
static GENERATION: AtomicU32 = AtomicU32::new(1);
static USED: [AtomicU64; WORDS] = [const { AtomicU64::new(0) }; WORDS];
static KEY: AtomicU32 = AtomicU32::new(u32::MAX);
#[allow(clippy::declare_interior_mutable_const)]
const SLOT: Slot = Slot {
    state: AtomicU32::new(FREE),
    waiter: AtomicU32::new(0),
    op: AtomicU32::new(0),
    err: AtomicU32::new(0),
    flags: AtomicU32::new(0),
    args: [const { AtomicU64::new(0) }; 6],
    ret: AtomicI64::new(0),
};
static SLOTS: [Slot; MAX_SLOTS] = [SLOT; MAX_SLOTS];
#[allow(clippy::declare_interior_mutable_const)]
const WORKER: Worker = Worker {
    pending: [const { AtomicU64::new(0) }; WORDS],
    bell: AtomicU32::new(0),
    sleeping: AtomicU32::new(0),
    thread: AtomicUsize::new(0),
};
static WORKERS: [Worker; MAX_THREADS] = [WORKER; MAX_THREADS];

thread_local! {
    /// This thread's slot (index + 1, 0 = none) and the generation it was taken in.
    static MY_SLOT: Cell<(u32, u32)> = const { Cell::new((0, 0)) };
    /// A delegated call of this thread is under way (a signal handler's call goes direct).
    static BUSY: Cell<bool> = const { Cell::new(false) };
    /// The lane start (EPOCH) this thread last compared its descriptor table in, and whether
    /// it was the carriers'.
    static SAME_TABLE: Cell<(u32, bool)> = const { Cell::new((0, false)) };
}

use crate::sys::{sys_futex_wait as futex_wait, sys_futex_wake as futex_wake};

/// Called once from the library's constructor: the key whose destructor frees a thread's slot.
pub fn init_key() {
    extern "C" fn release(value: *mut c_void) {
        let index = (value as usize).wrapping_sub(1);
        if index < MAX_SLOTS {
            USED[index / 64].fetch_and(!(1u64 << (index % 64)), Release);
        }
    }
    let mut key: c_uint = 0;
    // SAFETY: `key` is a valid out pointer; `release` has the destructor's signature.
    if unsafe { pthread_key_create(&mut key, release) } == 0 {
        KEY.store(key, Release);
    }
}

/// In a forked child only the forking thread exists: every slot and worker starts afresh.
pub extern "C" fn after_fork_in_child() {
    GENERATION.fetch_add(1, SeqCst);
    for word in &USED {
        word.store(0, Relaxed);
    }
    for slot in &SLOTS {
        slot.state.store(FREE, Relaxed);
    }
    for worker in &WORKERS {
        for word in &worker.pending {
            word.store(0, Relaxed);
        }
    }
    BUSY.with(|b| b.set(false));
    uring::forget_after_fork();
    URING_RUNNING.store(false, SeqCst);
    THREADS_RUNNING.store(false, SeqCst);
    for tid in &THREAD_TIDS {
        tid.store(0, SeqCst);
    }
    EPOCH.fetch_add(1, SeqCst);
    stats::claim_record();
    state::after_fork_in_child();
}

fn my_slot() -> Option<usize> {
    let generation = GENERATION.load(Acquire);
    let (index, taken_in) = MY_SLOT.with(Cell::get);
    if index != 0 && taken_in == generation {
        return Some(index as usize - 1);
    }
    for (w, word) in USED.iter().enumerate() {
        let mut bits = word.load(Relaxed);
        while bits != u64::MAX {
            let bit = (!bits).trailing_zeros() as usize;
            match word.compare_exchange(bits, bits | 1 << bit, Acquire, Relaxed) {
                Ok(_) => {
                    let index = w * 64 + bit;
                    MY_SLOT.with(|s| s.set((index as u32 + 1, generation)));
                    let key = KEY.load(Acquire);
                    if key != u32::MAX {
                        // SAFETY: the key was created by init_key; the value is an integer.
                        unsafe { pthread_setspecific(key, (index + 1) as *const c_void) };
                    }
                    return Some(index);
                }
                Err(now) => bits = now,
            }
        }
    }
    None
}

/// Runs `op` on a syscall thread, or returns None: the lane is off or unusable for this call
/// (this thread is inside a delegated call already, a vfork child, no free slot), and the
/// caller makes the call itself.
pub fn delegate(op: u32, args: [u64; 6]) -> Option<Outcome> {
    if !state::active() || BUSY.with(Cell::get) {
        return None;
    }
    // A vfork child shares our memory but not our file table: it must never hand its fds to
    // the parent's syscall threads.
    if !state::in_owner() || !ensure_started() || !same_table() {
        return None;
    }
    let index = my_slot()?;
    BUSY.with(|b| b.set(true));
    let outcome = if URING_RUNNING.load(Acquire) {
        through_uring(index, op, args)
    } else if THREADS_RUNNING.load(Acquire) {
        post_and_wait(index, op, args)
    } else {
        None
    };
    BUSY.with(|b| b.set(false));
    outcome
}

/// The uring lane: the slot only carries the completion (whichever waiting thread drains the
/// ring delivers it); the blocking mode is looked up here, and only when it matters.
fn through_uring(index: usize, op: u32, args: [u64; 6]) -> Option<Outcome> {
    let deliver = |user_data: u64, res: i32| {
        if let Some(slot) = (user_data as usize).checked_sub(1).and_then(|i| SLOTS.get(i)) {
            slot.ret.store(if res < 0 { -1 } else { i64::from(res) }, Relaxed);
            slot.err.store(if res < 0 { res.unsigned_abs() } else { 0 }, Relaxed);
            slot.flags.store(0, Relaxed);
            slot.state.store(DONE, Release);
        }
    };
    let slot = &SLOTS[index];
    let done = || (slot.state.load(Acquire) == DONE).then(|| take(slot));
    slot.state.store(POSTED, Release);
    let Some(mut outcome) = crate::uring::run(index, op, args, &deliver, &done) else {
        slot.state.store(FREE, Release);
        return None;
    };
    let would_block = outcome.ret < 0 && outcome.err == EAGAIN;
    let short_send =
        matches!(op, SEND | WRITE) && outcome.ret >= 0 && (outcome.ret as u64) < args[2];
    if would_block || short_send {
        // SAFETY: F_GETFL takes no pointer argument.
        let flags = unsafe { fcntl(args[0] as c_int, F_GETFL) };
        outcome.blocking = flags >= 0 && flags & O_NONBLOCK == 0;
    }
    if !outcome.direct {
        stats::count(op);
    }
    Some(outcome)
}

/// Whether this thread's descriptor table is the carriers' (kcmp, once per lane start): a
/// thread with another table (a raw clone without CLONE_FILES) makes every call itself, so
/// its fd numbers never name another table's files. A table the kernel cannot compare counts
/// as another.
fn same_table() -> bool {
    let epoch = EPOCH.load(Acquire);
    let (seen, same) = SAME_TABLE.with(Cell::get);
    if seen == epoch {
        return same;
    }
    let carrier = if URING_RUNNING.load(Acquire) {
        uring::carrier_tid()
    } else {
        THREAD_TIDS[0].load(Acquire)
    };
    let same = carrier != 0 && sys_same_fd_table(sys_gettid(), carrier) == Some(true);
    SAME_TABLE.with(|s| s.set((epoch, same)));
    same
}

fn post_and_wait(index: usize, op: u32, args: [u64; 6]) -> Option<Outcome> {
    let slot = &SLOTS[index];
    slot.op.store(op, Relaxed);
    for (a, v) in slot.args.iter().zip(args) {
        a.store(v, Relaxed);
    }
    slot.waiter.store(0, Relaxed);
    slot.state.store(POSTED, SeqCst);
    let worker = &WORKERS[index % THREADS.load(Relaxed).max(1)];
    worker.pending[index / 64].fetch_or(1 << (index % 64), SeqCst);
    if worker.sleeping.load(SeqCst) != 0 {
        worker.bell.fetch_add(1, SeqCst);
        futex_wake(&worker.bell);
    }
    if CALLER_SPINS.load(Relaxed) {
        for _ in 0..CALLER_SPIN {
            if slot.state.load(Acquire) == DONE {
                return Some(take(slot));
            }
            core::hint::spin_loop();
        }
    }
    slot.waiter.store(1, SeqCst);
    let second = Timespec { tv_sec: 1, tv_nsec: 0 };
    let deadline = monotonic_ns().saturating_add(1_000_000_000);
    loop {
        match slot.state.load(SeqCst) {
            DONE => return Some(take(slot)),
            POSTED => {
                // A signal ends the sleep early: its handler has run, and we wait on.
                futex_wait(&slot.state, POSTED, Some(&second));
                // Still not taken after a second: the thread is gone or starved. Take it back.
                if monotonic_ns() >= deadline
                    && slot.state.compare_exchange(POSTED, CANCELLED, SeqCst, SeqCst).is_ok()
                {
                    state::stop(CARRIER_STALLED);
                    return None;
                }
            }
            state => futex_wait(&slot.state, state, None),
        }
    }
}

fn take(slot: &Slot) -> Outcome {
    let flags = slot.flags.load(Relaxed);
    let outcome = Outcome {
        ret: slot.ret.load(Relaxed),
        err: slot.err.load(Relaxed) as c_int,
        blocking: flags & 1 != 0,
        direct: flags & 2 != 0,
    };
    slot.state.store(FREE, Release);
    outcome
}

/// Starts the syscall threads on the first delegated call of a process (never before main,
/// never in a vfork child, again in a forked child). Another thread's first call meanwhile
/// goes direct rather than wait.
fn ensure_started() -> bool {
    match LANE.compare_exchange(LANE_IDLE, LANE_STARTING, SeqCst, Acquire) {
        Ok(_) => {}
        Err(state) => return state == LANE_RUNNING,
    }
    let running = if WANT_URING.load(Relaxed) {
        start_uring() || start_threads()
    } else {
        stats::set_lane(lane_mode::THREADS);
        start_threads()
    };
    EPOCH.fetch_add(1, SeqCst);
    if running {
        // Unless a change of rights stopped the lane meanwhile.
        let _ = LANE.compare_exchange(LANE_STARTING, LANE_RUNNING, SeqCst, SeqCst);
    } else {
        state::stop(crate::abi::off_reason::START_FAILED);
    }
    LANE.load(SeqCst) == LANE_RUNNING
}

/// The uring lane's ring, made by (and with the context of) the calling thread.
fn start_uring() -> bool {
    let mode = uring::start(CPUS[0].load(Relaxed));
    stats::set_lane(mode);
    if mode == uring::MODE_UNAVAILABLE {
        return false;
    }
    stats::set_threads(usize::from(mode == uring::MODE_SQPOLL));
    URING_RUNNING.store(true, SeqCst);
    true
}

/// The syscall threads, made by (and sharing the context of) the calling thread; waits (at
/// most a second) for the first to say its thread id, the carriers' for `same_table`.
fn start_threads() -> bool {
    let count = THREADS.load(Relaxed);
    let all = Bits1024([u64::MAX; 16]);
    let mut old = Bits1024([0; 16]);
    // SAFETY: both masks are valid; new threads inherit the mask, so they start with every
    // signal blocked and no signal meant for the program ever runs on a syscall thread.
    unsafe { pthread_sigmask(SIG_SETMASK, &all, &mut old) };
    let mut started = 0;
    for (n, worker) in WORKERS.iter().enumerate().take(count) {
        let mut thread: PthreadT = 0;
        // SAFETY: `serve` has the start routine's signature; its argument is an integer.
        let rc = unsafe { pthread_create(&mut thread, core::ptr::null(), serve, n as *mut c_void) };
        if rc != 0 {
            break;
        }
        worker.thread.store(thread, Release);
        // SAFETY: the thread was just created and is never joined.
        unsafe { pthread_detach(thread) };
        started += 1;
    }
    // SAFETY: restores the mask saved above.
    unsafe { pthread_sigmask(SIG_SETMASK, &old, core::ptr::null_mut()) };
    if started < count {
        // Slots are spread over `count` workers; with fewer, some would never be served.
        THREADS.store(started, SeqCst);
    }
    stats::set_threads(started);
    let deadline = monotonic_ns().saturating_add(1_000_000_000);
    while started > 0 && THREAD_TIDS[0].load(Acquire) == 0 && monotonic_ns() < deadline {
        std::thread::yield_now();
    }
    THREADS_RUNNING.store(started > 0, SeqCst);
    started > 0
}

/// After a change of credentials every thread followed (glibc's set*id): the syscall threads
/// followed it too, but an SQPOLL thread did not. Its ring is retired and the lane made idle,
/// so the next call builds a new ring from its caller's (new) context. Returns whether a ring
/// was retired.
pub fn rebuild_after_setid() -> bool {
    if !URING_RUNNING.load(SeqCst)
        || LANE.compare_exchange(LANE_RUNNING, LANE_STARTING, SeqCst, SeqCst).is_err()
    {
        return false;
    }
    URING_RUNNING.store(false, SeqCst);
    uring::retire(true);
    stats::add_rebuilt();
    let _ = LANE.compare_exchange(LANE_STARTING, LANE_IDLE, SeqCst, SeqCst);
    true
}

/// Stops the lane for good in this process (`reason` an `abi::off_reason`), retiring its ring.
pub fn stop(reason: u64) {
    state::stop(reason);
    if URING_RUNNING.swap(false, SeqCst) {
        uring::retire(true);
    }
}

/// Whether the syscall threads carry this process's calls (they follow glibc's set*id).
pub fn threads_running() -> bool {
    THREADS_RUNNING.load(SeqCst)
}

extern "C" fn serve(arg: *mut c_void) -> *mut c_void {
    let n = arg as usize;
    let cpu = CPUS[n].load(Relaxed) as usize;
    let mut mask = Bits1024([0; 16]);
    mask.0[cpu / 64 % 16] |= 1 << (cpu % 64);
    let name = format!("cl-sys-{n}\0");
    // SAFETY: the mask and the NUL-terminated name outlive the calls.
    unsafe {
        sched_setaffinity(0, core::mem::size_of::<Bits1024>(), &mask);
        prctl(PR_SET_NAME, name.as_ptr());
    }
    let tid = sys_gettid();
    stats::set_thread_tid(n, tid);
    THREAD_TIDS[n].store(tid, Release);
    let worker = &WORKERS[n];
    let generation = GENERATION.load(SeqCst);
    let mut idle = 0u32;
    let mut served = 0u64;
    loop {
        if GENERATION.load(Relaxed) != generation {
            return core::ptr::null_mut();
        }
        let mut any = false;
        for (w, word) in worker.pending.iter().enumerate() {
            let mut bits = word.swap(0, Acquire);
            while bits != 0 {
                let bit = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                run_slot(&SLOTS[w * 64 + bit]);
                any = true;
                served += 1;
                if served % 64 == 0 {
                    stats::record_thread_cpu(n);
                }
            }
        }
        if any {
            idle = 0;
            continue;
        }
        idle += 1;
        if idle < THREAD_SPIN {
            core::hint::spin_loop();
            continue;
        }
        stats::record_thread_cpu(n);
        let seen = worker.bell.load(SeqCst);
        worker.sleeping.store(1, SeqCst);
        if worker.pending.iter().all(|w| w.load(SeqCst) == 0) {
            futex_wait(&worker.bell, seen, None);
        }
        worker.sleeping.store(0, SeqCst);
        idle = 0;
    }
}

fn run_slot(slot: &Slot) {
    if slot.state.compare_exchange(POSTED, RUNNING, Acquire, Relaxed).is_err() {
        return; // cancelled by its caller, or a stale bit
    }
    let op = slot.op.load(Relaxed);
    let args: [u64; 6] = core::array::from_fn(|i| slot.args[i].load(Relaxed));
    let outcome = crate::exec::execute(op, args);
    if !outcome.direct {
        stats::count(op);
    }
    slot.ret.store(outcome.ret, Relaxed);
    slot.err.store(outcome.err as u32, Relaxed);
    slot.flags.store(u32::from(outcome.blocking) | u32::from(outcome.direct) << 1, Relaxed);
    slot.state.store(DONE, SeqCst);
    if slot.waiter.load(SeqCst) != 0 {
        futex_wake(&slot.state);
    }
}

/// The pthread ids of the running syscall threads (for the CPU time recorded at exit).
pub fn thread_ids() -> impl Iterator<Item = (usize, PthreadT)> {
    let running = THREADS_RUNNING.load(Acquire);
    (0..if running { THREADS.load(Relaxed) } else { 0 })
        .map(|n| (n, WORKERS[n].thread.load(Acquire)))
}

/// Each running syscall thread's CPU time, exact to this moment (at the process's end).
pub fn record_threads_cpu() {
    for (n, thread) in thread_ids() {
        let mut clock: c_int = 0;
        // SAFETY: `thread` is a live syscall thread (they never exit while the lane runs);
        // `clock` is a valid out pointer.
        if unsafe { pthread_getcpuclockid(thread, &mut clock) } == 0 {
            if let Some(ns) = clock_ns(clock) {
                stats::set_cpu(n, ns);
            }
        }
    }
}
