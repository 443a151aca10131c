//! AF_XDP: a plain socket holds the port (and proves the address is this host's), then
//! corelane's XDP program goes on the interface and one AF_XDP socket binds to each RX queue
//! (`xdp::rx`), each read by its own lane: frames straight off the RX ring, through the
//! checked parser, into the payload check.

use std::io;
use std::net::SocketAddr;

use socket2::Socket;

use super::{Lanes, ReceiveBatch};
use crate::udp::check::LaneTally;
use crate::udp::socket::{bind_receiver, local_addr, WAKE_INTERVAL};
use crate::udp::UdpError;
use crate::xdp::rx::{RxConfig, XdpReceive, XskLane};
use crate::xdp::{XdpError, XdpMode};

/// Frames taken off the RX ring per batch.
const BUDGET: u32 = 64;

/// What the XDP backends ask of a receive: one address, no GRO, no dispatch. Returns the
/// plain socket that holds the port and the address it bound (port 0 resolved).
pub(in crate::udp) fn hold_port(
    addrs: &[SocketAddr],
    gro: bool,
    dispatch: bool,
) -> Result<(Socket, SocketAddr), UdpError> {
    if addrs.len() != 1 {
        return Err(XdpError::OneAddress.into());
    }
    if gro || dispatch {
        return Err(XdpError::Options.into());
    }
    crate::xdp::check_available()?;
    let socket = bind_receiver(addrs[0], false, None)?;
    let bound = local_addr(&socket)?;
    Ok((socket, bound))
}

/// Attaches the program for `addr` and binds one socket per RX queue: the lanes, the
/// attachment (kept until they join, then asked for its report) and how it runs.
pub(in crate::udp) fn bind(
    addr: SocketAddr,
    dev: Option<String>,
    mode: XdpMode,
    busy_poll_us: Option<u32>,
    reads: Reads,
) -> Result<(Lanes, XdpReceive, String), UdpError> {
    let mut xdp = XdpReceive::setup(&RxConfig { addr, dev, mode, busy_poll_us })?;
    let note = format!("AF_XDP on {}: {} ({})", xdp.interface().name, xdp.mode(), xdp.why());
    let note = match xdp.removed_stale() {
        Some(id) => format!("{note}; removed corelane XDP program {id} left by a killed run"),
        None => note,
    };
    let note = match xdp.code_unlocked() {
        Some(why) => format!("{note}; {why}"),
        None => note,
    };
    let lanes = xdp
        .take_lanes()
        .into_iter()
        .map(|xsk| Box::new(XdpLane { xsk, reads }) as Box<dyn ReceiveBatch>)
        .collect();
    Ok((lanes, xdp, note))
}

/// What the lanes do with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::udp) enum Reads {
    /// Parse it and hand the payload to the checks.
    Payloads,
    /// Nothing: give it back to the fill ring and count it (the delivery floor).
    Nothing,
}

/// One RX queue's socket, read by one lane.
#[derive(Debug)]
struct XdpLane {
    xsk: XskLane,
    reads: Reads,
}

impl ReceiveBatch for XdpLane {
    /// A poll (which also wakes the kernel when need_wakeup asks) only when the ring is empty.
    fn receive(&mut self, tally: &mut LaneTally) -> io::Result<bool> {
        let n = match self.reads {
            Reads::Payloads => self.xsk.receive(BUDGET, |payload| tally.datagram(payload)),
            Reads::Nothing => {
                let n = self.xsk.give_back(BUDGET);
                tally.count_only(u64::from(n));
                n
            }
        };
        tally.end_batch();
        if n == 0 {
            tally.syscalls += 1;
            self.xsk.wait(WAKE_INTERVAL)?;
            return Ok(false);
        }
        Ok(n < BUDGET / 2)
    }

    fn into_xsk(self: Box<Self>) -> Option<XskLane> {
        Some(self.xsk)
    }
}
