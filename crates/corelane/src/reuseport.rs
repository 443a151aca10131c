//! A reuseport group: several sockets bound to one address with SO_REUSEPORT, the kernel
//! handing each flow (UDP) or connection (TCP) to one of them — one socket per lane, so lanes
//! never share a socket's lock. Also the one mapping of a failed bind to an error a user can
//! act on, for both protocols.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsFd;

use socket2::{Domain, Socket, Type};

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
    /// Binds `count` sockets of type `kind` to `addr`, each made, configured and bound by
    /// `bind` (which must set SO_REUSEPORT when `count` > 1). Port 0 picks a free port once:
    /// the first socket picks it and the rest of the group joins that port. A fixed port that
    /// another socket already holds is refused first ([`refuse_if_held`]), even where the
    /// kernel would let the group join it.
    pub fn bind<E: From<BindError>>(
        addr: SocketAddr,
        count: usize,
        kind: Type,
        mut bind: impl FnMut(SocketAddr) -> Result<Socket, E>,
        address_of: impl Fn(&Socket) -> Result<SocketAddr, E>,
    ) -> Result<Self, E> {
        refuse_if_held(addr, kind)?;
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

/// Refuses a fixed `addr` that another socket already holds. SO_REUSEPORT lets any socket of
/// the same user join a port, so a second server or receiver started on a served port would
/// silently take a share of its connections or datagrams; a probe bound without SO_REUSEPORT
/// fails there instead. The TCP probe sets SO_REUSEADDR as the listeners do, so connections a
/// previous server left in TIME_WAIT do not count as holding the port; a listener does.
pub fn refuse_if_held(addr: SocketAddr, kind: Type) -> Result<(), BindError> {
    if addr.port() == 0 {
        return Ok(());
    }
    let probe = Socket::new(Domain::for_address(addr), kind.cloexec(), None)
        .map_err(|source| BindError::Other { addr, source })?;
    if kind == Type::STREAM {
        probe.set_reuse_address(true).map_err(|source| BindError::Other { addr, source })?;
    }
    probe.bind(&addr.into()).map_err(|e| BindError::of(addr, e))
}

/// The address a socket is bound to.
pub fn local_addr(socket: &Socket) -> io::Result<SocketAddr> {
    socket.local_addr()?.as_socket().ok_or_else(|| io::Error::other("not an IP socket"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::{Domain, Type};

    fn udp(addr: SocketAddr) -> Result<Socket, BindError> {
        let s = Socket::new(Domain::IPV4, Type::DGRAM, None).unwrap();
        s.set_reuse_port(true).unwrap();
        s.bind(&addr.into()).map_err(|e| BindError::of(addr, e))?;
        Ok(s)
    }

    #[test]
    fn port_zero_is_picked_once_and_joined_by_the_group() {
        let group =
            ReuseportGroup::bind("127.0.0.1:0".parse().unwrap(), 3, Type::DGRAM, udp, |s| {
                Ok::<_, BindError>(local_addr(s).unwrap())
            })
            .expect("bind");
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
        let err = ReuseportGroup::bind(addr, 1, Type::DGRAM, plain, |s| Ok(local_addr(s).unwrap()))
            .unwrap_err();
        assert!(matches!(err, BindError::AddrInUse { .. }));
        assert!(err.to_string().contains("pick another port"), "{err}");
    }

    /// The kernel lets a second reuseport group of the same user join a port; corelane must not.
    #[test]
    fn a_port_another_group_serves_is_refused_not_joined() {
        for kind in [Type::DGRAM, Type::STREAM] {
            let member = |a: SocketAddr| -> Result<Socket, BindError> {
                let s = Socket::new(Domain::IPV4, kind, None).unwrap();
                s.set_reuse_address(true).unwrap();
                s.set_reuse_port(true).unwrap();
                s.bind(&a.into()).map_err(|e| BindError::of(a, e))?;
                if kind == Type::STREAM {
                    s.listen(8).unwrap();
                }
                Ok(s)
            };
            let address = |s: &Socket| Ok(local_addr(s).unwrap());
            let first =
                ReuseportGroup::bind("127.0.0.1:0".parse().unwrap(), 2, kind, member, address)
                    .expect("the first group binds");
            // The kernel itself would take the second group:
            drop(member(first.addr()).expect("SO_REUSEPORT joins a port of the same user"));
            let err = ReuseportGroup::bind(first.addr(), 2, kind, member, address).unwrap_err();
            assert!(matches!(err, BindError::AddrInUse { .. }), "{kind:?}: {err}");
        }
    }

    /// A TCP port whose last server left connections in TIME_WAIT is free to serve again.
    #[test]
    fn a_tcp_port_with_only_time_wait_connections_is_not_refused() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut client = std::net::TcpStream::connect(addr).unwrap();
        let (mut served, _) = listener.accept().unwrap();
        // The server closes first, so its side of the connection waits in TIME_WAIT.
        served.write_all(b"x").unwrap();
        drop(served);
        let mut byte = [0u8; 2];
        let _ = client.read(&mut byte);
        drop(client);
        drop(listener);
        refuse_if_held(addr, Type::STREAM).expect("TIME_WAIT alone does not hold the port");
    }
}
