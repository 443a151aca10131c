//! The syscall threads' CPU time, read from the kernel by `corelane run` while the program
//! runs, not only as the threads last recorded it themselves: a process that ends by `_exit`
//! or a signal never records its last stretch. Each sample reads the counters area and, for
//! each record's syscall threads, `/proc/PID/task/TID/schedstat` (its first field: ns on CPU),
//! counted only when the task's name is a syscall thread's (`cl-sys-N`, `iou-sqp-PID`), so a
//! thread id reused by another task is not. Per thread (a record is one process, an index one
//! of its threads) the largest of what it recorded and what was read is kept.

use std::collections::HashMap;
use std::io::Read;
use std::sync::{Arc, Mutex, PoisonError};

use super::stats::{records, ProcessRecord, SharedStats};
use super::supervise::Watch;

/// The largest CPU time seen per (record, thread) of a run's counters area.
#[derive(Debug)]
pub struct LaneCpu {
    stats: Arc<SharedStats>,
    seen: Mutex<HashMap<(usize, usize), u64>>,
}

impl LaneCpu {
    pub fn new(stats: Arc<SharedStats>) -> Self {
        Self { stats, seen: Mutex::new(HashMap::new()) }
    }

    /// Reads the area and every syscall thread's run time now.
    pub fn sample_now(&self) {
        let Ok(bytes) = self.stats.read_bytes() else { return };
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        for (index, record) in records(&bytes).iter().enumerate() {
            for (t, ns) in thread_times(record) {
                let best = seen.entry((index, t)).or_insert(0);
                *best = (*best).max(ns);
            }
        }
    }

    /// The syscall threads' CPU time: the sum over threads of the largest seen.
    pub fn total_ns(&self) -> u64 {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.values().fold(0u64, |a, b| a.saturating_add(*b))
    }
}

/// Each thread of `record`: its index and the larger of its recorded and its read CPU time.
fn thread_times(record: &ProcessRecord) -> Vec<(usize, u64)> {
    record
        .thread_ids()
        .map(|(t, tid, comm)| {
            let read = if record.pid != 0 && tid != 0 {
                run_time(record.pid, tid, comm).unwrap_or(0)
            } else {
                0
            };
            (t, record.cpu_ns[t].max(read))
        })
        .collect()
}

/// Reads at most 256 bytes of a /proc file.
fn read_small(path: &str) -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(path).ok()?.take(256).read_to_string(&mut text).ok()?;
    Some(text)
}

/// The run time in ns of thread `tid` of process `pid`, if its name begins with `comm`.
pub fn run_time(pid: u32, tid: u32, comm: &str) -> Option<u64> {
    let dir = format!("/proc/{pid}/task/{tid}");
    if !read_small(&format!("{dir}/comm"))?.starts_with(comm) {
        return None;
    }
    read_small(&format!("{dir}/schedstat"))?.split_whitespace().next()?.parse().ok()
}

impl Watch for LaneCpu {
    fn sample(&self) {
        self.sample_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread named as a syscall thread is read; under another name, or a tid of no such
    /// task, it is not.
    #[test]
    fn only_a_task_named_as_a_syscall_thread_is_read() {
        let (named, stop) = std::sync::mpsc::channel::<u32>();
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("cl-sys-0".into())
            .spawn(move || {
                let until = std::time::Instant::now() + std::time::Duration::from_millis(30);
                while std::time::Instant::now() < until {
                    std::hint::spin_loop();
                }
                named.send(rustix::thread::gettid().as_raw_nonzero().get() as u32).unwrap();
                let _ = wait.recv();
            })
            .unwrap();
        let tid = stop.recv().unwrap();
        let pid = std::process::id();
        let ns = run_time(pid, tid, "cl-sys-").expect("a syscall thread's run time");
        assert!(ns >= 10_000_000, "{ns} ns after spinning 30 ms");
        assert_eq!(run_time(pid, tid, "iou-sqp-"), None);
        assert_eq!(run_time(pid, pid, "cl-sys-"), None, "the main thread is no syscall thread");
        assert_eq!(run_time(pid, 4_000_000_000, "cl-sys-"), None);
        done.send(()).unwrap();
        thread.join().unwrap();
    }

    /// What a thread recorded counts when nothing can be read (its process ended), and the
    /// largest seen stays.
    #[test]
    fn the_largest_of_recorded_and_read_is_kept() {
        use super::super::abi::stats as layout;
        let stats = Arc::new(SharedStats::create().unwrap());
        let put = |offset: usize, value: u64| {
            rustix::io::pwrite(&*stats, &value.to_ne_bytes(), offset as u64).unwrap();
        };
        put(layout::HEADER_CLAIMED, 1);
        put(layout::HEADER + layout::PID, 4_000_000_000);
        put(layout::HEADER + layout::THREADS, 2);
        put(layout::HEADER + layout::CPU_NS, 300);
        put(layout::HEADER + layout::CPU_NS + 8, 200);
        let cpu = LaneCpu::new(stats.clone());
        cpu.sample_now();
        put(layout::HEADER + layout::CPU_NS, 100);
        cpu.sample_now();
        assert_eq!(cpu.total_ns(), 500);
    }
}
