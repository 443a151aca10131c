//! `udp recv`'s and `udp echo`'s families, read at the scrape from the lanes' counters
//! (relaxed loads) and the kernel's UDP counters.
//!
//! Not exported: the sequence figures (missing, duplicates, late) are worked out from each
//! lane's per-flow tracker when the lanes have joined, and no lane publishes them while it
//! runs; a batch-size histogram would be a write per batch on every lane's path. Echo counts
//! the datagrams it answers, not their bytes.

use std::fmt;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use super::cpu::{self, LaneThreads};
use super::exposition::{Family, Value};
use crate::stats::{LaneCounters, UdpCounters};
use crate::udp::{Echo, Receiver, ReplyCounter};

/// What `udp recv` exports.
#[derive(Debug)]
pub struct RecvMetrics {
    counters: Arc<Vec<LaneCounters>>,
    threads: LaneThreads,
    kernel: KernelDrops,
}

impl RecvMetrics {
    pub fn new(receiver: &Receiver) -> Self {
        let counters = receiver.lane_counters();
        let threads = LaneThreads::new(crate::udp::RECV_LANE_NAME, counters.len());
        Self { counters, threads, kernel: KernelDrops::from_now() }
    }
}

impl Collector for RecvMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let e = &mut encoder;
        write_received(e, &self.counters)?;
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
        Family::counter("udp_answered_datagrams", "Datagrams answered")
            .per_lane(e, self.replies.iter().map(|r| Value::Count(r.load())))?;
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
