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
        let fixed = addr.port() != 0;
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
        // The probe and the binds are not one step: another server started at the same
        // moment may have passed its probe too and joined. Both see it now and refuse.
        if fixed && others_hold(addr, kind, &sockets) {
            return Err(BindError::AddrInUse { addr }.into());
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

/// Whether a socket other than `ours` holds `addr` (a TCP listener, or a bound UDP socket),
/// from the kernel's socket tables of the calling thread's network namespace
/// (/proc/thread-self/net/…: /proc/net is the main thread's, which a thread that joined
/// another namespace does not share). Where the tables cannot be read nothing is known and
/// the probe's answer stands.
fn others_hold(addr: SocketAddr, kind: Type, ours: &[Socket]) -> bool {
    let ours: Vec<u64> =
        ours.iter().filter_map(|s| rustix::fs::fstat(s).ok()).map(|st| st.st_ino).collect();
    let (tables, listen) = match kind == Type::STREAM {
        true => (["/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"], Some("0A")),
        false => (["/proc/thread-self/net/udp", "/proc/thread-self/net/udp6"], None),
    };
    tables.iter().filter_map(|t| std::fs::read_to_string(t).ok()).any(|table| {
        table.lines().skip(1).filter_map(table_entry).any(|(local, state, inode)| {
            let same_place = local.port() == addr.port()
                && (local.ip() == addr.ip()
                    || local.ip().is_unspecified()
                    || addr.ip().is_unspecified());
            same_place && listen.is_none_or(|l| l == state) && inode != 0 && !ours.contains(&inode)
        })
    })
}

/// One line of a /proc/net socket table: its local address, state and inode.
fn table_entry(line: &str) -> Option<(SocketAddr, &str, u64)> {
    let fields: Vec<&str> = line.split_ascii_whitespace().collect();
    let (local, state, inode) = (fields.get(1)?, fields.get(3)?, fields.get(9)?);
    let (ip, port) = local.split_once(':')?;
    // The kernel prints each 32-bit word of the address as it lies in memory.
    let words: Vec<u32> = (0..ip.len() / 8)
        .map(|i| u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok())
        .collect::<Option<_>>()?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let ip = match bytes.len() {
        4 => std::net::IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?),
        16 => std::net::IpAddr::from(<[u8; 16]>::try_from(bytes).ok()?),
        _ => return None,
    };
    let port = u16::from_str_radix(port, 16).ok()?;
    Some((SocketAddr::new(ip, port), state, inode.parse().ok()?))
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

    /// A thread that joined another network namespace is judged by that namespace's sockets,
    /// not by the main thread's: a port held out there does not refuse a bind in here.
    #[test]
    fn a_thread_in_another_namespace_sees_its_own_socket_tables() {
        let outside = udp("0.0.0.0:0".parse().unwrap()).unwrap();
        let port = local_addr(&outside).unwrap().port();
        let ns = format!("corelane-reuseport-{}", std::process::id());
        let made = std::process::Command::new("ip").args(["netns", "add", &ns]).status();
        if !made.is_ok_and(|s| s.success()) {
            return eprintln!("skipped: cannot make a network namespace (needs root and ip)");
        }
        let path = format!("/run/netns/{ns}");
        let inside = std::thread::spawn(move || {
            let joined = std::fs::File::open(&path).and_then(|f| {
                rustix::thread::move_into_link_name_space(
                    std::os::fd::AsFd::as_fd(&f),
                    Some(rustix::thread::LinkNameSpaceType::Network),
                )
                .map_err(std::io::Error::from)
            });
            if let Err(e) = joined {
                return Err(format!("skipped: cannot join {path} ({e})"));
            }
            let addr = SocketAddr::from(([0, 0, 0, 0], port));
            ReuseportGroup::bind(addr, 2, Type::DGRAM, udp, |s| Ok(local_addr(s).unwrap()))
                .map(drop)
                .map_err(|e: BindError| format!("refused in a namespace of its own: {e}"))
        })
        .join()
        .unwrap();
        let _ = std::process::Command::new("ip").args(["netns", "del", &ns]).status();
        match inside {
            Err(skip) if skip.starts_with("skipped") => eprintln!("{skip}"),
            other => other.unwrap(),
        }
        drop(outside);
    }

    /// Two servers started at the same moment can both pass the probe; whichever binds
    /// second, and the first on its own check, sees the other in the socket tables.
    #[test]
    fn a_server_that_joined_after_the_probe_is_seen() {
        for kind in [Type::DGRAM, Type::STREAM] {
            let member = |a: SocketAddr| -> Socket {
                let s = Socket::new(Domain::IPV4, kind, None).unwrap();
                s.set_reuse_address(true).unwrap();
                s.set_reuse_port(true).unwrap();
                s.bind(&a.into()).unwrap();
                if kind == Type::STREAM {
                    s.listen(8).unwrap();
                }
                s
            };
            let first = member("127.0.0.1:0".parse().unwrap());
            let addr = local_addr(&first).unwrap();
            let second = member(addr);
            assert!(
                !others_hold(
                    addr,
                    kind,
                    &[first.try_clone().unwrap(), second.try_clone().unwrap()]
                ),
                "{kind:?}: ours only"
            );
            assert!(others_hold(addr, kind, std::slice::from_ref(&first)), "{kind:?}: the joiner");
            let wildcard: SocketAddr = format!("0.0.0.0:{}", addr.port()).parse().unwrap();
            assert!(
                others_hold(wildcard, kind, std::slice::from_ref(&first)),
                "{kind:?}: any address"
            );
            let elsewhere: SocketAddr = format!("127.0.0.2:{}", addr.port()).parse().unwrap();
            assert!(!others_hold(elsewhere, kind, &[]), "{kind:?}: another address is not held");
        }
    }

    #[test]
    fn socket_table_lines_are_read_or_passed_over() {
        let v4 = "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1613 1";
        let (local, state, inode) = table_entry(v4).unwrap();
        assert_eq!((local, state, inode), ("127.0.0.1:8080".parse().unwrap(), "0A", 1613));
        let v6 = "   0: 00000000000000000000000001000000:0035 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 42 2";
        assert_eq!(table_entry(v6).unwrap().0, "[::1]:53".parse().unwrap());
        for bad in [
            "",
            "  sl  local_address",
            "0: zz:1 0:0 0A a b c d e f",
            "0: 0100007F 0:0 0A a b c d e 7",
        ] {
            assert!(table_entry(bad).is_none(), "{bad:?}");
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
