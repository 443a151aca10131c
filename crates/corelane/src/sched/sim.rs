//! A deterministic discrete-event simulation of one producer dispatching to W workers, for
//! worker counts this machine does not have. Each worker serves a FIFO ring of `ring` events
//! (a full ring stalls the producer, as a failed enqueue does); events cost 0.5–1.5x the mean;
//! the producer offers `offered_load` times the workers' capacity; completions reach an egress
//! point in time order, where order (RFC 4737), latency and balance are measured. The
//! dispatcher's own cost is not simulated (the threaded runs measure it).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use hdrhistogram::Histogram;
use serde::Serialize;

use super::dispatch::{Dispatcher, Event, Placement, EPOCH_NS};
use super::metrics::{Balance, ReorderMeter, ReorderReport};
use super::policy::Kind;
use super::workload::{Source, Workload};
use super::ConfigError;

#[derive(Debug, Clone, Copy)]
pub struct SimConfig {
    pub kind: Kind,
    pub workload: Workload,
    pub workers: usize,
    /// Completions to simulate (the first tenth is warm-up, left out of throughput).
    pub events: u64,
    pub mean_cost_ns: f64,
    pub ring: usize,
    /// Offered events/s as a multiple of the workers' capacity (above 1: saturation).
    pub offered_load: f64,
    pub seed: u64,
}

impl SimConfig {
    pub fn new(kind: Kind, workload: Workload, workers: usize) -> Self {
        Self {
            kind,
            workload,
            workers,
            events: 400_000,
            mean_cost_ns: 320.0,
            ring: 64,
            offered_load: 1.2,
            seed: 2026,
        }
    }
}

/// What one simulated run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResult {
    pub scheduler: String,
    pub workload: String,
    pub workers: usize,
    /// `sim` or `threads`.
    pub mode: String,
    pub throughput_mevps: f64,
    #[serde(flatten)]
    pub reorder: ReorderReport,
    pub imbalance_cov: f64,
    pub imbalance_max_over_mean: f64,
    pub jain: f64,
    pub p50_latency_us: f64,
    pub p99_latency_us: f64,
    pub p999_latency_us: f64,
    pub migrations_per_sec: f64,
    /// Share of the dispatching core's cycles spent deciding (threaded runs only).
    pub scheduling_share: Option<f64>,
}

impl RunResult {
    /// A run's figures from what it measured: `work` per worker (for balance), latencies in
    /// ns, and the dispatcher's migrations over `seconds`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn measured(
        kind: Kind,
        workload: Workload,
        workers: usize,
        mode: &str,
        throughput_mevps: f64,
        reorder: &ReorderMeter,
        work: &[f64],
        latency: &Histogram<u64>,
        migrations_per_sec: f64,
        scheduling_share: Option<f64>,
    ) -> Self {
        let balance = Balance::of(work);
        let us = |q: f64| latency.value_at_quantile(q) as f64 / 1000.0;
        Self {
            scheduler: kind.name().into(),
            workload: workload.name().into(),
            workers,
            mode: mode.into(),
            throughput_mevps,
            reorder: reorder.report(),
            imbalance_cov: balance.cov,
            imbalance_max_over_mean: balance.max_over_mean,
            jain: balance.jain,
            p50_latency_us: us(0.5),
            p99_latency_us: us(0.99),
            p999_latency_us: us(0.999),
            migrations_per_sec,
            scheduling_share,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Tick {
    Done(usize),
    Arrival,
    Epoch,
}

struct Worker {
    queue: VecDeque<Event>,
    busy: bool,
    epoch_busy_ns: u64,
    total_busy_ns: u64,
}

impl SimConfig {
    /// Refuses options no simulation can run with.
    pub fn check(&self) -> Result<(), ConfigError> {
        let range = |what, value: f64, ok: bool, fix| {
            if ok {
                Ok(())
            } else {
                Err(ConfigError::OutOfRange { what, value, fix })
            }
        };
        self.workload.check()?;
        range("workers", self.workers as f64, (1..=1024).contains(&self.workers), "use 1 to 1024")?;
        range("the ring size", self.ring as f64, self.ring >= 1, "use at least 1")?;
        range(
            "the mean cost (ns)",
            self.mean_cost_ns,
            (1.0..=1e9).contains(&self.mean_cost_ns),
            "use 1 ns to 1 s",
        )?;
        range(
            "the offered load",
            self.offered_load,
            (0.01..=100.0).contains(&self.offered_load),
            "use 0.01 to 100 times the workers' capacity",
        )
    }
}

/// Runs one simulation.
pub fn simulate(cfg: &SimConfig) -> Result<RunResult, ConfigError> {
    cfg.check()?;
    let mut source = Source::new(cfg.workload, cfg.mean_cost_ns, cfg.seed)?;
    let mut dispatcher = Dispatcher::new(cfg.kind, cfg.workers, cfg.seed ^ 0x5eed);
    let mut workers: Vec<Worker> = (0..cfg.workers)
        .map(|_| Worker { queue: VecDeque::new(), busy: false, epoch_busy_ns: 0, total_busy_ns: 0 })
        .collect();
    let gap_ns = (cfg.mean_cost_ns / (cfg.workers as f64 * cfg.offered_load)).max(1.0);
    let mut heap: BinaryHeap<Reverse<(u64, Tick)>> = BinaryHeap::new();
    heap.push(Reverse((0, Tick::Arrival)));
    heap.push(Reverse((EPOCH_NS, Tick::Epoch)));
    let mut next_arrival_at = 0.0f64;
    let mut blocked: Option<Placement> = None;
    let mut reorder = ReorderMeter::new();
    let mut latency =
        Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
    let mut released = Vec::new();
    let (mut completed, mut measured, mut measure_from) = (0u64, 0u64, 0u64);
    let warmup = cfg.events / 10;
    let mut now = 0u64;

    // Starts `w` on its next event, if idle and it has one.
    fn start(
        w: usize,
        now: u64,
        workers: &mut [Worker],
        heap: &mut BinaryHeap<Reverse<(u64, Tick)>>,
    ) {
        let worker = &mut workers[w];
        if worker.busy {
            return;
        }
        if let Some(ev) = worker.queue.front() {
            worker.busy = true;
            let begin = now.max(ev.not_before_ns);
            heap.push(Reverse((begin + ev.cost_ns as u64, Tick::Done(w))));
        }
    }

    while let Some(Reverse((t, tick))) = heap.pop() {
        now = t;
        match tick {
            Tick::Arrival => {
                let (flow, seq, cost_ns, visible_cost_ns) = source.draw();
                let ev = Event::new(flow, seq, now, cost_ns, visible_cost_ns);
                next_arrival_at += gap_ns;
                if let Some(placed) = dispatcher.dispatch(ev, now) {
                    if workers[placed.worker].queue.len() >= cfg.ring {
                        blocked = Some(placed); // the producer waits for room
                        continue;
                    }
                    workers[placed.worker].queue.push_back(placed.event);
                    start(placed.worker, now, &mut workers, &mut heap);
                }
                heap.push(Reverse(((next_arrival_at as u64).max(now), Tick::Arrival)));
            }
            Tick::Done(w) => {
                let ev = workers[w].queue.pop_front().expect("a running worker has an event");
                workers[w].busy = false;
                workers[w].epoch_busy_ns += ev.cost_ns as u64;
                completed += 1;
                if completed == warmup {
                    measure_from = now;
                }
                if completed > warmup {
                    measured += 1;
                    workers[w].total_busy_ns += ev.cost_ns as u64;
                }
                reorder.record(ev.flow, ev.seq);
                let _ = latency.record((now - ev.born_ns).max(1));
                dispatcher.complete(&ev, w, now, &mut released);
                for placed in released.drain(..) {
                    workers[placed.worker].queue.push_back(placed.event);
                    start(placed.worker, now, &mut workers, &mut heap);
                }
                if let Some(placed) = blocked {
                    if workers[placed.worker].queue.len() < cfg.ring {
                        blocked = None;
                        workers[placed.worker].queue.push_back(placed.event);
                        start(placed.worker, now, &mut workers, &mut heap);
                        next_arrival_at = next_arrival_at.max(now as f64);
                        heap.push(Reverse((now, Tick::Arrival)));
                    }
                }
                start(w, now, &mut workers, &mut heap);
                if completed >= cfg.events {
                    break;
                }
            }
            Tick::Epoch => {
                let busy: Vec<f64> = workers
                    .iter_mut()
                    .map(|w| {
                        (std::mem::take(&mut w.epoch_busy_ns) as f64 / EPOCH_NS as f64).min(1.0)
                    })
                    .collect();
                dispatcher.epoch(&busy, now, &mut released);
                for placed in released.drain(..) {
                    workers[placed.worker].queue.push_back(placed.event);
                    start(placed.worker, now, &mut workers, &mut heap);
                }
                heap.push(Reverse((now + EPOCH_NS, Tick::Epoch)));
            }
        }
    }
    let secs = (now.saturating_sub(measure_from)) as f64 / 1e9;
    let work: Vec<f64> = workers.iter().map(|w| w.total_busy_ns as f64).collect();
    Ok(RunResult::measured(
        cfg.kind,
        cfg.workload,
        cfg.workers,
        "sim",
        if secs > 0.0 { measured as f64 / secs / 1e6 } else { 0.0 },
        &reorder,
        &work,
        &latency,
        dispatcher.migrations() as f64 / (now as f64 / 1e9).max(1e-9),
        None,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (events, reordered, Mevents/s × 100) of 20,000 completions of Diffuser on 10 flows.
    const SNAPSHOT: (u64, u64, i64) = (20_000, 990, 1911);

    fn run(kind: Kind, workload: Workload, workers: usize) -> RunResult {
        simulate(&SimConfig { events: 60_000, ..SimConfig::new(kind, workload, workers) }).unwrap()
    }

    #[test]
    fn a_simulation_snapshot_holds() {
        // Fixed inputs give fixed outputs: if a change moves these, it changed the model or a
        // scheduler, and RESULTS.md's tables must be measured again.
        let r = simulate(&SimConfig {
            events: 20_000,
            ..SimConfig::new(Kind::Diffuser, Workload::TenFlows, 8)
        })
        .unwrap();
        let snapshot =
            (r.reorder.events, r.reorder.reordered, (r.throughput_mevps * 100.0).round() as i64);
        assert_eq!(snapshot, SNAPSHOT, "{r:?}");
    }

    /// Every scheduler on two workloads, 8 workers, 20,000 completions: (scheduler,
    /// workload, reordered, Mevents/s × 100, migrations/s, CoV × 1000, p99 latency in ns).
    const SNAPSHOTS: [(&str, &str, u64, i64, i64, i64, u64); 10] = [
        ("rss", "10-flows", 0, 1500, 0, 536, 21_935),
        ("rss", "elephant", 0, 565, 0, 1295, 22_511),
        ("spray", "10-flows", 9428, 2501, 0, 0, 21_967),
        ("spray", "elephant", 7740, 2501, 0, 0, 21_967),
        ("dsw-atomic", "10-flows", 0, 1525, 0, 360, 21_999),
        ("dsw-atomic", "elephant", 0, 589, 5870, 1233, 22_575),
        ("dsw-parallel", "10-flows", 13_233, 2502, 0, 0, 21_839),
        ("dsw-parallel", "elephant", 8948, 2502, 0, 0, 21_839),
        ("diffuser", "10-flows", 990, 1911, 5_494_924, 158, 21_695),
        ("diffuser", "elephant", 3461, 2083, 7_180_237, 67, 21_967),
    ];

    #[test]
    fn every_scheduler_keeps_its_snapshot() {
        // As above, for each scheduler: a refactoring of the dispatcher must leave these be.
        let mut got = Vec::new();
        for kind in Kind::ALL {
            for workload in [Workload::TenFlows, Workload::Elephant { mice: 256, share: 0.5 }] {
                let r =
                    simulate(&SimConfig { events: 20_000, ..SimConfig::new(kind, workload, 8) })
                        .unwrap();
                got.push((
                    kind.name(),
                    workload.name(),
                    r.reorder.reordered,
                    (r.throughput_mevps * 100.0).round() as i64,
                    r.migrations_per_sec.round() as i64,
                    (r.imbalance_cov * 1000.0).round() as i64,
                    (r.p99_latency_us * 1000.0).round() as u64,
                ));
            }
        }
        assert_eq!(got, SNAPSHOTS);
    }

    /// Zero workers used to index an empty worker list; a zero ring, load or cost spun or
    /// divided by zero.
    #[test]
    fn options_no_run_can_be_made_of_are_refused() {
        let base = SimConfig { events: 1_000, ..SimConfig::new(Kind::Rss, Workload::TenFlows, 2) };
        for bad in [
            SimConfig { workers: 0, ..base },
            SimConfig { ring: 0, ..base },
            SimConfig { offered_load: 0.0, ..base },
            SimConfig { mean_cost_ns: f64::NAN, ..base },
            SimConfig { workload: Workload::Uniform { flows: 0 }, ..base },
        ] {
            assert!(simulate(&bad).is_err(), "{bad:?}");
        }
        assert!(simulate(&base).is_ok());
    }

    #[test]
    fn simulations_are_deterministic() {
        let a = run(Kind::Diffuser, Workload::TenFlows, 8);
        let b = run(Kind::Diffuser, Workload::TenFlows, 8);
        assert_eq!(a, b);
    }

    #[test]
    fn flow_level_schedulers_never_reorder_and_every_event_arrives_once() {
        for kind in [Kind::Rss, Kind::DswAtomic] {
            for workload in Workload::ALL {
                let r = run(kind, workload, 8);
                assert_eq!(r.reorder.reordered, 0, "{kind} on {}", workload.name());
                assert_eq!(r.reorder.events, 60_000, "{kind} on {}", workload.name());
            }
        }
    }

    #[test]
    #[ignore = "prints the 8-worker grid: cargo test --release -p corelane grid -- --ignored --nocapture"]
    fn grid() {
        for workload in Workload::ALL {
            for kind in Kind::ALL {
                let r =
                    simulate(&SimConfig { events: 1_000_000, ..SimConfig::new(kind, workload, 8) })
                        .unwrap();
                eprintln!(
                    "{:<9} {:<13} {:>7.2} Mev/s reorder {:.4} cov {:.3} p99 {:.1}us mig/s {:.0}",
                    workload.name(),
                    kind.name(),
                    r.throughput_mevps,
                    r.reorder.reorder_ratio,
                    r.imbalance_cov,
                    r.p99_latency_us,
                    r.migrations_per_sec
                );
            }
        }
    }

    #[test]
    fn the_trade_off_diffuser_is_built_for() {
        // 10 equal flows on 8 workers: flow-level placement leaves workers with two flows.
        let atomic = run(Kind::DswAtomic, Workload::TenFlows, 8);
        let parallel = run(Kind::DswParallel, Workload::TenFlows, 8);
        let diffuser = run(Kind::Diffuser, Workload::TenFlows, 8);
        assert!(parallel.reorder.reordered > 0, "spraying reorders");
        assert!(diffuser.throughput_mevps > atomic.throughput_mevps, "{diffuser:?} {atomic:?}");
        assert!(
            diffuser.reorder.reorder_ratio < parallel.reorder.reorder_ratio,
            "{diffuser:?} {parallel:?}"
        );
    }
}
