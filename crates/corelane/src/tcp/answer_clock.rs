//! When the requests whose answers are not yet written were parsed, per connection, so that
//! each request's duration (parsed → its answer's last byte handed to the kernel) goes into
//! the lane's histogram ([`ServerCounters::observe`]) once its answer is out.
//!
//! Requests are parsed in rounds, one per lane wake-up that answered any (the lane's clock of
//! that wake-up); a connection keeps up to [`ROUNDS`] rounds queued, in order, and (on
//! io_uring) the rounds of the send in flight. A peer that leaves more rounds unread has its
//! later requests counted from the last round kept: never shorter than they took. An answer
//! never written (the connection failed or was closed first) is never counted.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::counters::ServerCounters;

/// Rounds a connection tells apart.
pub(crate) const ROUNDS: usize = 3;

/// One round: its clock (ns since [`epoch`]) and its requests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Round {
    at_ns: u64,
    requests: u32,
}

/// Rounds in order, the oldest first.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Rounds {
    rounds: [Round; ROUNDS],
    len: u8,
}

impl Rounds {
    fn push(&mut self, at_ns: u64) {
        let len = usize::from(self.len);
        match len.checked_sub(1).map(|last| &mut self.rounds[last]) {
            Some(last) if last.at_ns == at_ns || len == ROUNDS => {
                last.requests = last.requests.saturating_add(1);
            }
            _ => {
                self.rounds[len] = Round { at_ns, requests: 1 };
                self.len += 1;
            }
        }
    }

    /// Counts every round as written at `at_ns`, and empties.
    fn observe(&mut self, at_ns: u64, counters: &ServerCounters) {
        for round in &self.rounds[..usize::from(self.len)] {
            counters.observe(at_ns.saturating_sub(round.at_ns), u64::from(round.requests));
        }
        self.len = 0;
    }
}

/// A connection's requests whose answers are not yet written.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AnswerClock {
    queued: Rounds,
    /// In the io_uring send in flight.
    flying: Rounds,
}

/// The clock every round is read against: a minute before its first use in the process, so
/// that no clock a lane read before that use (its wake-up's, taken before it parsed the first
/// request) comes out before it and counts as 0 (which made a round look shorter than it was).
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(|| {
        let now = Instant::now();
        now.checked_sub(Duration::from_secs(60)).unwrap_or(now)
    })
}

fn ns_of(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(epoch()).as_nanos()).unwrap_or(u64::MAX)
}

impl AnswerClock {
    /// A request parsed (and its answer queued) at `now`, the lane's clock of this wake-up.
    #[inline]
    pub fn answered(&mut self, now: Instant) {
        self.queued.push(ns_of(now));
    }

    /// Whether any answer waits to be written.
    #[inline]
    pub fn is_waiting(&self) -> bool {
        self.queued.len > 0 || self.flying.len > 0
    }

    /// Everything queued is written now (a synchronous write took the last byte).
    pub fn written(&mut self, now: Instant, counters: &ServerCounters) {
        let at = ns_of(now);
        self.flying.observe(at, counters);
        self.queued.observe(at, counters);
    }

    /// Everything queued is in the send now submitted (io_uring: one send in flight).
    pub fn send_begins(&mut self) {
        debug_assert_eq!(self.flying.len, 0, "one send in flight at a time");
        self.flying = self.queued;
        self.queued.len = 0;
    }

    /// The send in flight is done, its last byte handed to the kernel by `now`.
    pub fn sent(&mut self, now: Instant, counters: &ServerCounters) {
        self.flying.observe(ns_of(now), counters);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn counted(counters: &ServerCounters) -> Vec<(usize, u64)> {
        let (buckets, _) = counters.durations();
        buckets.iter().copied().enumerate().filter(|&(_, n)| n > 0).collect()
    }

    #[test]
    fn each_round_is_timed_from_its_own_parse() {
        let counters = ServerCounters::default();
        let t0 = Instant::now();
        let mut clock = AnswerClock::default();
        clock.answered(t0);
        clock.answered(t0);
        clock.answered(t0 + Duration::from_millis(2));
        assert!(clock.is_waiting());
        clock.written(t0 + Duration::from_millis(3), &counters);
        assert!(!clock.is_waiting());
        // Two requests took 3 ms (≤ 5 ms: bucket 8), one took 1 ms (≤ 1 ms: bucket 6).
        assert_eq!(counted(&counters), vec![(6, 1), (8, 2)]);
        assert_eq!(counters.durations().1, 2 * 3_000_000 + 1_000_000);
    }

    #[test]
    fn a_clock_read_before_the_epochs_first_use_still_counts_from_it() {
        let before = Instant::now();
        std::thread::sleep(Duration::from_millis(1));
        assert!(ns_of(before) > 0, "read before the epoch was set, it must not saturate");
        assert!(ns_of(before + Duration::from_micros(20)) - ns_of(before) == 20_000);
    }

    #[test]
    fn a_send_in_flight_counts_only_what_it_carries() {
        let counters = ServerCounters::default();
        let t0 = Instant::now();
        let mut clock = AnswerClock::default();
        clock.answered(t0);
        clock.send_begins();
        clock.answered(t0 + Duration::from_secs(1));
        clock.sent(t0 + Duration::from_micros(20), &counters);
        assert_eq!(counted(&counters), vec![(1, 1)], "20 µs: the ≤ 25 µs bucket");
        assert!(clock.is_waiting(), "the later request waits for its own send");
        clock.send_begins();
        clock.sent(t0 + Duration::from_secs(12), &counters);
        assert_eq!(counted(&counters), vec![(1, 1), (19, 1)], "11 s: beyond 10 s");
    }

    #[test]
    fn rounds_beyond_the_kept_ones_count_from_the_last() {
        let counters = ServerCounters::default();
        let t0 = Instant::now();
        let mut clock = AnswerClock::default();
        for ms in 0..5u64 {
            clock.answered(t0 + Duration::from_millis(ms * 100));
        }
        clock.written(t0 + Duration::from_millis(400), &counters);
        let (buckets, sum) = counters.durations();
        assert_eq!(buckets.iter().sum::<u64>(), 5, "every request counted once");
        // 400, 300 ms, then 200 ms for the last three (kept as the third round): never shorter.
        assert_eq!(sum, (400 + 300 + 3 * 200) * 1_000_000);
    }
}
