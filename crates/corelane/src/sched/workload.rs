//! The traffic a scheduler is tried on: which flow each event belongs to and what it costs a
//! worker. Deterministic for a seed, so simulations can be compared and snapshotted.

use serde::Serialize;

use super::ConfigError;

/// The most flows a workload may have: as many as a UDP receiver tracks.
const MAX_FLOWS: usize = super::MAX_TRACKED_FLOWS;

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

    /// Refuses shapes no event can be drawn from (no flow, weights that are not numbers).
    pub fn check(&self) -> Result<(), ConfigError> {
        match *self {
            Workload::Uniform { flows: 0 }
            | Workload::Zipf { flows: 0, .. }
            | Workload::Elephant { mice: 0, .. } => Err(ConfigError::NoFlows),
            Workload::Uniform { flows }
            | Workload::Zipf { flows, .. }
            | Workload::Elephant { mice: flows, .. }
                if flows as usize > MAX_FLOWS =>
            {
                Err(ConfigError::OutOfRange {
                    what: "the number of flows",
                    value: f64::from(flows),
                    fix: "use at most 65536 (the flows a receiver tracks)",
                })
            }
            Workload::Zipf { s, .. } if !(0.0..=100.0).contains(&s) => {
                Err(ConfigError::OutOfRange {
                    what: "the Zipf exponent",
                    value: s,
                    fix: "use 0 to 100 (1.1 is typical)",
                })
            }
            Workload::Elephant { share, .. } if !(0.0..1.0).contains(&share) => {
                Err(ConfigError::OutOfRange {
                    what: "the elephant's share",
                    value: share,
                    fix: "use at least 0 and less than 1",
                })
            }
            _ => Ok(()),
        }
    }

    /// Relative rates of the flows.
    fn weights(&self) -> Vec<f64> {
        match *self {
            Workload::Uniform { flows } => vec![1.0; flows as usize],
            Workload::Zipf { flows, s } => (1..=flows).map(|k| 1.0 / (k as f64).powf(s)).collect(),
            Workload::Elephant { mice, share } => {
                let mut w = vec![(1.0 - share) / mice as f64; mice as usize];
                w.insert(0, share);
                w
            }
            Workload::TenFlows => vec![1.0; 10],
            Workload::OneFlow => vec![1.0],
        }
    }
}

/// Walker's alias table: a flow in O(1) per draw (a binary search over 1,024 cumulative
/// weights cost the threaded producer more than the scheduling it stands beside). Written
/// here because the crate we draw with (fastrand) has no weighted sampling.
#[derive(Debug)]
struct AliasTable {
    /// Per slot: the chance of keeping the slot's own flow, else its alias.
    keep: Vec<f64>,
    alias: Vec<u32>,
}

impl AliasTable {
    fn new(weights: &[f64]) -> Self {
        let n = weights.len();
        let total: f64 = weights.iter().sum();
        let mut scaled: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
        let (mut small, mut large): (Vec<usize>, Vec<usize>) =
            (0..n).partition(|&i| scaled[i] < 1.0);
        let mut keep = vec![1.0; n];
        let mut alias: Vec<u32> = (0..n as u32).collect();
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            keep[s] = scaled[s];
            alias[s] = l as u32;
            scaled[l] -= 1.0 - scaled[s];
            if scaled[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        Self { keep, alias }
    }

    fn draw(&self, rng: &mut fastrand::Rng) -> usize {
        let slot = rng.usize(..self.keep.len());
        if rng.f64() < self.keep[slot] {
            slot
        } else {
            self.alias[slot] as usize
        }
    }
}

/// Draws events of a workload: flow ids and per-event service costs.
#[derive(Debug)]
pub struct Source {
    flows: AliasTable,
    rng: fastrand::Rng,
    next_seq: Vec<u64>,
    /// Mean service cost of an event, in ns. An event's cost has a part that follows from
    /// what the dispatcher can see (a packet's length: 0.5–1.5x the mean) and a jitter it
    /// cannot (cache and branch effects: ±10 %).
    pub mean_cost_ns: f64,
}

impl Source {
    pub fn new(workload: Workload, mean_cost_ns: f64, seed: u64) -> Result<Self, ConfigError> {
        workload.check()?;
        let flows = AliasTable::new(&workload.weights());
        let count = flows.keep.len();
        Ok(Self {
            flows,
            rng: fastrand::Rng::with_seed(seed),
            next_seq: vec![0; count],
            mean_cost_ns,
        })
    }

    pub fn flows(&self) -> usize {
        self.flows.keep.len()
    }

    /// The next event's flow, its sequence number in that flow, its cost and the part of the
    /// cost visible at dispatch, in ns.
    pub fn draw(&mut self) -> (u32, u64, u32, u32) {
        let flow = self.flows.draw(&mut self.rng);
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
            let mut s = Source::new(w, 100.0, 7).unwrap();
            (0..10_000).map(|_| s.draw()).collect::<Vec<_>>()
        };
        assert_eq!(draw(Workload::TenFlows), draw(Workload::TenFlows));
        let elephant = draw(Workload::Elephant { mice: 256, share: 0.5 });
        let big = elephant.iter().filter(|e| e.0 == 0).count();
        assert!((4500..5500).contains(&big), "{big}");
        let zipf = draw(Workload::Zipf { flows: 1024, s: 1.1 });
        let harmonic: f64 = (1..=1024).map(|k| 1.0 / (k as f64).powf(1.1)).sum();
        for (flow, expected) in [(0u32, 1.0 / harmonic), (1, 2f64.powf(-1.1) / harmonic)] {
            let share = zipf.iter().filter(|e| e.0 == flow).count() as f64 / 10_000.0;
            assert!((share - expected).abs() < 0.02, "flow {flow}: {share} vs {expected}");
        }
        let one = draw(Workload::OneFlow);
        assert!(one.iter().enumerate().all(|(i, e)| e.0 == 0 && e.1 == i as u64));
        assert!(one.iter().all(|e| (45..=165).contains(&e.2) && (50..=150).contains(&e.3)));
    }

    /// `Uniform { flows: 0 }` used to panic at the first draw, `flows: u32::MAX` to try to
    /// allocate 32 GiB of weights, a NaN share to draw from NaN weights.
    #[test]
    fn shapes_without_a_flow_or_a_number_are_refused() {
        for w in [
            Workload::Uniform { flows: 0 },
            Workload::Uniform { flows: u32::MAX },
            Workload::Zipf { flows: 10, s: f64::NAN },
            Workload::Elephant { mice: 0, share: 0.5 },
            Workload::Elephant { mice: 10, share: 1.0 },
            Workload::Elephant { mice: 10, share: f64::NAN },
        ] {
            assert!(Source::new(w, 100.0, 7).is_err(), "{w:?}");
        }
        for w in Workload::ALL {
            assert!(w.check().is_ok(), "{w:?}");
        }
    }
}
