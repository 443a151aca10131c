//! `diffuser`: ours, after the thesis's abstract: stochastic flow assignment (a new flow goes
//! to the less loaded of two random workers) plus a load-imbalance feedback loop.
//!
//! Every epoch (250 µs) the imbalance I (coefficient of variation of the workers' busy
//! fractions; 0 while no worker is 70 % busy, DSW's threshold) drives the diffusion
//! probability p: `p += 0.5 (I − 0.01)` while I is above the target 0.01, `p −= 0.02`
//! otherwise, clamped to [0, 1]. A flow on a worker busier than the mean (by more than the
//! target) is *diffused* with probability p; once the workers are balanced, a diffused flow
//! whose share of the work is under half a worker's fair share (any flow, while no worker is
//! loaded) is undiffused with probability 1 − p — it goes back to the worker of its latest
//! event, so it cannot overtake it. A flow that needs more than a worker (one flow, an
//! elephant) thus stays diffused, and a small one is not moved back and forth every epoch. An
//! undiffused flow stays on its worker and cannot be reordered.
//!
//! A diffused event goes where it is cheapest, from predictions of each worker's queue (the
//! events' visible costs — what a packet processor knows from a packet's length): on each
//! worker it either starts when the worker is free, overtaking those of the flow's last 16
//! events predicted to finish after it (within a margin of 0.12 of its cost), at 0.16 of the
//! flow's mean cost per overtaken event, or waits until it would finish after them all, at
//! the wait; a worker free later than the least loaded one costs 0.95 ns per ns, so no worker
//! is left behind. Overtaking is a bounded reorder budget traded for throughput: on one flow
//! over 8 workers, insisting on order (no overtakes) leaves workers waiting for ~30 % of their
//! time. The parameters: target 0.01, gain 0.5, decay 0.02, load 0.7, margin 0.12, overtake
//! price 0.16, lateness price 0.95, the 16-event history and the 250 µs epoch.

use super::{Assignment, Event, Ledger, Policy};
use crate::sched::flowmap::FlowMap;
use crate::sched::metrics::Balance;

const TARGET: f64 = 0.01;
const GAIN: f64 = 0.5;
const DECAY: f64 = 0.02;
/// Below this busy fraction on every worker, Diffuser sees no imbalance worth a reorder.
const LOADED: f64 = 0.7;
/// A diffused event is meant to finish this many of its own costs after its predecessor
/// (room for the part of the cost the dispatcher cannot see).
const MARGIN: f64 = 0.12;
/// The price of overtaking one of the flow's events, in the flow's mean costs.
const OVERTAKE_PRICE: f64 = 0.16;
/// The price of a worker's being free later than the least loaded one, per ns.
const LATE_PRICE: f64 = 0.95;
/// A diffused flow's latest events whose predicted finishes Diffuser weighs overtaking.
const RECENT: usize = 16;

/// Diffuser's view of one flow.
#[derive(Debug, Clone, Copy, Default)]
struct Flow {
    /// The worker an undiffused flow's events go to.
    home: usize,
    diffused: bool,
    /// Predicted finish (absolute ns) of the flow's latest event, and its worker.
    last_finish: f64,
    last_worker: usize,
    /// Predicted finishes of the flow's latest events (a ring).
    recent: [f64; RECENT],
    recent_at: usize,
    /// Predicted work dispatched this epoch (ns).
    work_ns: f64,
}

#[derive(Debug)]
pub(crate) struct Diffuser {
    rng: fastrand::Rng,
    flows: FlowMap<Flow>,
    /// The diffusion probability p.
    p_diffuse: f64,
    /// Predicted queued work per worker (ns): what its events were charged, not yet done.
    backlog_ns: Vec<f64>,
    /// When each worker's queue is predicted to drain (absolute ns).
    queue_end: Vec<f64>,
    migrations: u64,
}

impl Policy for Diffuser {
    fn new(workers: usize, seed: u64) -> Self {
        Self {
            rng: fastrand::Rng::with_seed(seed),
            flows: FlowMap::new(),
            p_diffuse: 0.0,
            backlog_ns: vec![0.0; workers],
            queue_end: vec![0.0; workers],
            migrations: 0,
        }
    }

    fn place(&mut self, event: Event, now_ns: u64, ledger: &Ledger) -> Option<Assignment> {
        let rng = &mut self.rng;
        let flow = self.flows.get_or_insert_with(event.flow, || Flow {
            home: ledger.least_of_two(rng),
            ..Flow::default()
        });
        let cost = event.visible_cost_ns as f64;
        let now = now_ns as f64;
        let (worker, start) = if flow.diffused {
            cheapest(flow, cost, ledger.mean_cost(event.flow), &self.queue_end, now)
        } else {
            (flow.home, self.queue_end[flow.home].max(now))
        };
        if flow.diffused && worker != flow.last_worker {
            self.migrations += 1;
        }
        let free = self.queue_end[worker].max(now);
        let finish = start + cost;
        let charge_ns = (finish - free).round() as u32;
        let not_before_ns = if start > free + 1.0 { start as u64 } else { 0 };
        self.queue_end[worker] = finish;
        self.backlog_ns[worker] += charge_ns as f64;
        flow.last_finish = flow.last_finish.max(finish);
        flow.recent[flow.recent_at] = finish;
        flow.recent_at = (flow.recent_at + 1) % RECENT;
        flow.last_worker = worker;
        flow.work_ns += cost;
        let due_ns = finish as u64;
        Some(Assignment { worker, event: Event { not_before_ns, charge_ns, due_ns, ..event } })
    }

    fn completed(
        &mut self,
        event: &Event,
        worker: usize,
        now_ns: u64,
        ledger: &Ledger,
        _released: &mut Vec<Assignment>,
    ) {
        let backlog = &mut self.backlog_ns[worker];
        *backlog = if ledger.outstanding(worker) == 0 {
            0.0
        } else {
            (*backlog - event.charge_ns as f64).max(0.0)
        };
        // Re-anchor the worker's predicted queue end on the completion just seen.
        self.queue_end[worker] = now_ns as f64 + *backlog;
    }

    fn epoch(
        &mut self,
        busy: &[f64],
        _now_ns: u64,
        ledger: &Ledger,
        _released: &mut Vec<Assignment>,
    ) {
        // Imbalance matters only when a worker is loaded (DSW's 70 %): two workers at 3 %
        // and 1 % are as unbalanced as at 90 % and 30 %, with nothing to gain.
        let loaded = busy.iter().any(|b| *b >= LOADED);
        let imbalance = if loaded { Balance::of(busy).cov } else { 0.0 };
        self.p_diffuse = if imbalance > TARGET {
            (self.p_diffuse + GAIN * (imbalance - TARGET)).min(1.0)
        } else {
            (self.p_diffuse - DECAY).max(0.0)
        };
        let mean = busy.iter().sum::<f64>() / busy.len().max(1) as f64;
        let hot_above = mean * (1.0 + TARGET);
        let ids = self.flows.keys();
        let total: f64 =
            ids.iter().filter_map(|id| self.flows.get(id)).map(|f| f.work_ns).sum::<f64>().max(1.0);
        let fair = 1.0 / ledger.workers() as f64;
        for id in ids {
            let coin = self.rng.f64();
            let Some(flow) = self.flows.get_mut(&id) else { continue };
            let share = flow.work_ns / total;
            flow.work_ns = 0.0;
            if flow.diffused {
                // Home again only when balanced and the flow is small enough to sit on one
                // worker (any flow, when no worker is loaded); home is where its latest
                // event went, so it cannot overtake it.
                let fits = share < fair / 2.0 || !loaded;
                if imbalance <= TARGET && fits && coin >= self.p_diffuse {
                    flow.diffused = false;
                    flow.home = flow.last_worker;
                }
            } else if busy.get(flow.home).is_some_and(|b| *b > hot_above) && coin < self.p_diffuse {
                flow.diffused = true;
            }
        }
    }

    fn migrations(&self) -> u64 {
        self.migrations
    }
}

/// Where a diffused event of `flow` goes and when it starts, given when each worker's queue
/// is predicted to drain. On each worker it either starts
/// as soon as the worker is free, overtaking those of the flow's recent events predicted to
/// finish after it (within the margin), or waits until it would finish after them all; the
/// option's price is the predicted overtakes × `OVERTAKE_PRICE` or the wait. Each worker's
/// price also carries how much later than the least loaded one it is free (× `LATE_PRICE`),
/// so that no worker is left behind; the cheapest wins.
fn cheapest(flow: &Flow, cost: f64, mean_cost: f64, queue_end: &[f64], now: f64) -> (usize, f64) {
    let free_at = |w: usize| queue_end[w].max(now);
    let margin = cost * MARGIN;
    let in_order_start = flow.last_finish + margin - cost;
    let earliest = (0..queue_end.len()).map(free_at).fold(f64::INFINITY, f64::min);
    let mut best = (f64::INFINITY, 0, 0.0);
    for w in 0..queue_end.len() {
        let free = free_at(w);
        let finish = free + cost;
        let overtaken = flow.recent.iter().filter(|&&f| f + margin > finish).count();
        let overtake = OVERTAKE_PRICE * mean_cost * overtaken as f64;
        let wait = (in_order_start - free).max(0.0);
        let (price, start) = if overtake < wait { (overtake, free) } else { (wait, free + wait) };
        let price = price + LATE_PRICE * (free - earliest);
        if price < best.0 {
            best = (price, w, start);
        }
    }
    (best.1, best.2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::dispatch::EPOCH_NS;

    fn ev(flow: u32, seq: u64) -> Event {
        Event { charge_ns: 100, ..Event::new(flow, seq, 0, 100, 100) }
    }

    fn diffused() -> Flow {
        Flow { diffused: true, ..Flow::default() }
    }

    #[test]
    fn diffused_events_spread_over_the_workers_and_are_planned_to_finish_in_order() {
        let (mut ledger, mut d) = (Ledger::new(4), Diffuser::new(4, 1));
        d.flows.insert(9, diffused());
        let planned: Vec<(usize, u64)> = (0..4)
            .map(|seq| ledger.dispatch(&mut d, ev(9, seq), 0).unwrap())
            .map(|p| (p.worker, p.event.due_ns))
            .collect();
        let mut workers: Vec<usize> = planned.iter().map(|p| p.0).collect();
        workers.sort_unstable();
        assert_eq!(workers, vec![0, 1, 2, 3], "{planned:?}");
        assert!(planned.windows(2).all(|p| p[0].1 < p[1].1), "{planned:?}");
    }

    #[test]
    fn diffuser_diffuses_only_when_a_worker_is_loaded() {
        let (mut ledger, mut d) = (Ledger::new(2), Diffuser::new(2, 7));
        for seq in 0..40 {
            ledger.dispatch(&mut d, ev(seq as u32 % 4, seq), 0);
        }
        let mut released = Vec::new();
        // Unbalanced but idle (3 % and 1 % busy): nothing to gain, nothing diffused.
        for epoch in 1..=20 {
            ledger.epoch(&mut d, &[0.03, 0.01], epoch * EPOCH_NS, &mut released);
        }
        assert_eq!(d.p_diffuse, 0.0);
        assert!((0..4).all(|f| !d.flows.get(&f).unwrap().diffused));
        // One worker loaded: the feedback loop raises p and flows on it get diffused.
        for epoch in 21..=40 {
            ledger.epoch(&mut d, &[0.95, 0.3], epoch * EPOCH_NS, &mut released);
        }
        assert!(d.p_diffuse > 0.5, "{}", d.p_diffuse);
        assert!((0..4).any(|f| d.flows.get(&f).unwrap().diffused));
    }

    #[test]
    fn a_drained_worker_is_predicted_free_again() {
        // A worker with nothing outstanding is predicted free from its last completion on
        // (charge fractions once leaked into the predictions and made workers wait idle).
        let (mut ledger, mut d) = (Ledger::new(3), Diffuser::new(3, 5));
        d.flows.insert(1, diffused());
        let sent: Vec<Assignment> = (0..300)
            .map(|seq| {
                let e = Event { charge_ns: 0, ..Event::new(1 + (seq % 2) as u32, seq, 0, 97, 97) };
                ledger.dispatch(&mut d, e, seq * 7).unwrap()
            })
            .collect();
        let mut released = Vec::new();
        for p in &sent {
            ledger.complete(&mut d, &p.event, p.worker, 10_000, &mut released);
        }
        assert!(d.backlog_ns.iter().all(|b| *b == 0.0), "{:?}", d.backlog_ns);
        assert!(d.queue_end.iter().all(|e| *e == 10_000.0), "{:?}", d.queue_end);
    }
}
