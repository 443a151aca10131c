//! The schedulers, behind one dispatcher that the simulation and the threaded runs share.
//!
//! * `rss` — a static flow hash: never reorders, never balances.
//! * `spray` — every event to the less loaded of two random workers (power of two choices):
//!   balances, reorders.
//! * `dsw-atomic` — DPDK's DSW (drivers/event/dsw): flows start on random workers; each
//!   worker's load is its busy fraction, smoothed `(new + old) / 2` every epoch (250 µs); a
//!   flow's load is its worker's load times its share of that worker's last 128 events; every
//!   0.5–1.5 ms a worker loaded ≥ 70 % that carries more than one flow moves up to 8 flows,
//!   greedily, to workers under 95 %, each time picking the (flow, target) that leaves the
//!   target least loaded, never to a target within 3 % of the source or one the flow would
//!   load above the source. A moving flow is *paused*: its new events are held until every
//!   event it has in flight has left the old worker, then they follow it — order is kept.
//! * `dsw-parallel` — DSW on parallel queues: events sprayed round-robin, no pause.
//! * `diffuser` — ours, after the thesis's abstract: stochastic flow assignment (a new flow
//!   goes to the less loaded of two random workers) plus a load-imbalance feedback loop.
//!   Every epoch (250 µs) the imbalance I (coefficient of variation of the workers' busy
//!   fractions; 0 while no worker is 70 % busy, DSW's threshold) drives the diffusion
//!   probability p: `p += 0.5 (I − 0.01)` while I is above the target 0.01, `p −= 0.02`
//!   otherwise, clamped to [0, 1]. A flow on a worker busier than the mean (by more than
//!   the target) is *diffused* with probability p; once the workers are balanced, a
//!   diffused flow whose share of the work is under half a worker's fair share (any flow,
//!   while no worker is loaded) is undiffused with probability 1 − p — it goes back to the
//!   worker of its latest event, so it cannot overtake it. A flow that needs more than a
//!   worker (one flow, an elephant) thus stays diffused, and a small one is not moved back
//!   and forth every epoch. An undiffused flow stays on its worker and cannot be reordered.
//!   A diffused event goes where it is cheapest, from predictions of each worker's queue
//!   (the events' visible costs — what a packet processor knows from a packet's length): on
//!   each worker it either starts when the worker is free, overtaking those of the flow's
//!   last 16 events predicted to finish after it (within a margin of 0.12 of its cost), at
//!   0.16 of the flow's mean cost per overtaken event, or waits until it would finish after
//!   them all, at the wait; a worker free later than the least loaded one costs 0.95 ns per
//!   ns, so no worker is left behind. Overtaking is a bounded reorder budget traded for
//!   throughput: on one flow over 8 workers, insisting on order (no overtakes) leaves
//!   workers waiting for ~30 % of their time. The parameters: target 0.01, gain 0.5, decay
//!   0.02, load 0.7, margin 0.12, overtake price 0.16, lateness price 0.95, the 16-event
//!   history and the 250 µs epoch.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::flowmap::FlowMap;

use serde::Serialize;

/// An event: which flow it belongs to, its place in the flow, when it was born and its cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub flow: u32,
    pub seq: u64,
    pub born_ns: u64,
    pub cost_ns: u32,
    /// The part of the cost the dispatcher can predict (from a packet's length).
    pub visible_cost_ns: u32,
    /// A worker starts the event no earlier than this (0: at once); set by Diffuser so that a
    /// diffused event finishes after its predecessor.
    pub not_before_ns: u64,
    /// Predicted worker time the dispatcher charged for it (waiting included).
    pub charge_ns: u32,
    /// When the dispatcher predicted it would finish (Diffuser), to correct its predictions.
    pub due_ns: u64,
}

impl Event {
    /// A new event; the dispatcher fills in its timing fields.
    pub fn new(flow: u32, seq: u64, born_ns: u64, cost_ns: u32, visible_cost_ns: u32) -> Self {
        Self {
            flow,
            seq,
            born_ns,
            cost_ns,
            visible_cost_ns,
            not_before_ns: 0,
            charge_ns: 0,
            due_ns: 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Rss,
    Spray,
    DswAtomic,
    DswParallel,
    Diffuser,
}

impl Kind {
    pub const ALL: [Kind; 5] =
        [Kind::Rss, Kind::Spray, Kind::DswAtomic, Kind::DswParallel, Kind::Diffuser];

    pub fn name(&self) -> &'static str {
        match self {
            Kind::Rss => "rss",
            Kind::Spray => "spray",
            Kind::DswAtomic => "dsw-atomic",
            Kind::DswParallel => "dsw-parallel",
            Kind::Diffuser => "diffuser",
        }
    }
}

impl std::str::FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Kind::ALL.iter().copied().find(|k| k.name() == s).ok_or_else(|| {
            format!("unknown scheduler {s:?}: use rss, spray, dsw-atomic, dsw-parallel or diffuser")
        })
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The epoch at which loads are measured and the feedback loops run.
pub const EPOCH_NS: u64 = 250_000;
const DSW_RECENT: usize = 128;
const DSW_MAX_MOVES: usize = 8;
const DIFFUSER_TARGET: f64 = 0.01;
const DIFFUSER_GAIN: f64 = 0.5;
const DIFFUSER_DECAY: f64 = 0.02;
/// Below this busy fraction on every worker, Diffuser sees no imbalance worth a reorder.
const DIFFUSER_LOADED: f64 = 0.7;
/// A diffused event is meant to finish this many of its own costs after its predecessor
/// (room for the part of the cost the dispatcher cannot see).
const DIFFUSER_MARGIN: f64 = 0.12;
/// The price of overtaking one of the flow's events, in the flow's mean costs.
const OVERTAKE_PRICE: f64 = 0.16;
/// The price of a worker's being free later than the least loaded one, per ns.
const LATE_PRICE: f64 = 0.95;
/// A diffused flow's latest events whose predicted finishes Diffuser weighs overtaking.
const RECENT: usize = 16;

/// Diffuser's view of one flow.
#[derive(Debug, Clone, Copy, Default)]
struct Diffusion {
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

/// Decides which worker each event goes to; tracks what is in flight.
#[derive(Debug)]
pub struct Dispatcher {
    kind: Kind,
    workers: usize,
    rng: fastrand::Rng,
    /// Flow → worker, for the flow-level schedulers (ordered, so runs are deterministic).
    table: FlowMap<usize>,
    /// Events dispatched and not yet completed, per flow and per worker.
    flow_in_flight: FlowMap<u32>,
    outstanding: Vec<u64>,
    /// Predicted queued work per worker (ns), from the flows' mean costs.
    backlog_ns: Vec<f64>,
    /// Diffuser: when each worker's queue is predicted to drain (absolute ns).
    queue_end: Vec<f64>,
    mean_cost: FlowMap<f64>,
    round_robin: usize,
    // DSW
    load: Vec<f64>,
    recent: Vec<VecDeque<u32>>,
    next_migration_ns: u64,
    paused: HashMap<u32, (usize, Vec<Event>)>,
    // Diffuser
    p_diffuse: f64,
    diffusion: FlowMap<Diffusion>,
    migrations: u64,
    /// (worker, not-before, charge, due) of the latest dispatch, for `stamp`.
    last_decision: (usize, u64, u32, u64),
}

impl Dispatcher {
    pub fn new(kind: Kind, workers: usize, seed: u64) -> Self {
        let workers = workers.max(1);
        Self {
            kind,
            workers,
            rng: fastrand::Rng::with_seed(seed),
            table: FlowMap::new(),
            flow_in_flight: FlowMap::new(),
            outstanding: vec![0; workers],
            backlog_ns: vec![0.0; workers],
            queue_end: vec![0.0; workers],
            mean_cost: FlowMap::new(),
            round_robin: 0,
            load: vec![0.0; workers],
            recent: vec![VecDeque::with_capacity(DSW_RECENT); workers],
            next_migration_ns: 1_000_000,
            paused: HashMap::new(),
            p_diffuse: 0.0,
            diffusion: FlowMap::new(),
            migrations: 0,
            last_decision: (0, 0, 0, 0),
        }
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Flow migrations so far (DSW moves; Diffuser events sent off a flow's worker).
    pub fn migrations(&self) -> u64 {
        self.migrations
    }

    fn least_of_two(&mut self) -> usize {
        let a = self.rng.usize(..self.workers);
        let b = self.rng.usize(..self.workers);
        if self.outstanding[b] < self.outstanding[a] {
            b
        } else {
            a
        }
    }

    /// The worker for `ev`, or `None` when its flow is paused (the event is held and comes
    /// back from `complete` once the flow has moved).
    pub fn dispatch(&mut self, ev: Event, now_ns: u64) -> Option<usize> {
        let cost = {
            let m = self.mean_cost.get_or_insert_with(ev.flow, || ev.visible_cost_ns as f64);
            *m += (ev.visible_cost_ns as f64 - *m) / 16.0;
            *m
        };
        let worker = match self.kind {
            Kind::Rss => (ev.flow.wrapping_mul(0x9E37_79B1) >> 7) as usize % self.workers,
            Kind::Spray => self.least_of_two(),
            Kind::DswParallel => {
                self.round_robin = (self.round_robin + 1) % self.workers;
                self.round_robin
            }
            Kind::DswAtomic => {
                if !self.paused.is_empty() {
                    if let Some((_, held)) = self.paused.get_mut(&ev.flow) {
                        held.push(ev);
                        return None;
                    }
                }
                let w = match self.table.get(&ev.flow) {
                    Some(&w) => w,
                    None => {
                        let w = self.rng.usize(..self.workers);
                        self.table.insert(ev.flow, w);
                        w
                    }
                };
                let recent = &mut self.recent[w];
                if recent.len() == DSW_RECENT {
                    recent.pop_front();
                }
                recent.push_back(ev.flow);
                w
            }
            Kind::Diffuser => {
                let (w, not_before, charge, due) =
                    self.diffuse(ev.flow, ev.visible_cost_ns as f64, cost, now_ns);
                *self.flow_in_flight.get_or_insert_with(ev.flow, || 0) += 1;
                self.outstanding[w] += 1;
                let charge = charge.round() as u32;
                self.backlog_ns[w] += charge as f64;
                self.last_decision = (w, not_before, charge, due);
                return Some(w);
            }
        };
        *self.flow_in_flight.get_or_insert_with(ev.flow, || 0) += 1;
        self.outstanding[worker] += 1;
        // Booked as the whole ns the event carries, so completions take back exactly that.
        let charge = cost.round() as u32;
        self.backlog_ns[worker] += charge as f64;
        self.last_decision = (worker, 0, charge, 0);
        Some(worker)
    }

    /// The start time and charge of the event `dispatch` just placed; copy them into the
    /// event before it goes to its worker.
    pub fn stamp(&self, ev: &mut Event) {
        ev.not_before_ns = self.last_decision.1;
        ev.charge_ns = self.last_decision.2;
        ev.due_ns = self.last_decision.3;
    }

    /// Diffuser's placement: (worker, not-before time, predicted charge, predicted finish).
    fn diffuse(
        &mut self,
        flow: u32,
        cost: f64,
        mean_cost: f64,
        now_ns: u64,
    ) -> (usize, u64, f64, u64) {
        let home = match self.table.get(&flow) {
            Some(&w) => w,
            None => {
                let w = self.least_of_two();
                self.table.insert(flow, w);
                w
            }
        };
        let state = self.diffusion.get_or_insert_with(flow, Diffusion::default);
        let (diffused, last_worker) = (state.diffused, state.last_worker);
        let now = now_ns as f64;
        let free_at = |w: usize| self.queue_end[w].max(now);
        let (worker, start) = match self.diffusion.get(&flow) {
            Some(state) if diffused => self.place_diffused(state, cost, mean_cost, free_at),
            _ => (home, free_at(home)),
        };
        if diffused && worker != last_worker {
            self.migrations += 1;
        }
        let finish = start + cost;
        let charge = finish - free_at(worker);
        let not_before = if start > free_at(worker) + 1.0 { start as u64 } else { 0 };
        self.queue_end[worker] = finish;
        let state = self.diffusion.get_or_insert_with(flow, Diffusion::default);
        state.last_finish = state.last_finish.max(finish);
        state.recent[state.recent_at] = finish;
        state.recent_at = (state.recent_at + 1) % RECENT;
        state.last_worker = worker;
        state.work_ns += cost;
        (worker, not_before, charge, finish as u64)
    }

    /// Where a diffused event goes and when it starts. On each worker it either starts as
    /// soon as the worker is free, overtaking those of the flow's recent events predicted to
    /// finish after it (within the margin), or waits until it would finish after them all;
    /// the option's price is the predicted overtakes × `OVERTAKE_PRICE` or the wait. Each
    /// worker's price also carries how much later than the least loaded one it is free
    /// (× `LATE_PRICE`), so that no worker is left behind; the cheapest wins.
    fn place_diffused(
        &self,
        state: &Diffusion,
        cost: f64,
        mean_cost: f64,
        free_at: impl Fn(usize) -> f64,
    ) -> (usize, f64) {
        let margin = cost * DIFFUSER_MARGIN;
        let in_order_start = state.last_finish + margin - cost;
        let earliest = (0..self.workers).map(&free_at).fold(f64::INFINITY, f64::min);
        let mut best = (f64::INFINITY, 0, 0.0);
        for w in 0..self.workers {
            let free = free_at(w);
            let finish = free + cost;
            let overtaken = state.recent.iter().filter(|&&f| f + margin > finish).count();
            let overtake = OVERTAKE_PRICE * mean_cost * overtaken as f64;
            let wait = (in_order_start - free).max(0.0);
            let (price, start) =
                if overtake < wait { (overtake, free) } else { (wait, free + wait) };
            let price = price + LATE_PRICE * (free - earliest);
            if price < best.0 {
                best = (price, w, start);
            }
        }
        (best.1, best.2)
    }

    /// An event of `flow` left `worker`. Events released by a finished migration are
    /// appended to `released` with their new worker, in order.
    pub fn complete(
        &mut self,
        ev: &Event,
        worker: usize,
        now_ns: u64,
        released: &mut Vec<(Event, usize)>,
    ) {
        let cost = ev.charge_ns as f64;
        self.outstanding[worker] = self.outstanding[worker].saturating_sub(1);
        self.backlog_ns[worker] = if self.outstanding[worker] == 0 {
            0.0
        } else {
            (self.backlog_ns[worker] - cost).max(0.0)
        };
        // Re-anchor the worker's predicted queue end on the completion just seen.
        self.queue_end[worker] = now_ns as f64 + self.backlog_ns[worker];
        let left = {
            let n = self.flow_in_flight.get_or_insert_with(ev.flow, || 1);
            *n = n.saturating_sub(1);
            *n
        };
        if left == 0 {
            self.finish_move(ev.flow, released);
        }
    }

    /// Completes a paused flow's move once nothing of it is in flight.
    fn finish_move(&mut self, flow: u32, released: &mut Vec<(Event, usize)>) {
        if self.paused.is_empty() {
            return;
        }
        let Some((to, held)) = self.paused.remove(&flow) else { return };
        self.table.insert(flow, to);
        let charge = self.mean_cost.get(&flow).copied().unwrap_or(0.0).round() as u32;
        for mut ev in held {
            *self.flow_in_flight.get_or_insert_with(flow, || 0) += 1;
            self.outstanding[to] += 1;
            self.backlog_ns[to] += charge as f64;
            ev.charge_ns = charge;
            released.push((ev, to));
        }
    }

    /// Called every EPOCH_NS with each worker's busy fraction over the epoch.
    pub fn epoch(&mut self, busy: &[f64], now_ns: u64, released: &mut Vec<(Event, usize)>) {
        match self.kind {
            Kind::DswAtomic => {
                for (l, b) in self.load.iter_mut().zip(busy) {
                    *l = (*l + b) / 2.0;
                }
                if now_ns >= self.next_migration_ns {
                    self.next_migration_ns = now_ns + 500_000 + self.rng.u64(..1_000_000);
                    self.dsw_migrate(released);
                }
            }
            Kind::Diffuser => {
                // Imbalance matters only when a worker is loaded (DSW's 70 %): two workers
                // at 3 % and 1 % are as unbalanced as at 90 % and 30 %, with nothing to gain.
                let loaded = busy.iter().any(|b| *b >= DIFFUSER_LOADED);
                let imbalance = if loaded { super::metrics::Balance::of(busy).cov } else { 0.0 };
                self.p_diffuse = if imbalance > DIFFUSER_TARGET {
                    (self.p_diffuse + DIFFUSER_GAIN * (imbalance - DIFFUSER_TARGET)).min(1.0)
                } else {
                    (self.p_diffuse - DIFFUSER_DECAY).max(0.0)
                };
                let mean = busy.iter().sum::<f64>() / busy.len().max(1) as f64;
                let hot_above = mean * (1.0 + DIFFUSER_TARGET);
                let flows: Vec<u32> = self.table.keys();
                let total: f64 = flows
                    .iter()
                    .filter_map(|f| self.diffusion.get(f))
                    .map(|d| d.work_ns)
                    .sum::<f64>()
                    .max(1.0);
                let fair = 1.0 / self.workers as f64;
                for flow in flows {
                    let Some(&home) = self.table.get(&flow) else { continue };
                    let coin = self.rng.f64();
                    let p = self.p_diffuse;
                    let Some(state) = self.diffusion.get_mut(&flow) else { continue };
                    let share = state.work_ns / total;
                    state.work_ns = 0.0;
                    if state.diffused {
                        // Home again only when balanced and the flow is small enough to sit
                        // on one worker (any flow, when no worker is loaded); home is where
                        // its latest event went, so it cannot overtake it.
                        let fits = share < fair / 2.0 || !loaded;
                        if imbalance <= DIFFUSER_TARGET && fits && coin >= p {
                            state.diffused = false;
                            self.table.insert(flow, state.last_worker);
                        }
                    } else if busy.get(home).is_some_and(|b| *b > hot_above) && coin < p {
                        state.diffused = true;
                    }
                }
            }
            _ => {}
        }
    }

    fn dsw_migrate(&mut self, released: &mut Vec<(Event, usize)>) {
        let mut load = self.load.clone();
        let mut order: Vec<usize> = (0..self.workers).collect();
        order.sort_by(|a, b| load[*b].total_cmp(&load[*a]));
        let mut moves = 0;
        for &source in &order {
            if load[source] < 0.70 || moves >= DSW_MAX_MOVES {
                continue;
            }
            let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
            for &f in &self.recent[source] {
                *counts.entry(f).or_insert(0) += 1;
            }
            counts
                .retain(|f, _| !self.paused.contains_key(f) && self.table.get(f) == Some(&source));
            if counts.len() < 2 {
                continue; // never move a worker's only flow
            }
            let total = self.recent[source].len().max(1) as f64;
            while moves < DSW_MAX_MOVES {
                let mut best: Option<(f64, u32, usize, f64)> = None;
                for (&flow, &n) in &counts {
                    let flow_load = load[source] * n as f64 / total;
                    for target in 0..self.workers {
                        let after = load[target] + flow_load;
                        if target == source
                            || load[target] >= 0.95
                            || load[target] + 0.03 >= load[source]
                            || after > load[source] - flow_load
                        {
                            continue;
                        }
                        if best.is_none_or(|(b, ..)| after < b) {
                            best = Some((after, flow, target, flow_load));
                        }
                    }
                }
                let Some((_, flow, target, flow_load)) = best else { break };
                counts.remove(&flow);
                load[source] -= flow_load;
                load[target] += flow_load;
                moves += 1;
                self.migrations += 1;
                self.paused.insert(flow, (target, Vec::new()));
                if self.flow_in_flight.get(&flow).copied().unwrap_or(0) == 0 {
                    self.finish_move(flow, released);
                }
                if counts.len() < 2 {
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(flow: u32, seq: u64) -> Event {
        Event { charge_ns: 100, ..Event::new(flow, seq, 0, 100, 100) }
    }

    #[test]
    fn rss_keeps_a_flow_on_one_worker() {
        let mut d = Dispatcher::new(Kind::Rss, 8, 1);
        let w: Vec<usize> = (0..100).map(|s| d.dispatch(ev(42, s), 0).unwrap()).collect();
        assert!(w.iter().all(|x| *x == w[0]));
    }

    #[test]
    fn dsw_parallel_sprays_round_robin() {
        let mut d = Dispatcher::new(Kind::DswParallel, 4, 1);
        let w: Vec<usize> = (0..8).map(|s| d.dispatch(ev(1, s), 0).unwrap()).collect();
        assert_eq!(w, vec![1, 2, 3, 0, 1, 2, 3, 0]);
    }

    #[test]
    fn a_paused_flow_is_held_until_its_events_have_left_then_follows_in_order() {
        let mut d = Dispatcher::new(Kind::DswAtomic, 2, 3);
        let first = d.dispatch(ev(5, 0), 0).unwrap();
        let target = 1 - first;
        d.paused.insert(5, (target, Vec::new()));
        assert_eq!(d.dispatch(ev(5, 1), 0), None);
        assert_eq!(d.dispatch(ev(5, 2), 0), None);
        let mut released = Vec::new();
        d.complete(&ev(5, 0), first, 0, &mut released);
        assert_eq!(
            released.iter().map(|(e, w)| (e.seq, *w)).collect::<Vec<_>>(),
            vec![(1, target), (2, target)]
        );
        assert_eq!(d.dispatch(ev(5, 3), 0), Some(target));
    }

    #[test]
    fn diffused_events_spread_over_the_workers_and_are_planned_to_finish_in_order() {
        let mut d = Dispatcher::new(Kind::Diffuser, 4, 1);
        d.diffusion.insert(9, Diffusion { diffused: true, ..Diffusion::default() });
        let mut planned = Vec::new();
        for seq in 0..4 {
            let mut e = ev(9, seq);
            let w = d.dispatch(e, 0).unwrap();
            d.stamp(&mut e);
            planned.push((w, e.due_ns));
        }
        let mut workers: Vec<usize> = planned.iter().map(|p| p.0).collect();
        workers.sort_unstable();
        assert_eq!(workers, vec![0, 1, 2, 3], "{planned:?}");
        assert!(planned.windows(2).all(|p| p[0].1 < p[1].1), "{planned:?}");
    }

    #[test]
    fn diffuser_diffuses_only_when_a_worker_is_loaded() {
        let mut d = Dispatcher::new(Kind::Diffuser, 2, 7);
        for seq in 0..40 {
            d.dispatch(ev(seq as u32 % 4, seq), 0);
        }
        let mut released = Vec::new();
        // Unbalanced but idle (3 % and 1 % busy): nothing to gain, nothing diffused.
        for epoch in 1..=20 {
            d.epoch(&[0.03, 0.01], epoch * EPOCH_NS, &mut released);
        }
        assert_eq!(d.p_diffuse, 0.0);
        assert!((0..4).all(|f| !d.diffusion.get(&f).unwrap().diffused));
        // One worker loaded: the feedback loop raises p and flows on it get diffused.
        for epoch in 21..=40 {
            d.epoch(&[0.95, 0.3], epoch * EPOCH_NS, &mut released);
        }
        assert!(d.p_diffuse > 0.5, "{}", d.p_diffuse);
        assert!((0..4).any(|f| d.diffusion.get(&f).unwrap().diffused));
    }

    #[test]
    fn a_drained_worker_is_predicted_free_again() {
        // A worker with nothing outstanding is predicted free from its last completion on
        // (charge fractions once leaked into the predictions and made workers wait idle).
        let mut d = Dispatcher::new(Kind::Diffuser, 3, 5);
        d.diffusion.insert(1, Diffusion { diffused: true, ..Diffusion::default() });
        let mut sent = Vec::new();
        for seq in 0..300 {
            let mut e = Event { charge_ns: 0, ..Event::new(1 + (seq % 2) as u32, seq, 0, 97, 97) };
            let w = d.dispatch(e, seq * 7).unwrap();
            d.stamp(&mut e);
            sent.push((e, w));
        }
        let mut released = Vec::new();
        for (e, w) in &sent {
            d.complete(e, *w, 10_000, &mut released);
        }
        assert!(d.backlog_ns.iter().all(|b| *b == 0.0), "{:?}", d.backlog_ns);
        assert!(d.queue_end.iter().all(|e| *e == 10_000.0), "{:?}", d.queue_end);
    }

    #[test]
    fn kinds_parse_and_print() {
        for k in Kind::ALL {
            assert_eq!(k.name().parse::<Kind>().unwrap(), k);
        }
        assert!("fifo".parse::<Kind>().unwrap_err().contains("diffuser"));
    }
}
