//! `spray`: every event to the less loaded of two random workers (power of two choices).
//! Balances, reorders.

use super::{Assignment, Event, Ledger, Policy};

#[derive(Debug)]
pub(crate) struct Spray {
    rng: fastrand::Rng,
}

impl Policy for Spray {
    fn new(_workers: usize, seed: u64) -> Self {
        Self { rng: fastrand::Rng::with_seed(seed) }
    }

    fn place(&mut self, event: Event, _now_ns: u64, ledger: &Ledger) -> Option<Assignment> {
        Some(ledger.at_mean_cost(ledger.least_of_two(&mut self.rng), event))
    }
}
