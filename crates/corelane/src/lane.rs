//! A lane is a thread pinned to one CPU, owning its own resources (socket, buffers, counters)
//! and watching a shared stop signal. Lanes never share mutable state on the hot path.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};

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

/// A running lane: its index, the CPU it is pinned to, and its thread.
#[derive(Debug)]
pub struct Lane<T> {
    pub index: usize,
    pub cpu: Option<usize>,
    handle: JoinHandle<io::Result<T>>,
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
        let handle = thread::Builder::new().name(format!("{name}-{index}")).spawn(move || {
            if let Some(cpu) = cpu {
                pin_current_thread(cpu)?;
            }
            work()
        })?;
        Ok(Self { index, cpu, handle })
    }

    /// True once the lane's work returned (or failed).
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Waits for the lane; a panic in the lane becomes an error rather than a second panic.
    pub fn join(self) -> io::Result<T> {
        self.handle.join().unwrap_or_else(|_| Err(io::Error::other("lane thread panicked")))
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

    #[test]
    fn stop_signal_is_shared() {
        let stop = StopSignal::new();
        let seen = stop.clone();
        stop.stop();
        assert!(seen.is_stopped());
    }
}
