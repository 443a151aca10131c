//! Seed 001's path: a per-lane TCP/HTTP server that recycles its data structures, and the
//! closed-loop load generator that measures it.
//!
//! * [`server`] — lanes with their own listener (SO_REUSEPORT, optionally steered to the CPU
//!   that received the SYN), epoll instance, connection slab and buffer pools.
//! * [`recycle`] — the three recycling methods (buffers, fd slots, epoll events), each
//!   switchable so the lab can price it.
//! * [`http`] — request parsing under limits, response heads, static files.
//! * [`load`] — the load generator (`corelane load http`).

mod epoll;
mod exchange;
pub mod http;
pub mod load;
pub mod recycle;
pub mod server;
mod uring;

use std::io;
use std::net::SocketAddr;

pub use http::Limits;
pub use load::{LoadConfig, LoadSummary};
pub use recycle::Recycle;
pub use server::{
    Backend, Content, Listen, ServeInterval, ServeSummary, Server, ServerConfig, ServerTotals,
};

/// What can go wrong serving or loading, each naming the cause and the fix.
#[derive(Debug, thiserror::Error)]
pub enum TcpError {
    #[error("--lanes must be at least 1")]
    NoLanes,
    #[error("{cpus} CPUs given for {lanes} lanes: give one CPU per lane, or none")]
    Cpus { cpus: usize, lanes: usize },
    #[error("--listen reuseport-cpu needs --pin (the lanes' CPUs decide the listener)")]
    SteeringNeedsPins,
    #[error(
        "--connections {connections} is fewer than --lanes {lanes}: every lane needs a connection"
    )]
    TooFewConnections { connections: usize, lanes: usize },
    #[error("the uring backend serves --body only: use --backend epoll to serve files (sendfile)")]
    UringFiles,
    #[error("--sqpoll needs --backend uring (the SQPOLL thread is io_uring's)")]
    SqpollNeedsUring,
    #[error("{addr} is already in use (another server running?): pick another --port")]
    AddrInUse { addr: SocketAddr },
    #[error("{addr} is not an address of this host or network namespace: use 0.0.0.0 or an address `ip addr` lists")]
    AddrNotAvailable { addr: SocketAddr },
    #[error("binding {addr} is not permitted: ports below 1024 need root or CAP_NET_BIND_SERVICE")]
    Permission { addr: SocketAddr },
    #[error(
        "no response from {target} ({errors} connection errors): is a server listening there?"
    )]
    NoResponses { target: SocketAddr, errors: u64 },
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
    #[error(transparent)]
    Topology(#[from] crate::topology::TopologyError),
}

/// Checks that every CPU a lane is to be pinned to is online.
pub(crate) fn check_cpus(cpus: &[usize], lanes: usize) -> Result<(), TcpError> {
    if cpus.is_empty() {
        return Ok(());
    }
    if cpus.len() != lanes {
        return Err(TcpError::Cpus { cpus: cpus.len(), lanes });
    }
    let list = crate::topology::CpuList::new(cpus.to_vec());
    crate::topology::Topology::read()?.check(&list)?;
    Ok(())
}

impl TcpError {
    pub(crate) fn bind(addr: SocketAddr, source: io::Error) -> Self {
        match source.kind() {
            io::ErrorKind::AddrInUse => Self::AddrInUse { addr },
            io::ErrorKind::AddrNotAvailable => Self::AddrNotAvailable { addr },
            io::ErrorKind::PermissionDenied => Self::Permission { addr },
            _ => Self::Io { what: format!("cannot bind {addr}"), source },
        }
    }

    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        Self::Io { what: what.into(), source }
    }
}
