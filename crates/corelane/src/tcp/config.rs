//! What a server is asked to do: its content, how connections reach lanes, which backend
//! its lanes run and their limits. A leaf: the lanes and the server read it.

use std::net::SocketAddr;
use std::time::Duration;

use super::http::Limits;
use super::recycle::Recycle;
use super::static_file::StaticRoot;
use crate::lane::Placement;

/// How often a lane looks for timed-out connections and checks its stop signal when idle.
pub(crate) const TICK: Duration = Duration::from_millis(50);

/// What the server answers with.
#[derive(Debug, Clone)]
pub enum Content {
    /// The same body (text/plain) for every GET.
    Body(Vec<u8>),
    /// Files under a directory.
    Root(StaticRoot),
}

/// How connections reach lanes (the web-serving study's flow-to-core allocation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Listen {
    /// One listener watched by every lane (EPOLLEXCLUSIVE wakes one): the baseline.
    Shared,
    /// A SO_REUSEPORT listener per lane; the kernel hashes each connection to one.
    Reuseport,
    /// Reuseport plus a BPF program that picks the lane pinned to the CPU that received the
    /// connection's SYN: the connection is served where its packets are processed.
    ReuseportCpu,
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Shared => "shared",
            Self::Reuseport => "reuseport",
            Self::ReuseportCpu => "reuseport-cpu",
        })
    }
}

impl std::str::FromStr for Listen {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "shared" => Ok(Self::Shared),
            "reuseport" => Ok(Self::Reuseport),
            "reuseport-cpu" => Ok(Self::ReuseportCpu),
            _ => Err(format!("unknown listen mode {s:?}: use shared, reuseport or reuseport-cpu")),
        }
    }
}

/// How a lane talks to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Edge-triggered epoll and one read and one write syscall per request.
    Epoll,
    /// io_uring: multishot accept into registered files, multishot receive into provided
    /// buffers, one submission per loop iteration; with `sqpoll_cpu`, none: an SQPOLL thread
    /// pinned to that CPU submits for the lane (the core-partitioning study's syscall thread).
    Uring { sqpoll_cpu: Option<usize> },
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Epoll => "epoll",
            Self::Uring { sqpoll_cpu: None } => "uring",
            Self::Uring { sqpoll_cpu: Some(_) } => "uring+sqpoll",
        })
    }
}

/// As its name (`epoll`, `uring`, `uring+sqpoll`), the same names UDP's receiver reports.
impl serde::Serialize for Backend {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `epoll` or `uring` (without an SQPOLL thread: the CLI's `--sqpoll` adds it).
impl std::str::FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "epoll" => Ok(Self::Epoll),
            "uring" | "io_uring" | "io-uring" => Ok(Self::Uring { sqpoll_cpu: None }),
            _ => Err(format!("unknown backend {s:?}: use epoll or uring")),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub addr: SocketAddr,
    pub lanes: usize,
    /// Which CPU each lane runs on.
    pub placement: Placement,
    pub content: Content,
    pub recycle: Recycle,
    pub listen: Listen,
    pub limits: Limits,
    pub backlog: i32,
    pub backend: Backend,
    /// The user to become once the port is bound, before any lane (or io_uring) is made;
    /// `None` keeps the process as it is.
    pub run_as: Option<crate::privilege::RunAs>,
}

impl ServerConfig {
    pub fn new(addr: SocketAddr, content: Content) -> Self {
        Self {
            addr,
            lanes: 1,
            placement: Placement::Unpinned,
            content,
            recycle: Recycle::ALL,
            listen: Listen::Reuseport,
            limits: Limits::default(),
            backlog: 4096,
            backend: Backend::Epoll,
            run_as: None,
        }
    }
}
