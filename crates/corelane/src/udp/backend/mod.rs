//! How a lane asks the kernel for datagrams: one file per backend, each a type per lane that
//! implements [`ReceiveBatch`] (and [`EchoBatch`] where it can answer in place), so the lane
//! loops of `udp recv` and `udp echo` are written once over them, and one fallback policy
//! ([`settle`]) for both.
//!
//! * [`mmsg`] — recvmmsg batches (optionally UDP_GRO); answers go back by sendmmsg.
//! * [`uring`] — one io_uring multishot receive per socket into provided buffers; answers
//!   are sent from the buffer they arrived in.
//! * [`xdp`] — AF_XDP: frames off an RX ring, one lane per RX queue (or, as the delivery
//!   floor, handed straight back to the fill ring).
//! * [`xdp_drop`] — the XDP_DROP ceiling: the driver's drop count, read every 10 ms.
//!
//! A backend sees only its sockets and the lane's [`LaneTally`] (or the echo's [`Judge`]):
//! what a datagram means is decided in `check.rs` and `judge.rs`, never here.

use std::fmt;
use std::io;
use std::time::Duration;

use serde::Serialize;

use super::check::LaneTally;
use super::judge::{EchoTally, Judge};
use super::UdpError;
use crate::lane::StopSignal;
use crate::sys::socket_ring;
use crate::topology::{CpuList, Topology};
use crate::xdp::rx::XskLane;
use crate::xdp::XdpMode;

pub(super) mod mmsg;
pub(super) mod uring;
pub(super) mod xdp;
pub(super) mod xdp_drop;

/// How a lane asks the kernel for datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvBackend {
    /// recvmmsg batches (optionally with UDP_GRO).
    Mmsg,
    /// io_uring: one multishot receive per socket into a ring of provided buffers, one
    /// datagram per completion; with `sqpoll_cpu`, an SQPOLL thread on that CPU submits for
    /// the lane (the core-partitioning study's syscall thread).
    Uring { sqpoll_cpu: Option<usize> },
    /// AF_XDP: corelane's XDP program redirects the bound address and port's frames to one
    /// AF_XDP socket per RX queue, each read by its own lane (`ReceiverConfig::xdp_dev` names
    /// the interface when the address does not).
    Xdp { mode: XdpMode, busy_poll_us: Option<u32> },
    /// The floor of an AF_XDP delivery: the same program and sockets as `Xdp` (native copy
    /// or as `mode` says), and lanes that only hand each frame back to the fill ring and count
    /// it, reading nothing: what a delivery costs before any lane looks at a frame.
    XdpReturn { mode: XdpMode },
    /// The ceiling of any XDP consumer: the same match dropped (XDP_DROP) and counted in the
    /// driver; the count is reported as datagrams, and nothing reaches user space.
    XdpDrop,
}

impl fmt::Display for RecvBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Mmsg => "mmsg",
            Self::Uring { sqpoll_cpu: None } => "uring",
            Self::Uring { sqpoll_cpu: Some(_) } => "uring+sqpoll",
            Self::Xdp { .. } => "xdp",
            Self::XdpReturn { .. } => "xdp-return",
            Self::XdpDrop => "xdp-drop",
        })
    }
}

/// As its name (`mmsg`, `uring`, `uring+sqpoll`, `xdp`, `xdp-drop`).
impl Serialize for RecvBackend {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One receive lane's source of datagrams, moved into the lane's thread. Called once per
/// batch (a dynamic call per batch, never per datagram).
pub(super) trait ReceiveBatch: Send + fmt::Debug {
    /// In the lane's own thread, before the first batch (a ring is made on the lane's CPU).
    fn start(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Waits at most `WAKE_INTERVAL` for datagrams, hands each to `tally` and ends each
    /// batch with [`LaneTally::end_batch`]. True when the batch came back less than half
    /// full, so that receive coalescing may pause before the next.
    fn receive(&mut self, tally: &mut LaneTally) -> io::Result<bool>;

    /// After the last batch: the AF_XDP socket, handed back for its counters.
    fn into_xsk(self: Box<Self>) -> Option<XskLane> {
        None
    }
}

/// Every lane's receiver, as a backend's bind makes them.
pub(super) type Lanes = Vec<Box<dyn ReceiveBatch>>;

/// One echo lane's receive-and-answer, moved into the lane's thread. Called once per batch.
pub(super) trait EchoBatch: Send {
    /// In the lane's own thread, before the first batch.
    fn start(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Waits at most `WAKE_INTERVAL` for requests, asks `judge` which are answered (each
    /// turned into its reply in place) and sends those back from the buffers they came in.
    /// True when the batch came back less than half full (see [`ReceiveBatch::receive`]).
    fn echo(&mut self, judge: &mut Judge, tally: &mut EchoTally) -> io::Result<bool>;
}

/// The fallback policy of `udp recv` and `udp echo`: io_uring falls back to recvmmsg (with
/// `fallback` saying how the lanes then work) and an SQPOLL thread to lanes submitting for
/// themselves, each with the reason in the note returned; the other backends run as asked
/// or fail at bind. GRO with io_uring is refused (it receives datagram by datagram).
pub(super) fn settle(
    backend: &mut RecvBackend,
    gro: bool,
    fallback: &str,
) -> Result<Option<String>, UdpError> {
    let RecvBackend::Uring { sqpoll_cpu } = *backend else { return Ok(None) };
    if gro {
        return Err(UdpError::UringGro);
    }
    if let Err(reason) = socket_ring::probe_datagram_ring() {
        *backend = RecvBackend::Mmsg;
        return Ok(Some(format!("{reason}; {fallback}")));
    }
    let Some(cpu) = sqpoll_cpu else { return Ok(None) };
    Topology::read()?.check(&CpuList::new(vec![cpu]))?;
    match socket_ring::probe_sqpoll(cpu) {
        Ok(()) => Ok(None),
        Err(reason) => {
            *backend = RecvBackend::Uring { sqpoll_cpu: None };
            Ok(Some(format!("{reason}; lanes submit for themselves")))
        }
    }
}

/// A receive lane's loop: batches until `stop`, pausing `coalesce` after a thin batch so
/// that datagrams accumulate; `entered` is called once the receiver has started, right before
/// the first batch. Hands the receiver back (an AF_XDP socket's counters).
pub(super) fn receive_until(
    mut receiver: Box<dyn ReceiveBatch>,
    tally: &mut LaneTally,
    stop: &StopSignal,
    coalesce: Option<Duration>,
    entered: impl FnOnce(),
) -> io::Result<Box<dyn ReceiveBatch>> {
    receiver.start()?;
    entered();
    while !stop.is_stopped() {
        if receiver.receive(tally)? {
            if let Some(pause) = coalesce {
                std::thread::sleep(pause);
            }
        }
    }
    Ok(receiver)
}

/// An echo lane's loop: batches until `stop`, pausing `coalesce` after a thin batch.
pub(super) fn echo_until(
    mut lane: Box<dyn EchoBatch>,
    judge: &mut Judge,
    tally: &mut EchoTally,
    stop: &StopSignal,
    coalesce: Option<Duration>,
) -> io::Result<()> {
    lane.start()?;
    while !stop.is_stopped() {
        if lane.echo(judge, tally)? {
            if let Some(pause) = coalesce {
                std::thread::sleep(pause);
            }
        }
    }
    Ok(())
}
