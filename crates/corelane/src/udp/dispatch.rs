//! Seed 004's scenario on real datagrams: one receive lane reads the socket (one RX queue's
//! worth) and dispatches every datagram, by the flow id and sequence number its sender wrote,
//! to worker lanes through SPSC rings; the receive lane is also the egress point, where order
//! is checked per flow (RFC 4737).

use std::io;

use serde::Serialize;

use crate::sched::dispatch::EPOCH_NS;
use crate::sched::metrics::{Balance, ReorderMeter, ReorderReport};
use crate::sched::pool::WorkerPool;
use crate::sched::{Assignment, Dispatcher, Event, Kind};

/// How the receive lane dispatches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatchConfig {
    pub kind: Kind,
    pub workers: usize,
    /// Worker time per datagram, in ns (0: none).
    pub work_ns: u32,
}

/// What dispatching did.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct DispatchReport {
    pub scheduler: String,
    pub workers: usize,
    /// Datagrams each worker handled.
    pub per_worker: Vec<u64>,
    pub imbalance_cov: f64,
    pub jain: f64,
    /// Order at the egress point.
    pub egress: ReorderReport,
    pub migrations: u64,
}

/// The receive lane's dispatcher, workers and egress check.
#[derive(Debug)]
pub(crate) struct DispatchLane {
    config: DispatchConfig,
    dispatcher: Dispatcher,
    pool: WorkerPool,
    egress: ReorderMeter,
    per_worker: Vec<u64>,
    released: Vec<Assignment>,
    next_epoch_ns: u64,
}

impl DispatchLane {
    pub fn start(config: DispatchConfig, worker_cpus: &[usize]) -> io::Result<Self> {
        let workers = config.workers.max(1);
        Ok(Self {
            config,
            dispatcher: Dispatcher::new(config.kind, workers, 2026),
            pool: WorkerPool::start(workers, 4096, worker_cpus, config.work_ns > 0)?,
            egress: ReorderMeter::new(),
            per_worker: vec![0; workers],
            released: Vec::new(),
            next_epoch_ns: EPOCH_NS,
        })
    }

    /// Hands one datagram of `flow`, numbered `seq`, to a worker; waits (serving the egress)
    /// while the workers' rings are full, so nothing is dropped here.
    pub fn offer(&mut self, flow: u32, seq: u64) {
        while !self.pool.has_room() {
            self.pool.flush();
            self.egress();
        }
        let now = self.pool.now_ns();
        let cost = self.config.work_ns;
        let ev = Event::new(flow, seq, now, cost, cost.max(1));
        if let Some(placed) = self.dispatcher.dispatch(ev, now) {
            self.pool.send(placed);
        }
    }

    /// Sends what is queued and takes in what the workers finished.
    pub fn egress(&mut self) {
        self.pool.flush();
        let now = self.pool.now_ns();
        let (egress, per_worker, dispatcher, released) =
            (&mut self.egress, &mut self.per_worker, &mut self.dispatcher, &mut self.released);
        self.pool.drain(|ev, w| {
            egress.record(ev.flow, ev.seq);
            per_worker[w] += 1;
            dispatcher.complete(&ev, w, now, released);
        });
        for placed in self.released.drain(..) {
            self.pool.send(placed);
        }
        if now >= self.next_epoch_ns {
            self.next_epoch_ns = now + EPOCH_NS;
            let busy = self.pool.busy_fractions(EPOCH_NS);
            self.dispatcher.epoch(&busy, now, &mut self.released);
        }
    }

    /// Waits for what is in flight (up to a second), stops the workers, and reports.
    pub fn finish(mut self) -> io::Result<DispatchReport> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while std::time::Instant::now() < deadline {
            let before: u64 = self.per_worker.iter().sum();
            self.egress();
            std::thread::sleep(std::time::Duration::from_millis(1));
            self.egress();
            if self.per_worker.iter().sum::<u64>() == before {
                break;
            }
        }
        let balance = Balance::of(&self.per_worker.iter().map(|&n| n as f64).collect::<Vec<_>>());
        let report = DispatchReport {
            scheduler: self.config.kind.name().into(),
            workers: self.per_worker.len(),
            per_worker: self.per_worker.clone(),
            imbalance_cov: balance.cov,
            jain: balance.jain,
            egress: self.egress.report(),
            migrations: self.dispatcher.migrations(),
        };
        self.pool.stop()?;
        Ok(report)
    }
}
