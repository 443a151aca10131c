//! Per-flow sequence accounting at a receiver: distinct, duplicated, late (reordered) and
//! missing datagrams, in O(1) per datagram with a 128-sequence sliding window.

use serde::Serialize;

use super::UdpError;
use crate::stats::SequenceCounts;

pub use crate::sched::MAX_TRACKED_FLOWS;

const WINDOW: u64 = 128;

/// One flow's state: the highest sequence seen and which of the 128 up to it arrived. Kept as
/// the highest sequence rather than "highest + 1" so that `u64::MAX` needs no special case.
#[derive(Debug, Clone, Copy, Default)]
struct FlowWindow {
    /// Highest sequence seen (meaningless while `received == 0`).
    top: u64,
    /// Bit i set: sequence `top - i` arrived.
    seen: u128,
    received: u64,
    duplicates: u64,
    late: u64,
}

impl FlowWindow {
    fn record(&mut self, seq: u64) {
        if self.received == 0 || seq > self.top {
            let shift = if self.received == 0 { WINDOW } else { seq - self.top };
            self.seen = if shift >= WINDOW { 0 } else { self.seen << shift };
            self.seen |= 1;
            self.top = seq;
        } else {
            let back = self.top - seq;
            if back >= WINDOW {
                // Too old to tell a duplicate from a latecomer; counted as late.
                self.late += 1;
            } else if self.seen & (1 << back) != 0 {
                self.duplicates += 1;
            } else {
                self.seen |= 1 << back;
                self.late += 1;
            }
        }
        self.received += 1;
    }

    /// Whether `seq` is the next in order (the common case, which changes no figure but
    /// the received count).
    #[inline]
    fn is_next(&self, seq: u64) -> bool {
        self.received > 0 && seq > self.top && seq - self.top == 1
    }

    /// Sequences 0..=top that never arrived, as [`SequenceTracker::report`] counts them.
    fn missing(&self) -> u64 {
        if self.received == 0 {
            return 0;
        }
        let span = u128::from(self.top) + 1;
        let distinct = u128::from(self.received - self.duplicates);
        u64::try_from(span.saturating_sub(distinct)).unwrap_or(u64::MAX)
    }
}

/// Totals over all flows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SequenceReport {
    pub flows: u64,
    pub received: u64,
    pub duplicates: u64,
    /// Arrived after a higher sequence of the same flow (reordered), not duplicated.
    pub late: u64,
    /// Sequences below the highest seen that never arrived (senders start every flow at 0).
    pub missing: u64,
    pub untracked: u64,
}

/// Sequence windows for every flow one lane sees.
#[derive(Debug, Clone, Default)]
pub struct SequenceTracker {
    flows: Vec<FlowWindow>,
    untracked: u64,
    /// Over this lane's flows, what [`Self::report`] of this tracker alone would say, kept
    /// as datagrams arrive (out of order only: the next in order changes none of them) so
    /// that the lane can publish them while it runs.
    /// Missing over this lane's flows (a sum of up to 65 536 flows' u64s, so in u128).
    missing: u128,
    duplicates: u64,
    late: u64,
}

impl SequenceTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records datagram `seq` of `flow`.
    #[inline]
    pub fn record(&mut self, flow: u32, seq: u64) {
        let idx = flow as usize;
        if idx >= MAX_TRACKED_FLOWS {
            self.untracked += 1;
            return;
        }
        if idx >= self.flows.len() {
            self.flows.resize(idx + 1, FlowWindow::default());
        }
        let window = &mut self.flows[idx];
        if window.is_next(seq) {
            window.record(seq);
            return;
        }
        let (missing, duplicates, late) = (window.missing(), window.duplicates, window.late);
        window.record(seq);
        self.missing = self.missing - u128::from(missing) + u128::from(window.missing());
        self.duplicates += window.duplicates - duplicates;
        self.late += window.late - late;
    }

    /// Missing, duplicates and late over this lane's flows so far: equal to the run's report
    /// when no flow is split over lanes.
    #[inline]
    pub fn counts(&self) -> SequenceCounts {
        SequenceCounts {
            missing: u64::try_from(self.missing).unwrap_or(u64::MAX),
            duplicates: self.duplicates,
            late: self.late,
        }
    }

    /// Merges the trackers of several lanes that may have seen parts of the same flows (a
    /// shared socket): per flow, distinct counts add up and the highest sequence is the max.
    /// Duplicates split across lanes cannot be seen here; within a lane they are.
    pub fn report(lanes: &[&SequenceTracker]) -> SequenceReport {
        let n = lanes.iter().map(|t| t.flows.len()).max().unwrap_or(0);
        let mut r = Self::report_flows(lanes, 0..n);
        r.untracked = lanes.iter().map(|t| t.untracked).sum();
        r
    }

    /// [`Self::report`] for one group of flows (no untracked count: those have no flow id
    /// the receiver keeps).
    pub fn report_group(lanes: &[&SequenceTracker], group: FlowGroup) -> SequenceReport {
        let end = (group.last as usize + 1).min(MAX_TRACKED_FLOWS);
        Self::report_flows(lanes, (group.first as usize).min(end)..end)
    }

    fn report_flows(lanes: &[&SequenceTracker], flows: std::ops::Range<usize>) -> SequenceReport {
        let mut r = SequenceReport::default();
        for flow in flows {
            // Sequences 0..=top: up to 2^64 of them, so counted in u128.
            let (mut span, mut distinct, mut any) = (0u128, 0u128, false);
            for t in lanes {
                if let Some(w) = t.flows.get(flow).filter(|w| w.received > 0) {
                    any = true;
                    span = span.max(u128::from(w.top) + 1);
                    distinct += u128::from(w.received - w.duplicates);
                    r.received += w.received;
                    r.duplicates += w.duplicates;
                    r.late += w.late;
                }
            }
            if any {
                r.flows += 1;
                let missing = u64::try_from(span.saturating_sub(distinct)).unwrap_or(u64::MAX);
                r.missing = r.missing.saturating_add(missing);
            }
        }
        r
    }
}

/// The most flow groups a receiver reports apart (one per load host, with room).
pub const MAX_FLOW_GROUPS: usize = 64;

/// Flows `first..=last`: the ids one sender used (`udp send --first-flow F --flows N` is
/// `F-(F+N-1)`), so that a receiver fed by several senders can say what arrived from each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct FlowGroup {
    #[serde(rename = "first_flow")]
    pub first: u32,
    #[serde(rename = "last_flow")]
    pub last: u32,
}

impl FlowGroup {
    /// Groups a receiver can count apart: at most [`MAX_FLOW_GROUPS`], within the flow ids it
    /// tracks, none overlapping another (a datagram would count in both).
    pub fn check_all(groups: &[FlowGroup]) -> Result<(), UdpError> {
        if groups.len() > MAX_FLOW_GROUPS {
            return Err(UdpError::FlowGroups(groups.len()));
        }
        if let Some(g) = groups.iter().find(|g| g.last as usize >= MAX_TRACKED_FLOWS) {
            return Err(UdpError::FlowGroupUntracked(g.first, g.last));
        }
        let mut sorted = groups.to_vec();
        sorted.sort_by_key(|g| g.first);
        match sorted.windows(2).find(|w| w[1].first <= w[0].last) {
            Some(w) => {
                Err(UdpError::FlowGroupsOverlap(w[0].first, w[0].last, w[1].first, w[1].last))
            }
            None => Ok(()),
        }
    }
}

impl std::str::FromStr for FlowGroup {
    type Err = String;

    /// `F-L` or a single flow `F`.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("flow group {s:?}: write FIRST-LAST (e.g. 0-7) or one flow id");
        let (first, last) = s.split_once('-').unwrap_or((s, s));
        let first: u32 = first.trim().parse().map_err(|_| bad())?;
        let last: u32 = last.trim().parse().map_err(|_| bad())?;
        if last < first {
            return Err(format!("flow group {s:?} runs backwards: write the lower id first"));
        }
        Ok(Self { first, last })
    }
}

/// What arrived of one group of flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct FlowGroupReport {
    #[serde(flatten)]
    pub group: FlowGroup,
    #[serde(flatten)]
    pub sequence: SequenceReport,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report_of(seqs: &[(u32, u64)]) -> SequenceReport {
        let mut t = SequenceTracker::new();
        for &(f, s) in seqs {
            t.record(f, s);
        }
        SequenceTracker::report(&[&t])
    }

    /// The counts a lane publishes while it runs are the report's, datagram by datagram.
    #[test]
    fn running_counts_follow_the_report() {
        let seqs = [(0, 0), (0, 2), (0, 1), (0, 2), (0, 5), (1, 3), (1, 4), (0, 500), (0, 3)];
        let mut t = SequenceTracker::new();
        for (i, &(f, s)) in seqs.iter().enumerate() {
            t.record(f, s);
            let r = SequenceTracker::report(&[&t]);
            let c = t.counts();
            assert_eq!((c.missing, c.duplicates, c.late), (r.missing, r.duplicates, r.late), "{i}");
        }
        // Flow 0: 3, 4 and 6..=499 but 3 (late); flow 1: 0..=2.
        assert_eq!(t.counts().missing, 2 + 494 - 1 + 3);
    }

    #[test]
    fn in_order_flows_are_clean() {
        let seqs: Vec<_> = (0..1000).map(|s| ((s % 3) as u32, s / 3)).collect();
        let r = report_of(&seqs);
        assert_eq!((r.flows, r.received, r.duplicates, r.late, r.missing), (3, 1000, 0, 0, 0));
    }

    #[test]
    fn tells_loss_duplicates_and_reordering_apart() {
        let r = report_of(&[(0, 0), (0, 2), (0, 1), (0, 2), (0, 5)]);
        assert_eq!((r.duplicates, r.late, r.missing), (1, 1, 2));
    }

    #[test]
    fn far_late_arrivals_count_as_late() {
        let r = report_of(&[(0, 500), (0, 3)]);
        assert_eq!((r.late, r.duplicates), (1, 0));
    }

    #[test]
    fn merges_a_flow_split_over_lanes() {
        let (mut a, mut b) = (SequenceTracker::new(), SequenceTracker::new());
        for s in 0..100u64 {
            if s % 2 == 0 {
                a.record(7, s)
            } else {
                b.record(7, s)
            }
        }
        let r = SequenceTracker::report(&[&a, &b]);
        assert_eq!((r.flows, r.received, r.missing, r.duplicates), (1, 100, 0, 0));
    }

    /// `seq = u64::MAX` used to overflow `seq + 1` (a panic in debug builds, a wrap to 0 that
    /// turned every later datagram into a "late" one in release builds).
    #[test]
    fn the_largest_sequence_numbers_are_ordinary() {
        let r = report_of(&[(0, u64::MAX - 1), (0, u64::MAX), (0, u64::MAX), (0, u64::MAX - 2)]);
        assert_eq!((r.received, r.duplicates, r.late), (4, 1, 1));
        assert_eq!(r.missing, u64::MAX - 2, "0..=MAX-3 never arrived");
        let r = report_of(&[(1, u64::MAX), (1, 0)]);
        assert_eq!((r.duplicates, r.late), (0, 1));
    }

    proptest::proptest! {
        /// Any sequence numbers, in any order: no panic, and every datagram is counted once.
        #[test]
        fn any_sequences_are_accounted(seqs in proptest::collection::vec(
            (0u32..4, proptest::prop_oneof![proptest::num::u64::ANY, 0u64..300, (u64::MAX - 300)..=u64::MAX]),
            0..200,
        )) {
            let r = report_of(&seqs);
            proptest::prop_assert_eq!(r.received, seqs.len() as u64);
            proptest::prop_assert!(r.duplicates + r.late <= r.received);
            let mut t = SequenceTracker::new();
            seqs.iter().for_each(|&(f, s)| t.record(f, s));
            let c = t.counts();
            proptest::prop_assert_eq!((c.missing, c.duplicates, c.late), (r.missing, r.duplicates, r.late));
        }
    }

    #[test]
    fn a_group_counts_only_its_own_flows() {
        let mut a = SequenceTracker::new();
        let mut b = SequenceTracker::new();
        for seq in 0..10 {
            a.record(0, seq);
            b.record(5, seq);
        }
        a.record(5, 20); // flow 5 split over two lanes: 10..=19 never arrived
        a.record(70_000, 0); // beyond what is tracked: in no group
        let group = |s: &str| SequenceTracker::report_group(&[&a, &b], s.parse().unwrap());
        assert_eq!((group("0-3").received, group("0-3").missing, group("0-3").flows), (10, 0, 1));
        assert_eq!((group("4-7").received, group("4-7").missing), (11, 10));
        assert_eq!(group("6").received, 0);
        assert_eq!(group("60000-4294967295").received, 0, "no panic past the tracked flows");
        assert_eq!(group("0-4294967295").received, 21);
    }

    #[test]
    fn groups_that_cannot_be_counted_apart_are_refused() {
        let groups =
            |s: &str| -> Vec<FlowGroup> { s.split(',').map(|g| g.parse().unwrap()).collect() };
        assert!(FlowGroup::check_all(&groups("0-3,4-7,8")).is_ok());
        let err = |s: &str| FlowGroup::check_all(&groups(s)).unwrap_err().to_string();
        assert!(err("0-7,4-11").contains("overlap"), "{}", err("0-7,4-11"));
        assert!(err("8-9,0-8").contains("overlap"));
        assert!(err("0-3,65530-65536").contains("65535"));
        let many: Vec<FlowGroup> = (0..=64).map(|i| FlowGroup { first: i, last: i }).collect();
        assert!(FlowGroup::check_all(&many).unwrap_err().to_string().contains("at most 64"));
    }

    #[test]
    fn flow_groups_parse_or_name_the_fix() {
        assert_eq!("3-9".parse::<FlowGroup>(), Ok(FlowGroup { first: 3, last: 9 }));
        assert_eq!("4".parse::<FlowGroup>(), Ok(FlowGroup { first: 4, last: 4 }));
        assert!("9-3".parse::<FlowGroup>().unwrap_err().contains("backwards"));
        for bad in ["", "-", "a-b", "1-", "4294967296", "1-2-3"] {
            assert!(bad.parse::<FlowGroup>().unwrap_err().contains("FIRST-LAST"), "{bad:?}");
        }
    }

    #[test]
    fn huge_flow_ids_are_counted_not_tracked() {
        let r = report_of(&[(u32::MAX, 0)]);
        assert_eq!((r.untracked, r.flows), (1, 0));
    }
}
