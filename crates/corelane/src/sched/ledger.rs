//! The books the dispatcher keeps around every call to its policy, and that every policy
//! reads: each flow's mean visible cost and events in flight, each worker's outstanding
//! events. A policy decides; the ledger counts what it decided in and out.

use super::dispatch::{Event, Placement};
use super::flowmap::FlowMap;
use super::policy::Policy;

/// What is in flight, per flow and per worker, and what each flow's events cost.
#[derive(Debug)]
pub(crate) struct Ledger {
    /// Each flow's visible cost, a moving average over about 16 events.
    mean_cost: FlowMap<f64>,
    /// Events dispatched and not yet completed, per flow.
    in_flight: FlowMap<u32>,
    /// Events dispatched and not yet completed, per worker.
    outstanding: Vec<u64>,
}

impl Ledger {
    /// Empty books for `workers` workers (at least one).
    pub fn new(workers: usize) -> Self {
        Self {
            mean_cost: FlowMap::new(),
            in_flight: FlowMap::new(),
            outstanding: vec![0; workers.max(1)],
        }
    }

    /// How many workers it counts for.
    pub fn workers(&self) -> usize {
        self.outstanding.len()
    }

    /// The mean visible cost of `flow`'s events (0 for a flow never seen).
    pub fn mean_cost(&self, flow: u32) -> f64 {
        self.mean_cost.get(&flow).copied().unwrap_or(0.0)
    }

    /// `flow`'s events dispatched and not yet completed.
    pub fn in_flight(&self, flow: u32) -> u32 {
        self.in_flight.get(&flow).copied().unwrap_or(0)
    }

    /// `worker`'s events dispatched and not yet completed.
    pub fn outstanding(&self, worker: usize) -> u64 {
        self.outstanding[worker]
    }

    /// The less loaded (fewer outstanding events) of two random workers: the power of two
    /// choices.
    pub fn least_of_two(&self, rng: &mut fastrand::Rng) -> usize {
        let a = rng.usize(..self.workers());
        let b = rng.usize(..self.workers());
        if self.outstanding(b) < self.outstanding(a) {
            b
        } else {
            a
        }
    }

    /// `event` on `worker`, to start at once, charged its flow's mean cost (booked as the
    /// whole ns the event carries, so its completion takes back exactly that).
    pub fn at_mean_cost(&self, worker: usize, event: Event) -> Placement {
        let charge_ns = self.mean_cost(event.flow).round() as u32;
        Placement { worker, event: Event { not_before_ns: 0, charge_ns, due_ns: 0, ..event } }
    }

    /// Asks `policy` where `event` goes and counts it in.
    pub fn dispatch(
        &mut self,
        policy: &mut dyn Policy,
        event: Event,
        now_ns: u64,
    ) -> Option<Placement> {
        let visible = event.visible_cost_ns as f64;
        let mean = self.mean_cost.get_or_insert_with(event.flow, || visible);
        *mean += (visible - *mean) / 16.0;
        let placement = policy.place(event, now_ns, self)?;
        self.count_in(&placement);
        Some(placement)
    }

    /// Counts `event` out of `worker`, then tells `policy`; what it releases is counted in
    /// and appended to `released`.
    pub fn complete(
        &mut self,
        policy: &mut dyn Policy,
        event: &Event,
        worker: usize,
        now_ns: u64,
        released: &mut Vec<Placement>,
    ) {
        self.outstanding[worker] = self.outstanding[worker].saturating_sub(1);
        let left = self.in_flight.get_or_insert_with(event.flow, || 1);
        *left = left.saturating_sub(1);
        let from = released.len();
        policy.completed(event, worker, now_ns, self, released);
        for placement in &released[from..] {
            self.count_in(placement);
        }
    }

    /// Runs `policy`'s epoch; what it releases is counted in and appended to `released`.
    pub fn epoch(
        &mut self,
        policy: &mut dyn Policy,
        busy: &[f64],
        now_ns: u64,
        released: &mut Vec<Placement>,
    ) {
        let from = released.len();
        policy.epoch(busy, now_ns, self, released);
        for placement in &released[from..] {
            self.count_in(placement);
        }
    }

    fn count_in(&mut self, placement: &Placement) {
        *self.in_flight.get_or_insert_with(placement.event.flow, || 0) += 1;
        self.outstanding[placement.worker] += 1;
    }
}
