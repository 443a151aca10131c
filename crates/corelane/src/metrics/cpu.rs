//! Exact CPU time at a scrape: the process's (CLOCK_PROCESS_CPUTIME_ID, every thread, ended
//! ones too) and each lane's (its thread's schedstat: the scheduler's own count of ns on a
//! CPU, read from /proc/self/task).

use std::fmt;
use std::io::Read;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use super::exposition::{Family, Value};

/// The lanes' threads of a [`crate::lane::LaneSet`], found by name (`NAME-INDEX`). A name
/// the kernel cut at its 15 bytes could be another lane's, so that lane is left out rather
/// than charged another's time.
#[derive(Debug, Clone)]
pub struct LaneThreads {
    name: &'static str,
    lanes: usize,
}

/// The kernel keeps a thread's name in 16 bytes, its NUL included.
const COMM_MAX: usize = 15;

impl LaneThreads {
    pub fn new(name: &'static str, lanes: usize) -> Self {
        Self { name, lanes }
    }

    /// Each lane found: its index and its thread's CPU time in ns.
    pub fn read(&self) -> Vec<(usize, u64)> {
        let mut found = Vec::new();
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return found };
        for task in tasks.flatten() {
            let dir = task.path();
            let Some(comm) = read_small(&dir.join("comm")) else { continue };
            let comm = comm.trim_end_matches('\n');
            let Some(index) = self.lane_of(comm) else { continue };
            let ns = read_small(&dir.join("schedstat"))
                .and_then(|s| crate::stats::schedstat_runtime(&s));
            if let Some(ns) = ns {
                found.push((index, ns));
            }
        }
        found.sort_unstable();
        found
    }

    /// The lane a thread named `comm` is, when it is one of ours and no other lane's name
    /// cut short (`x-1` of 15 bytes could be `x-12` cut, when there are 13 lanes or more).
    fn lane_of(&self, comm: &str) -> Option<usize> {
        let index: usize = comm.strip_prefix(self.name)?.strip_prefix('-')?.parse().ok()?;
        let cut_other =
            comm.len() >= COMM_MAX && index != 0 && index.saturating_mul(10) < self.lanes;
        (index < self.lanes && !cut_other).then_some(index)
    }

    /// `lane_cpu_seconds_total{lane}`.
    pub(super) fn write(&self, encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
        let rows = self
            .read()
            .into_iter()
            .map(|(lane, ns)| ([("lane", lane.to_string())], Value::Real(ns as f64 / 1e9)));
        Family::counter("lane_cpu", "CPU time of each lane's thread (schedstat, exact)")
            .unit(&Unit::Seconds)
            .write(encoder, rows)
    }
}

/// `process_cpu_seconds_total`: this process's exact CPU time, every thread included.
pub(super) fn write_process(encoder: &mut DescriptorEncoder<'_>) -> fmt::Result {
    let cpu = crate::stats::process_runtime().as_secs_f64();
    Family::counter(
        "process_cpu",
        "CPU time of this corelane process, every thread, ended ones too (CLOCK_PROCESS_CPUTIME_ID, exact)",
    )
    .unit(&Unit::Seconds)
    .single(encoder, Value::Real(cpu))
}

/// At most 256 bytes of a /proc file.
fn read_small(path: &std::path::Path) -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(path).ok()?.take(256).read_to_string(&mut text).ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_are_found_by_their_whole_names_only() {
        let lanes = LaneThreads::new("corelane-echo", 12);
        assert_eq!(lanes.lane_of("corelane-echo-1"), None, "15 bytes: may be lane 10 or 11 cut");
        assert_eq!(lanes.lane_of("corelane-echo-3"), Some(3), "no lane 30 to be cut to it");
        assert_eq!(lanes.lane_of("corelane-echo-0"), Some(0));
        let lanes = LaneThreads::new("serve", 12);
        assert_eq!(lanes.lane_of("serve-3"), Some(3));
        assert_eq!(lanes.lane_of("serve-12"), None, "not one of ours");
        assert_eq!(lanes.lane_of("serve-x"), None);
        assert_eq!(lanes.lane_of("server-1"), None);
    }

    #[test]
    fn a_named_thread_is_read() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (ready_tx, ready) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("mtest-1".into())
            .spawn(move || {
                // 20 ms of this thread's own CPU (a loaded machine gives a wall-clock spin
                // much less), within 10 s.
                let own_ns = || {
                    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
                    text.split_whitespace().next().unwrap().parse::<u64>().unwrap()
                };
                let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
                while own_ns() < 20_000_000 && std::time::Instant::now() < end {
                    std::hint::spin_loop();
                }
                ready_tx.send(()).unwrap();
                let _ = rx.recv();
            })
            .unwrap();
        ready.recv().unwrap();
        let found = LaneThreads::new("mtest", 2).read();
        tx.send(()).unwrap();
        thread.join().unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, 1);
        assert!(found[0].1 >= 20_000_000, "{found:?}");
    }
}
