//! How a lane asks the kernel for datagrams: one file per backend, each a type that
//! implements [`Backend`] (it binds, says what its lanes read, may offer an echo and keeps
//! its own run state: [`BackendRun`]) and a type per lane that implements [`ReceiveBatch`]
//! (and [`EchoBatch`] where it can answer in place), so the lane loops of `udp recv` and
//! `udp echo` are written once over them. Every backend has one line in the table
//! (`registry.rs`); nothing else names one.
//!
//! * [`mmsg`] — recvmmsg batches (optionally UDP_GRO); answers go back by sendmmsg.
//! * [`uring`] — one io_uring multishot receive per socket into provided buffers; answers
//!   are sent from the buffer they arrived in.
//! * [`xdp`] — AF_XDP: frames off an RX ring, one lane per RX queue.
//! * [`xdp_return`] — the delivery floor: AF_XDP frames handed straight back to the fill ring.
//! * [`xdp_drop`] — the XDP_DROP ceiling: the driver's drop count, read every 10 ms.
//!
//! A backend sees only its sockets and the lane's [`LaneTally`] (or the echo's [`Judge`]):
//! what a datagram means is decided in `check.rs` and `judge.rs`, never here.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use socket2::Socket;

use super::check::LaneTally;
use super::judge::{EchoTally, Judge};
use super::socket::{OffloadState, SocketMode, Steering};
use super::UdpError;
use crate::lane::{Placement, StopSignal};
use crate::xdp::rx::{XdpReport, XskStats};

pub(super) mod mmsg;
mod registry;
mod sockets;
pub(super) mod uring;
pub(super) mod xdp;
pub(super) mod xdp_drop;
pub(super) mod xdp_return;

pub use registry::{BackendOptions, RecvBackend};

/// One receive backend: everything `udp recv` and `udp echo` ask of it. Its type is built
/// from its [`RecvBackend`] variant's options (see `registry.rs`).
pub(super) trait Backend {
    /// The name the command line takes and the reports print.
    fn name(&self) -> &'static str;

    /// One line on what it is, for the command line's help.
    fn about(&self) -> &'static str;

    /// The backend options ([`BackendOptions`], by flag) it takes; any other is refused.
    fn options(&self) -> &'static [&'static str] {
        &[]
    }

    /// The backend with `options` applied (only options it takes are given).
    fn configure(&self, options: &BackendOptions) -> RecvBackend;

    /// Whether it can run as asked: `Some` names the backend to run instead and why. An error
    /// when it cannot run with these options at all.
    fn settle(
        &self,
        _gro: bool,
        _fallback: &str,
    ) -> Result<Option<(RecvBackend, String)>, UdpError> {
        Ok(None)
    }

    /// Binds what the lanes read, before any thread starts: one receiver per lane, and the
    /// run state the backend keeps.
    fn bind(&self, request: &BindRequest<'_>) -> Result<Bound, UdpError>;

    /// Whether its lanes read each datagram's header (checks and flow groups need them).
    fn reads_headers(&self) -> bool {
        true
    }

    /// Whether each lane reads one RX queue, which RSS fills by the headers' hash: a flow then
    /// stays on one lane whatever the socket options (AF_XDP).
    fn lane_per_queue(&self) -> bool {
        false
    }

    /// How it answers in place, if it can: an echo lane per socket.
    fn echo(&self) -> Option<EchoLanes> {
        None
    }
}

/// Makes one echo lane over its socket, with `batch` messages of `slot` bytes.
pub(super) type EchoLanes = Box<dyn Fn(Arc<Socket>, usize, usize) -> Box<dyn EchoBatch>>;

/// What a receive asks of its backend's bind.
#[derive(Debug, Clone, Copy)]
pub(super) struct BindRequest<'a> {
    pub addrs: &'a [SocketAddr],
    pub threads: usize,
    pub batch: usize,
    pub placement: &'a Placement,
    pub rcvbuf: Option<usize>,
    pub gro: bool,
    pub sockets: SocketMode,
    pub steering: Steering,
    /// Bytes per receive buffer asked for (`None`: the default, `socket::slot_bytes`).
    pub slot: Option<usize>,
    pub dispatch: bool,
    /// The interface to attach to, for a backend that attaches to one.
    pub interface: Option<&'a str>,
}

/// What a backend's bind made.
pub(super) struct Bound {
    /// One receiver per lane (they hold the sockets they read).
    pub lanes: Vec<Box<dyn ReceiveBatch>>,
    /// The addresses bound (port 0 resolved).
    pub addrs: Vec<SocketAddr>,
    pub gro: OffloadState,
    pub rcvbuf_bytes: Option<usize>,
    /// Bytes per receive buffer.
    pub slot: usize,
    /// How it runs, for the output.
    pub note: Option<String>,
    pub run: Box<dyn BackendRun>,
}

/// What a backend keeps while its lanes run: its own counters, read each second, and the
/// report of them once the lanes have joined.
pub(super) trait BackendRun: Send + fmt::Debug {
    /// Called once a second by the receive's watch.
    fn second(&mut self) -> BackendSecond {
        BackendSecond::default()
    }

    /// After the lanes joined (their receivers dropped): the backend's report.
    fn finish(self: Box<Self>) -> BackendReport {
        BackendReport::default()
    }
}

/// A backend that keeps nothing of its own while its lanes run (or only what `held` holds
/// until the receive ends, such as a socket that holds the port).
#[derive(Debug)]
pub(super) struct Keeps<T: Send + fmt::Debug> {
    _held: T,
}

impl<T: Send + fmt::Debug + 'static> Keeps<T> {
    pub fn boxed(held: T) -> Box<dyn BackendRun> {
        Box::new(Self { _held: held })
    }
}

impl<T: Send + fmt::Debug> BackendRun for Keeps<T> {}

/// What a backend adds to each second of a receive (flattened into its JSON): its own
/// counters, when it keeps any.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct BackendSecond {
    /// With `xdp`: the AF_XDP sockets' kernel counters this interval (frames lost at the
    /// sockets: `rx_ring_full`, `rx_dropped`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub xsk: Option<XskStats>,
    /// With `xdp`: the sockets' counters could not be read this interval (or the last), so
    /// its losses are unknown; `xsk` is then absent.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub xsk_unknown: bool,
}

/// What a backend adds to a receive's summary (flattened into its JSON).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BackendReport {
    /// How the AF_XDP receive ran (mode and why, frames dropped and why), with `xdp`.
    #[serde(default)]
    pub xdp: Option<XdpReport>,
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
}

/// One echo lane's receive-and-answer, moved into the lane's thread. Called once per batch.
pub(super) trait EchoBatch: Send + fmt::Debug {
    /// In the lane's own thread, before the first batch.
    fn start(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Waits at most `WAKE_INTERVAL` for requests, asks `judge` which are answered (each
    /// turned into its reply in place) and sends those back from the buffers they came in.
    /// True when the batch came back less than half full (see [`ReceiveBatch::receive`]).
    fn echo(&mut self, judge: &mut Judge, tally: &mut EchoTally) -> io::Result<bool>;
}

/// The fallback policy of `udp recv` and `udp echo`: a backend the kernel refuses falls back
/// (io_uring to recvmmsg, with `fallback` saying how the lanes then work; an SQPOLL thread
/// to lanes submitting for themselves), with the reason in the note returned; the others
/// run as asked or fail at bind.
pub(super) fn settle(
    backend: &mut RecvBackend,
    gro: bool,
    fallback: &str,
) -> Result<Option<String>, UdpError> {
    let Some((instead, why)) = backend.unit().settle(gro, fallback)? else { return Ok(None) };
    *backend = instead;
    Ok(Some(why))
}

/// The backends `udp echo` can answer with, by name (`mmsg or uring`).
pub(super) fn echoing() -> String {
    registry::names(RecvBackend::ALL.iter().filter(|b| b.echoes()))
}

/// A receive lane's loop: batches until `stop`, pausing `coalesce` after a thin batch so
/// that datagrams accumulate; `entered` is called once the receiver has started, right before
/// the first batch.
pub(super) fn receive_until(
    mut receiver: Box<dyn ReceiveBatch>,
    tally: &mut LaneTally,
    stop: &StopSignal,
    coalesce: Option<Duration>,
    entered: impl FnOnce(),
) -> io::Result<()> {
    receiver.start()?;
    entered();
    while !stop.is_stopped() {
        if receiver.receive(tally)? {
            if let Some(pause) = coalesce {
                std::thread::sleep(pause);
            }
        }
    }
    Ok(())
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
