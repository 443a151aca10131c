//! What can go wrong on the XDP path, each error naming the cause and the fix.

use std::io;
use std::net::{IpAddr, SocketAddr};

#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    #[error(
        "XDP needs root, or CAP_BPF with CAP_NET_ADMIN (and CAP_NET_RAW for AF_XDP): run with sudo"
    )]
    NotPermitted,
    #[error(
        "this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS is off): use --backend mmsg or uring"
    )]
    NoAfXdp,
    #[error("no network interface named {0:?}: see `ip link`")]
    NoInterface(String),
    #[error("{0} is on no interface of this host, so XDP has nowhere to attach: use one of this host's addresses, or give --xdp-dev")]
    AddressNowhere(IpAddr),
    #[error("{addr} is not an address of {dev}: use an address `ip addr show dev {dev}` lists, or that interface")]
    NotOnInterface { addr: IpAddr, dev: String },
    #[error("{0} names no interface (it is unspecified): give --xdp-dev DEV")]
    NeedInterface(SocketAddr),
    #[error("{dev} already carries XDP program id {id} ({name:?}), attached by someone else; corelane never replaces it: remove it yourself (`ip link set dev {dev} xdp off`) or use another interface")]
    Foreign { dev: String, id: u32, name: String },
    #[error("{dev} already carries corelane's XDP program id {id} through bpf_link {link}: another corelane run is receiving there; stop it first")]
    Busy { dev: String, id: u32, link: u32 },
    #[error("the AF_XDP UMEM ({bytes} bytes per queue) is over RLIMIT_MEMLOCK ({limit}): raise it (`ulimit -l unlimited`, or LimitMEMLOCK=infinity in a systemd unit) or run with CAP_IPC_LOCK")]
    Memlock { bytes: u64, limit: String },
    #[error("--xdp-mode {mode} is not possible on {dev}: {reason}; try --xdp-mode auto")]
    ModeRefused { mode: &'static str, dev: String, reason: String },
    #[error("--backend xdp takes exactly one address (one program per interface and port)")]
    OneAddress,
    #[error("--backend xdp receives frame by frame: drop --gro and --dispatch")]
    Options,
    #[error("the next hop {next_hop} on {dev} did not answer ARP/neighbour discovery within 1s: check that it is up (`ip neigh show dev {dev}`)")]
    NoNeighbour { next_hop: IpAddr, dev: String },
    #[error("--backend xdp: a flow socket's address and the target {0} are of different address families: give targets of one family")]
    Ipv6Send(SocketAddr),
    #[error("--backend xdp sends frame by frame, one datagram per frame of at most {max} bytes of payload: drop --gso, keep --size within it")]
    SendOptions { max: usize },
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
}

impl XdpError {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        if matches!(source.raw_os_error(), Some(libc::EPERM)) {
            return Self::NotPermitted;
        }
        Self::Io { what: what.into(), source }
    }
}
