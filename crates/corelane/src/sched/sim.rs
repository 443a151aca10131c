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

use super::dispatch::{Assignment, Dispatcher, Event, EPOCH_NS};
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

/// How a run was made: simulated, or on real threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunMode {
    Sim,
    Threads,
}

impl RunMode {
    /// As the rows and reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sim => "sim",
            Self::Threads => "threads",
        }
    }
}

impl std::fmt::Display for RunMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What one simulated run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResult {
    pub scheduler: Kind,
    pub workload: String,
    pub workers: usize,
    /// `sim` or `threads`.
    pub mode: RunMode,
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
        mode: RunMode,
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
            scheduler: kind,
            workload: workload.name().into(),
            workers,
            mode,
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
    let mut sim = Sim::new(cfg)?;
    while let Some(Reverse((t, tick))) = sim.heap.pop() {
        sim.now = t;
        match tick {
            Tick::Arrival => sim.arrive(),
            Tick::Done(w) => {
                if sim.complete(w) {
                    break;
                }
            }
            Tick::Epoch => sim.epoch(),
        }
    }
    Ok(sim.result())
}

/// One simulation's state: the producer, the dispatcher, the workers and the clock's pending
/// ticks, with what the egress point has measured so far.
struct Sim<'a> {
    cfg: &'a SimConfig,
    source: Source,
    dispatcher: Dispatcher,
    workers: Vec<Worker>,
    heap: BinaryHeap<Reverse<(u64, Tick)>>,
    /// Nanoseconds between two arrivals at the offered load.
    gap_ns: f64,
    next_arrival_at: f64,
    /// The placement the producer waits to enqueue while its worker's ring is full.
    blocked: Option<Assignment>,
    reorder: ReorderMeter,
    latency: Histogram<u64>,
    released: Vec<Assignment>,
    completed: u64,
    /// Completions after the warm-up.
    measured: u64,
    /// When the warm-up ended (ns).
    measure_from: u64,
    warmup: u64,
    now: u64,
}

impl<'a> Sim<'a> {
    fn new(cfg: &'a SimConfig) -> Result<Self, ConfigError> {
        let workers = (0..cfg.workers)
            .map(|_| Worker {
                queue: VecDeque::new(),
                busy: false,
                epoch_busy_ns: 0,
                total_busy_ns: 0,
            })
            .collect();
        let mut heap = BinaryHeap::new();
        heap.push(Reverse((0, Tick::Arrival)));
        heap.push(Reverse((EPOCH_NS, Tick::Epoch)));
        Ok(Self {
            cfg,
            source: Source::new(cfg.workload, cfg.mean_cost_ns, cfg.seed)?,
            dispatcher: Dispatcher::new(cfg.kind, cfg.workers, cfg.seed ^ 0x5eed),
            workers,
            heap,
            gap_ns: (cfg.mean_cost_ns / (cfg.workers as f64 * cfg.offered_load)).max(1.0),
            next_arrival_at: 0.0,
            blocked: None,
            reorder: ReorderMeter::new(),
            latency: Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds"),
            released: Vec::new(),
            completed: 0,
            measured: 0,
            measure_from: 0,
            warmup: cfg.events / 10,
            now: 0,
        })
    }

    /// Starts worker `w` on its next event, if idle and it has one.
    fn start(&mut self, w: usize) {
        let worker = &mut self.workers[w];
        if worker.busy {
            return;
        }
        if let Some(ev) = worker.queue.front() {
            worker.busy = true;
            let begin = self.now.max(ev.not_before_ns);
            self.heap.push(Reverse((begin + ev.cost_ns as u64, Tick::Done(w))));
        }
    }

    /// Queues a placed event on its worker's ring and starts the worker if idle.
    fn enqueue(&mut self, placed: Assignment) {
        self.workers[placed.worker].queue.push_back(placed.event);
        self.start(placed.worker);
    }

    /// Enqueues the events the dispatcher released (held back for order) since the last call.
    fn enqueue_released(&mut self) {
        let mut released = std::mem::take(&mut self.released);
        for placed in released.drain(..) {
            self.enqueue(placed);
        }
        self.released = released;
    }

    /// The producer offers its next event, unless a full ring makes it wait.
    fn arrive(&mut self) {
        let (flow, seq, cost_ns, visible_cost_ns) = self.source.draw();
        let ev = Event::new(flow, seq, self.now, cost_ns, visible_cost_ns);
        self.next_arrival_at += self.gap_ns;
        if let Some(placed) = self.dispatcher.dispatch(ev, self.now) {
            if self.workers[placed.worker].queue.len() >= self.cfg.ring {
                self.blocked = Some(placed); // the producer waits for room
                return;
            }
            self.enqueue(placed);
        }
        self.heap.push(Reverse(((self.next_arrival_at as u64).max(self.now), Tick::Arrival)));
    }

    /// Worker `w` finished its event: it reaches the egress point, and the room it leaves may
    /// unblock the producer. True once the run has its completions.
    fn complete(&mut self, w: usize) -> bool {
        let now = self.now;
        let ev = self.workers[w].queue.pop_front().expect("a running worker has an event");
        self.workers[w].busy = false;
        self.workers[w].epoch_busy_ns += ev.cost_ns as u64;
        self.completed += 1;
        if self.completed == self.warmup {
            self.measure_from = now;
        }
        if self.completed > self.warmup {
            self.measured += 1;
            self.workers[w].total_busy_ns += ev.cost_ns as u64;
        }
        self.reorder.record(ev.flow, ev.seq);
        let _ = self.latency.record((now - ev.born_ns).max(1));
        self.dispatcher.complete(&ev, w, now, &mut self.released);
        self.enqueue_released();
        if let Some(placed) = self.blocked {
            if self.workers[placed.worker].queue.len() < self.cfg.ring {
                self.blocked = None;
                self.enqueue(placed);
                self.next_arrival_at = self.next_arrival_at.max(now as f64);
                self.heap.push(Reverse((now, Tick::Arrival)));
            }
        }
        self.start(w);
        self.completed >= self.cfg.events
    }

    /// The end of an epoch: the dispatcher sees each worker's busy share since the last one.
    fn epoch(&mut self) {
        let busy: Vec<f64> = self
            .workers
            .iter_mut()
            .map(|w| (std::mem::take(&mut w.epoch_busy_ns) as f64 / EPOCH_NS as f64).min(1.0))
            .collect();
        self.dispatcher.epoch(&busy, self.now, &mut self.released);
        self.enqueue_released();
        self.heap.push(Reverse((self.now + EPOCH_NS, Tick::Epoch)));
    }

    /// What the run measured, throughput over the time after the warm-up.
    fn result(&self) -> RunResult {
        let cfg = self.cfg;
        let secs = (self.now.saturating_sub(self.measure_from)) as f64 / 1e9;
        let work: Vec<f64> = self.workers.iter().map(|w| w.total_busy_ns as f64).collect();
        RunResult::measured(
            cfg.kind,
            cfg.workload,
            cfg.workers,
            RunMode::Sim,
            if secs > 0.0 { self.measured as f64 / secs / 1e6 } else { 0.0 },
            &self.reorder,
            &work,
            &self.latency,
            self.dispatcher.migrations() as f64 / (self.now as f64 / 1e9).max(1e-9),
            None,
        )
    }
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
