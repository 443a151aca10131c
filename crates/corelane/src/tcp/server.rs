//! The HTTP server: one lane per CPU, each with its own listener (SO_REUSEPORT: a connection
//! stays on the lane that accepted it) or a share of one listener, its own epoll instance,
//! connection slab, buffer pools and counters. Lanes share nothing on the hot path.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::{Domain, Socket, Type};

use super::epoll::EpollLane;
use super::http::{Limits, StaticRoot};
use super::recycle::Recycle;
use super::uring::UringLane;
use super::TcpError;
use crate::lane::{LaneSet, StopSignal};
use crate::sys::sockopt;

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

/// How connections reach lanes (seed 001's flow-to-core allocation).
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// Edge-triggered epoll and one read and one write syscall per request.
    Epoll,
    /// io_uring: multishot accept into registered files, multishot receive into provided
    /// buffers, one submission per loop iteration (or none, with an SQPOLL thread).
    Uring,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Epoll => "epoll",
            Self::Uring => "uring",
        })
    }
}

impl std::str::FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "epoll" => Ok(Self::Epoll),
            "uring" | "io_uring" | "io-uring" => Ok(Self::Uring),
            _ => Err(format!("unknown backend {s:?}: use epoll or uring")),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub addr: SocketAddr,
    pub lanes: usize,
    /// CPU of each lane (same length as `lanes`), or empty for unpinned lanes.
    pub cpus: Vec<usize>,
    pub content: Content,
    pub recycle: Recycle,
    pub listen: Listen,
    pub limits: Limits,
    pub backlog: i32,
    pub backend: Backend,
    /// With the uring backend: an SQPOLL thread per lane, pinned to this CPU, submits for
    /// the lanes (seed 003's syscall thread).
    pub sqpoll_cpu: Option<usize>,
}

impl ServerConfig {
    pub fn new(addr: SocketAddr, content: Content) -> Self {
        Self {
            addr,
            lanes: 1,
            cpus: Vec::new(),
            content,
            recycle: Recycle::ALL,
            listen: Listen::Reuseport,
            limits: Limits::default(),
            backlog: 4096,
            backend: Backend::Epoll,
            sqpoll_cpu: None,
        }
    }
}

/// Counters one lane writes and anyone reads; alone on their cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct ServerCounters {
    pub(crate) requests: AtomicU64,
    pub(crate) accepted: AtomicU64,
    pub(crate) open: AtomicU64,
    pub(crate) client_errors: AtomicU64,
    pub(crate) server_errors: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) timeouts: AtomicU64,
    pub(crate) bytes_out: AtomicU64,
}

/// Only the owning lane writes, so a load and a store are enough (no locked read-modify-write).
pub(crate) fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Ordering::Relaxed).wrapping_add(by), Ordering::Relaxed);
}

/// What the server did in one second of [`Server::run`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ServeInterval {
    pub index: u64,
    pub requests_per_sec: f64,
    pub open: u64,
    pub client_errors: u64,
    pub server_errors: u64,
    /// This process's exact CPU time per request answered in the interval, in µs.
    pub cpu_us_per_request: f64,
}

/// What the server did over all of [`Server::run`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ServeSummary {
    pub seconds: f64,
    #[serde(flatten)]
    pub totals: ServerTotals,
    pub cpu_us_per_request: f64,
}

fn per_request_us(cpu: Duration, requests: u64) -> f64 {
    if requests == 0 {
        0.0
    } else {
        cpu.as_secs_f64() * 1e6 / requests as f64
    }
}

/// Totals over every lane.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServerTotals {
    /// Requests answered (any status).
    pub requests: u64,
    pub connections: u64,
    pub open: u64,
    /// 4xx responses (malformed, oversized, slow or not found).
    pub client_errors: u64,
    /// 5xx responses other than refusals.
    pub server_errors: u64,
    /// Connections refused with 503 at the connection limit.
    pub refused: u64,
    /// Connections closed by the header timeout (408).
    pub timeouts: u64,
    pub bytes_out: u64,
}

impl ServerTotals {
    pub fn of(counters: &[Arc<ServerCounters>]) -> Self {
        let mut t = Self::default();
        for c in counters {
            let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
            t.requests += get(&c.requests);
            t.connections += get(&c.accepted);
            t.open += get(&c.open);
            t.client_errors += get(&c.client_errors);
            t.server_errors += get(&c.server_errors);
            t.refused += get(&c.refused);
            t.timeouts += get(&c.timeouts);
            t.bytes_out += get(&c.bytes_out);
        }
        t
    }
}

/// A running server.
#[derive(Debug)]
pub struct Server {
    lanes: LaneSet<()>,
    counters: Vec<Arc<ServerCounters>>,
    addr: SocketAddr,
    backend: Backend,
    notes: Vec<String>,
}

/// A lane ready to run, on either backend.
#[derive(Debug)]
enum LaneLoop {
    Epoll(Box<EpollLane>),
    Uring(Box<UringLane>),
}

impl LaneLoop {
    fn run(&mut self, stop: &StopSignal) -> io::Result<()> {
        match self {
            Self::Epoll(lane) => lane.run(stop),
            Self::Uring(lane) => lane.run(stop),
        }
    }
}

impl Server {
    /// Binds every listener (so a busy port fails here, before any lane starts), then starts
    /// the lanes. They run until `stop` is raised, then drain.
    pub fn start(config: ServerConfig, stop: StopSignal) -> Result<Self, TcpError> {
        if config.lanes == 0 {
            return Err(TcpError::NoLanes);
        }
        super::check_cpus(&config.cpus, config.lanes)?;
        if config.listen == Listen::ReuseportCpu && config.cpus.is_empty() {
            return Err(TcpError::SteeringNeedsPins);
        }
        let listeners = bind_listeners(&config)?;
        let addr = listeners[0].local_addr().ok().and_then(|a| a.as_socket()).ok_or_else(|| {
            TcpError::io("cannot read the listener's address", io::Error::other("no address"))
        })?;
        let max_per_lane = config.limits.max_connections.div_ceil(config.lanes).max(1);
        let content = Arc::new(config.content);
        let mut notes = Vec::new();
        let mut backend = config.backend;
        let mut sqpoll_cpu = config.sqpoll_cpu;
        if backend == Backend::Uring && matches!(*content, Content::Root(_)) {
            return Err(TcpError::UringFiles);
        }
        if backend == Backend::Epoll && sqpoll_cpu.is_some() {
            return Err(TcpError::SqpollNeedsUring);
        }
        if let Some(cpu) = sqpoll_cpu {
            super::check_cpus(&[cpu], 1)?;
            if let Err(reason) = crate::sys::socket_ring::probe_sqpoll(cpu) {
                notes.push(format!("{reason}; lanes submit for themselves"));
                sqpoll_cpu = None;
            }
        }
        // Every lane is built before any starts, so a failure leaves nothing running.
        let mut loops = Vec::with_capacity(config.lanes);
        let mut counters = Vec::with_capacity(config.lanes);
        for index in 0..config.lanes {
            let listener = Arc::clone(&listeners[index % listeners.len()]);
            let lane_counters = Arc::new(ServerCounters::default());
            counters.push(Arc::clone(&lane_counters));
            if backend == Backend::Uring {
                match UringLane::new(
                    Arc::clone(&listener),
                    Arc::clone(&content),
                    config.recycle,
                    config.limits,
                    max_per_lane,
                    sqpoll_cpu,
                    Arc::clone(&lane_counters),
                ) {
                    Ok(lane) => {
                        loops.push(LaneLoop::Uring(Box::new(lane)));
                        continue;
                    }
                    Err(e) if index == 0 => {
                        notes.push(format!(
                            "io_uring is not available here ({e}); serving with epoll"
                        ));
                        backend = Backend::Epoll;
                    }
                    Err(e) => return Err(TcpError::io("cannot set up a lane's io_uring", e)),
                }
            }
            let lane = EpollLane::new(
                listener,
                config.listen == Listen::Shared,
                Arc::clone(&content),
                config.recycle,
                config.limits,
                max_per_lane,
                lane_counters,
            )
            .map_err(|e| TcpError::io("cannot create an epoll instance", e))?;
            loops.push(LaneLoop::Epoll(Box::new(lane)));
        }
        // Dropping the set (an error below, or a Server dropped without `wait`) stops and
        // joins the lanes started so far.
        let mut lanes = LaneSet::new("serve", stop.clone());
        for (index, mut lane) in loops.into_iter().enumerate() {
            let lane_stop = stop.clone();
            let cpu = config.cpus.get(index).copied();
            lanes
                .spawn(cpu, move || lane.run(&lane_stop))
                .map_err(|e| TcpError::io("cannot start a lane thread", e))?;
        }
        Ok(Self { lanes, counters, addr, backend, notes })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The backend the lanes run (uring falls back to epoll where the kernel refuses it).
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Fallbacks taken at start, each with its reason.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    pub fn counters(&self) -> &[Arc<ServerCounters>] {
        &self.counters
    }

    pub fn totals(&self) -> ServerTotals {
        ServerTotals::of(&self.counters)
    }

    /// True once any lane has ended (after a stop, or on an error `wait` reports).
    pub fn any_lane_finished(&self) -> bool {
        self.lanes.any_finished()
    }

    /// Serves until the stop signal is raised or `duration` has passed, calling
    /// `on_interval` once a second; then drains and returns the summary. CPU per request is
    /// this process's exact runtime (CLOCK_PROCESS_CPUTIME_ID) over the requests answered.
    pub fn run(
        self,
        duration: Option<Duration>,
        mut on_interval: impl FnMut(&ServeInterval),
    ) -> Result<ServeSummary, TcpError> {
        let stop = self.lanes.stop_signal().clone();
        let cpu_at_start = crate::stats::process_runtime();
        let mut ticker = crate::stats::Ticker::every(Duration::from_secs(1));
        let started = ticker.start();
        let end = duration.map(|d| started + d);
        let (mut last, mut last_cpu) = (ServerTotals::default(), cpu_at_start);
        while !stop.is_stopped() && !self.any_lane_finished() {
            if end.is_some_and(|end| Instant::now() >= end) {
                break;
            }
            if let Some(tick) = ticker.wait(end) {
                let (totals, cpu) = (self.totals(), crate::stats::process_runtime());
                let requests = totals.requests - last.requests;
                on_interval(&ServeInterval {
                    index: tick.index,
                    requests_per_sec: requests as f64 / tick.since_last.as_secs_f64(),
                    open: totals.open,
                    client_errors: totals.client_errors - last.client_errors,
                    server_errors: totals.server_errors - last.server_errors,
                    cpu_us_per_request: per_request_us(cpu.saturating_sub(last_cpu), requests),
                });
                (last, last_cpu) = (totals, cpu);
            }
        }
        stop.stop();
        let totals = self.wait()?;
        let cpu_total = crate::stats::process_runtime().saturating_sub(cpu_at_start);
        Ok(ServeSummary {
            seconds: started.elapsed().as_secs_f64(),
            totals,
            cpu_us_per_request: per_request_us(cpu_total, totals.requests),
        })
    }

    /// Waits for every lane to drain and returns the totals, or the first lane's error.
    pub fn wait(self) -> Result<ServerTotals, TcpError> {
        self.lanes.join().map_err(|e| TcpError::io("a lane failed", e))?;
        Ok(ServerTotals::of(&self.counters))
    }
}

fn bind_listeners(config: &ServerConfig) -> Result<Vec<Arc<Socket>>, TcpError> {
    let count = if config.listen == Listen::Shared { 1 } else { config.lanes };
    let reuseport = config.listen != Listen::Shared;
    let mut addr = config.addr;
    let mut listeners = Vec::with_capacity(count);
    for _ in 0..count {
        let socket = listener(addr, reuseport, config.backlog)?;
        if addr.port() == 0 {
            // Port 0: the first listener picks the port, the rest of the group joins it.
            if let Some(bound) = socket.local_addr().ok().and_then(|a| a.as_socket()) {
                addr = bound;
            }
        }
        listeners.push(Arc::new(socket));
    }
    if config.listen == Listen::ReuseportCpu {
        sockopt::steer_reuseport_by_cpu(listeners[0].as_fd(), &config.cpus).map_err(|e| {
            TcpError::io("the kernel refused the reuseport CPU-steering program", e)
        })?;
    }
    Ok(listeners)
}

fn listener(addr: SocketAddr, reuseport: bool, backlog: i32) -> Result<Socket, TcpError> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM.nonblocking().cloexec(), None)
        .map_err(|e| TcpError::io("cannot create a TCP socket", e))?;
    let setup = |s: &Socket| -> io::Result<()> {
        s.set_reuse_address(true)?;
        if reuseport {
            s.set_reuse_port(true)?;
        }
        Ok(())
    };
    setup(&socket).map_err(|e| TcpError::io("cannot set SO_REUSEADDR/SO_REUSEPORT", e))?;
    socket.bind(&addr.into()).map_err(|e| TcpError::bind(addr, e))?;
    // Best effort: without it a connection is accepted before its request arrives.
    let _ = sockopt::set_tcp_defer_accept(socket.as_fd(), 1);
    socket.listen(backlog).map_err(|e| TcpError::io(format!("cannot listen on {addr}"), e))?;
    Ok(socket)
}
