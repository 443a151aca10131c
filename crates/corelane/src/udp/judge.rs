//! Which datagrams an echo lane answers, whatever backend brought them: the source is checked
//! ([`source_check`](super::source_check)), each datagram classified and each request turned
//! into its reply in place ([`answer`](super::answer); a GRO buffer segment by segment, the
//! requests squeezed to the front), and the answers taken from the source address's token
//! bucket ([`budget`](super::budget)). Everything not answered is counted by reason.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::answer::{self, Verdict};
use super::budget::SourceBudget;
use super::source_check::{Refused, SourceCheck};
use super::Wire;
use crate::stats::LaneCounters;

/// Datagrams the echo did not answer, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    /// Already replies (corelane's reply magic, or a sockperf answer).
    pub dropped_replies: u64,
    /// sockperf messages that ask for no answer.
    pub dropped_not_asked: u64,
    /// Neither wire's request (or a wire `--wire` excludes), or no IP source address.
    pub dropped_unrecognised: u64,
    /// From the echo's own address and port, or an unspecified address.
    pub dropped_self: u64,
    /// From source port 0.
    pub dropped_port0: u64,
    /// Requests beyond their source address's budget, or from an address the full table
    /// could not take in yet.
    pub dropped_over_budget: u64,
}

impl Dropped {
    pub(super) fn add(&mut self, o: &Self) {
        self.dropped_replies += o.dropped_replies;
        self.dropped_not_asked += o.dropped_not_asked;
        self.dropped_unrecognised += o.dropped_unrecognised;
        self.dropped_self += o.dropped_self;
        self.dropped_port0 += o.dropped_port0;
        self.dropped_over_budget += o.dropped_over_budget;
    }

    fn refused(&mut self, why: Refused, datagrams: u64) {
        match why {
            Refused::Itself => self.dropped_self += datagrams,
            Refused::Port0 => self.dropped_port0 += datagrams,
        }
    }

    fn not_answered(&mut self, verdict: Verdict) {
        match verdict {
            Verdict::Answer => {}
            Verdict::Reply => self.dropped_replies += 1,
            Verdict::NotAsked => self.dropped_not_asked += 1,
            Verdict::Unrecognised => self.dropped_unrecognised += 1,
        }
    }
}

/// One echo lane's answering policy and what it refused.
#[derive(Debug)]
pub(super) struct Judge {
    /// Answer every Nth datagram received (`--reply-every`).
    reply_every: u64,
    seen: u64,
    wire: Option<Wire>,
    check: SourceCheck,
    budget: SourceBudget,
    /// The budget's clock starts with the lane.
    clock: Instant,
    pub dropped: Dropped,
}

impl Judge {
    pub fn new(
        reply_every: u64,
        wire: Option<Wire>,
        check: SourceCheck,
        budget: SourceBudget,
    ) -> Self {
        Self {
            reply_every,
            seen: 0,
            wire,
            check,
            budget,
            clock: Instant::now(),
            dropped: Dropped::default(),
        }
    }

    /// Nanoseconds on the lane's clock (the budget's), above 0; read once per batch.
    pub fn now(&self) -> u64 {
        u64::try_from(self.clock.elapsed().as_nanos()).unwrap_or(u64::MAX - 1) + 1
    }

    /// Counts one received message; true when `--reply-every` lets it be answered.
    #[inline]
    pub fn due(&mut self) -> bool {
        self.seen += 1;
        self.reply_every == 1 || self.seen % self.reply_every == 0
    }

    /// A datagram nobody may answer: one with no IP source address, or an empty one.
    pub fn unrecognised(&mut self, datagrams: u64) {
        self.dropped.dropped_unrecognised += datagrams;
    }

    /// Decides one received message from `source`: `data` holds `count` datagrams of
    /// `segment` bytes (a GRO buffer holds several; the last may be shorter). Each request
    /// becomes its reply in place, the rest are squeezed out, and the answers are taken from
    /// the source's budget. Returns how many datagrams go back and the bytes they fill.
    pub fn answer(
        &mut self,
        source: Option<SocketAddr>,
        data: &mut [u8],
        segment: usize,
        count: u64,
        now: u64,
    ) -> (u64, usize) {
        let Some(source) = source else {
            self.unrecognised(count);
            return (0, 0);
        };
        if let Some(why) = self.check.refuse(source) {
            self.dropped.refused(why, count);
            return (0, 0);
        }
        let (requests, len) = answer_segments(data, segment, self.wire, &mut self.dropped);
        if requests == 0 {
            return (0, 0);
        }
        let granted = self.budget.take(source.ip(), requests, now);
        self.dropped.dropped_over_budget += requests - granted;
        (granted, if granted == requests { len } else { granted as usize * segment })
    }
}

/// Classifies the `segment`-byte datagrams of `data` (one message, a GRO buffer holding
/// several), turning each request into its reply in place and moving the requests to the
/// front, in order, over what is not answered (counted in `dropped`). Returns the requests
/// and the bytes they now fill. Only the last datagram may be shorter than `segment`, so
/// the requests stay GSO segments of that size.
fn answer_segments(
    data: &mut [u8],
    segment: usize,
    wire: Option<Wire>,
    dropped: &mut Dropped,
) -> (u64, usize) {
    if data.len() <= segment {
        let verdict = answer::answer_in_place(data, wire);
        dropped.not_answered(verdict);
        return if verdict == Verdict::Answer { (1, data.len()) } else { (0, 0) };
    }
    let (mut requests, mut end, mut at) = (0u64, 0usize, 0usize);
    while at < data.len() {
        let next = (at + segment).min(data.len());
        let verdict = answer::answer_in_place(&mut data[at..next], wire);
        if verdict == Verdict::Answer {
            if end != at {
                data.copy_within(at..next, end);
            }
            end += next - at;
            requests += 1;
        } else {
            dropped.not_answered(verdict);
        }
        at = next;
    }
    (requests, end)
}

/// Replies per lane (datagrams and their payload bytes), read once a second and by a scrape.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct ReplyCounter {
    datagrams: AtomicU64,
    bytes: AtomicU64,
}

impl ReplyCounter {
    /// Datagrams answered.
    pub fn load(&self) -> u64 {
        self.datagrams.load(Ordering::Relaxed)
    }

    /// Payload bytes answered.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// What one echo lane counted.
#[derive(Debug)]
pub(super) struct EchoTally {
    counters: Arc<Vec<LaneCounters>>,
    replies: Arc<Vec<ReplyCounter>>,
    index: usize,
    pub syscalls: u64,
    pub send_errors: u64,
    pub truncated: u64,
    /// Datagrams answered so far, and their payload bytes.
    pub replied: u64,
    pub replied_bytes: u64,
}

impl EchoTally {
    pub fn new(
        counters: Arc<Vec<LaneCounters>>,
        replies: Arc<Vec<ReplyCounter>>,
        index: usize,
    ) -> Self {
        Self {
            counters,
            replies,
            index,
            syscalls: 0,
            send_errors: 0,
            truncated: 0,
            replied: 0,
            replied_bytes: 0,
        }
    }

    /// The end of a batch: what it received (and the batch's size, when it brought any) and
    /// what has been answered, published.
    #[inline]
    pub fn end_batch(&mut self, datagrams: u64, bytes: u64) {
        let lane = &self.counters[self.index];
        lane.add(datagrams, bytes);
        if datagrams > 0 {
            lane.add_batch(datagrams);
        }
        let replies = &self.replies[self.index];
        replies.datagrams.store(self.replied, Ordering::Relaxed);
        replies.bytes.store(self.replied_bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udp::{payload, sockperf};
    use proptest::prelude::*;

    fn request(flow: u32, seq: u64, len: usize) -> Vec<u8> {
        let mut d = vec![0u8; len];
        payload::prefill(&mut d);
        payload::write_header(&mut d, flow, seq);
        d
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// A GRO buffer of requests, replies and junk in any order: exactly the requests go
        /// back, each as its reply, in order, as segments of the size they came in.
        #[test]
        fn each_gro_segment_is_judged_on_its_own(
            kinds in proptest::collection::vec(0u8..4, 1..20),
            segment in 16usize..80,
            last_short in 0usize..16,
        ) {
            let mut data = Vec::new();
            let mut expect = Vec::new();
            for (k, kind) in kinds.iter().enumerate() {
                let len = if k + 1 == kinds.len() { segment - last_short } else { segment };
                let mut d = match kind {
                    0 | 1 => request(7, k as u64, len.max(payload::HEADER_LEN)),
                    2 => { let mut d = request(7, k as u64, len.max(payload::HEADER_LEN)); payload::answer_in_place(&mut d); d }
                    _ => vec![0x55; len],
                };
                d.truncate(len);
                if *kind == 1 && len >= sockperf::HEADER_LEN {
                    d = vec![0; len];
                    sockperf::write_request(&mut d, k as u64);
                }
                data.extend_from_slice(&d);
                let mut answered = d.clone();
                if answer::answer_in_place(&mut answered, None) == Verdict::Answer {
                    expect.extend_from_slice(&answered);
                }
            }
            let mut dropped = Dropped::default();
            let (requests, end) = answer_segments(&mut data, segment, None, &mut dropped);
            prop_assert_eq!(&data[..end], &expect[..]);
            let not = dropped.dropped_replies + dropped.dropped_not_asked + dropped.dropped_unrecognised;
            prop_assert_eq!(requests + not, kinds.len() as u64);
        }
    }
}
