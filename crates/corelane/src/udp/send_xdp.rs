//! The AF_XDP sender lane: each flow's frame (Ethernet, IPv4 or IPv6, UDP, payload filler) is
//! built once; per datagram the template is copied into a UMEM frame and only the payload's
//! 16-byte header (flow, sequence number) is rewritten (over IPv6 the UDP checksum too, from a
//! sum of the rest taken once), then the frames go through the TX ring with one kick per
//! batch. Same pacing, flows and sequence numbers as the sendmmsg lane.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::payload;
use crate::lane::StopSignal;
use crate::stats::LaneCounters;
use crate::xdp::frame::{
    build_ipv4, build_ipv6, Udp6Checksum, IPV4_PAYLOAD_OFFSET, IPV6_PAYLOAD_OFFSET,
};
use crate::xdp::route::Egress;
use crate::xdp::tx::XskTx;
use crate::xdp::XdpError;

/// Frames per TX batch (one kick each): the kernel's copy-mode TX budget per call.
const BATCH: u32 = 32;

/// One flow's frame, built once.
#[derive(Debug)]
pub(crate) struct FlowFrame {
    pub id: u32,
    template: Vec<u8>,
    /// Where the payload starts in the frame.
    payload_at: usize,
    /// IPv6: the UDP checksum, brought up to date per datagram from its payload header.
    checksum: Option<Udp6Checksum>,
    next_seq: u64,
}

impl FlowFrame {
    /// The frame of flow `id` from `src` (the flow socket's bound address) to `dst`.
    pub(crate) fn build(
        id: u32,
        egress: &Egress,
        src: SocketAddr,
        dst: SocketAddr,
        size: usize,
    ) -> Result<Self, XdpError> {
        let mut body = vec![0u8; size];
        payload::prefill(&mut body);
        let (mac, next_mac) = (egress.iface.mac, egress.dst_mac);
        let (template, payload_at, checksum) = match (src, dst) {
            (SocketAddr::V4(s), SocketAddr::V4(d)) => {
                (build_ipv4(mac, next_mac, s, d, &body), IPV4_PAYLOAD_OFFSET, None)
            }
            (SocketAddr::V6(s), SocketAddr::V6(d)) => {
                let frame = build_ipv6(mac, next_mac, s, d, &body);
                let checksum = Udp6Checksum::of(&frame, payload::HEADER_LEN);
                (frame, IPV6_PAYLOAD_OFFSET, Some(checksum))
            }
            _ => return Err(XdpError::Ipv6Send(dst)),
        };
        Ok(Self { id, template, payload_at, checksum, next_seq: 0 })
    }
}

/// What an AF_XDP lane owns.
pub(crate) struct XdpSendLane {
    pub tx: XskTx,
    pub flows: Vec<FlowFrame>,
    pub size: usize,
    pub rate: Option<u64>,
    pub count: Option<u64>,
    pub deadline: Option<Instant>,
    pub counters: Arc<Vec<LaneCounters>>,
    pub index: usize,
    pub stop: StopSignal,
}

/// (kicks, times the ring or UMEM was full)
pub(crate) type XdpSendResult = (u64, u64);

impl XdpSendLane {
    pub(crate) fn run(mut self) -> io::Result<XdpSendResult> {
        let (mut kicks, mut full) = (0u64, 0u64);
        let start = Instant::now();
        let (mut sent, mut turn) = (0u64, 0usize);
        while !self.stop.is_stopped() && self.count.is_none_or(|c| sent < c) {
            let now = Instant::now();
            if self.deadline.is_some_and(|d| now >= d) {
                break;
            }
            if super::pace::wait_for_pace(start, sent, self.rate, now) {
                continue;
            }
            let mut want = BATCH;
            if let Some(c) = self.count {
                want = want.min((c - sent).min(u64::from(BATCH)) as u32);
            }
            let at = turn % self.flows.len();
            let flow = &mut self.flows[at];
            turn = turn.wrapping_add(1);
            let (id, first, template) = (flow.id, flow.next_seq, &flow.template);
            let (at, checksum) = (flow.payload_at, flow.checksum);
            let n = self.tx.send(want, |i, slot| {
                let len = template.len().min(slot.len());
                slot[..len].copy_from_slice(&template[..len]);
                payload::write_header(&mut slot[at..len], id, first + u64::from(i));
                if let Some(c) = checksum {
                    c.write(&mut slot[..len]);
                }
                len
            })?;
            kicks += 1;
            if n == 0 {
                // Every frame is in flight: let the kernel complete some.
                full += 1;
                std::thread::sleep(Duration::from_micros(20));
                continue;
            }
            flow.next_seq += u64::from(n);
            sent += u64::from(n);
            self.counters[self.index].add(u64::from(n), u64::from(n) * self.size as u64);
        }
        // Let queued frames leave before the socket (and its UMEM) goes.
        let _ = self.tx.send_all(&[], Duration::from_millis(500));
        Ok((kicks, full))
    }
}
