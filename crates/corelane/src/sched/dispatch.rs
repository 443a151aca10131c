//! The dispatcher: one scheduling policy (`policy/`, named by [`Kind`]) and the books every
//! policy reads (`ledger`). [`Dispatcher::dispatch`] answers with a [`Assignment`]: the worker
//! and the event stamped with all the worker and the books need, so nothing has to follow it.

pub use super::event::{Assignment, Event, EPOCH_NS};
use super::ledger::Ledger;
use super::policy::{Kind, Policy};

/// Decides which worker each event goes to; tracks what is in flight.
#[derive(Debug)]
pub struct Dispatcher {
    kind: Kind,
    ledger: Ledger,
    policy: Box<dyn Policy>,
}

impl Dispatcher {
    /// A dispatcher of `kind` over `workers` workers (at least one); `seed` fixes its random
    /// choices, so the same events get the same placements.
    pub fn new(kind: Kind, workers: usize, seed: u64) -> Self {
        let workers = workers.max(1);
        Self { kind, ledger: Ledger::new(workers), policy: kind.policy(workers, seed) }
    }

    /// The policy it dispatches by.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Flow migrations so far (DSW moves; Diffuser events sent off a flow's worker).
    pub fn migrations(&self) -> u64 {
        self.policy.migrations()
    }

    /// Where `event` goes, or `None` when its flow is paused (the event is held and comes
    /// back from `complete` once the flow has moved).
    pub fn dispatch(&mut self, event: Event, now_ns: u64) -> Option<Assignment> {
        self.ledger.arrived(&event);
        let placement = self.policy.place(event, now_ns, &self.ledger)?;
        self.ledger.count_in(&placement);
        Some(placement)
    }

    /// `event` left `worker`. Events released by a finished migration are appended to
    /// `released`, in order.
    pub fn complete(
        &mut self,
        event: &Event,
        worker: usize,
        now_ns: u64,
        released: &mut Vec<Assignment>,
    ) {
        self.ledger.count_out(event, worker);
        let from = released.len();
        self.policy.completed(event, worker, now_ns, &self.ledger, released);
        for placement in &released[from..] {
            self.ledger.count_in(placement);
        }
    }

    /// Called every [`EPOCH_NS`] with each worker's busy fraction over the epoch; events
    /// released by a migration are appended to `released`.
    pub fn epoch(&mut self, busy: &[f64], now_ns: u64, released: &mut Vec<Assignment>) {
        let from = released.len();
        self.policy.epoch(busy, now_ns, &self.ledger, released);
        for placement in &released[from..] {
            self.ledger.count_in(placement);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(flow: u32, seq: u64) -> Event {
        Event { charge_ns: 100, ..Event::new(flow, seq, 0, 100, 100) }
    }

    fn worker(d: &mut Dispatcher, flow: u32, seq: u64) -> Option<usize> {
        d.dispatch(ev(flow, seq), 0).map(|p| p.worker)
    }

    #[test]
    fn rss_keeps_a_flow_on_one_worker() {
        let mut d = Dispatcher::new(Kind::Rss, 8, 1);
        let w: Vec<Option<usize>> = (0..100).map(|s| worker(&mut d, 42, s)).collect();
        assert!(w[0].is_some() && w.iter().all(|x| *x == w[0]));
    }

    #[test]
    fn dsw_parallel_sprays_round_robin() {
        let mut d = Dispatcher::new(Kind::DswParallel, 4, 1);
        let w: Vec<Option<usize>> = (0..8).map(|s| worker(&mut d, 1, s)).collect();
        assert_eq!(w, [1, 2, 3, 0, 1, 2, 3, 0].map(Some));
    }

    #[test]
    fn a_placement_carries_the_event_charged_its_flow_s_mean_cost() {
        let mut d = Dispatcher::new(Kind::Spray, 3, 1);
        let p = d.dispatch(Event::new(7, 0, 5, 300, 40), 5).unwrap();
        assert!(p.worker < 3);
        assert_eq!(p.event, Event { charge_ns: 40, ..Event::new(7, 0, 5, 300, 40) });
    }
}
