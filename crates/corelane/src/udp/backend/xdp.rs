//! AF_XDP: a plain socket holds the port (and proves the address is this host's), then
//! corelane's XDP program goes on the interface and one AF_XDP socket binds to each RX queue
//! (`xdp::rx`), each read by its own lane: frames straight off the RX ring, through the
//! checked parser, into the payload check. The run keeps the attachment, reads the sockets'
//! kernel counters each second and, once the lanes have handed their sockets back, reports.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use socket2::Socket;

use super::{Backend, BackendOptions, BackendReport, BackendRun, BackendSecond, BindRequest};
use super::{Bound, ReceiveBatch, RecvBackend};
use crate::udp::check::LaneTally;
use crate::udp::socket::{bind_receiver, local_addr, slot_bytes, OffloadState, WAKE_INTERVAL};
use crate::udp::UdpError;
use crate::xdp::rx::{RxConfig, XdpReceive, XskLane, XskStats};
use crate::xdp::{XdpError, XdpMode};

/// Frames taken off the RX ring per batch.
const BUDGET: u32 = 64;

/// The AF_XDP backend: every frame's payload read and checked.
pub(in crate::udp) struct Xdp {
    pub mode: XdpMode,
    pub busy_poll_us: Option<u32>,
}

impl Backend for Xdp {
    fn name(&self) -> &'static str {
        "xdp"
    }

    fn about(&self) -> &'static str {
        "corelane's XDP program and one AF_XDP socket and lane per RX queue of the address's \
         interface (needs root; --xdp-mode, --xdp-dev, --busy-poll)"
    }

    fn options(&self) -> &'static [&'static str] {
        &["--xdp-mode", "--xdp-dev", "--busy-poll"]
    }

    fn configure(&self, options: &BackendOptions) -> RecvBackend {
        RecvBackend::Xdp {
            mode: options.xdp_mode.unwrap_or(self.mode),
            busy_poll_us: options.busy_poll_us.or(self.busy_poll_us),
        }
    }

    fn lane_per_queue(&self) -> bool {
        true
    }

    fn bind(&self, request: &BindRequest<'_>) -> Result<Bound, UdpError> {
        bind(request, self.mode, self.busy_poll_us, Reads::Payloads)
    }
}

/// What the XDP backends ask of a receive: one address, no GRO, no dispatch. Returns the
/// plain socket that holds the port and the address it bound (port 0 resolved).
pub(super) fn hold_port(request: &BindRequest<'_>) -> Result<(Socket, SocketAddr), UdpError> {
    let [addr] = request.addrs else { return Err(XdpError::OneAddress.into()) };
    if request.gro || request.dispatch {
        return Err(XdpError::Options.into());
    }
    crate::xdp::check_available()?;
    let socket = bind_receiver(*addr, false, None)?;
    let bound = local_addr(&socket)?;
    Ok((socket, bound))
}

/// What a bind over a port held by `port` makes of `lanes`: no kernel socket options, the
/// default slot, and `run`.
pub(super) fn bound_over_port(
    request: &BindRequest<'_>,
    addr: SocketAddr,
    lanes: Vec<Box<dyn ReceiveBatch>>,
    note: String,
    run: Box<dyn BackendRun>,
) -> Bound {
    Bound {
        lanes,
        addrs: vec![addr],
        gro: OffloadState { requested: false, active: false, note: None },
        rcvbuf_bytes: None,
        slot: slot_bytes(request.slot, false),
        note: Some(note),
        run,
    }
}

/// Holds the port, attaches the program for its address and binds one socket per RX
/// queue, each read by a lane that does with its frames what `reads` says.
pub(super) fn bind(
    request: &BindRequest<'_>,
    mode: XdpMode,
    busy_poll_us: Option<u32>,
    reads: Reads,
) -> Result<Bound, UdpError> {
    let (port, addr) = hold_port(request)?;
    let dev = request.interface.map(String::from);
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
    let handed = Arc::new(Mutex::new(Vec::new()));
    let lanes = xdp
        .take_lanes()
        .into_iter()
        .map(|xsk| {
            let handed = Arc::clone(&handed);
            Box::new(XdpLane { xsk: Some(xsk), reads, handed }) as Box<dyn ReceiveBatch>
        })
        .collect();
    let last = xdp.kernel_counters().total();
    let run = XdpRun { receive: xdp, last, handed, _port: port };
    Ok(bound_over_port(request, addr, lanes, note, Box::new(run)))
}

/// What the lanes do with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reads {
    /// Parse it and hand the payload to the checks.
    Payloads,
    /// Nothing: give it back to the fill ring and count it (the delivery floor).
    Nothing,
}

/// The AF_XDP sockets handed back by their lanes, for the report.
type HandedBack = Arc<Mutex<Vec<XskLane>>>;

/// One RX queue's socket, read by one lane; handed back to the run when the lane drops it.
#[derive(Debug)]
struct XdpLane {
    xsk: Option<XskLane>,
    reads: Reads,
    handed: HandedBack,
}

impl ReceiveBatch for XdpLane {
    /// A poll (which also wakes the kernel when need_wakeup asks) only when the ring is empty.
    fn receive(&mut self, tally: &mut LaneTally) -> io::Result<bool> {
        let Some(xsk) = self.xsk.as_mut() else { return Ok(false) };
        let n = match self.reads {
            Reads::Payloads => xsk.receive(BUDGET, |payload| tally.datagram(payload)),
            Reads::Nothing => {
                let n = xsk.give_back(BUDGET);
                tally.count_only(u64::from(n));
                n
            }
        };
        tally.end_batch();
        if n == 0 {
            tally.syscalls += 1;
            xsk.wait(WAKE_INTERVAL)?;
            return Ok(false);
        }
        Ok(n < BUDGET / 2)
    }
}

impl Drop for XdpLane {
    fn drop(&mut self) {
        if let Some(xsk) = self.xsk.take() {
            self.handed.lock().unwrap_or_else(PoisonError::into_inner).push(xsk);
        }
    }
}

/// The attached receive while its lanes run: the sockets' kernel counters each second, the
/// report at the end (dropping it detaches the program, then the port is let go).
#[derive(Debug)]
struct XdpRun {
    receive: XdpReceive,
    /// The sockets' counters summed at the last second (`None`: unknown then).
    last: Option<XskStats>,
    handed: HandedBack,
    _port: Socket,
}

impl BackendRun for XdpRun {
    fn second(&mut self) -> BackendSecond {
        let now = self.receive.kernel_counters().total();
        let xsk = now.zip(self.last).map(|(now, last)| now.since(&last));
        self.last = now;
        BackendSecond { xsk, xsk_unknown: xsk.is_none() }
    }

    fn finish(self: Box<Self>) -> BackendReport {
        let lanes =
            std::mem::take(&mut *self.handed.lock().unwrap_or_else(PoisonError::into_inner));
        BackendReport { xdp: Some(self.receive.finish(&lanes)) }
    }
}
