//! `dsw-atomic`: DPDK's DSW (drivers/event/dsw). Flows start on random workers; each worker's
//! load is its busy fraction, smoothed `(new + old) / 2` every epoch (250 µs); a flow's load
//! is its worker's load times its share of that worker's last 128 events; every 0.5–1.5 ms a
//! worker loaded ≥ 70 % that carries more than one flow moves up to 8 flows, greedily, to
//! workers under 95 %, each time picking the (flow, target) that leaves the target least
//! loaded, never to a target within 3 % of the source or one the flow would load above the
//! source. A moving flow is *paused*: its new events are held until every event it has in
//! flight has left the old worker, then they follow it — order is kept.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::{Assignment, Event, Ledger, Policy};
use crate::sched::flowmap::FlowMap;

/// A worker's latest events whose flows make up its load.
const RECENT: usize = 128;
/// Flows moved per migration round, at most.
const MAX_MOVES: usize = 8;
/// A worker this loaded sheds flows.
const LOADED: f64 = 0.70;
/// A worker this loaded takes no flow.
const FULL: f64 = 0.95;
/// A target must be this much less loaded than the source.
const MIN_GAP: f64 = 0.03;

#[derive(Debug)]
pub(crate) struct DswAtomic {
    rng: fastrand::Rng,
    /// Each flow's worker.
    home: FlowMap<usize>,
    /// Each worker's smoothed busy fraction.
    load: Vec<f64>,
    /// The flows of each worker's latest events.
    recent: Vec<VecDeque<u32>>,
    next_migration_ns: u64,
    /// Flows on the move: their target and the events held until they get there.
    paused: HashMap<u32, (usize, Vec<Event>)>,
    migrations: u64,
}

impl Policy for DswAtomic {
    fn new(workers: usize, seed: u64) -> Self {
        Self {
            rng: fastrand::Rng::with_seed(seed),
            home: FlowMap::new(),
            load: vec![0.0; workers],
            recent: vec![VecDeque::with_capacity(RECENT); workers],
            next_migration_ns: 1_000_000,
            paused: HashMap::new(),
            migrations: 0,
        }
    }

    fn place(&mut self, event: Event, _now_ns: u64, ledger: &Ledger) -> Option<Assignment> {
        if !self.paused.is_empty() {
            if let Some((_, held)) = self.paused.get_mut(&event.flow) {
                held.push(event);
                return None;
            }
        }
        let rng = &mut self.rng;
        let worker = *self.home.get_or_insert_with(event.flow, || rng.usize(..ledger.workers()));
        let recent = &mut self.recent[worker];
        if recent.len() == RECENT {
            recent.pop_front();
        }
        recent.push_back(event.flow);
        Some(ledger.at_mean_cost(worker, event))
    }

    fn completed(
        &mut self,
        event: &Event,
        _worker: usize,
        _now_ns: u64,
        ledger: &Ledger,
        released: &mut Vec<Assignment>,
    ) {
        if ledger.in_flight(event.flow) == 0 {
            self.finish_move(event.flow, ledger, released);
        }
    }

    fn epoch(
        &mut self,
        busy: &[f64],
        now_ns: u64,
        ledger: &Ledger,
        released: &mut Vec<Assignment>,
    ) {
        for (load, busy) in self.load.iter_mut().zip(busy) {
            *load = (*load + busy) / 2.0;
        }
        if now_ns >= self.next_migration_ns {
            self.next_migration_ns = now_ns + 500_000 + self.rng.u64(..1_000_000);
            self.migrate(ledger, released);
        }
    }

    fn migrations(&self) -> u64 {
        self.migrations
    }
}

impl DswAtomic {
    /// Completes a paused flow's move once nothing of it is in flight.
    fn finish_move(&mut self, flow: u32, ledger: &Ledger, released: &mut Vec<Assignment>) {
        if self.paused.is_empty() {
            return;
        }
        let Some((to, held)) = self.paused.remove(&flow) else { return };
        self.home.insert(flow, to);
        released.extend(held.into_iter().map(|event| ledger.at_mean_cost(to, event)));
    }

    /// One migration round: loaded workers shed flows, most loaded first.
    fn migrate(&mut self, ledger: &Ledger, released: &mut Vec<Assignment>) {
        let mut load = self.load.clone();
        let mut order: Vec<usize> = (0..load.len()).collect();
        order.sort_by(|a, b| load[*b].total_cmp(&load[*a]));
        let mut moves = 0;
        for &source in &order {
            if load[source] < LOADED || moves >= MAX_MOVES {
                continue;
            }
            let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
            for &flow in &self.recent[source] {
                *counts.entry(flow).or_insert(0) += 1;
            }
            counts.retain(|f, _| !self.paused.contains_key(f) && self.home.get(f) == Some(&source));
            if counts.len() < 2 {
                continue; // never move a worker's only flow
            }
            let total = self.recent[source].len().max(1) as f64;
            while moves < MAX_MOVES {
                let mut best: Option<(f64, u32, usize, f64)> = None;
                for (&flow, &n) in &counts {
                    let flow_load = load[source] * n as f64 / total;
                    for target in 0..load.len() {
                        let after = load[target] + flow_load;
                        if target == source
                            || load[target] >= FULL
                            || load[target] + MIN_GAP >= load[source]
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
                if ledger.in_flight(flow) == 0 {
                    self.finish_move(flow, ledger, released);
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
    fn a_paused_flow_is_held_until_its_events_have_left_then_follows_in_order() {
        let (mut ledger, mut dsw) = (Ledger::new(2), DswAtomic::new(2, 3));
        let first = ledger.dispatch(&mut dsw, ev(5, 0), 0).unwrap().worker;
        let target = 1 - first;
        dsw.paused.insert(5, (target, Vec::new()));
        assert_eq!(ledger.dispatch(&mut dsw, ev(5, 1), 0), None);
        assert_eq!(ledger.dispatch(&mut dsw, ev(5, 2), 0), None);
        let mut released = Vec::new();
        ledger.complete(&mut dsw, &ev(5, 0), first, 0, &mut released);
        assert_eq!(
            released.iter().map(|p| (p.event.seq, p.worker)).collect::<Vec<_>>(),
            vec![(1, target), (2, target)]
        );
        assert_eq!(ledger.in_flight(5), 2, "released events are counted in");
        assert_eq!(ledger.dispatch(&mut dsw, ev(5, 3), 0).map(|p| p.worker), Some(target));
    }
}
