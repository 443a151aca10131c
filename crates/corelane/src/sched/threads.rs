//! The dispatcher on real threads: a producer lane that draws events, dispatches them to W
//! worker lanes (a [`WorkerPool`]), and is also the egress point — it drains each worker's
//! completion ring (in order, since a worker is FIFO) and measures order, latency and
//! balance there. Workers spin for each event's cost.

use std::collections::VecDeque;
use std::io;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::dispatch::{Dispatcher, Event, EPOCH_NS};
use super::metrics::ReorderMeter;
use super::policy::Kind;
use super::pool::WorkerPool;
use super::sim::RunResult;
use super::workload::{Source, Workload};
use crate::lane::pin_current_thread_for_now;

#[derive(Debug, Clone)]
pub struct ThreadsConfig {
    pub kind: Kind,
    pub workload: Workload,
    pub workers: usize,
    pub duration: Duration,
    /// Mean service cost of an event in ns; 0 measures the dispatch path alone.
    pub mean_cost_ns: f64,
    pub ring: usize,
    /// The producer's CPU, then the workers' (round-robin); empty: unpinned.
    pub cpus: Vec<usize>,
    pub seed: u64,
}

/// Events a producer draws, then dispatches, per round (the dispatch part is timed as the
/// scheduling share).
const BATCH: usize = 32;

/// Runs the producer on the calling thread and the workers on their own lanes.
pub fn run(cfg: &ThreadsConfig) -> io::Result<RunResult> {
    let mut source = Source::new(cfg.workload, cfg.mean_cost_ns.max(1.0), cfg.seed)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let workers = cfg.workers.max(1);
    let worker_cpus = cfg.cpus.get(1..).unwrap_or(&[]);
    let mut pool = WorkerPool::start(workers, cfg.ring, worker_cpus, cfg.mean_cost_ns > 0.0)?;
    // The producer is the caller's own thread: pinned for the run, given its CPUs back after.
    let _pinned = cfg.cpus.first().map(|&cpu| pin_current_thread_for_now(cpu)).transpose()?;
    let mut dispatcher = Dispatcher::new(cfg.kind, workers, cfg.seed ^ 0x5eed);
    let mut reorder = ReorderMeter::new();
    let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .map_err(|e| io::Error::other(e.to_string()))?;
    let mut released = Vec::new();
    let mut drawn: VecDeque<Event> = VecDeque::with_capacity(BATCH);
    let mut done_per_worker = vec![0u64; workers];
    let (mut completed, mut sched_ns) = (0u64, 0u64);
    let start = Instant::now();
    let mut next_epoch = EPOCH_NS;
    loop {
        let now_ns = pool.now_ns();
        if start.elapsed() >= cfg.duration {
            break;
        }
        // Egress: each worker's completions, in its (FIFO) order.
        pool.drain(|ev, w| {
            completed += 1;
            done_per_worker[w] += 1;
            reorder.record(ev.flow, ev.seq);
            let _ = latency.record(now_ns.saturating_sub(ev.born_ns).max(1));
            dispatcher.complete(&ev, w, now_ns, &mut released);
        });
        for placed in released.drain(..) {
            pool.send(placed);
        }
        if now_ns >= next_epoch {
            next_epoch = now_ns + EPOCH_NS;
            let busy = pool.busy_fractions(EPOCH_NS);
            dispatcher.epoch(&busy, now_ns, &mut released);
        }
        // Draw a batch first: drawing stands in for receiving, not for scheduling.
        while drawn.len() < BATCH {
            let (flow, seq, cost_ns, visible_cost_ns) = source.draw();
            let cost_ns = if cfg.mean_cost_ns > 0.0 { cost_ns } else { 0 };
            drawn.push_back(Event::new(flow, seq, now_ns, cost_ns, visible_cost_ns));
        }
        // The decision and the enqueue are the scheduling work.
        let t = Instant::now();
        if pool.has_room() {
            while let Some(ev) = drawn.pop_front() {
                if let Some(placed) = dispatcher.dispatch(ev, now_ns) {
                    pool.send(placed);
                }
            }
        }
        pool.flush();
        sched_ns += t.elapsed().as_nanos() as u64;
    }
    let elapsed = start.elapsed();
    let busy_totals = pool.busy_totals();
    pool.stop()?;
    let work: Vec<f64> = if cfg.mean_cost_ns > 0.0 {
        busy_totals
    } else {
        done_per_worker.iter().map(|&d| d as f64).collect()
    };
    Ok(RunResult::measured(
        cfg.kind,
        cfg.workload,
        workers,
        super::sim::RunMode::Threads,
        completed as f64 / elapsed.as_secs_f64() / 1e6,
        &reorder,
        &work,
        &latency,
        dispatcher.migrations() as f64 / elapsed.as_secs_f64(),
        Some(sched_ns as f64 / elapsed.as_nanos() as f64),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The producer runs on the caller's thread: the caller gets its CPUs back (a lab run
    /// that pinned its own thread here made every later experiment's processes inherit one
    /// CPU).
    #[test]
    fn the_callers_cpus_are_given_back() {
        let before = rustix::thread::sched_getaffinity(None).unwrap();
        run(&ThreadsConfig {
            kind: Kind::Rss,
            workload: Workload::TenFlows,
            workers: 1,
            duration: Duration::from_millis(50),
            mean_cost_ns: 0.0,
            ring: 256,
            cpus: vec![0],
            seed: 1,
        })
        .unwrap();
        assert_eq!(rustix::thread::sched_getaffinity(None).unwrap(), before);
    }

    #[test]
    fn every_event_comes_back_and_flow_level_dispatch_keeps_order() {
        for kind in [Kind::Rss, Kind::DswAtomic, Kind::Diffuser] {
            // 300 ms, or 3 s where a loaded machine gave the threads too little of it.
            let runs = [300, 3000].map(|ms| ThreadsConfig {
                kind,
                workload: Workload::TenFlows,
                workers: 2,
                duration: Duration::from_millis(ms),
                mean_cost_ns: 200.0,
                ring: 256,
                cpus: Vec::new(),
                seed: 1,
            });
            let mut r = run(&runs[0]).unwrap();
            if r.reorder.events <= 1000 {
                r = run(&runs[1]).unwrap();
            }
            assert!(r.reorder.events > 1000, "{kind}: {r:?}");
            if kind != Kind::Diffuser {
                assert_eq!(r.reorder.reordered, 0, "{kind} reordered: {r:?}");
            }
        }
    }
}
