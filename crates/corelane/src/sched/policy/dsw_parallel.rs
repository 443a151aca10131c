//! `dsw-parallel`: DPDK's DSW on parallel queues, where order is not kept: events go
//! round-robin, no flow is ever paused.

use super::{Assignment, Event, Ledger, Policy};

#[derive(Debug)]
pub(crate) struct DswParallel {
    /// The worker the latest event went to.
    last: usize,
}

impl Policy for DswParallel {
    fn new(_workers: usize, _seed: u64) -> Self {
        Self { last: 0 }
    }

    fn place(&mut self, event: Event, _now_ns: u64, ledger: &Ledger) -> Option<Assignment> {
        self.last = (self.last + 1) % ledger.workers();
        Some(ledger.at_mean_cost(self.last, event))
    }
}
