//! The HTTP server: one lane per CPU, each with its own listener (SO_REUSEPORT: a connection
//! stays on the lane that accepted it) or a share of one listener, its own epoll instance,
//! connection slab, buffer pools and counters. Lanes share nothing on the hot path.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use socket2::{Domain, Socket, Type};

use super::config::{Backend, Listen, ServerConfig};
use super::counters::{ServerCounters, ServerTotals};
use super::epoll::EpollLane;
use super::uring::UringLane;
use super::TcpError;
use crate::lane::{LaneSet, LanesEnd, Monitor, Second, StopSignal, Watch};
use crate::reuseport::{self, ReuseportGroup};
use crate::sys::{socket_ring, sockopt};

/// The server's lane threads are named `serve-INDEX`.
pub const LANE_NAME: &str = "serve";

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
    /// Bytes each open connection holds (state and lent buffers), when any is open.
    pub bytes_per_connection: Option<f64>,
}

/// What the server did over all of [`Server::run`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ServeSummary {
    pub seconds: f64,
    #[serde(flatten)]
    pub totals: ServerTotals,
    pub cpu_us_per_request: f64,
    /// Bytes each open connection held (state and lent buffers) at the last second that had
    /// any open (the drain closes them all); none if none was ever open at a second's end.
    pub bytes_per_connection: Option<f64>,
}

/// [`Server::run`]'s seconds: each one's requests, errors and CPU from the lanes' counters.
struct ServeWatch<'a, F> {
    counters: &'a [Arc<ServerCounters>],
    last: ServerTotals,
    /// At the last second that had any connection open.
    bytes_per_connection: Option<f64>,
    on_interval: F,
}

impl<F: FnMut(&ServeInterval)> Watch for ServeWatch<'_, F> {
    fn second(&mut self, second: &Second) {
        let (totals, last) = (ServerTotals::of(self.counters), self.last);
        let requests = totals.requests - last.requests;
        (self.on_interval)(&ServeInterval {
            index: second.tick.index,
            requests_per_sec: requests as f64 / second.tick.since_last.as_secs_f64(),
            open: totals.open,
            client_errors: totals.client_errors - last.client_errors,
            server_errors: totals.server_errors - last.server_errors,
            cpu_us_per_request: second.cpu_ns_per(requests) / 1000.0,
            bytes_per_connection: totals.bytes_per_connection(),
        });
        self.bytes_per_connection = totals.bytes_per_connection().or(self.bytes_per_connection);
        self.last = totals;
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
    identity: Option<crate::privilege::Identity>,
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
        config.placement.check()?;
        if config.listen == Listen::ReuseportCpu && !config.placement.is_pinned() {
            return Err(TcpError::SteeringNeedsPins);
        }
        let (mut notes, mut backend) = (Vec::new(), config.backend);
        if let Backend::Uring { sqpoll_cpu: Some(cpu) } = backend {
            let list = crate::topology::CpuList::new(vec![cpu]);
            crate::topology::Topology::read()?.check(&list)?;
        }
        let (listeners, addr) = bind_listeners(&config)?;
        // Root is given up here: after the bind, before any lane, ring or thread exists (an
        // io_uring keeps its creator's credentials for SQPOLL submissions).
        let identity = config.run_as.as_ref().map(|r| r.become_user()).transpose()?;
        // Probed as the user the lanes run as, after the drop: the probe's SQPOLL thread
        // outlives its ring for a moment, and must not do so with root's credentials.
        if let Backend::Uring { sqpoll_cpu: Some(cpu) } = backend {
            if let Err(reason) = socket_ring::probe_sqpoll(cpu) {
                notes.push(format!("{reason}; lanes submit for themselves"));
                backend = Backend::Uring { sqpoll_cpu: None };
            }
        }
        let max_per_lane = config.limits.max_connections.div_ceil(config.lanes).max(1);
        let content = Arc::new(config.content.clone());
        // Every lane is built before any starts, so a failure leaves nothing running.
        let mut loops = Vec::with_capacity(config.lanes);
        let mut counters = Vec::with_capacity(config.lanes);
        for index in 0..config.lanes {
            let listener = Arc::clone(&listeners[index % listeners.len()]);
            let lane_counters = Arc::new(ServerCounters::default());
            counters.push(Arc::clone(&lane_counters));
            if let Backend::Uring { sqpoll_cpu } = backend {
                let lane = UringLane::new(
                    Arc::clone(&listener),
                    Arc::clone(&content),
                    config.recycle,
                    config.limits,
                    max_per_lane,
                    sqpoll_cpu,
                    Arc::clone(&lane_counters),
                );
                match lane {
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
        let mut lanes = LaneSet::new(LANE_NAME, stop.clone());
        for (index, mut lane) in loops.into_iter().enumerate() {
            let lane_stop = stop.clone();
            lanes
                .spawn(config.placement.cpu_of(index), move || lane.run(&lane_stop))
                .map_err(|e| TcpError::io("cannot start a lane thread", e))?;
        }
        Ok(Self { lanes, counters, addr, backend, notes, identity })
    }

    /// Who the server runs as, when [`ServerConfig::run_as`] was given.
    pub fn identity(&self) -> Option<&crate::privilege::Identity> {
        self.identity.as_ref()
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
    /// this process's exact runtime (CLOCK_PROCESS_CPUTIME_ID) over the requests answered,
    /// the drain included.
    pub fn run(
        self,
        duration: Option<Duration>,
        on_interval: impl FnMut(&ServeInterval),
    ) -> Result<ServeSummary, TcpError> {
        let stop = self.lanes.stop_signal().clone();
        let mut monitor = Monitor::new(&stop, LanesEnd::AnyFinished).until(duration);
        let mut watch = ServeWatch {
            counters: &self.counters,
            last: ServerTotals::default(),
            bytes_per_connection: None,
            on_interval,
        };
        monitor.watch(&[&self.lanes], &mut watch);
        let bytes_per_connection = watch.bytes_per_connection;
        let (_, usage) = monitor.join(self.lanes).map_err(|e| TcpError::io("a lane failed", e))?;
        let totals = ServerTotals::of(&self.counters);
        Ok(ServeSummary {
            seconds: usage.elapsed.as_secs_f64(),
            totals,
            cpu_us_per_request: usage.cpu_ns_per(totals.requests) / 1000.0,
            bytes_per_connection,
        })
    }

    /// Waits for every lane to drain and returns the totals, or the first lane's error.
    pub fn wait(self) -> Result<ServerTotals, TcpError> {
        self.lanes.join().map_err(|e| TcpError::io("a lane failed", e))?;
        Ok(ServerTotals::of(&self.counters))
    }
}

/// One listener per lane in a reuseport group (optionally steered by CPU), or one shared.
fn bind_listeners(config: &ServerConfig) -> Result<(Vec<Arc<Socket>>, SocketAddr), TcpError> {
    let reuseport = config.listen != Listen::Shared;
    let count = if reuseport { config.lanes } else { 1 };
    let group = ReuseportGroup::bind(
        config.addr,
        count,
        Type::STREAM,
        |addr| listener(addr, reuseport, config.backlog),
        |s| {
            reuseport::local_addr(s)
                .map_err(|e| TcpError::io("cannot read the listener's address", e))
        },
    )?;
    if config.listen == Listen::ReuseportCpu {
        group.steer_by_cpu(&config.placement.lane_cpus(config.lanes)).map_err(|e| {
            TcpError::io("the kernel refused the reuseport CPU-steering program", e)
        })?;
    }
    let addr = group.addr();
    Ok((group.into_sockets().into_iter().map(Arc::new).collect(), addr))
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
    let _ = sockopt::set_tcp_defer_accept(std::os::fd::AsFd::as_fd(&socket), 1);
    socket.listen(backlog).map_err(|e| TcpError::io(format!("cannot listen on {addr}"), e))?;
    Ok(socket)
}
