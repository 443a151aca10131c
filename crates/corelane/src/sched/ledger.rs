//! The books the dispatcher keeps around every call to its policy, and that every policy
//! reads: each flow's mean visible cost and events in flight, each worker's outstanding
//! events. A policy decides; the ledger counts what it decided in and out.

use super::event::{Assignment, Event};
use super::flowmap::FlowMap;

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
    pub fn at_mean_cost(&self, worker: usize, event: Event) -> Assignment {
        let charge_ns = self.mean_cost(event.flow).round() as u32;
        Assignment { worker, event: Event { not_before_ns: 0, charge_ns, due_ns: 0, ..event } }
    }

    /// Books an arriving event: its flow's mean visible cost moves toward it.
    pub(crate) fn arrived(&mut self, event: &Event) {
        let visible = event.visible_cost_ns as f64;
        let mean = self.mean_cost.get_or_insert_with(event.flow, || visible);
        *mean += (visible - *mean) / 16.0;
    }

    /// Books `event` as done on `worker`.
    pub(crate) fn count_out(&mut self, event: &Event, worker: usize) {
        self.outstanding[worker] = self.outstanding[worker].saturating_sub(1);
        let left = self.in_flight.get_or_insert_with(event.flow, || 1);
        *left = left.saturating_sub(1);
    }

    /// Books a placement as in flight on its worker.
    pub(crate) fn count_in(&mut self, placement: &Assignment) {
        *self.in_flight.get_or_insert_with(placement.event.flow, || 0) += 1;
        self.outstanding[placement.worker] += 1;
    }
}
