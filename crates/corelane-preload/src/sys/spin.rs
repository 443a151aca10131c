//! How long a lane's threads spin before they sleep: by time (the monotonic clock, read every
//! few iterations), never by a count of iterations, and long only while nobody else wants the
//! CPU.
//!
//! Sleeping costs a futex wake-up: measured here (`docs/results/futex-wake.c`, 2 vCPUs) the
//! waker's FUTEX_WAKE takes 13–19 µs and the sleeper runs 41–44 µs after it on another, idle
//! CPU, 5 µs on the same CPU. Spinning costs whatever else could run on the CPU. So every
//! spinner spins [`Budget::short_ns`] (about one wake-up) and goes on to its longer budget
//! only while its CPU has nothing else to run, as far as it can tell:
//! - no other syscall thread of the run is awake on it (the run's shared count of awake
//!   carriers per CPU, `stats::awake_on`: a carrier counts itself; a caller, which runs on an
//!   application CPU, counts nothing there), and
//! - it was not preempted lately (`ru_nivcsw` did not rise within [`QUIET_NS`]): a client or
//!   any other program wanting the CPU preempts a spinner, and the spinner keeps its spins
//!   short for a while after. A caller does not ask this: its answer is being made, and it
//!   spins at most about one wake-up.
//!
//! While the long spin goes on both are looked at again: the count at every clock read, the
//! preemptions every [`LOOK_NS`]. A syscall thread crowded only by other syscall threads of
//! the run hands them the CPU (sched_yield) from its first look, not after its short spin
//! (one of them may hold a posted call), and spins on instead of sleeping: a sleeping
//! carrier costs its next caller a FUTEX_WAKE on the application CPU.
//!
//! When several processes' carriers share the syscall CPU (the run's count there is above
//! one: Apache prefork, eight processes and their eight carriers), a caller's spin would take
//! its CPU from the other processes on it, and every sleep on either side costs the other a
//! FUTEX_WAKE. Then a caller takes turns with whatever else its CPU has to run from the start
//! ([`CALLER_SHARED`]: sched_yield, which returns at once when nothing is), and only then
//! sleeps; its carrier naps (`lane.rs`). A single process's lane (the count at most one)
//! never takes turns and never naps.

use core::sync::atomic::AtomicU32;
use core::sync::atomic::Ordering::Relaxed;
use std::cell::Cell;

use super::{involuntary_switches, monotonic_ns, sys_sched_yield};

/// About one futex wake-up here (see above): what spinning may cost when another thread is
/// runnable on the CPU.
pub const WAKE_NS: u64 = 10_000;
/// A thread preempted within this long counts as sharing its CPU.
pub const QUIET_NS: u64 = 1_000_000;
/// How often a long spin asks whether it was preempted (getrusage).
pub const LOOK_NS: u64 = 25_000;
/// The clock is read once every this many spins (a read costs 80–110 ns in this VM).
const SPINS_PER_READ: u32 = 16;

/// When a spinner past its short budget hands its CPU over (sched_yield) and spins on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Yield {
    /// Never: past the short budget it spins on only while its CPU has nothing else to run.
    Never,
    /// While other syscall threads of the run are awake on the CPU, rather than sleep: every
    /// carrier that sleeps costs its next caller a futex wake-up on the application CPU.
    ToCarriers,
    /// Always, up to the long budget: whatever else is runnable runs first.
    Always,
}

/// How long one kind of spinner spins.
#[derive(Clone, Copy)]
pub struct Budget {
    /// While another thread is runnable on the CPU.
    pub short_ns: u64,
    /// While the CPU has nothing else to run (`Yield::Always`: in turns with what else is).
    pub long_ns: u64,
    pub yields: Yield,
}

/// A syscall thread after its last request (a server's next call usually follows at once):
/// its former budget of 20,000 spins took 0.5 ms here.
pub const CARRIER: Budget =
    Budget { short_ns: WAKE_NS, long_ns: 500_000, yields: Yield::ToCarriers };
/// A caller waiting for its carrier's answer: about one wake-up as it sleeps on a busy CPU
/// (41-44 µs), whatever else wants its CPU, when its carrier was awake (sleeping instead would
/// cost it two context switches there: redis under the threads lane lost half its requests/s).
pub const CALLER: Budget = Budget { short_ns: WAKE_NS, long_ns: 45_000, yields: Yield::Never };
/// A caller whose carrier shares the syscall CPU with other processes' carriers: in turns
/// with whatever else its CPU has to run from the start (its carrier is seldom the one on
/// the syscall CPU when the call is posted, so a spin only keeps the CPU from the other
/// processes), for a few of its carrier's naps (`lane.rs`), then it sleeps. Measured with
/// Apache prefork (eight processes and the client on one CPU, their carriers on the other):
/// 10.3k → 12.0k requests/s, program CPU per request 60 → 44 µs (28 without the lane); with
/// the client on the carriers' CPU 10.1k → 17.6k (docs/RESULTS.md).
pub const CALLER_SHARED: Budget = Budget { short_ns: 0, long_ns: 200_000, yields: Yield::Always };
/// A uring lane caller waiting for its completion.
pub const URING_WAITER: Budget =
    Budget { short_ns: WAKE_NS, long_ns: 100_000, yields: Yield::Never };

thread_local! {
    /// This thread's involuntary switches when last read (None: never), and when (monotonic
    /// ns) they were last seen to rise (0: never).
    static PREEMPTED: Cell<(Option<u64>, u64)> = const { Cell::new((None, 0)) };
}

/// Whether this thread was preempted within QUIET_NS of `now` (reads getrusage).
fn preempted_lately(now: u64) -> bool {
    let Some(switches) = involuntary_switches() else { return false };
    let (seen, at) = PREEMPTED.with(Cell::get);
    let at = if seen.is_some_and(|seen| seen != switches) { now } else { at };
    PREEMPTED.with(|p| p.set((Some(switches), at)));
    at != 0 && now.saturating_sub(at) < QUIET_NS
}

/// Hands the CPU to whatever else is runnable on it; the switches this makes are not
/// preemptions (the baseline of `preempted_lately` moves past them).
fn yield_cpu() {
    #[cfg(test)]
    tests::YIELDS.with(|y| y.set(y.get() + 1));
    sys_sched_yield();
    if let Some(switches) = involuntary_switches() {
        PREEMPTED.with(|p| p.set((Some(switches), p.get().1)));
    }
}

/// One spin-then-sleep wait: ask [`Spinner::go_on`] after each look at what is awaited.
pub struct Spinner {
    budget: Budget,
    /// The run's count of awake carriers on this CPU, and how many of them are this thread.
    awake: Option<(&'static AtomicU32, u32)>,
    spins: u32,
    start: u64,
    long: bool,
    next_look: u64,
    /// The budget is spent: every later ask answers false.
    spent: bool,
}

impl Spinner {
    /// A spinner with `budget`; `awake`: the CPU's count of awake carriers and how many of
    /// them this thread is (a carrier: 1), or None (a caller).
    pub fn new(budget: Budget, awake: Option<(&'static AtomicU32, u32)>) -> Self {
        Spinner { budget, awake, spins: 0, start: 0, long: false, next_look: 0, spent: false }
    }

    /// Whether another carrier of the run is awake on this CPU.
    fn crowded(&self) -> bool {
        self.awake.is_some_and(|(count, mine)| count.load(Relaxed) > mine)
    }

    /// Whether to spin once more (false: sleep now, and from then on).
    pub fn go_on(&mut self) -> bool {
        if self.spent {
            return false;
        }
        self.spins = self.spins.wrapping_add(1);
        if self.spins % SPINS_PER_READ != 0 {
            core::hint::spin_loop();
            return true;
        }
        let now = monotonic_ns();
        if self.start == 0 {
            self.start = now;
        }
        let spun = now.saturating_sub(self.start);
        // A carrier crowded by other carriers of the run hands them the CPU from its first
        // look: one of them may hold a posted call, and a spin here only delays it.
        let hand_over = self.budget.yields == Yield::ToCarriers && self.crowded();
        let go_on = if spun < self.budget.short_ns && !hand_over {
            true
        } else if self.budget.yields == Yield::Always {
            if spun < self.budget.long_ns {
                #[cfg(test)]
                tests::YIELDS.with(|y| y.set(y.get() + 1));
                sys_sched_yield();
            }
            spun < self.budget.long_ns
        } else if self.budget.yields == Yield::ToCarriers
            && spun < self.budget.long_ns
            && self.crowded()
        {
            yield_cpu();
            true
        } else if !self.long {
            // A caller waits for an answer that is already being made (its carrier was
            // awake): sleeping would cost it two context switches on a CPU its program needs.
            self.long = self.awake.is_none() || (!self.crowded() && !preempted_lately(now));
            self.next_look = spun.saturating_add(LOOK_NS);
            self.long
        } else if spun >= self.budget.long_ns
            || (self.budget.yields == Yield::Never && self.crowded())
        {
            false
        } else if spun >= self.next_look && self.awake.is_some() {
            self.next_look = spun.saturating_add(LOOK_NS);
            !preempted_lately(now)
        } else {
            true
        };
        if go_on {
            core::hint::spin_loop();
        }
        self.spent = !go_on;
        go_on
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::AtomicU32;

    thread_local! {
        /// How many times this thread handed its CPU over.
        pub static YIELDS: Cell<u32> = const { Cell::new(0) };
    }

    /// Asks `budget`'s spinner to go on for its first look at the clock (the first read is
    /// at 0 ns spun: inside every short budget, whatever this thread's scheduling); returns
    /// the yields it made.
    fn yields_at_first_look(budget: Budget, awake: &'static AtomicU32) -> u32 {
        YIELDS.with(|y| y.set(0));
        let mut spinner = Spinner::new(budget, Some((awake, 1)));
        for _ in 0..SPINS_PER_READ {
            spinner.go_on();
        }
        YIELDS.with(Cell::get)
    }

    #[test]
    fn a_carrier_crowded_by_other_carriers_hands_over_its_cpu_at_once() {
        static CROWDED: AtomicU32 = AtomicU32::new(3);
        static ALONE: AtomicU32 = AtomicU32::new(1);
        assert_eq!(yields_at_first_look(CARRIER, &CROWDED), 1);
        assert_eq!(yields_at_first_look(CARRIER, &ALONE), 0);
    }

    #[test]
    fn a_caller_sharing_the_syscall_cpu_takes_turns_from_the_start_and_one_alone_never() {
        static NONE: AtomicU32 = AtomicU32::new(0);
        assert_eq!(yields_at_first_look(CALLER_SHARED, &NONE), 1);
        assert_eq!(yields_at_first_look(CALLER, &NONE), 0);
    }
}
