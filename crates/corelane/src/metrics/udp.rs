//! `udp recv`'s and `udp echo`'s families, read at the scrape from the lanes' counters
//! (relaxed loads) and the kernel's UDP counters: datagrams and bytes, the batch-size
//! histogram (each lane counts its calls into fixed buckets, a load and store per batch), the
//! sequence figures each receive lane publishes at its batches' ends, what echo answered.
//!
//! Missing datagrams are exported per lane only where each flow stays on one lane (the
//! run's summary merges a flow split over lanes, which a lane alone cannot): not with a
//! shared socket or CPU steering. `udp echo` checks no sequence (its client does).

use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use super::cpu::{self, LaneThreads};
use super::exposition::{Family, Histogram, Value};
use crate::stats::{LaneCounters, UdpCounters, BATCH_BOUNDS};
use crate::udp::{Echo, Receiver, RecvBackend, ReplyCounter};

/// What `udp recv` exports.
#[derive(Debug)]
pub struct RecvMetrics {
    counters: Arc<Vec<LaneCounters>>,
    threads: LaneThreads,
    kernel: KernelDrops,
    /// `None`: no header is read; `Some(false)`: a flow may be split over lanes.
    sequence: Option<bool>,
    /// The XDP_DROP ceiling reads a driver's count, not batches of datagrams.
    batches: bool,
}

impl RecvMetrics {
    pub fn new(receiver: &Receiver) -> Self {
        let counters = receiver.lane_counters();
        let threads = LaneThreads::new(crate::udp::RECV_LANE_NAME, counters.len());
        Self {
            counters,
            threads,
            kernel: KernelDrops::from_now(),
            sequence: receiver.flows_stay_on_one_lane(),
            batches: receiver.backend() != RecvBackend::XdpDrop,
        }
    }

    /// `udp_missing_datagrams{lane}`, `udp_duplicate_datagrams_total{lane}` and
    /// `udp_late_datagrams_total{lane}`.
    fn write_sequence(&self, e: &mut DescriptorEncoder<'_>) -> fmt::Result {
        let Some(one_lane_per_flow) = self.sequence else { return Ok(()) };
        let sequence = || self.counters.iter().map(LaneCounters::sequence);
        if one_lane_per_flow {
            Family::gauge(
                "udp_missing_datagrams",
                "Sequences below each flow's highest that have not arrived (as the run's summary counts them); falls when a late one arrives",
            )
            .per_lane(e, sequence().map(|s| Value::Count(s.missing)))?;
        }
        Family::counter(
            "udp_duplicate_datagrams",
            "Datagrams whose flow and sequence had arrived before",
        )
        .per_lane(e, sequence().map(|s| Value::Count(s.duplicates)))?;
        Family::counter(
            "udp_late_datagrams",
            "Datagrams that arrived after a higher sequence of their flow (reordered), not duplicates",
        )
        .per_lane(e, sequence().map(|s| Value::Count(s.late)))
    }
}

impl Collector for RecvMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let e = &mut encoder;
        write_received(e, &self.counters)?;
        if self.batches {
            write_batches(e, &self.counters)?;
        }
        self.write_sequence(e)?;
        self.kernel.write(e)?;
        self.threads.write(e)?;
        cpu::write_process(e)
    }
}

/// What `udp echo` exports.
#[derive(Debug)]
pub struct EchoMetrics {
    counters: Arc<Vec<LaneCounters>>,
    replies: Arc<Vec<ReplyCounter>>,
    threads: LaneThreads,
    kernel: KernelDrops,
}

impl EchoMetrics {
    pub fn new(echo: &Echo) -> Self {
        let (counters, replies) = echo.lane_counters();
        let threads = LaneThreads::new(crate::udp::ECHO_LANE_NAME, counters.len());
        Self { counters, replies, threads, kernel: KernelDrops::from_now() }
    }
}

impl Collector for EchoMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let e = &mut encoder;
        write_received(e, &self.counters)?;
        write_batches(e, &self.counters)?;
        Family::counter("udp_answered_datagrams", "Datagrams answered")
            .per_lane(e, self.replies.iter().map(|r| Value::Count(r.load())))?;
        Family::counter("udp_answered", "Payload bytes answered")
            .unit(&Unit::Bytes)
            .per_lane(e, self.replies.iter().map(|r| Value::Count(r.bytes())))?;
        self.kernel.write(e)?;
        self.threads.write(e)?;
        cpu::write_process(e)
    }
}

/// `udp_received_datagrams_total{lane}` and `udp_received_bytes_total{lane}`.
fn write_received(e: &mut DescriptorEncoder<'_>, counters: &[LaneCounters]) -> fmt::Result {
    Family::counter("udp_received_datagrams", "Datagrams received")
        .per_lane(e, counters.iter().map(|c| Value::Count(c.datagrams())))?;
    Family::counter("udp_received", "Payload bytes received")
        .unit(&Unit::Bytes)
        .per_lane(e, counters.iter().map(|c| Value::Count(c.bytes())))
}

/// `udp_receive_batch_datagrams{lane}`: a histogram of the datagrams each receive call
/// brought (calls that brought none are not counted).
fn write_batches(e: &mut DescriptorEncoder<'_>, counters: &[LaneCounters]) -> fmt::Result {
    Family::histogram(
        "udp_receive_batch_datagrams",
        "Datagrams per receive call (recvmmsg, an io_uring wait, an AF_XDP ring read) that brought any",
    )
    .histogram_per_lane(e, counters.iter().map(batch_histogram))
}

/// One lane's batch sizes as a histogram: its sum is the datagrams the batches brought.
fn batch_histogram(lane: &LaneCounters) -> Histogram {
    let bounds = BATCH_BOUNDS.iter().map(|&b| b as f64).chain([f64::INFINITY]);
    let buckets = bounds.zip(lane.batches()).collect();
    Histogram { sum: lane.datagrams() as f64, buckets }
}

/// The kernel's UDP receive-buffer drops since the command started.
#[derive(Debug)]
struct KernelDrops {
    start: Option<UdpCounters>,
}

impl KernelDrops {
    fn from_now() -> Self {
        Self { start: UdpCounters::read().ok() }
    }

    /// Left out when either reading fails: never a count since boot nor a made-up 0.
    fn write(&self, e: &mut DescriptorEncoder<'_>) -> fmt::Result {
        let Some(drops) = self.start.zip(UdpCounters::read().ok()).map(|(s, n)| n.since(&s)) else {
            return Ok(());
        };
        Family::counter(
            "udp_kernel_receive_buffer_drops",
            "UDP datagrams the kernel dropped for a full receive buffer since the command started, every socket of its network namespace (RcvbufErrors)",
        )
        .single(e, Value::Count(drops.rcvbuf_errors))
    }
}
