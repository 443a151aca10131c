//! The calling thread's side of a run (udp recv, echo, send and ping; tcp serve and load):
//! once a second it reads what the lanes counted and hands on an interval report; between
//! seconds it watches the stop conditions (the caller's signal, a deadline, a count target,
//! lanes that ended); then it stops the lanes and joins them. It measures the process's exact
//! CPU time per second and over the run. The lanes never see it: nothing it does is on their
//! path.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Joined, LaneSet, StopSignal};
use crate::stats::{self, Tick, Ticker};

const SECOND: Duration = Duration::from_secs(1);

/// When the lanes' own ending ends the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LanesEnd {
    /// Lanes run until stopped: one that returns early (an error, a closed socket) ends it.
    AnyFinished,
    /// Lanes end by themselves (their share of a count, their own deadline): the run ends
    /// with the last of them.
    AllFinished,
}

/// Why a run's watch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The caller's stop signal (Ctrl-C).
    Stopped,
    /// The run's duration passed.
    Deadline,
    /// The caller's count target was reached.
    Target,
    /// Lanes ended (see [`LanesEnd`]).
    Lanes,
}

/// One second of a run: its tick, and the process's exact CPU time over it.
#[derive(Debug, Clone, Copy)]
pub struct Second {
    pub tick: Tick,
    pub cpu: Duration,
}

/// The run from its start to a moment: time, the process's exact CPU time
/// (CLOCK_PROCESS_CPUTIME_ID) and its tick-sampled user/system split.
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub elapsed: Duration,
    pub cpu: Duration,
    pub user: Duration,
    pub system: Duration,
}

/// CPU nanoseconds per unit (datagram, request, …); 0 when there was none.
fn ns_per(cpu: Duration, units: u64) -> f64 {
    if units == 0 {
        return 0.0;
    }
    cpu.as_nanos() as f64 / units as f64
}

impl Second {
    /// This second's CPU time per unit, in ns.
    pub fn cpu_ns_per(&self, units: u64) -> f64 {
        ns_per(self.cpu, units)
    }
}

impl Usage {
    /// The run's CPU time per unit, in ns.
    pub fn cpu_ns_per(&self, units: u64) -> f64 {
        ns_per(self.cpu, units)
    }
}

/// What differs between runs: how to read the totals and build the interval report.
pub trait Watch {
    /// True once the run's own count target is reached; asked at every wake-up (about 50
    /// times a second).
    fn reached(&mut self) -> bool {
        false
    }

    /// Called at every wake-up, for figures a lane hands over by itself (ping's seconds).
    fn between(&mut self) {}

    /// Once a second: read the totals and hand on the interval report.
    fn second(&mut self, second: &Second);
}

/// A set of lanes the monitor watches and stops.
pub trait RunningLanes {
    fn any_finished(&self) -> bool;
    fn all_finished(&self) -> bool;
    /// Raises the signal the lanes watch.
    fn stop(&self);
}

impl<T: Send + 'static> RunningLanes for LaneSet<T> {
    fn any_finished(&self) -> bool {
        LaneSet::any_finished(self)
    }

    fn all_finished(&self) -> bool {
        LaneSet::all_finished(self)
    }

    fn stop(&self) {
        self.stop_signal().stop();
    }
}

/// Raised by the monitor at each tick for a lane that keeps its own per-second figures
/// (ping's histogram of the second); the lane takes it between messages and hands them over.
/// One relaxed load per look, the same cost as comparing a clock against the next second.
#[derive(Debug, Clone, Default)]
pub struct SecondDue(Arc<AtomicBool>);

impl SecondDue {
    pub fn raise(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// True (once) when a second was due since the last take.
    pub fn take(&self) -> bool {
        self.0.load(Ordering::Relaxed) && self.0.swap(false, Ordering::Relaxed)
    }
}

/// A run's clock, stop conditions and CPU accounting.
#[derive(Debug)]
pub struct Monitor {
    stop: StopSignal,
    lanes_end: LanesEnd,
    start: Instant,
    deadline: Option<Instant>,
    ticker: Ticker,
    cpu_start: Duration,
    cpu_last: Duration,
    split_start: stats::CpuUsage,
}

impl Monitor {
    /// A run that starts now, ticks every second and ends on `stop` or as `lanes_end` says.
    pub fn new(stop: &StopSignal, lanes_end: LanesEnd) -> Self {
        let start = Instant::now();
        let cpu = stats::process_runtime();
        Self {
            stop: stop.clone(),
            lanes_end,
            start,
            deadline: None,
            ticker: Ticker::starting_at(start, SECOND),
            cpu_start: cpu,
            cpu_last: cpu,
            split_start: stats::process_cpu(),
        }
    }

    /// Ends the run `duration` after its start, when given.
    pub fn until(mut self, duration: Option<Duration>) -> Self {
        self.deadline = duration.map(|d| self.start + d);
        self
    }

    /// Ticks from `delay` after the start (seconds measured once a warm-up is over).
    pub fn first_tick_after(mut self, delay: Duration) -> Self {
        self.ticker = Ticker::starting_at(self.start + delay, SECOND);
        self
    }

    /// When the run ends by its duration, for lanes that end themselves then.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Ticks until a stop condition holds, calling `watch` once a second, then raises the
    /// stop signal of every set in `lanes`. Returns why it ended and the usage at that moment
    /// (before the lanes are joined).
    pub fn watch(
        &mut self,
        lanes: &[&dyn RunningLanes],
        watch: &mut impl Watch,
    ) -> (Ending, Usage) {
        let ending = loop {
            watch.between();
            if let Some(ending) = self.ending(lanes, watch) {
                break ending;
            }
            if let Some(tick) = self.ticker.wait(self.deadline) {
                let runtime = stats::process_runtime();
                let cpu = runtime.saturating_sub(self.cpu_last);
                self.cpu_last = runtime;
                watch.second(&Second { tick, cpu });
            }
        };
        lanes.iter().for_each(|set| set.stop());
        (ending, self.usage())
    }

    fn ending(&self, lanes: &[&dyn RunningLanes], watch: &mut impl Watch) -> Option<Ending> {
        let lanes_ended = match self.lanes_end {
            LanesEnd::AnyFinished => lanes.iter().any(|set| set.any_finished()),
            LanesEnd::AllFinished => lanes.iter().all(|set| set.all_finished()),
        };
        if self.stop.is_stopped() {
            Some(Ending::Stopped)
        } else if lanes_ended {
            Some(Ending::Lanes)
        } else if watch.reached() {
            Some(Ending::Target)
        } else if self.deadline.is_some_and(|d| Instant::now() >= d) {
            Some(Ending::Deadline)
        } else {
            None
        }
    }

    /// The run from its start to now.
    pub fn usage(&self) -> Usage {
        let split = stats::process_cpu();
        Usage {
            elapsed: self.start.elapsed(),
            cpu: stats::process_runtime().saturating_sub(self.cpu_start),
            user: split.user.saturating_sub(self.split_start.user),
            system: split.system.saturating_sub(self.split_start.system),
        }
    }

    /// Waits for a set the watch stopped; returns its lanes' results (or the first lane's
    /// error, named by its lane) and the usage with their drain included.
    pub fn join<T: Send + 'static>(
        &self,
        lanes: LaneSet<T>,
    ) -> io::Result<(Vec<Joined<T>>, Usage)> {
        let joined = lanes.join()?;
        Ok((joined, self.usage()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// Counts what the monitor hands over; `target` ends the run once the counter reaches it.
    struct Count<'a> {
        counter: &'a AtomicU64,
        target: Option<u64>,
        seconds: Vec<Second>,
    }

    impl Watch for Count<'_> {
        fn reached(&mut self) -> bool {
            self.target.is_some_and(|t| self.counter.load(Ordering::Relaxed) >= t)
        }

        fn second(&mut self, second: &Second) {
            self.seconds.push(*second);
        }
    }

    /// Lanes that run until stopped, bumping `counter`, except those in `quit_at_once`.
    fn lanes(counter: &Arc<AtomicU64>, count: usize, quit_at_once: &[usize]) -> LaneSet<()> {
        let stop = StopSignal::new();
        let mut set = LaneSet::new("m", stop.clone());
        for i in 0..count {
            let (stop, counter, quit) =
                (stop.clone(), Arc::clone(counter), quit_at_once.contains(&i));
            set.spawn(None, move || {
                while !quit && !stop.is_stopped() {
                    counter.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(())
            })
            .unwrap();
        }
        set
    }

    /// Runs a watch with a 20 s backstop (the caller's signal raised by another thread), so
    /// a condition the monitor ignored shows as the wrong ending, not as a test that hangs.
    fn run(
        monitor: Monitor,
        stop: &StopSignal,
        set: &LaneSet<()>,
        target: Option<u64>,
        counter: &AtomicU64,
    ) -> (Ending, Usage, Vec<Second>) {
        let backstop = stop.clone();
        let watchdog = std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(20);
            while Instant::now() < until && !backstop.is_stopped() {
                std::thread::sleep(Duration::from_millis(10));
            }
            backstop.stop();
        });
        let mut monitor = monitor;
        let mut watch = Count { counter, target, seconds: Vec::new() };
        let (ending, usage) = monitor.watch(&[set], &mut watch);
        assert!(set.stop_signal().is_stopped(), "the watch stops the lanes it watched");
        stop.stop();
        watchdog.join().unwrap();
        (ending, usage, watch.seconds)
    }

    #[test]
    fn each_stop_condition_ends_the_run_by_itself() {
        let counter = Arc::new(AtomicU64::new(0));

        // The deadline: 1.5 s, so one tick comes first, with the CPU of its second.
        let (stop, set) = (StopSignal::new(), lanes(&counter, 2, &[]));
        let monitor =
            Monitor::new(&stop, LanesEnd::AnyFinished).until(Some(Duration::from_millis(1500)));
        let (ending, usage, seconds) = run(monitor, &stop, &set, None, &counter);
        assert_eq!(ending, Ending::Deadline);
        assert!(usage.elapsed >= Duration::from_millis(1500), "{usage:?}");
        assert_eq!(seconds.len(), 1, "{seconds:?}");
        assert_eq!(seconds[0].tick.index, 1);
        assert!(usage.cpu >= seconds[0].cpu, "{usage:?} {seconds:?}");
        assert_eq!(set.join().unwrap().len(), 2);

        // The count target, read from what the lanes count.
        let (stop, set) = (StopSignal::new(), lanes(&counter, 2, &[]));
        let target = counter.load(Ordering::Relaxed) + 20;
        let monitor = Monitor::new(&stop, LanesEnd::AnyFinished);
        let (ending, ..) = run(monitor, &stop, &set, Some(target), &counter);
        assert_eq!(ending, Ending::Target);
        assert!(counter.load(Ordering::Relaxed) >= target);
        set.join().unwrap();

        // One lane of two ending ends a run of lanes that run until stopped…
        let (stop, set) = (StopSignal::new(), lanes(&counter, 2, &[1]));
        let (ending, ..) =
            run(Monitor::new(&stop, LanesEnd::AnyFinished), &stop, &set, None, &counter);
        assert_eq!(ending, Ending::Lanes);
        set.join().unwrap();

        // …but not a run of lanes that end by themselves, until the last one has.
        let (stop, set) = (StopSignal::new(), lanes(&counter, 2, &[1]));
        let monitor =
            Monitor::new(&stop, LanesEnd::AllFinished).until(Some(Duration::from_millis(200)));
        let (ending, ..) = run(monitor, &stop, &set, None, &counter);
        assert_eq!(ending, Ending::Deadline);
        set.join().unwrap();
        let (stop, set) = (StopSignal::new(), lanes(&counter, 2, &[0, 1]));
        let (ending, ..) =
            run(Monitor::new(&stop, LanesEnd::AllFinished), &stop, &set, None, &counter);
        assert_eq!(ending, Ending::Lanes);
        set.join().unwrap();

        // The caller's signal (Ctrl-C), raised from another thread, against a 5 s deadline.
        let (stop, set) = (StopSignal::new(), lanes(&counter, 2, &[]));
        let raiser = stop.clone();
        let ctrl_c = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            raiser.stop();
        });
        let monitor =
            Monitor::new(&stop, LanesEnd::AnyFinished).until(Some(Duration::from_secs(5)));
        let before = Instant::now();
        let (ending, ..) = run(monitor, &stop, &set, None, &counter);
        ctrl_c.join().unwrap();
        assert_eq!(ending, Ending::Stopped);
        assert!(before.elapsed() < Duration::from_secs(4));
        set.join().unwrap();
    }

    #[test]
    fn a_second_due_is_taken_once() {
        let due = SecondDue::default();
        assert!(!due.take());
        due.raise();
        due.raise();
        assert!(due.clone().take());
        assert!(!due.take());
    }
}
