//! A reuseport group: several sockets bound to one address with SO_REUSEPORT, the kernel
//! handing each flow (UDP) or connection (TCP) to one of them — one socket per lane, so lanes
//! never share a socket's lock. Also the one mapping of a failed bind to an error a user can
//! act on, for both protocols.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsFd;

use socket2::Socket;

use crate::sys::sockopt;

/// Why an address could not be bound, naming the address and the fix.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("{addr} is already in use (another server or receiver running?): pick another port")]
    AddrInUse { addr: SocketAddr },
    #[error("{addr} is not an address of this host or network namespace: use 0.0.0.0 or an address `ip addr` lists")]
    AddrNotAvailable { addr: SocketAddr },
    #[error("binding {addr} is not permitted: ports below 1024 need root or CAP_NET_BIND_SERVICE")]
    Permission { addr: SocketAddr },
    #[error("cannot bind {addr}: {source}")]
    Other { addr: SocketAddr, source: io::Error },
}

impl BindError {
    /// The error a failed bind(2) of `addr` means.
    pub fn of(addr: SocketAddr, source: io::Error) -> Self {
        match source.kind() {
            io::ErrorKind::AddrInUse => Self::AddrInUse { addr },
            io::ErrorKind::AddrNotAvailable => Self::AddrNotAvailable { addr },
            io::ErrorKind::PermissionDenied => Self::Permission { addr },
            _ => Self::Other { addr, source },
        }
    }
}

/// Sockets sharing one address: with one member it is a plain socket (the shared mode),
/// with more each was bound with SO_REUSEPORT.
#[derive(Debug)]
pub struct ReuseportGroup {
    sockets: Vec<Socket>,
    addr: SocketAddr,
}

impl ReuseportGroup {
    /// Binds `count` sockets to `addr`, each made, configured and bound by `bind` (which must
    /// set SO_REUSEPORT when `count` > 1). Port 0 picks a free port once: the first socket
    /// picks it and the rest of the group joins that port.
    pub fn bind<E>(
        addr: SocketAddr,
        count: usize,
        mut bind: impl FnMut(SocketAddr) -> Result<Socket, E>,
        address_of: impl Fn(&Socket) -> Result<SocketAddr, E>,
    ) -> Result<Self, E> {
        let mut sockets = Vec::with_capacity(count);
        let mut addr = addr;
        for _ in 0..count.max(1) {
            let socket = bind(addr)?;
            if sockets.is_empty() {
                addr = address_of(&socket)?;
            }
            sockets.push(socket);
        }
        Ok(Self { sockets, addr })
    }

    /// The address bound (port 0 resolved).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Hands each datagram or connection to the socket of the lane pinned to the CPU whose
    /// softirq processed it (`lane_cpus[i]`: the CPU of the lane owning socket `i`), instead
    /// of the kernel's flow hash. The program belongs to the group; its first socket carries it.
    pub fn steer_by_cpu(&self, lane_cpus: &[usize]) -> io::Result<()> {
        sockopt::steer_reuseport_by_cpu(self.sockets[0].as_fd(), lane_cpus)
    }

    pub fn sockets(&self) -> &[Socket] {
        &self.sockets
    }

    pub fn into_sockets(self) -> Vec<Socket> {
        self.sockets
    }
}

/// The address a socket is bound to.
pub fn local_addr(socket: &Socket) -> io::Result<SocketAddr> {
    socket.local_addr()?.as_socket().ok_or_else(|| io::Error::other("not an IP socket"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::{Domain, Type};

    fn udp(addr: SocketAddr) -> io::Result<Socket> {
        let s = Socket::new(Domain::IPV4, Type::DGRAM, None)?;
        s.set_reuse_port(true)?;
        s.bind(&addr.into())?;
        Ok(s)
    }

    #[test]
    fn port_zero_is_picked_once_and_joined_by_the_group() {
        let group =
            ReuseportGroup::bind("127.0.0.1:0".parse().unwrap(), 3, udp, local_addr).expect("bind");
        assert_ne!(group.addr().port(), 0);
        for s in group.sockets() {
            assert_eq!(local_addr(s).unwrap(), group.addr());
        }
    }

    #[test]
    fn a_busy_address_is_named_with_the_fix() {
        let held = udp("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = local_addr(&held).unwrap();
        let plain = |a: SocketAddr| -> Result<Socket, BindError> {
            let s = Socket::new(Domain::IPV4, Type::DGRAM, None).unwrap();
            s.bind(&a.into()).map_err(|e| BindError::of(a, e))?;
            Ok(s)
        };
        let err = ReuseportGroup::bind(addr, 1, plain, |s| Ok(local_addr(s).unwrap())).unwrap_err();
        assert!(matches!(err, BindError::AddrInUse { .. }));
        assert!(err.to_string().contains("pick another port"), "{err}");
    }
}
