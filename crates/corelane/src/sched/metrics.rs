//! What a scheduler is judged by: reordering at the egress point (RFC 4737), balance over
//! the workers (coefficient of variation, max/mean − 1, Jain's index) and latency.

use super::flowmap::FlowMap;

use serde::Serialize;

/// RFC 4737 reordering of the events of every flow, fed in arrival order at the egress.
///
/// Per flow, NextExp starts at the first sequence number; an event with s ≥ NextExp is in
/// order and sets NextExp = s + 1, otherwise it is reordered. Its extent is i − j, where i is
/// its arrival index and j the earliest earlier arrival with a larger sequence number; it is
/// n-reordered when at least n earlier arrivals have larger sequence numbers (n = 3 triggers
/// TCP's fast retransmit).
#[derive(Debug, Default)]
pub struct ReorderMeter {
    flows: FlowMap<FlowOrder>,
    events: u64,
    reordered: u64,
    extent_sum: u64,
    extent_max: u64,
    n_reordered: u64,
}

#[derive(Debug, Default)]
struct FlowOrder {
    next_exp: u64,
    /// Arrivals of this flow since a sequence number was first skipped, as (sequence,
    /// arrival index), for extents: only a skipped number can arrive late, and every arrival
    /// larger than it came after the skip. Empty while nothing is missing (in-order flows
    /// cost no memory); only the recent window is kept (reordering beyond it counts with the
    /// window's extent).
    recent: std::collections::VecDeque<(u64, u64)>,
    /// Sequence numbers skipped and not yet arrived (those below the first arrival count:
    /// they too can arrive late).
    missing: u64,
    arrivals: u64,
}

/// Arrivals remembered per flow for extents: reordering further back is rare and capped.
const WINDOW: usize = 1024;
/// n of n-reordering (RFC 4737 section 5.1): 3, the duplicate-ACK threshold.
pub const N_REORDER: usize = 3;

impl ReorderMeter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the arrival of `seq` of `flow`.
    pub fn record(&mut self, flow: u32, seq: u64) {
        self.events += 1;
        let f = self.flows.get_or_insert_with(flow, || FlowOrder {
            next_exp: seq,
            missing: seq,
            ..Default::default()
        });
        let index = f.arrivals;
        f.arrivals += 1;
        if seq >= f.next_exp {
            f.missing = f.missing.saturating_add(seq - f.next_exp);
            // Saturates at u64::MAX: after it, a repeated u64::MAX counts as in order.
            f.next_exp = seq.saturating_add(1);
        } else {
            f.missing = f.missing.saturating_sub(1);
            self.reordered += 1;
            // Earliest earlier arrival with a larger sequence number, and how many there are.
            let mut earliest = None;
            let mut larger = 0usize;
            for &(s, i) in &f.recent {
                if s > seq {
                    larger += 1;
                    if earliest.is_none() {
                        earliest = Some(i);
                    }
                }
            }
            let extent = earliest.map_or(WINDOW as u64, |j| index - j);
            self.extent_sum += extent;
            self.extent_max = self.extent_max.max(extent);
            if larger >= N_REORDER {
                self.n_reordered += 1;
            }
        }
        if f.missing == 0 {
            f.recent.clear();
            return;
        }
        f.recent.push_back((seq, index));
        if f.recent.len() > WINDOW {
            f.recent.pop_front();
        }
    }

    pub fn report(&self) -> ReorderReport {
        let ratio = |n: u64| if self.events == 0 { 0.0 } else { n as f64 / self.events as f64 };
        ReorderReport {
            events: self.events,
            reordered: self.reordered,
            reorder_ratio: ratio(self.reordered),
            mean_extent: if self.reordered == 0 {
                0.0
            } else {
                self.extent_sum as f64 / self.reordered as f64
            },
            max_extent: self.extent_max,
            n_reordered_ratio: ratio(self.n_reordered),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct ReorderReport {
    pub events: u64,
    pub reordered: u64,
    /// Reordered events / events (RFC 4737's reordered packet ratio).
    pub reorder_ratio: f64,
    pub mean_extent: f64,
    pub max_extent: u64,
    /// Events with at least N_REORDER earlier arrivals of larger sequence numbers, / events.
    pub n_reordered_ratio: f64,
}

/// How evenly work was spread over workers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Balance {
    /// Standard deviation / mean.
    pub cov: f64,
    /// max / mean − 1.
    pub max_over_mean: f64,
    /// (Σx)² / (n·Σx²): 1 when even, 1/n when one worker does everything.
    pub jain: f64,
}

impl Balance {
    pub fn of(work: &[f64]) -> Self {
        let n = work.len() as f64;
        let sum: f64 = work.iter().sum();
        if work.is_empty() || sum <= 0.0 {
            return Self::default();
        }
        let mean = sum / n;
        let var = work.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        let max = work.iter().cloned().fold(f64::MIN, f64::max);
        let squares: f64 = work.iter().map(|x| x * x).sum();
        Self {
            cov: var.sqrt() / mean,
            max_over_mean: max / mean - 1.0,
            jain: sum * sum / (n * squares),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meter(seqs: &[u64]) -> ReorderReport {
        let mut m = ReorderMeter::new();
        for &s in seqs {
            m.record(7, s);
        }
        m.report()
    }

    /// Sequence numbers come from the network (`udp recv --dispatch`): `u64::MAX` used to
    /// overflow `seq + 1`.
    #[test]
    fn the_largest_sequence_numbers_do_not_overflow() {
        let r = meter(&[0, u64::MAX - 1, u64::MAX, u64::MAX, 5]);
        assert_eq!((r.events, r.reordered), (5, 1));
    }

    #[test]
    fn in_order_arrivals_are_not_reordered() {
        let r = meter(&[1, 2, 3, 4, 5]);
        assert_eq!((r.reordered, r.max_extent), (0, 0));
    }

    #[test]
    fn rfc4737_examples() {
        // RFC 4737 section 4.2 style: 1 2 4 5 3 — packet 3 is reordered; the earliest earlier
        // arrival with a larger number is 4 (arrival index 2), 3 arrives at index 4: extent 2;
        // two larger earlier arrivals (4 and 5): not 3-reordered.
        let r = meter(&[1, 2, 4, 5, 3]);
        assert_eq!(r.reordered, 1);
        assert_eq!(r.max_extent, 2);
        assert_eq!(r.n_reordered_ratio, 0.0);
        // 1 5 2 3 4: NextExp jumps to 6 at 5, so 2, 3 and 4 are all reordered (extents 1, 2, 3).
        let r = meter(&[1, 5, 2, 3, 4]);
        assert_eq!(r.reordered, 3);
        assert_eq!(r.mean_extent, 2.0);
        assert!((r.reorder_ratio - 0.6).abs() < 1e-12);
        // 4 5 6 1 ... wait: the first arrival sets NextExp; 1 after 4 5 6 is 3-reordered.
        let r = meter(&[4, 5, 6, 1]);
        assert_eq!(r.reordered, 1);
        assert_eq!(r.max_extent, 3);
        assert!((r.n_reordered_ratio - 0.25).abs() < 1e-12);
    }

    /// RFC 4737 straight from its definitions, remembering every arrival.
    fn by_definition(seqs: &[u64]) -> (u64, u64, u64) {
        let (mut reordered, mut extent_sum, mut n_reordered) = (0, 0, 0);
        let mut next_exp = seqs[0];
        for (i, &s) in seqs.iter().enumerate() {
            if s >= next_exp {
                next_exp = s + 1;
                continue;
            }
            reordered += 1;
            let larger: Vec<usize> = (0..i).filter(|&j| seqs[j] > s).collect();
            extent_sum += (i - larger[0]) as u64;
            if larger.len() >= N_REORDER {
                n_reordered += 1;
            }
        }
        (reordered, extent_sum, n_reordered)
    }

    proptest::proptest! {
        #[test]
        fn the_meter_agrees_with_the_definition(
            shuffles in proptest::collection::vec((0usize..200, 0usize..200), 0..60),
        ) {
            // A flow's numbers 0..200 with some pairs swapped: late arrivals of every extent.
            let mut seqs: Vec<u64> = (0..200).collect();
            for (a, b) in shuffles {
                seqs.swap(a, b);
            }
            let r = meter(&seqs);
            let n_reordered = (r.n_reordered_ratio * r.events as f64).round() as u64;
            let extent_sum = (r.mean_extent * r.reordered as f64).round() as u64;
            proptest::prop_assert_eq!((r.reordered, extent_sum, n_reordered), by_definition(&seqs));
        }
    }

    #[test]
    fn flows_are_judged_separately() {
        let mut m = ReorderMeter::new();
        for (flow, seq) in [(1, 1), (2, 10), (1, 2), (2, 11), (1, 3)] {
            m.record(flow, seq);
        }
        assert_eq!(m.report().reordered, 0);
    }

    #[test]
    fn balance_of_even_and_skewed_work() {
        let even = Balance::of(&[5.0, 5.0, 5.0, 5.0]);
        assert!(even.cov.abs() < 1e-12 && (even.jain - 1.0).abs() < 1e-12);
        let one = Balance::of(&[8.0, 0.0, 0.0, 0.0]);
        assert!((one.jain - 0.25).abs() < 1e-12);
        assert!((one.max_over_mean - 3.0).abs() < 1e-12);
    }
}
