//! A lane is a thread pinned to one CPU, owning its own resources (socket, buffers, counters)
//! and watching a shared stop signal. Lanes never share mutable state on the hot path.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};

use crate::topology::{CpuList, Topology, TopologyError};

mod monitor;

pub use monitor::{Ending, LanesEnd, Monitor, RunningLanes, Second, SecondDue, Usage, Watch};

/// One `T` (counters, say) for each of `lanes` lanes, to share with the lanes that write them.
pub fn per_lane<T: Default>(lanes: usize) -> Arc<Vec<T>> {
    Arc::new((0..lanes).map(|_| T::default()).collect())
}

/// A flag every lane polls between batches; raised by Ctrl-C, a deadline or the caller.
#[derive(Debug, Clone, Default)]
pub struct StopSignal(Arc<AtomicBool>);

impl StopSignal {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// The flag itself, for signal-hook's `flag::register`.
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.0)
    }
}

/// Where a set's lanes run: anywhere the scheduler likes, or lane `i` on CPU
/// `cpus[i % len]` (round-robin over a list, so three lanes on `0-1` run on 0, 1, 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Placement {
    #[default]
    Unpinned,
    RoundRobin(CpuList),
}

impl Placement {
    /// Round-robin over `pin`, or unpinned without one.
    pub fn from_pin(pin: Option<CpuList>) -> Self {
        pin.map_or(Self::Unpinned, Self::RoundRobin)
    }

    /// The CPU lane `lane` runs on, if pinned.
    pub fn cpu_of(&self, lane: usize) -> Option<usize> {
        match self {
            Self::Unpinned => None,
            Self::RoundRobin(list) => list.cpus().get(lane % list.len().max(1)).copied(),
        }
    }

    /// The CPU of each of `lanes` lanes; empty when unpinned.
    pub fn lane_cpus(&self, lanes: usize) -> Vec<usize> {
        (0..lanes).filter_map(|lane| self.cpu_of(lane)).collect()
    }

    pub fn is_pinned(&self) -> bool {
        matches!(self, Self::RoundRobin(_))
    }

    /// Every CPU of the list is online (and the list is not empty).
    pub fn check(&self) -> Result<(), TopologyError> {
        match self {
            Self::Unpinned => Ok(()),
            Self::RoundRobin(list) => Topology::read()?.check_pin(list),
        }
    }
}

/// A running lane: its index, the CPU it is pinned to, and its thread.
#[derive(Debug)]
pub struct Lane<T> {
    pub index: usize,
    pub cpu: Option<usize>,
    handle: JoinHandle<io::Result<T>>,
}

/// The calling thread's CPUs before [`pin_current_thread_for_now`] pinned it, given back when
/// dropped: a function that runs on its caller's thread leaves the caller as it found it.
#[derive(Debug)]
pub struct PinnedForNow {
    before: rustix::thread::CpuSet,
}

impl Drop for PinnedForNow {
    fn drop(&mut self) {
        let _ = rustix::thread::sched_setaffinity(None, &self.before);
    }
}

/// Pins the calling thread to `cpu` until the guard is dropped.
pub fn pin_current_thread_for_now(cpu: usize) -> io::Result<PinnedForNow> {
    let before = rustix::thread::sched_getaffinity(None)?;
    pin_current_thread(cpu)?;
    Ok(PinnedForNow { before })
}

/// Pins the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= rustix::thread::CpuSet::MAX_CPU {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "cannot pin to CPU {cpu}: beyond the {} CPUs an affinity mask holds",
                rustix::thread::CpuSet::MAX_CPU
            ),
        ));
    }
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).map_err(|e| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("cannot pin to CPU {cpu}: {e}"))
    })
}

impl<T: Send + 'static> Lane<T> {
    /// Starts lane `index` on `cpu` (unpinned when `None`) running `work`.
    pub fn spawn<F>(name: &str, index: usize, cpu: Option<usize>, work: F) -> io::Result<Self>
    where
        F: FnOnce() -> io::Result<T> + Send + 'static,
    {
        let handle = thread::Builder::new()
            .name(format!("{name}-{index}"))
            .spawn(move || pin_then(cpu, work))?;
        Ok(Self { index, cpu, handle })
    }

    /// True once the lane's work returned (or failed).
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Waits for the lane; a panic in the lane becomes an error rather than a second panic.
    pub fn join(self) -> io::Result<T> {
        self.handle.join().unwrap_or_else(|_| Err(panicked()))
    }
}

/// A lane's body: pinned to `cpu` first (a failed pin is the lane's error), then `work`.
fn pin_then<T>(cpu: Option<usize>, work: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    if let Some(cpu) = cpu {
        pin_current_thread(cpu)?;
    }
    work()
}

fn panicked() -> io::Error {
    io::Error::other("lane thread panicked")
}

/// Every lane's result in start order, or the first lane's error named by its lane.
fn gather<T>(
    name: &str,
    results: impl IntoIterator<Item = (usize, Option<usize>, io::Result<T>)>,
) -> io::Result<Vec<Joined<T>>> {
    let mut joined = Vec::new();
    let mut first_error = None;
    for (index, cpu, result) in results {
        match result {
            Ok(value) => joined.push(Joined { index, cpu, value }),
            Err(e) => {
                first_error.get_or_insert(io::Error::new(e.kind(), format!("{name}-{index}: {e}")));
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(joined),
    }
}

/// A lane's result, with where it ran.
#[derive(Debug)]
pub struct Joined<T> {
    pub index: usize,
    pub cpu: Option<usize>,
    pub value: T,
}

/// Lanes that run together: started all or none, stopped and joined together. Dropping a set
/// raises its stop signal and joins every lane, so no way out of the code that owns it (an
/// error returned with `?` half-way through starting, a panic) leaves a lane running.
#[derive(Debug)]
pub struct LaneSet<T: Send + 'static> {
    name: &'static str,
    stop: StopSignal,
    lanes: Vec<Lane<T>>,
}

impl<T: Send + 'static> LaneSet<T> {
    /// An empty set whose lanes are named `name-INDEX` and watch `stop`.
    pub fn new(name: &'static str, stop: StopSignal) -> Self {
        Self { name, stop, lanes: Vec::new() }
    }

    /// Starts the next lane (index = lanes started so far) on `cpu`, running `work`. On an
    /// error the set is unchanged; dropping it then stops the lanes already started.
    pub fn spawn<F>(&mut self, cpu: Option<usize>, work: F) -> io::Result<()>
    where
        F: FnOnce() -> io::Result<T> + Send + 'static,
    {
        let index = self.lanes.len();
        self.lanes.push(Lane::spawn(self.name, index, cpu, work)?);
        Ok(())
    }

    /// The signal every lane of the set watches.
    pub fn stop_signal(&self) -> &StopSignal {
        &self.stop
    }

    pub fn len(&self) -> usize {
        self.lanes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lanes.is_empty()
    }

    /// True once any lane has returned (or failed).
    pub fn any_finished(&self) -> bool {
        self.lanes.iter().any(Lane::is_finished)
    }

    /// True once every lane has returned (or failed).
    pub fn all_finished(&self) -> bool {
        self.lanes.iter().all(Lane::is_finished)
    }

    /// Waits for every lane (the caller raises the stop signal first if they do not end by
    /// themselves) and returns their results in start order; the first lane's error, named
    /// by its lane, once all have been joined.
    pub fn join(mut self) -> io::Result<Vec<Joined<T>>> {
        let lanes = std::mem::take(&mut self.lanes);
        gather(self.name, lanes.into_iter().map(|lane| (lane.index, lane.cpu, lane.join())))
    }
}

/// Runs `count` lanes named `name-INDEX` on `placement` inside a thread scope, so that they
/// may borrow from the caller (copy's tree lanes share the walk, the destination's
/// descriptors and the progress callback). As in a [`LaneSet`], each lane is pinned before
/// its work starts and a failed pin is that lane's error; a lane that fails (or cannot be
/// started) raises `stop`, so the others end early; the results come in start order, or the
/// first error named by its lane, once every lane has ended.
pub fn run_scoped<T, F>(
    name: &str,
    count: usize,
    placement: &Placement,
    stop: &StopSignal,
    work: F,
) -> io::Result<Vec<Joined<T>>>
where
    T: Send,
    F: Fn(usize) -> io::Result<T> + Sync,
{
    let work = &work;
    let results: Vec<_> = thread::scope(|scope| {
        let mut started = Vec::with_capacity(count);
        for index in 0..count {
            let cpu = placement.cpu_of(index);
            let lane = thread::Builder::new().name(format!("{name}-{index}")).spawn_scoped(
                scope,
                move || {
                    let result = pin_then(cpu, || work(index));
                    if result.is_err() {
                        stop.stop();
                    }
                    result
                },
            );
            if lane.is_err() {
                stop.stop();
            }
            started.push((index, cpu, lane));
        }
        started
            .into_iter()
            .map(|(index, cpu, lane)| {
                let result = lane.and_then(|l| l.join().unwrap_or_else(|_| Err(panicked())));
                (index, cpu, result)
            })
            .collect()
    });
    gather(name, results)
}

impl<T: Send + 'static> Drop for LaneSet<T> {
    fn drop(&mut self) {
        if self.lanes.is_empty() {
            return;
        }
        self.stop.stop();
        for lane in self.lanes.drain(..) {
            let _ = lane.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_lane_runs_on_its_cpu() {
        let lane = Lane::spawn("t", 0, Some(0), || Ok(rustix::thread::sched_getcpu())).unwrap();
        assert_eq!(lane.join().unwrap(), 0);
    }

    #[test]
    fn pinning_to_an_absent_cpu_is_an_error_not_a_panic() {
        let lane = Lane::spawn("t", 0, Some(1000), || Ok(())).unwrap();
        let err = lane.join().unwrap_err();
        assert!(err.to_string().contains("cannot pin to CPU 1000"), "{err}");
    }

    /// rustix's CpuSet::set panics beyond its size; a CPU number from a caller must not.
    #[test]
    fn pinning_beyond_the_affinity_mask_is_an_error_not_a_panic() {
        let err = pin_current_thread(usize::MAX).unwrap_err();
        assert!(err.to_string().contains("beyond the"), "{err}");
    }

    /// load.rs returned with `?` half-way through starting and left the started lanes
    /// running; server.rs stopped its lanes but never joined them. A set stops and joins on
    /// every way out.
    #[test]
    fn a_set_dropped_half_way_stops_and_joins_its_lanes() {
        use std::sync::atomic::AtomicUsize;
        let ended = Arc::new(AtomicUsize::new(0));
        let stop = StopSignal::new();
        let start = || -> io::Result<LaneSet<()>> {
            let mut set = LaneSet::new("t", stop.clone());
            for _ in 0..3 {
                let (stop, ended) = (stop.clone(), Arc::clone(&ended));
                set.spawn(None, move || {
                    while !stop.is_stopped() {
                        thread::sleep(std::time::Duration::from_millis(1));
                    }
                    ended.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                })?;
            }
            // Starting the fourth fails (an absent CPU is an error inside the lane; here the
            // caller's own setup fails after three lanes started).
            Err(io::Error::other("setup failed"))
        };
        assert!(start().is_err());
        assert!(stop.is_stopped());
        assert_eq!(ended.load(Ordering::Relaxed), 3, "every started lane ended and was joined");
    }

    #[test]
    fn join_returns_every_result_and_names_the_failed_lane() {
        let mut set = LaneSet::new("w", StopSignal::new());
        set.spawn(None, || Ok(1)).unwrap();
        set.spawn(None, || Err(io::Error::other("boom"))).unwrap();
        set.spawn(None, || -> io::Result<i32> { panic!("lane panics") }).unwrap();
        let err = set.join().unwrap_err();
        assert_eq!(err.to_string(), "w-1: boom");
        let mut set = LaneSet::new("w", StopSignal::new());
        set.spawn(Some(0), || Ok(7)).unwrap();
        let joined = set.join().unwrap();
        assert_eq!((joined[0].index, joined[0].cpu, joined[0].value), (0, Some(0), 7));
    }

    /// Copy's tree lanes ran in their own thread scope and dropped a pin error: the copy
    /// went on unpinned and said nothing. A scoped lane's failed pin is its error, named by
    /// the lane, and stops the others.
    #[test]
    fn a_scoped_lane_that_cannot_pin_fails_the_set_and_stops_the_rest() {
        let stop = StopSignal::new();
        let placement = Placement::RoundRobin(CpuList::new(vec![0, 100_000]));
        let result = run_scoped("s", 2, &placement, &stop, |index| {
            // Lane 0 runs until stopped: only lane 1's failure can end it.
            while !stop.is_stopped() {
                thread::sleep(std::time::Duration::from_millis(1));
            }
            Ok(index)
        });
        let err = result.unwrap_err();
        assert!(err.to_string().starts_with("s-1: cannot pin to CPU 100000"), "{err}");
        let borrowed = [10, 20, 30];
        let joined =
            run_scoped("s", 3, &Placement::Unpinned, &StopSignal::new(), |i| Ok(borrowed[i]))
                .unwrap();
        let values: Vec<_> = joined.iter().map(|j| (j.index, j.value)).collect();
        assert_eq!(values, vec![(0, 10), (1, 20), (2, 30)]);
    }

    #[test]
    fn placement_is_round_robin_over_its_list() {
        let p = Placement::from_pin(Some("0-1".parse().unwrap()));
        assert_eq!(p.lane_cpus(3), vec![0, 1, 0]);
        assert_eq!(Placement::from_pin(None).cpu_of(5), None);
        assert!(Placement::from_pin(Some("999".parse().unwrap())).check().is_err());
        // An empty list (only constructible in code) neither panics nor pins.
        assert_eq!(Placement::RoundRobin(CpuList::default()).cpu_of(0), None);
        assert!(Placement::RoundRobin(CpuList::default()).check().is_err());
    }

    #[test]
    fn stop_signal_is_shared() {
        let stop = StopSignal::new();
        let seen = stop.clone();
        stop.stop();
        assert!(seen.is_stopped());
    }
}
