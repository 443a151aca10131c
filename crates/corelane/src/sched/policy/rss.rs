//! `rss`: a static flow hash, as a NIC's receive-side scaling spreads flows over queues. Never
//! reorders, never balances.

use super::{Assignment, Event, Ledger, Policy};

#[derive(Debug)]
pub(crate) struct Rss;

impl Policy for Rss {
    fn new(_workers: usize, _seed: u64) -> Self {
        Rss
    }

    fn place(&mut self, event: Event, _now_ns: u64, ledger: &Ledger) -> Option<Assignment> {
        let worker = (event.flow.wrapping_mul(0x9E37_79B1) >> 7) as usize % ledger.workers();
        Some(ledger.at_mean_cost(worker, event))
    }
}
