//! The traffic a scheduler is tried on: which flow each event belongs to and what it costs a
//! worker. Deterministic for a seed, so simulations can be compared and snapshotted.

use serde::Serialize;

/// A traffic shape.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// `flows` flows of equal rate.
    Uniform { flows: u32 },
    /// `flows` flows whose rates follow Zipf's law with exponent `s`.
    Zipf { flows: u32, s: f64 },
    /// One flow carrying `share` of the events among `mice` small flows.
    Elephant { mice: u32, share: f64 },
    /// Ten flows of equal rate (Diffuser's headline case).
    TenFlows,
    /// A single flow.
    OneFlow,
}

impl Workload {
    /// The workloads `lab sched` runs, in table order.
    pub const ALL: [Workload; 5] = [
        Workload::Uniform { flows: 1024 },
        Workload::Zipf { flows: 1024, s: 1.1 },
        Workload::Elephant { mice: 256, share: 0.5 },
        Workload::TenFlows,
        Workload::OneFlow,
    ];

    pub fn name(&self) -> &'static str {
        match self {
            Workload::Uniform { .. } => "uniform",
            Workload::Zipf { .. } => "zipf",
            Workload::Elephant { .. } => "elephant",
            Workload::TenFlows => "10-flows",
            Workload::OneFlow => "1-flow",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|w| w.name() == name)
    }

    /// Cumulative weights of the flows, for sampling.
    fn weights(&self) -> Vec<f64> {
        let w: Vec<f64> = match *self {
            Workload::Uniform { flows } => vec![1.0; flows as usize],
            Workload::Zipf { flows, s } => (1..=flows).map(|k| 1.0 / (k as f64).powf(s)).collect(),
            Workload::Elephant { mice, share } => {
                let mut w = vec![(1.0 - share) / mice as f64; mice as usize];
                w.insert(0, share);
                w
            }
            Workload::TenFlows => vec![1.0; 10],
            Workload::OneFlow => vec![1.0],
        };
        let total: f64 = w.iter().sum();
        let mut acc = 0.0;
        w.iter()
            .map(|x| {
                acc += x / total;
                acc
            })
            .collect()
    }
}

/// Draws events of a workload: flow ids and per-event service costs.
#[derive(Debug)]
pub struct Source {
    cumulative: Vec<f64>,
    rng: fastrand::Rng,
    next_seq: Vec<u64>,
    /// Mean service cost of an event, in ns. An event's cost has a part that follows from
    /// what the dispatcher can see (a packet's length: 0.5–1.5x the mean) and a jitter it
    /// cannot (cache and branch effects: ±10 %).
    pub mean_cost_ns: f64,
}

impl Source {
    pub fn new(workload: Workload, mean_cost_ns: f64, seed: u64) -> Self {
        let cumulative = workload.weights();
        let flows = cumulative.len();
        Self {
            cumulative,
            rng: fastrand::Rng::with_seed(seed),
            next_seq: vec![0; flows],
            mean_cost_ns,
        }
    }

    pub fn flows(&self) -> usize {
        self.cumulative.len()
    }

    /// The next event's flow, its sequence number in that flow, its cost and the part of the
    /// cost visible at dispatch, in ns.
    pub fn draw(&mut self) -> (u32, u64, u32, u32) {
        let u = self.rng.f64();
        let flow = self.cumulative.partition_point(|&c| c < u).min(self.cumulative.len() - 1);
        let seq = self.next_seq[flow];
        self.next_seq[flow] += 1;
        let visible = self.mean_cost_ns * (0.5 + self.rng.f64());
        let cost = visible * (0.9 + 0.2 * self.rng.f64());
        (flow as u32, seq, cost.max(1.0) as u32, visible.max(1.0) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_deterministic_and_follow_their_shares() {
        let draw = |w| {
            let mut s = Source::new(w, 100.0, 7);
            (0..10_000).map(|_| s.draw()).collect::<Vec<_>>()
        };
        assert_eq!(draw(Workload::TenFlows), draw(Workload::TenFlows));
        let elephant = draw(Workload::Elephant { mice: 256, share: 0.5 });
        let big = elephant.iter().filter(|e| e.0 == 0).count();
        assert!((4500..5500).contains(&big), "{big}");
        let one = draw(Workload::OneFlow);
        assert!(one.iter().enumerate().all(|(i, e)| e.0 == 0 && e.1 == i as u64));
        assert!(one.iter().all(|e| (45..=165).contains(&e.2) && (50..=150).contains(&e.3)));
    }
}
