//! `corelane run`'s families, read at the scrape from what the supervisor's `LaneCpu` reads:
//! the counters area the preloaded library keeps (read whole with pread, treated as hostile
//! by its parser) and each syscall thread's schedstat, named as one (`run::run_time`). The
//! largest figure seen per thread is kept, so a counter never goes back when a process ends;
//! that memory is this collector's own (a lock no lane and no supervisor takes).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use super::cpu;
use super::exposition::{Family, Value};
use crate::run::abi::{self, KINDS, MAX_THREADS};
use crate::run::{
    lane_off_entries, parse_stats as parse, records, run_time, ProcessRecord, SharedStats,
};

/// What `corelane run` exports.
#[derive(Debug)]
pub struct RunMetrics {
    stats: Arc<SharedStats>,
    seen: Mutex<Seen>,
}

/// The largest CPU times seen so far.
#[derive(Debug, Default)]
struct Seen {
    /// Per (record, thread index): the syscall thread's ns.
    carriers: HashMap<(usize, usize), u64>,
    program_ns: u64,
}

/// The lane modes the library records, by [`abi::lane_mode`] word.
fn mode_name(word: u64) -> &'static str {
    match word {
        abi::lane_mode::THREADS => "threads",
        abi::lane_mode::URING_SQPOLL => "uring_sqpoll",
        abi::lane_mode::URING_PLAIN => "uring_plain",
        abi::lane_mode::URING_UNAVAILABLE => "uring_unavailable",
        _ => "starting",
    }
}

impl RunMetrics {
    /// The families of a run whose library counts into `stats`.
    pub fn new(stats: Arc<SharedStats>) -> Self {
        Self { stats, seen: Mutex::new(Seen::default()) }
    }

    /// Each syscall thread index's CPU (ns) summed over the processes, and the program's.
    fn cpu(&self, records: &[ProcessRecord]) -> ([u64; MAX_THREADS], u64) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let mut live_carriers = 0u64;
        for (index, record) in records.iter().enumerate() {
            for (t, tid, comm) in record.thread_ids() {
                let read = (record.pid != 0 && tid != 0)
                    .then(|| run_time(record.pid, tid, comm))
                    .flatten();
                live_carriers = live_carriers.saturating_add(read.unwrap_or(0));
                let best = seen.carriers.entry((index, t)).or_insert(0);
                *best = (*best).max(record.cpu_ns[t]).max(read.unwrap_or(0));
            }
        }
        let mut lanes = [0u64; MAX_THREADS];
        for (&(_, t), &ns) in &seen.carriers {
            lanes[t] = lanes[t].saturating_add(ns);
        }
        // The program: every thread alive under this process but its own, less the carriers.
        let me = std::process::id();
        let tree = crate::stats::tree_runtime_of(me).zip(crate::stats::runtime_of(me));
        if let Some((tree, own)) = tree {
            let program = tree.saturating_sub(own).as_nanos() as u64;
            seen.program_ns = seen.program_ns.max(program.saturating_sub(live_carriers));
        }
        (lanes, seen.program_ns)
    }
}

impl Collector for RunMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let e = &mut encoder;
        let bytes = self.stats.read_bytes().unwrap_or_default();
        let records = records(&bytes);
        let mut carried: HashMap<(&str, usize), u64> = HashMap::new();
        for record in &records {
            for (kind, n) in record.counts.iter().enumerate() {
                let sum = carried.entry((mode_name(record.lane), kind)).or_insert(0);
                *sum = sum.saturating_add(*n);
            }
        }
        let mut rows: Vec<_> = carried.into_iter().collect();
        rows.sort_unstable();
        Family::counter(
            "run_carried_calls",
            "System calls the syscall threads carried, by kind and by the process's lane mode",
        )
        .write(
            e,
            rows.into_iter().map(|((mode, kind), n)| {
                ([("kind", KINDS[kind]), ("mode", mode)], Value::Count(n))
            }),
        )?;
        let in_place = records.iter().fold(0u64, |sum, r| sum.saturating_add(r.in_place));
        Family::counter(
            "run_in_place_calls",
            "Calls the program's threads made themselves because several processes' syscall threads contended for a syscall CPU (the threads lane stepped aside)",
        )
        .single(e, Value::Count(in_place))?;
        let (lanes, program_ns) = self.cpu(&records);
        let threads = records.iter().map(|r| r.threads).max().unwrap_or(0);
        Family::counter("run_carrier_cpu", "CPU time of the syscall threads by index (the lane on the index-th syscall CPU), over every process (schedstat, exact; the largest seen per thread)")
            .unit(&Unit::Seconds)
            .per_lane(e, lanes[..threads].iter().map(|&ns| Value::Real(ns as f64 / 1e9)))?;
        Family::counter("run_program_cpu", "CPU time of the program's threads but the syscall threads (schedstat of the threads alive at each scrape, exact; the largest seen)")
            .unit(&Unit::Seconds)
            .single(e, Value::Real(program_ns as f64 / 1e9))?;
        write_processes(e, &bytes)?;
        cpu::write_process(e)
    }
}

/// `run_processes{lane, reason}`: the processes that loaded the library, carrying or off
/// and why (bounded: the library's off reasons).
fn write_processes(e: &mut DescriptorEncoder<'_>, bytes: &[u8]) -> fmt::Result {
    let report = parse(bytes);
    let mut off: Vec<(&'static str, u64)> = Vec::new();
    for entry in lane_off_entries(&report.lane_off, 0) {
        match off.iter_mut().find(|(r, _)| *r == entry.reason) {
            Some((_, n)) => *n += 1,
            None => off.push((entry.reason, 1)),
        }
    }
    off.sort_unstable();
    let carrying = report.processes.saturating_sub(off.iter().map(|(_, n)| n).sum());
    let rows = std::iter::once((("on", "carrying"), carrying))
        .chain(off.into_iter().map(|(reason, n)| (("off", reason), n)))
        .map(|((lane, reason), n)| ([("lane", lane), ("reason", reason)], Value::Count(n)));
    Family::gauge(
        "run_processes",
        "Processes that loaded the syscall library: lane on (carrying), or off and why",
    )
    .write(e, rows)
}
