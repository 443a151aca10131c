//! UDP socket setup shared by senders and receivers (socket2 does the option work).

use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use super::UdpError;
use crate::sys::sockopt;

/// How often a blocked lane wakes to look at its stop signal.
pub(crate) const WAKE_INTERVAL: Duration = Duration::from_millis(100);

/// Bytes per receive buffer: `asked`, else 2048, or 64 KiB with GRO (room for 64 segments).
pub(super) fn slot_bytes(asked: Option<usize>, gro: bool) -> usize {
    asked.unwrap_or(if gro { 65_536 } else { 2048 })
}

pub(crate) fn new_udp(addr: &SocketAddr) -> Result<Socket, UdpError> {
    Socket::new(Domain::for_address(*addr), Type::DGRAM, Some(Protocol::UDP))
        .map_err(|e| UdpError::io("cannot create a UDP socket", e))
}

/// A receiving socket bound to `addr`; `reuseport` lets several sockets share the port and
/// the kernel hash each flow to one of them.
pub(crate) fn bind_receiver(
    addr: SocketAddr,
    reuseport: bool,
    rcvbuf: Option<usize>,
) -> Result<Socket, UdpError> {
    let socket = new_udp(&addr)?;
    if reuseport {
        socket.set_reuse_port(true).map_err(|e| UdpError::io("cannot set SO_REUSEPORT", e))?;
    }
    if let Some(bytes) = rcvbuf {
        // Root may exceed net.core.rmem_max; others get what SO_RCVBUF allows.
        if sockopt::set_rcvbuf_force(socket.as_fd(), bytes).is_err() {
            socket.set_recv_buffer_size(bytes).map_err(|e| {
                UdpError::io(format!("cannot set a {bytes}-byte receive buffer"), e)
            })?;
        }
    }
    socket.set_read_timeout(Some(WAKE_INTERVAL)).map_err(|e| UdpError::io("SO_RCVTIMEO", e))?;
    socket.bind(&addr.into()).map_err(|e| UdpError::bind(addr, e))?;
    Ok(socket)
}

/// The address a socket is bound to.
pub(crate) fn local_addr(socket: &Socket) -> Result<SocketAddr, UdpError> {
    crate::reuseport::local_addr(socket)
        .map_err(|e| UdpError::io("cannot read the bound address", e))
}

/// Busy polling as asked for and as the kernel took it.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct BusyPollState {
    /// Microseconds asked for (`--busy-poll`), if any.
    pub requested_us: Option<u32>,
    /// SO_BUSY_POLL was accepted on every socket.
    pub active: bool,
    /// SO_PREFER_BUSY_POLL was accepted too (Linux 5.11+).
    pub prefer: bool,
    /// Why it is off or partial, if so.
    pub note: Option<String>,
}

/// Sets SO_BUSY_POLL (and SO_PREFER_BUSY_POLL) on every socket; a refusal is reported in the
/// state, never silent, and the sockets keep working without it.
pub(crate) fn apply_busy_poll<'a>(
    sockets: impl IntoIterator<Item = &'a Socket>,
    usecs: Option<u32>,
) -> BusyPollState {
    let Some(us) = usecs.filter(|&u| u > 0) else { return BusyPollState::default() };
    let mut state =
        BusyPollState { requested_us: Some(us), active: true, prefer: true, note: None };
    for socket in sockets {
        if let Err(e) = sockopt::set_busy_poll(socket.as_fd(), us) {
            state.active = false;
            state.prefer = false;
            state.note = Some(match e.raw_os_error() {
                Some(libc::EPERM) => format!(
                    "the kernel refused SO_BUSY_POLL {us} us (EPERM: above net.core.busy_read it needs CAP_NET_ADMIN); running without busy polling"
                ),
                _ => format!("the kernel refused SO_BUSY_POLL ({e}); running without busy polling"),
            });
            return state;
        }
        if state.prefer && sockopt::set_prefer_busy_poll(socket.as_fd(), true).is_err() {
            state.prefer = false;
            state.note = Some("SO_PREFER_BUSY_POLL refused (Linux 5.11+): busy polling without preferring it over interrupts".into());
        }
    }
    state
}

/// The NAPI id of the last datagram `socket` received (0: a path without NAPI, such as
/// loopback, where busy polling has nothing to poll).
pub(crate) fn napi_id(socket: &Socket) -> u32 {
    sockopt::incoming_napi_id(socket.as_fd()).unwrap_or(0)
}

/// Whether GRO was asked for and whether the kernel accepted it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct OffloadState {
    pub requested: bool,
    pub active: bool,
    pub note: Option<String>,
}

/// Turns UDP_GRO on for every socket if asked; a refusal is reported (with `fallback`, how
/// the lanes then work), not fatal.
pub(super) fn settle_gro<'a>(
    requested: bool,
    sockets: impl Iterator<Item = &'a Arc<Socket>>,
    fallback: &str,
) -> OffloadState {
    let mut gro = OffloadState { requested, active: false, note: None };
    if requested {
        let mut sockets = sockets;
        match sockets.find_map(|s| sockopt::set_udp_gro(s.as_fd(), true).err()) {
            None => gro.active = true,
            Some(e) => gro.note = Some(format!("kernel refused UDP_GRO ({e}); {fallback}")),
        }
    }
    gro
}

/// How receiver lanes share the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SocketMode {
    /// One socket per address, every lane reading it (the UDP study's "multiple thread" step:
    /// the lanes contend on the socket's lock).
    Shared,
    /// One SO_REUSEPORT socket per lane and address (the UDP study's "binding port" step).
    Reuseport,
}

/// How a reuseport group picks the socket (and so the lane) for a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Steering {
    /// The kernel's flow hash: a flow sticks to a socket, whichever CPU processed it.
    Hash,
    /// The socket of the lane pinned to the CPU whose softirq processed the datagram, so the
    /// datagram never crosses CPUs between the receive path and the lane that reads it.
    Cpu,
}
