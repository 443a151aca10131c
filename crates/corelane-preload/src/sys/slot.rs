//! The request slot through which a program's thread hands one call to a syscall thread and
//! waits for its answer. The slot owns the protocol that keeps [`Call`]'s promise: the
//! program's thread returns (and its pointers may die) only once the call is answered, or
//! after taking back a request no syscall thread has started.

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use core::sync::atomic::{AtomicI64, AtomicU32, AtomicU64};

use super::spin::{Budget, Spinner, CALLER, CALLER_SHARED};
use super::*;

const FREE: u32 = 0;
const POSTED: u32 = 1;
const RUNNING: u32 = 2;
const DONE: u32 = 3;
const CANCELLED: u32 = 4;

/// What a lane hands back for one call.
#[derive(Clone, Copy)]
pub struct Outcome {
    pub ret: i64,
    pub err: c_int,
    /// The fd is in blocking mode (only looked up when the call would have blocked).
    pub blocking: bool,
    /// The lane declined (the call could block a syscall thread): the caller makes it itself.
    pub direct: bool,
}

/// One thread's request slot (a cache line of its own).
#[repr(C, align(64))]
pub struct Slot {
    state: AtomicU32,
    waiter: AtomicU32,
    op: AtomicU32,
    err: AtomicU32,
    flags: AtomicU32,
    args: [AtomicU64; 6],
    ret: AtomicI64,
}

impl Slot {
    pub const fn new() -> Slot {
        Slot {
            state: AtomicU32::new(FREE),
            waiter: AtomicU32::new(0),
            op: AtomicU32::new(0),
            err: AtomicU32::new(0),
            flags: AtomicU32::new(0),
            args: [const { AtomicU64::new(0) }; 6],
            ret: AtomicI64::new(0),
        }
    }

    fn reset(&self) {
        self.state.store(FREE, Relaxed);
    }

    /// Posts `call`, runs `notify` (which tells a syscall thread, and returns whether it had
    /// to wake it), and waits for the answer: spinning first if `spin` (as long as
    /// `spin::CALLER` allows, `spin::CALLER_SHARED` if the carrier's CPU is `shared` with other
    /// processes' carriers; only the short budget for a thread just woken, whose answer comes
    /// a wake-up later), then sleeping on the slot's futex. A request no syscall thread
    /// has taken after a second is taken back: None, and the caller makes the call itself.
    /// A request a thread has taken is always waited for (it never blocks: `exec.rs`).
    pub fn post_and_wait(
        &self,
        call: &Call,
        notify: impl FnOnce() -> bool,
        spin: bool,
        shared: bool,
    ) -> Option<Outcome> {
        self.op.store(call.op(), Relaxed);
        for (a, v) in self.args.iter().zip(call.args()) {
            a.store(v, Relaxed);
        }
        self.waiter.store(0, Relaxed);
        self.state.store(POSTED, SeqCst);
        let woken = notify();
        if spin {
            let budget = if shared { CALLER_SHARED } else { CALLER };
            let budget = if woken { Budget { long_ns: budget.short_ns, ..budget } } else { budget };
            let mut spinner = Spinner::new(budget, None);
            while spinner.go_on() {
                if self.state.load(Acquire) == DONE {
                    return Some(self.take());
                }
            }
        }
        self.waiter.store(1, SeqCst);
        let second = Timespec { tv_sec: 1, tv_nsec: 0 };
        let deadline = monotonic_ns().saturating_add(1_000_000_000);
        loop {
            match self.state.load(SeqCst) {
                DONE => return Some(self.take()),
                POSTED => {
                    // A signal ends the sleep early: its handler has run, and we wait on.
                    sys_futex_wait(&self.state, POSTED, Some(&second));
                    // Still not taken after a second: the thread is gone or starved. Take it
                    // back.
                    if monotonic_ns() >= deadline
                        && self.state.compare_exchange(POSTED, CANCELLED, SeqCst, SeqCst).is_ok()
                    {
                        return None;
                    }
                }
                state => sys_futex_wait(&self.state, state, None),
            }
        }
    }

    /// On a syscall thread: runs the call posted here, if any (not cancelled, not a stale
    /// bit), with `run`, and answers it. Returns whether one ran.
    pub fn serve(&self, run: impl FnOnce(&Call) -> Outcome) -> bool {
        if self.state.compare_exchange(POSTED, RUNNING, Acquire, Relaxed).is_err() {
            return false; // cancelled by its caller, or a stale bit
        }
        let op = self.op.load(Relaxed);
        let args: [u64; 6] = core::array::from_fn(|i| self.args[i].load(Relaxed));
        // SAFETY: the arguments of the call `post_and_wait` posted; its caller is still
        // waiting (RUNNING: it can no longer take the request back) and returns only once
        // the state below is DONE.
        let call = unsafe { Call::new(op, args) };
        let outcome = run(&call);
        self.ret.store(outcome.ret, Relaxed);
        self.err.store(outcome.err as u32, Relaxed);
        self.flags.store(u32::from(outcome.blocking) | u32::from(outcome.direct) << 1, Relaxed);
        self.state.store(DONE, SeqCst);
        if self.waiter.load(SeqCst) != 0 {
            sys_futex_wake(&self.state);
        }
        true
    }

    /// The uring lane: the slot only carries the completion. Marks a submission under way.
    pub fn begin(&self) {
        self.state.store(POSTED, Release);
    }

    /// The uring lane: the submission was not made (or given up); free again.
    pub fn abandon(&self) {
        self.state.store(FREE, Release);
    }

    /// The uring lane: the answer, if the completion has come.
    pub fn answer(&self) -> Option<Outcome> {
        (self.state.load(Acquire) == DONE).then(|| self.take())
    }

    /// The uring lane: the completion `res` (a value or -errno) of the submission under way
    /// here. A completion for a slot with none under way changes nothing.
    pub fn complete(&self, res: i32) {
        if self.state.compare_exchange(POSTED, RUNNING, Acquire, Relaxed).is_err() {
            return;
        }
        self.ret.store(if res < 0 { -1 } else { i64::from(res) }, Relaxed);
        self.err.store(if res < 0 { res.unsigned_abs() } else { 0 }, Relaxed);
        self.flags.store(0, Relaxed);
        self.state.store(DONE, Release);
    }

    fn take(&self) -> Outcome {
        let flags = self.flags.load(Relaxed);
        let outcome = Outcome {
            ret: self.ret.load(Relaxed),
            err: self.err.load(Relaxed) as c_int,
            blocking: flags & 1 != 0,
            direct: flags & 2 != 0,
        };
        self.state.store(FREE, Release);
        outcome
    }
}

/// At most this many threads of a process carry calls at once (one slot each).
pub const MAX_SLOTS: usize = 1024;

/// The request slots, one per application thread (the lane hands each index to one thread
/// only: `lane.rs`'s allocation).
static SLOTS: [Slot; MAX_SLOTS] = [const { Slot::new() }; MAX_SLOTS];

/// Request slot `index`.
pub fn slot(index: usize) -> Option<&'static Slot> {
    SLOTS.get(index)
}

/// In a forked child (one thread, no syscall thread): every slot free again.
pub fn reset_slots() {
    for slot in &SLOTS {
        slot.reset();
    }
}
