//! UDP socket setup shared by senders and receivers (socket2 does the option work).

use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use super::UdpError;
use crate::sys::sockopt;

/// How often a blocked lane wakes to look at its stop signal.
pub(crate) const WAKE_INTERVAL: Duration = Duration::from_millis(100);

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
