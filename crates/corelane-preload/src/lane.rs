//! The threads lane: one request slot per application thread, syscall threads pinned to the
//! syscall CPUs that run what the slots ask and hand back result and errno.
//!
//! Waiting. A delegated call never blocks (see `exec.rs`), so it takes microseconds. The
//! caller spins for its answer, then sleeps on the slot's futex; it spins not at all when it
//! may share a CPU with a syscall thread (spinning would only delay the thread it waits for).
//! A syscall thread spins after its last request (a server's next call usually follows at
//! once), then sleeps on its doorbell futex. Both spin by time, about one futex wake-up
//! (10 µs; measured here: 13–19 µs in FUTEX_WAKE, 41–44 µs until a sleeper on another idle CPU
//! runs). A syscall thread spins longer (0.5 ms) only while its CPU has nothing else to run:
//! no preemption of it lately, and no other syscall thread of the run awake there (the run's
//! count per CPU, which a thread keeps itself in while awake and a waking caller counts it
//! into before FUTEX_WAKE) — those it hands the CPU to (sched_yield) and spins on. A caller
//! whose syscall thread was awake spins about one wake-up (45 µs) whatever else wants its CPU:
//! sleeping would cost it two context switches there (`sys/spin.rs`). When several processes'
//! syscall threads are awake on one CPU (a pre-forking server: one process per connection),
//! callers take turns with their CPU from the start, syscall threads hand theirs to each other
//! at once (one of them may hold a posted call), and one that has been busy naps (25 µs timed
//! waits, up to 5 ms) before it sleeps, so neither side needs the other's FUTEX_WAKE.
//! Every sleep is a Dekker pair of sequentially consistent flags, so no wake-up is lost.
//! A caller that waits a second for a request the thread has not even taken cancels it, runs
//! the call itself and turns the lane off for the process: a failing lane never becomes a hang.

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
use std::cell::Cell;

use crate::abi::off_reason::CARRIER_STALLED;
use crate::abi::{lane_mode, MAX_THREADS};
use crate::contention;
use crate::state::{self, LANE, LANE_IDLE, LANE_RUNNING, LANE_STARTING};
use crate::stats;
use crate::sys::spin::{self, Spinner};
use crate::sys::*;
use crate::uring;

const WORDS: usize = MAX_SLOTS / 64;

struct Worker {
    pending: [AtomicU64; WORDS],
    bell: AtomicU32,
    /// 1 while the thread sleeps (or is about to) on `bell`; whoever sets it back to 0 (a
    /// caller that rings, or the thread itself) counts the thread awake again.
    sleeping: AtomicU32,
    /// The thread is counted in its CPU's awake count (`stats::awake_on`).
    counted: AtomicBool,
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
#[allow(clippy::declare_interior_mutable_const)]
const WORKER: Worker = Worker {
    pending: [const { AtomicU64::new(0) }; WORDS],
    bell: AtomicU32::new(0),
    sleeping: AtomicU32::new(0),
    counted: AtomicBool::new(false),
};
static WORKERS: [Worker; MAX_THREADS] = [WORKER; MAX_THREADS];
/// The process is exiting: its syscall threads no longer count themselves awake.
static EXITING: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// This thread's slot (index + 1, 0 = none) and the generation it was taken in.
    static MY_SLOT: Cell<(u32, u32)> = const { Cell::new((0, 0)) };
    /// A delegated call of this thread is under way (a signal handler's call goes direct).
    static BUSY: Cell<bool> = const { Cell::new(false) };
    /// The lane start (EPOCH) this thread last compared its descriptor table in, and whether
    /// it was the carriers'.
    static SAME_TABLE: Cell<(u32, bool)> = const { Cell::new((0, false)) };
}

/// Called once from the library's constructor: the key whose destructor frees a thread's slot.
pub fn init_key() {
    extern "C" fn release(value: *mut c_void) {
        let index = (value as usize).wrapping_sub(1);
        if index < MAX_SLOTS {
            USED[index / 64].fetch_and(!(1u64 << (index % 64)), Release);
        }
    }
    create_thread_key(release);
}

/// In a forked child only the forking thread exists: every slot and worker starts afresh.
pub extern "C" fn after_fork_in_child() {
    GENERATION.fetch_add(1, SeqCst);
    for word in &USED {
        word.store(0, Relaxed);
    }
    reset_slots();
    for worker in &WORKERS {
        for word in &worker.pending {
            word.store(0, Relaxed);
        }
        // The parent's threads are counted, and stay so in the parent; the child's own start
        // uncounted.
        worker.counted.store(false, Relaxed);
        worker.sleeping.store(0, Relaxed);
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
                    set_thread_value(index + 1);
                    return Some(index);
                }
                Err(now) => bits = now,
            }
        }
    }
    None
}

/// Runs `call` on a syscall thread, or returns None: the lane is off or unusable for this call
/// (this thread is inside a delegated call already, a vfork child, no free slot), and the
/// caller makes the call itself.
pub fn delegate(call: &Call) -> Option<Outcome> {
    if !state::active() || BUSY.with(Cell::get) {
        return None;
    }
    // A vfork child shares our memory but not our file table: it must never hand its fds to
    // the parent's syscall threads.
    if !state::in_owner() {
        return None;
    }
    let index = my_slot()?;
    if stepped_aside(index) {
        stats::count_in_place();
        return None;
    }
    if !ensure_started() || !same_table() {
        return None;
    }
    BUSY.with(|b| b.set(true));
    let outcome = if URING_RUNNING.load(Acquire) {
        through_uring(index, call)
    } else if THREADS_RUNNING.load(Acquire) {
        post_and_wait(index, call)
    } else {
        None
    };
    BUSY.with(|b| b.set(false));
    outcome
}

/// Whether the threads lane leaves slot `index`'s call to its caller: its syscall CPU is
/// contended by several processes' carriers (`contention.rs`). Asked before the lane starts,
/// so a process forked meanwhile does not start carriers it would leave idle.
fn stepped_aside(index: usize) -> bool {
    let uring =
        URING_RUNNING.load(Acquire) || (WANT_URING.load(Relaxed) && !THREADS_RUNNING.load(Acquire));
    !uring
        && contention::contended(CPUS[index % THREADS.load(Relaxed).max(1)].load(Relaxed) as usize)
}

/// The uring lane: the slot only carries the completion (whichever waiting thread drains the
/// ring delivers it); the blocking mode is looked up here, and only when it matters.
fn through_uring(index: usize, call: &Call) -> Option<Outcome> {
    let (op, args) = (call.op(), call.args());
    let slot = slot(index)?;
    slot.begin();
    let Some(mut outcome) = crate::uring::run(call, index) else {
        slot.abandon();
        return None;
    };
    let would_block = outcome.ret < 0 && outcome.err == EAGAIN;
    let short_send = crate::exec::is_short_send(op, args, outcome.ret);
    if would_block || short_send {
        let flags = status_flags(args[0] as c_int);
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

fn post_and_wait(index: usize, call: &Call) -> Option<Outcome> {
    let slot = slot(index)?;
    let n = index % THREADS.load(Relaxed).max(1);
    let notify = || {
        let worker = &WORKERS[n];
        worker.pending[index / 64].fetch_or(1 << (index % 64), SeqCst);
        // One caller wakes it (and counts it awake, before it runs: a carrier spinning on
        // that CPU sees at once that another needs it); the others' bits are seen as it wakes.
        let asleep = worker.sleeping.compare_exchange(1, 0, SeqCst, SeqCst).is_ok();
        if asleep {
            count_awake(n, true);
            worker.bell.fetch_add(1, SeqCst);
            sys_futex_wake(&worker.bell);
        }
        asleep
    };
    let shared = carriers_sharing(n);
    if shared {
        contention::crowded_post(CPUS[n].load(Relaxed) as usize);
    }
    let outcome = slot.post_and_wait(call, notify, CALLER_SPINS.load(Relaxed), shared);
    if outcome.is_none() {
        // Not taken after a second: the thread is gone or starved.
        state::stop(CARRIER_STALLED);
    }
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
    // Every signal blocked in them: no signal meant for the program runs on a syscall thread.
    let started = spawn_detached(count.min(WORKERS.len()), serve, |_, _| {});
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
    if let Ok(name) = std::ffi::CString::new(format!("cl-sys-{n}")) {
        pin_and_name(cpu, &name);
    }
    let tid = sys_gettid();
    stats::set_thread_tid(n, tid);
    THREAD_TIDS[n].store(tid, Release);
    let worker = &WORKERS[n];
    let generation = GENERATION.load(SeqCst);
    let awake = stats::awake_on(cpu).map(|count| (count, 1));
    count_awake(n, true);
    let mut served = 0u64;
    // What had been served when the thread last woke from a sleep.
    let mut served_at_wake = 0u64;
    while GENERATION.load(Relaxed) == generation {
        if serve_pending(n, &mut served) {
            continue;
        }
        let mut spinner = Spinner::new(spin::CARRIER, awake);
        let mut asked = false;
        while spinner.go_on() {
            asked = worker.pending.iter().any(|w| w.load(Relaxed) != 0);
            if asked {
                break;
            }
        }
        // A thread that has been busy naps, rather than sleeps, while it shares its CPU.
        let napped = || served - served_at_wake >= NAP_AFTER_CALLS && carriers_sharing(n) && nap(n);
        if !asked && !napped() {
            sleep(n);
            served_at_wake = served;
        }
    }
    count_awake(n, false);
    core::ptr::null_mut()
}

/// Runs every call posted to syscall thread `n`; returns whether there was any.
fn serve_pending(n: usize, served: &mut u64) -> bool {
    let mut any = false;
    for (w, word) in WORKERS[n].pending.iter().enumerate() {
        let mut bits = word.swap(0, Acquire);
        while bits != 0 {
            let bit = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            run_slot(w * 64 + bit);
            any = true;
            *served += 1;
            if *served % 64 == 0 {
                stats::record_thread_cpu(n);
            }
        }
    }
    any
}

/// Whether syscall thread `n`'s CPU has other processes' carriers awake on it too (the run's
/// count there above one: each process has one carrier per syscall CPU). Then callers take
/// turns with their CPU and carriers nap (`spin::CALLER_SHARED`).
fn carriers_sharing(n: usize) -> bool {
    stats::awake_on(CPUS[n].load(Relaxed) as usize).is_some_and(|count| count.load(Relaxed) > 1)
}

/// A syscall thread that served this many calls since it last slept naps before it sleeps
/// (one that served a periodic timer's lone call sleeps at once: an idle program's carrier
/// costs next to nothing).
const NAP_AFTER_CALLS: u64 = 4;
/// One nap: a timed wait, which no caller needs to end.
const NAP_NS: u64 = 25_000;
/// Naps go on this long without a call before the thread sleeps.
const NAPS_NS: u64 = 5_000_000;

/// Between its spin and its sleep, syscall thread `n`, sharing its CPU with other processes'
/// carriers, naps (short timed waits; still counted awake): a caller posting meanwhile is
/// served within a nap and never pays the FUTEX_WAKE a sleeping thread needs (13–19 µs on
/// the application CPU here), and the CPU stays free for the other carriers. Returns whether
/// a call came.
fn nap(n: usize) -> bool {
    let worker = &WORKERS[n];
    let start = monotonic_ns();
    let nap = Timespec { tv_sec: 0, tv_nsec: NAP_NS as _ };
    while monotonic_ns().saturating_sub(start) < NAPS_NS {
        if worker.pending.iter().any(|w| w.load(SeqCst) != 0) {
            return true;
        }
        let seen = worker.bell.load(SeqCst);
        sys_futex_wait(&worker.bell, seen, Some(&nap));
    }
    false
}

/// Syscall thread `n` sleeps on its doorbell until a caller rings it (Dekker: `sleeping`
/// set, then the pending bits looked at; a caller sets its bit, then looks at `sleeping`).
fn sleep(n: usize) {
    let worker = &WORKERS[n];
    stats::record_thread_cpu(n);
    let seen = worker.bell.load(SeqCst);
    count_awake(n, false);
    worker.sleeping.store(1, SeqCst);
    if worker.pending.iter().all(|w| w.load(SeqCst) == 0) {
        sys_futex_wait(&worker.bell, seen, None);
    }
    // Woken without a caller's ring (a bit seen before sleeping, a signal-free spurious
    // return): the thread counts itself awake.
    if worker.sleeping.compare_exchange(1, 0, SeqCst, SeqCst).is_ok() {
        count_awake(n, true);
    }
}

/// Counts syscall thread `n` in (or out of) its CPU's awake count, once: whoever changes its
/// `counted` flag changes the count. A process at its exit counts its threads out for good
/// (`at_exit`), so a count never keeps a thread that is gone (unless the process is killed).
fn count_awake(n: usize, awake: bool) {
    let worker = &WORKERS[n];
    let Some(count) = stats::awake_on(CPUS[n].load(Relaxed) as usize) else { return };
    if awake && EXITING.load(SeqCst) {
        return;
    }
    if worker.counted.swap(awake, SeqCst) != awake {
        if awake {
            count.fetch_add(1, SeqCst);
            // The exit may have counted every thread out meanwhile.
            if EXITING.load(SeqCst) {
                count_awake(n, false);
            }
        } else {
            count.fetch_sub(1, SeqCst);
        }
    }
}

/// At the process's exit: its syscall threads leave the run's awake counts.
pub fn at_exit() {
    if !state::in_owner() {
        return; // a vfork child: the memory, and the threads counted in it, are its parent's
    }
    EXITING.store(true, SeqCst);
    for n in 0..WORKERS.len() {
        count_awake(n, false);
    }
}

fn run_slot(index: usize) {
    let Some(slot) = slot(index) else { return };
    slot.serve(|call| {
        let outcome = crate::exec::execute(call);
        if !outcome.direct {
            stats::count(call.op());
        }
        outcome
    });
}

/// Each running syscall thread's CPU time, exact to this moment (at the process's end).
pub fn record_threads_cpu() {
    let running = if THREADS_RUNNING.load(Acquire) { THREADS.load(Relaxed) } else { 0 };
    for (n, tid) in THREAD_TIDS.iter().enumerate().take(running) {
        if let Some(ns) = thread_cpu_ns(tid.load(Acquire)) {
            stats::set_cpu(n, ns);
        }
    }
}
