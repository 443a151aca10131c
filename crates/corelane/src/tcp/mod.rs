//! Seed 001's path: a per-lane TCP/HTTP server that recycles its data structures, and the
//! closed-loop load generator that measures it.
//!
//! * [`config`] — what a server is asked to do; [`counters`] — what its lanes count.
//! * [`server`] — lanes with their own listener (SO_REUSEPORT, optionally steered to the CPU
//!   that received the SYN), epoll instance, connection slab and buffer pools.
//! * [`recycle`] — the three recycling methods (buffers, fd slots, epoll events), each
//!   switchable so the lab can price it.
//! * [`http`] — request parsing under limits, response heads, static files.
//! * [`load`] — the load generator (`corelane load http`).

mod answer_clock;
pub mod config;
mod conn;
pub mod counters;
mod epoll;
mod exchange;
pub mod http;
pub mod idle;
pub mod load;
pub mod recycle;
mod response;
pub mod server;
pub mod static_file;
mod uring;
mod write_out;

use std::io;
use std::net::SocketAddr;

pub use config::{Backend, Content, Listen, ServerConfig};
pub use counters::ServerCounters;
pub use counters::ServerTotals;
pub use http::Limits;
pub use load::{LoadConfig, LoadSummary};
pub use recycle::Recycle;
pub use server::{ServeInterval, ServeSummary, Server, LANE_NAME};

/// What can go wrong serving or loading, each naming the cause and the fix.
#[derive(Debug, thiserror::Error)]
pub enum TcpError {
    #[error("--lanes must be at least 1")]
    NoLanes,
    #[error("--rate must be above 0 requests per second (leave it out for a closed loop)")]
    ZeroRate,
    #[error("--listen reuseport-cpu needs --pin (the lanes' CPUs decide the listener)")]
    SteeringNeedsPins,
    #[error(
        "--connections {connections} is fewer than --lanes {lanes}: every lane needs a connection"
    )]
    TooFewConnections { connections: usize, lanes: usize },
    #[error(transparent)]
    Bind(#[from] crate::reuseport::BindError),
    #[error(
        "no response from {target} ({errors} connection errors: refused, reset, timed out, or an answer that is not HTTP/1.1 with a Content-Length and a head under 64 KiB): is an HTTP server listening there?"
    )]
    NoResponses { target: SocketAddr, errors: u64 },
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
    #[error(transparent)]
    Privilege(#[from] crate::privilege::PrivilegeError),
    #[error(transparent)]
    Topology(#[from] crate::topology::TopologyError),
}

impl TcpError {
    /// A failed bind of `addr`, as the error a user can act on.
    pub(crate) fn bind(addr: SocketAddr, source: io::Error) -> Self {
        Self::Bind(crate::reuseport::BindError::of(addr, source))
    }

    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        Self::Io { what: what.into(), source }
    }
}
