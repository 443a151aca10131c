//! The dispatcher on real threads: a producer lane that draws events, dispatches them to W
//! worker lanes through one lock-free SPSC ring each (rtrb), and is also the egress point —
//! it drains each worker's completion ring (in order, since a worker is FIFO) and measures
//! order, latency and balance there. Workers spin for each event's cost.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::dispatch::{Dispatcher, Event, Kind, EPOCH_NS};
use super::metrics::{Balance, ReorderMeter};
use super::sim::RunResult;
use super::workload::{Source, Workload};
use crate::lane::{pin_current_thread, Lane};

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

/// Events a ring hands over at once.
const BURST: usize = 64;

/// Events a producer draws, then dispatches, per round (the dispatch part is timed as the
/// scheduling share).
const BATCH: usize = 32;

#[derive(Debug, Default)]
#[repr(align(128))]
struct WorkerStats {
    busy_ns: AtomicU64,
}

/// Runs the producer on the calling thread and the workers on their own lanes.
pub fn run(cfg: &ThreadsConfig) -> io::Result<RunResult> {
    let workers = cfg.workers.max(1);
    let stop = Arc::new(AtomicBool::new(false));
    let stats: Arc<Vec<WorkerStats>> =
        Arc::new((0..workers).map(|_| WorkerStats::default()).collect());
    let epoch = Instant::now();
    let mut to_workers = Vec::with_capacity(workers);
    let mut from_workers = Vec::with_capacity(workers);
    let mut lanes = Vec::with_capacity(workers);
    for w in 0..workers {
        let (tx, mut rx) = rtrb::RingBuffer::<Event>::new(cfg.ring.max(2));
        let (mut done_tx, done_rx) = rtrb::RingBuffer::<Event>::new(cfg.ring.max(2) * 4);
        to_workers.push(tx);
        from_workers.push(done_rx);
        let (stop, stats) = (Arc::clone(&stop), Arc::clone(&stats));
        let cpu = (cfg.cpus.len() > 1).then(|| cfg.cpus[1 + w % (cfg.cpus.len() - 1)]);
        let spin = cfg.mean_cost_ns > 0.0;
        lanes.push(Lane::spawn("sched-worker", w, cpu, move || {
            let mut busy = 0u64;
            let mut done: Vec<Event> = Vec::with_capacity(BURST);
            while !stop.load(Ordering::Relaxed) {
                // A burst at a time: one index update per burst, not per event.
                let n = rx.slots().min(BURST);
                if n == 0 {
                    std::hint::spin_loop();
                    continue;
                }
                let Ok(chunk) = rx.read_chunk(n) else { continue };
                for ev in chunk {
                    if ev.not_before_ns > 0 {
                        // Diffuser's not-before time, on the producer's clock.
                        while (epoch.elapsed().as_nanos() as u64) < ev.not_before_ns {
                            std::hint::spin_loop();
                        }
                    }
                    if spin {
                        let start = Instant::now();
                        while (start.elapsed().as_nanos() as u64) < ev.cost_ns as u64 {
                            std::hint::spin_loop();
                        }
                        busy += start.elapsed().as_nanos() as u64;
                    }
                    done.push(ev);
                }
                stats[w].busy_ns.store(busy, Ordering::Relaxed);
                let mut sent = 0;
                while sent < done.len() {
                    let room = done_tx.slots().min(done.len() - sent);
                    if room == 0 {
                        if stop.load(Ordering::Relaxed) {
                            return Ok(());
                        }
                        std::hint::spin_loop();
                        continue;
                    }
                    if let Ok(chunk) = done_tx.write_chunk_uninit(room) {
                        sent += chunk.fill_from_iter(done[sent..sent + room].iter().copied());
                    }
                }
                done.clear();
            }
            Ok(())
        })?);
    }
    if let Some(&cpu) = cfg.cpus.first() {
        pin_current_thread(cpu)?;
    }
    let mut source = Source::new(cfg.workload, cfg.mean_cost_ns.max(1.0), cfg.seed);
    let mut dispatcher = Dispatcher::new(cfg.kind, workers, cfg.seed ^ 0x5eed);
    let mut reorder = ReorderMeter::new();
    let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .map_err(|e| io::Error::other(e.to_string()))?;
    let mut released = Vec::new();
    let mut drawn: std::collections::VecDeque<Event> =
        std::collections::VecDeque::with_capacity(BATCH);
    let mut done_per_worker = vec![0u64; workers];
    let (mut completed, mut sched_ns) = (0u64, 0u64);
    let start = epoch;
    let mut next_epoch = EPOCH_NS;
    let mut last_busy = vec![0u64; workers];
    // Per-worker outboxes, written to the rings a burst at a time (one index update each).
    let mut outbox: Vec<Vec<Event>> = (0..workers).map(|_| Vec::with_capacity(4 * BURST)).collect();
    let flush = |to: &mut [rtrb::Producer<Event>], outbox: &mut [Vec<Event>]| {
        for (ring, out) in to.iter_mut().zip(outbox.iter_mut()) {
            let room = ring.slots().min(out.len());
            if room > 0 {
                if let Ok(chunk) = ring.write_chunk_uninit(room) {
                    chunk.fill_from_iter(out.drain(..room));
                }
            }
        }
    };
    loop {
        let now_ns = start.elapsed().as_nanos() as u64;
        if now_ns >= cfg.duration.as_nanos() as u64 {
            break;
        }
        // Egress: each worker's completions, in its (FIFO) order, a burst at a time.
        for (w, rx) in from_workers.iter_mut().enumerate() {
            let n = rx.slots();
            let Ok(chunk) = rx.read_chunk(n) else { continue };
            for ev in chunk {
                completed += 1;
                done_per_worker[w] += 1;
                reorder.record(ev.flow, ev.seq);
                let _ = latency.record(now_ns.saturating_sub(ev.born_ns).max(1));
                dispatcher.complete(&ev, w, now_ns, &mut released);
            }
        }
        for (ev, w) in released.drain(..) {
            outbox[w].push(ev);
        }
        if now_ns >= next_epoch {
            next_epoch = now_ns + EPOCH_NS;
            let busy: Vec<f64> = stats
                .iter()
                .zip(last_busy.iter_mut())
                .map(|(s, last)| {
                    let b = s.busy_ns.load(Ordering::Relaxed);
                    let f = (b - *last) as f64 / EPOCH_NS as f64;
                    *last = b;
                    f.min(1.0)
                })
                .collect();
            dispatcher.epoch(&busy, now_ns, &mut released);
        }
        // Dispatch a batch (the decision and the enqueue are the scheduling work).
        // Draw the batch first: drawing stands in for receiving, not for scheduling.
        while drawn.len() < BATCH {
            let (flow, seq, cost_ns, visible_cost_ns) = source.draw();
            let cost_ns = if cfg.mean_cost_ns > 0.0 { cost_ns } else { 0 };
            drawn.push_back(Event {
                flow,
                seq,
                born_ns: now_ns,
                cost_ns,
                visible_cost_ns,
                not_before_ns: 0,
                charge_ns: 0,
                due_ns: 0,
            });
        }
        let t = Instant::now();
        // Back-pressure: new events only while every outbox has room for a burst.
        if outbox.iter().all(|o| o.len() < BURST) {
            while let Some(mut ev) = drawn.pop_front() {
                if let Some(w) = dispatcher.dispatch(ev, now_ns) {
                    dispatcher.stamp(&mut ev);
                    outbox[w].push(ev);
                }
            }
        }
        flush(&mut to_workers, &mut outbox);
        sched_ns += t.elapsed().as_nanos() as u64;
    }
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    for lane in lanes {
        lane.join()?;
    }
    let work: Vec<f64> = if cfg.mean_cost_ns > 0.0 {
        stats.iter().map(|s| s.busy_ns.load(Ordering::Relaxed) as f64).collect()
    } else {
        done_per_worker.iter().map(|&d| d as f64).collect()
    };
    let balance = Balance::of(&work);
    let us = |q: f64| latency.value_at_quantile(q) as f64 / 1000.0;
    Ok(RunResult {
        scheduler: cfg.kind.name().into(),
        workload: cfg.workload.name().into(),
        workers,
        mode: "threads".into(),
        throughput_mevps: completed as f64 / elapsed.as_secs_f64() / 1e6,
        reorder: reorder.report(),
        imbalance_cov: balance.cov,
        imbalance_max_over_mean: balance.max_over_mean,
        jain: balance.jain,
        p50_latency_us: us(0.5),
        p99_latency_us: us(0.99),
        p999_latency_us: us(0.999),
        migrations_per_sec: dispatcher.migrations() as f64 / elapsed.as_secs_f64(),
        scheduling_share: Some(sched_ns as f64 / elapsed.as_nanos() as f64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_comes_back_and_flow_level_dispatch_keeps_order() {
        for kind in [Kind::Rss, Kind::DswAtomic, Kind::Diffuser] {
            let r = run(&ThreadsConfig {
                kind,
                workload: Workload::TenFlows,
                workers: 2,
                duration: Duration::from_millis(300),
                mean_cost_ns: 200.0,
                ring: 256,
                cpus: Vec::new(),
                seed: 1,
            })
            .unwrap();
            assert!(r.reorder.events > 1000, "{kind}: {r:?}");
            if kind != Kind::Diffuser {
                assert_eq!(r.reorder.reordered, 0, "{kind} reordered: {r:?}");
            }
        }
    }
}
