//! What can go wrong on the UDP path, each error naming the cause and the fix.

use std::io;
use std::net::SocketAddr;

use crate::reuseport::BindError;
use crate::topology::TopologyError;

#[derive(Debug, thiserror::Error)]
pub enum UdpError {
    #[error("batch {0} is out of range: use 1 to 1024 (the kernel's limit for recvmmsg/sendmmsg)")]
    Batch(usize),
    #[error("{0} flow groups: a receiver reports at most 64 apart; merge some")]
    FlowGroups(usize),
    #[error("--flow-groups counts each datagram's flow and sequence: drop --no-check, and use a backend that reads the datagrams (mmsg, uring or xdp)")]
    FlowGroupsUnchecked,
    #[error("flow group {0}-{1} reaches past flow id 65535, the last a receiver tracks: use lower flow ids")]
    FlowGroupUntracked(u32, u32),
    #[error("flow groups {0}-{1} and {2}-{3} overlap: each datagram would count in both; give each sender its own range")]
    FlowGroupsOverlap(u32, u32, u32, u32),
    #[error("--threads must be at least 1")]
    NoThreads,
    #[error("give at least one address")]
    NoAddress,
    #[error("payload size {size} is out of range: use {min} to {max} bytes")]
    Size { size: usize, min: usize, max: usize },
    #[error("GSO segments {0} is out of range: use 1 to 64 (the kernel's UDP_MAX_SEGMENTS)")]
    Segments(usize),
    #[error(transparent)]
    Bind(#[from] BindError),
    #[error("--steer cpu needs --sockets reuseport and --pin (the lanes' CPUs decide the socket)")]
    Steering,
    #[error(
        "--dispatch needs one receive lane (--threads 1), --backend mmsg and the header check (no --no-check): the receive lane is the one RX queue the workers share"
    )]
    Dispatch,
    #[error(
        "--backend uring receives datagram by datagram: drop --gro, or use --backend mmsg for GRO"
    )]
    UringGro,
    #[error("--backend {backend} offers no echo (it cannot answer requests in place): use --backend {echoing}")]
    NoEcho { backend: &'static str, echoing: String },
    #[error("{flag} does not go with --backend {backend}: it is for {takers}")]
    BackendOption { flag: &'static str, backend: &'static str, takers: String },
    #[error("--reply-every must be at least 1 (1 answers every datagram)")]
    ReplyEvery,
    #[error("--reply-every counts datagrams one by one: drop --gro, or answer every datagram")]
    ReplyEveryGro,
    #[error(
        "--per-source-rate must be 1 to 1000000000 answers per second and --per-source-burst at least 1"
    )]
    Budget,
    #[error("--rate must be above 0 messages per second (or use --mode ping-pong)")]
    ZeroRate,
    #[error("--flows {0} is out of range: use 1 to 1024")]
    Flows(usize),
    #[error("--first-flow {first} with {flows} flows runs past flow id 4294967295: give a smaller --first-flow")]
    FlowIds { first: u32, flows: usize },
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error(transparent)]
    Xdp(#[from] crate::xdp::XdpError),
}

impl UdpError {
    /// A failed bind of `addr`, as the error a user can act on.
    pub(crate) fn bind(addr: SocketAddr, source: io::Error) -> Self {
        Self::Bind(BindError::of(addr, source))
    }

    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        Self::Io { what: what.into(), source }
    }
}
