//! The HTTP server: one lane per CPU, each with its own listener (SO_REUSEPORT: a connection
//! stays on the lane that accepted it) or a share of one listener, its own epoll instance,
//! connection slab, buffer pools and counters. Lanes share nothing on the hot path.

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::event::epoll::{self, Event, EventData, EventFlags};
use rustix::io::Errno;
use rustix::net::SocketFlags;
use socket2::{Domain, Socket, Type};

use super::http::{self, DateCache, Limits, Method, Parsed, Request, StaticRoot, Status};
use super::recycle::{BufferPool, Recycle, SlotTable};
use super::TcpError;
use crate::lane::{Lane, StopSignal};
use crate::sys::sockopt;

/// The epoll token of a lane's listener; connections use their slot tokens.
const LISTENER: u64 = u64::MAX;
/// Events one `epoll_wait` returns at most.
const EVENTS: usize = 256;
/// Connections accepted per listener wake-up, so a burst cannot starve open connections.
const ACCEPT_BURST: usize = 128;
/// How often a lane looks for timed-out connections and checks its stop signal when idle.
const TICK: Duration = Duration::from_millis(50);
/// A response head and a small body fit; larger responses grow the buffer.
const OUTPUT_BYTES: usize = 4096;

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
        }
    }
}

/// Counters one lane writes and anyone reads; alone on their cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct ServerCounters {
    requests: AtomicU64,
    accepted: AtomicU64,
    open: AtomicU64,
    client_errors: AtomicU64,
    server_errors: AtomicU64,
    refused: AtomicU64,
    timeouts: AtomicU64,
    bytes_out: AtomicU64,
}

/// Only the owning lane writes, so a load and a store are enough (no locked read-modify-write).
fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Ordering::Relaxed).wrapping_add(by), Ordering::Relaxed);
}

/// Totals over every lane.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
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
    lanes: Vec<Lane<()>>,
    counters: Vec<Arc<ServerCounters>>,
    addr: SocketAddr,
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
        let mut lanes = Vec::with_capacity(config.lanes);
        let mut counters = Vec::with_capacity(config.lanes);
        for index in 0..config.lanes {
            let listener = Arc::clone(&listeners[index % listeners.len()]);
            let lane_counters = Arc::new(ServerCounters::default());
            counters.push(Arc::clone(&lane_counters));
            let mut lane = LaneLoop::new(
                listener,
                config.listen == Listen::Shared,
                Arc::clone(&content),
                config.recycle,
                config.limits,
                max_per_lane,
                lane_counters,
            )
            .map_err(|e| TcpError::io("cannot create an epoll instance", e))?;
            let stop = stop.clone();
            let cpu = config.cpus.get(index).copied();
            lanes.push(
                Lane::spawn("serve", index, cpu, move || lane.run(&stop))
                    .map_err(|e| TcpError::io("cannot start a lane thread", e))?,
            );
        }
        Ok(Self { lanes, counters, addr })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn counters(&self) -> &[Arc<ServerCounters>] {
        &self.counters
    }

    pub fn totals(&self) -> ServerTotals {
        ServerTotals::of(&self.counters)
    }

    /// True once any lane has ended (after a stop, or on an error `wait` reports).
    pub fn any_lane_finished(&self) -> bool {
        self.lanes.iter().any(Lane::is_finished)
    }

    /// Waits for every lane to drain and returns the totals, or the first lane's error.
    pub fn wait(self) -> Result<ServerTotals, TcpError> {
        let mut first_error = None;
        for lane in self.lanes {
            let index = lane.index;
            if let Err(e) = lane.join() {
                first_error.get_or_insert(TcpError::io(format!("lane {index} failed"), e));
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(ServerTotals::of(&self.counters)),
        }
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
    socket.listen(backlog).map_err(|e| TcpError::io(format!("cannot listen on {addr}"), e))?;
    Ok(socket)
}

/// One connection's state.
#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    /// Received bytes not yet consumed: `input[..filled]`.
    input: Vec<u8>,
    filled: usize,
    /// Response bytes not yet sent: `output[sent..]`.
    output: Vec<u8>,
    sent: usize,
    /// A file body to send after `output`: the file, the next offset and the end.
    file: Option<(File, u64, u64)>,
    /// Request body bytes still to be skipped.
    skip_body: u64,
    /// Close once `output` and `file` are sent.
    close_after: bool,
    /// When the request now being received began (for the header timeout).
    request_since: Option<Instant>,
    /// Last read or write progress (for the idle timeout).
    last_active: Instant,
}

impl Conn {
    fn consume(&mut self, n: usize) {
        if n < self.filled {
            self.input.copy_within(n..self.filled, 0);
        }
        self.filled -= n;
    }

    fn is_idle(&self) -> bool {
        self.filled == 0 && self.output.is_empty() && self.file.is_none()
    }
}

/// How far a flush got.
enum Flushed {
    Done,
    Blocked,
    Failed,
}

/// Ready-made responses for a fixed body, rebuilt when the Date header changes.
#[derive(Debug)]
struct Responder {
    content: Arc<Content>,
    limits: Limits,
    date: DateCache,
    /// Date the cached responses carry, and [keep-alive, close] × [GET, HEAD].
    cached_date: String,
    cached: [[Vec<u8>; 2]; 2],
}

impl Responder {
    fn new(content: Arc<Content>, limits: Limits) -> Self {
        let mut r = Self {
            content,
            limits,
            date: DateCache::default(),
            cached_date: String::new(),
            cached: Default::default(),
        };
        r.refresh(Instant::now());
        r
    }

    fn refresh(&mut self, now: Instant) {
        let date = self.date.get(now);
        if date == self.cached_date {
            return;
        }
        self.cached_date = date.to_owned();
        if let Content::Body(body) = &*self.content {
            for (k, keep) in [true, false].into_iter().enumerate() {
                for (m, get) in [true, false].into_iter().enumerate() {
                    let out = &mut self.cached[k][m];
                    out.clear();
                    let len = body.len() as u64;
                    http::write_head(out, Status::Ok, "text/plain", len, keep, &self.cached_date);
                    if get {
                        out.extend_from_slice(body);
                    }
                }
            }
        }
    }

    /// Appends the response to `req` to the connection; a file body is left in `conn.file`.
    fn respond(&mut self, conn: &mut Conn, req: &Request, keep: bool) -> Status {
        let k = usize::from(!keep);
        match (&*self.content, req.method) {
            (_, Method::Other) => {
                http::write_error(
                    &mut conn.output,
                    Status::MethodNotAllowed,
                    keep,
                    &self.cached_date,
                );
                Status::MethodNotAllowed
            }
            (Content::Body(_), method) => {
                let m = usize::from(method == Method::Head);
                conn.output.extend_from_slice(&self.cached[k][m]);
                Status::Ok
            }
            (Content::Root(root), method) => {
                let opened = root
                    .resolve(&conn.input[req.target.clone()])
                    .and_then(|path| open_regular(&path).map(|(f, len)| (path, f, len)));
                match opened {
                    Ok((path, file, len)) => {
                        let kind = http::content_type(&path);
                        http::write_head(
                            &mut conn.output,
                            Status::Ok,
                            kind,
                            len,
                            keep,
                            &self.cached_date,
                        );
                        if method == Method::Get && len > 0 {
                            conn.file = Some((file, 0, len));
                        }
                        Status::Ok
                    }
                    Err(status) => {
                        http::write_error(&mut conn.output, status, keep, &self.cached_date);
                        status
                    }
                }
            }
        }
    }
}

fn open_regular(path: &std::path::Path) -> Result<(File, u64), Status> {
    let file = File::open(path).map_err(|e| match e.kind() {
        io::ErrorKind::PermissionDenied => Status::Forbidden,
        _ => Status::NotFound,
    })?;
    let meta = file.metadata().map_err(|_| Status::NotFound)?;
    if !meta.is_file() {
        return Err(Status::NotFound);
    }
    Ok((file, meta.len()))
}

/// A lane's input and output buffers.
#[derive(Debug)]
struct Buffers {
    inputs: BufferPool,
    outputs: BufferPool,
    recycle: bool,
}

impl Buffers {
    /// Without recycling, an idle connection holds no buffers: the next request allocates
    /// fresh ones, as a server that allocates per request does (the sk_buff analog).
    fn release_if_idle(&mut self, conn: &mut Conn) {
        if !self.recycle && conn.is_idle() {
            self.inputs.give(std::mem::take(&mut conn.input));
            self.outputs.give(std::mem::take(&mut conn.output));
        }
    }
}

/// One lane's event loop and everything it owns.
#[derive(Debug)]
struct LaneLoop {
    epoll: OwnedFd,
    listener: Option<Arc<Socket>>,
    shared_listener: bool,
    table: SlotTable<Conn>,
    buffers: Buffers,
    responder: Responder,
    recycle: Recycle,
    max_connections: usize,
    counters: Arc<ServerCounters>,
    /// Accepting paused (fd limit reached) until this instant.
    accept_resume: Option<Instant>,
    drain_deadline: Option<Instant>,
}

impl LaneLoop {
    fn new(
        listener: Arc<Socket>,
        shared_listener: bool,
        content: Arc<Content>,
        recycle: Recycle,
        limits: Limits,
        max_connections: usize,
        counters: Arc<ServerCounters>,
    ) -> io::Result<Self> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let mut lane = Self {
            epoll,
            listener: Some(listener),
            shared_listener,
            table: SlotTable::new(recycle.fd),
            buffers: Buffers {
                inputs: BufferPool::new(limits.max_header_bytes, recycle.buffers, 1024),
                outputs: BufferPool::new(0, recycle.buffers, 1024),
                recycle: recycle.buffers,
            },
            responder: Responder::new(content, limits),
            recycle,
            max_connections,
            counters,
            accept_resume: None,
            drain_deadline: None,
        };
        lane.watch_listener()?;
        Ok(lane)
    }

    fn watch_listener(&mut self) -> io::Result<()> {
        let Some(listener) = &self.listener else { return Ok(()) };
        let mut flags = EventFlags::IN;
        if self.shared_listener {
            // Wake one lane per connection, not all of them (the thundering herd).
            flags |= EventFlags::EXCLUSIVE;
        }
        epoll::add(&self.epoll, listener, EventData::new_u64(LISTENER), flags)?;
        Ok(())
    }

    fn run(&mut self, stop: &StopSignal) -> io::Result<()> {
        let timeout = rustix::event::Timespec { tv_sec: 0, tv_nsec: TICK.as_nanos() as i64 };
        let blank = Event { flags: EventFlags::empty(), data: EventData::new_u64(0) };
        let mut recycled_events = vec![blank; EVENTS];
        let mut last_sweep = Instant::now();
        loop {
            let now = Instant::now();
            if stop.is_stopped() && self.drain_deadline.is_none() {
                self.begin_drain(now);
            }
            if let Some(deadline) = self.drain_deadline {
                if self.table.is_empty() || now >= deadline {
                    break;
                }
            }
            // With events recycling off, every wait gets a fresh array, as a server that
            // allocates per call would.
            let mut fresh_events: Vec<Event>;
            let events: &[Event] = if self.recycle.events {
                let n = match epoll::wait(&self.epoll, &mut recycled_events[..], Some(&timeout)) {
                    Ok(n) => n,
                    Err(Errno::INTR) => 0,
                    Err(e) => return Err(e.into()),
                };
                &recycled_events[..n]
            } else {
                fresh_events = Vec::with_capacity(EVENTS);
                let spare = rustix::buffer::spare_capacity(&mut fresh_events);
                match epoll::wait(&self.epoll, spare, Some(&timeout)) {
                    Ok(_) | Err(Errno::INTR) => {}
                    Err(e) => return Err(e.into()),
                }
                &fresh_events
            };
            let now = Instant::now();
            self.responder.refresh(now);
            for event in events {
                let token = event.data.u64();
                if token == LISTENER {
                    self.accept_ready(now);
                } else {
                    self.serve(token, now);
                }
            }
            if now.duration_since(last_sweep) >= TICK {
                last_sweep = now;
                self.sweep(now);
            }
        }
        for token in self.table.tokens() {
            self.close(token);
        }
        Ok(())
    }

    fn accept_ready(&mut self, now: Instant) {
        for _ in 0..ACCEPT_BURST {
            let Some(listener) = &self.listener else { return };
            match rustix::net::accept_with(
                &**listener,
                SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            ) {
                Ok(fd) => self.admit(TcpStream::from(fd), now),
                Err(Errno::AGAIN) => return,
                Err(Errno::INTR | Errno::CONNABORTED) => {}
                Err(_) => {
                    // Out of fds or memory: stop watching the listener for a moment instead of
                    // spinning on a level-triggered event that cannot be served.
                    if let Some(listener) = &self.listener {
                        let _ = epoll::delete(&self.epoll, &**listener);
                    }
                    self.accept_resume = Some(now + Duration::from_millis(100));
                    bump(&self.counters.server_errors, 1);
                    return;
                }
            }
        }
    }

    fn admit(&mut self, stream: TcpStream, now: Instant) {
        bump(&self.counters.accepted, 1);
        if self.table.len() >= self.max_connections {
            let mut out = Vec::new();
            http::write_error(
                &mut out,
                Status::ServiceUnavailable,
                false,
                &self.responder.cached_date,
            );
            let _ = (&stream).write(&out);
            bump(&self.counters.refused, 1);
            return;
        }
        let _ = stream.set_nodelay(true);
        // Recycling: the connection keeps pooled buffers for its life. Without it, buffers
        // are allocated per request (in `drive`) and freed when the connection goes idle.
        let (input, output) = if self.buffers.recycle {
            let mut output = self.buffers.outputs.take();
            output.clear();
            output.reserve(OUTPUT_BYTES);
            (self.buffers.inputs.take(), output)
        } else {
            (Vec::new(), Vec::new())
        };
        let conn = Conn {
            stream,
            input,
            filled: 0,
            output,
            sent: 0,
            file: None,
            skip_body: 0,
            close_after: false,
            request_since: None,
            last_active: now,
        };
        let token = self.table.insert(conn);
        let Some(conn) = self.table.get_mut(token) else { return };
        let flags = EventFlags::IN | EventFlags::OUT | EventFlags::RDHUP | EventFlags::ET;
        if epoll::add(&self.epoll, &conn.stream, EventData::new_u64(token), flags).is_err() {
            self.close(token);
            bump(&self.counters.server_errors, 1);
            return;
        }
        self.counters.open.store(self.table.len() as u64, Ordering::Relaxed);
    }

    fn close(&mut self, token: u64) {
        if let Some(conn) = self.table.remove(token) {
            self.buffers.inputs.give(conn.input);
            self.buffers.outputs.give(conn.output);
            // Dropping the stream closes the fd, which also leaves the epoll set.
        }
        self.counters.open.store(self.table.len() as u64, Ordering::Relaxed);
    }

    /// Reads, answers and writes what one edge made possible.
    fn serve(&mut self, token: u64, now: Instant) {
        let draining = self.drain_deadline.is_some();
        let Some(conn) = self.table.get_mut(token) else { return };
        let close =
            drive(conn, &mut self.responder, &mut self.buffers, &self.counters, draining, now);
        if close {
            self.close(token);
        }
    }

    fn sweep(&mut self, now: Instant) {
        if let Some(resume) = self.accept_resume {
            if now >= resume && self.drain_deadline.is_none() {
                self.accept_resume = None;
                let _ = self.watch_listener();
            }
        }
        let limits = self.responder.limits;
        for token in self.table.tokens() {
            let Some(conn) = self.table.get_mut(token) else { continue };
            let slow =
                conn.request_since.is_some_and(|t| now.duration_since(t) >= limits.header_timeout);
            let idle = now.duration_since(conn.last_active) >= limits.idle_timeout;
            if slow {
                let mut out = Vec::new();
                http::write_error(
                    &mut out,
                    Status::RequestTimeout,
                    false,
                    &self.responder.cached_date,
                );
                let _ = (&conn.stream).write(&out);
                bump(&self.counters.timeouts, 1);
                bump(&self.counters.client_errors, 1);
            }
            if slow || idle {
                self.close(token);
            }
        }
    }

    /// Stops accepting and closes the connections with nothing in flight; the rest finish
    /// their current request (answered with `Connection: close`) before the deadline.
    fn begin_drain(&mut self, now: Instant) {
        self.drain_deadline = Some(now + self.responder.limits.drain_timeout);
        if let Some(listener) = self.listener.take() {
            let _ = epoll::delete(&self.epoll, &*listener);
        }
        for token in self.table.tokens() {
            let idle =
                self.table.get_mut(token).is_some_and(|c| c.is_idle() && c.request_since.is_none());
            if idle {
                self.close(token);
            }
        }
    }
}

/// Reads what arrived, answers every complete request and writes the answers; returns whether
/// the connection is to be closed now.
fn drive(
    conn: &mut Conn,
    responder: &mut Responder,
    buffers: &mut Buffers,
    counters: &ServerCounters,
    draining: bool,
    now: Instant,
) -> bool {
    if conn.input.is_empty() {
        conn.input = buffers.inputs.take();
    }
    loop {
        // Read until the socket is drained, or until a file body must go out first.
        while conn.file.is_none() && !conn.close_after {
            let space = conn.input.len() - conn.filled;
            if space == 0 {
                break;
            }
            match (&conn.stream).read(&mut conn.input[conn.filled..]) {
                Ok(0) => {
                    // The client finished sending; answer what it sent, then close.
                    conn.close_after = true;
                }
                Ok(n) => {
                    conn.filled += n;
                    conn.last_active = now;
                    answer(conn, responder, counters, draining, now);
                    // Edge-triggered: a short read drained the socket; the next byte brings
                    // a new edge, so no read is wasted on EAGAIN.
                    if n < space {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return true,
            }
        }
        let paused_for_file = conn.file.is_some();
        match flush(conn, counters, now) {
            Flushed::Done => {}
            Flushed::Blocked => return false,
            Flushed::Failed => return true,
        }
        if conn.close_after {
            return true;
        }
        if !paused_for_file {
            buffers.release_if_idle(conn);
            return false;
        }
        // A file went out while requests may wait in the buffer or the socket: go on.
        answer(conn, responder, counters, draining, now);
    }
}

/// Answers every complete request in the connection's input.
fn answer(
    conn: &mut Conn,
    responder: &mut Responder,
    counters: &ServerCounters,
    draining: bool,
    now: Instant,
) {
    while !conn.close_after && conn.file.is_none() {
        if conn.skip_body > 0 {
            let n = conn.skip_body.min(conn.filled as u64);
            conn.consume(n as usize);
            conn.skip_body -= n;
            if conn.skip_body > 0 {
                return;
            }
        }
        if conn.filled == 0 {
            conn.request_since = None;
            return;
        }
        match http::parse_request(&conn.input[..conn.filled], &responder.limits) {
            Parsed::Partial => {
                conn.request_since.get_or_insert(now);
                return;
            }
            Parsed::Reject(status) => {
                http::write_error(&mut conn.output, status, false, &responder.cached_date);
                count_status(counters, status);
                conn.close_after = true;
                conn.filled = 0;
            }
            Parsed::Request(req) => {
                let keep = req.keep_alive && !draining;
                let status = responder.respond(conn, &req, keep);
                count_status(counters, status);
                conn.consume(req.head_len);
                conn.skip_body = req.body_len;
                conn.request_since = None;
                if !keep {
                    conn.close_after = true;
                }
            }
        }
    }
}

fn count_status(counters: &ServerCounters, status: Status) {
    bump(&counters.requests, 1);
    match status.code() {
        400..=499 => bump(&counters.client_errors, 1),
        500..=599 => bump(&counters.server_errors, 1),
        _ => {}
    }
}

/// Writes pending output, then the file body with sendfile (no copy through user space).
fn flush(conn: &mut Conn, counters: &ServerCounters, now: Instant) -> Flushed {
    while conn.sent < conn.output.len() {
        match (&conn.stream).write(&conn.output[conn.sent..]) {
            Ok(n) => {
                conn.sent += n;
                conn.last_active = now;
                bump(&counters.bytes_out, n as u64);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Flushed::Blocked,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Flushed::Failed,
        }
    }
    conn.output.clear();
    conn.sent = 0;
    if let Some((file, offset, end)) = &mut conn.file {
        while *offset < *end {
            let chunk = (*end - *offset).min(1 << 30) as usize;
            match rustix::fs::sendfile(&conn.stream, &*file, Some(offset), chunk) {
                Ok(0) => return Flushed::Failed, // the file shrank under us
                Ok(n) => {
                    conn.last_active = now;
                    bump(&counters.bytes_out, n as u64);
                }
                Err(Errno::AGAIN) => return Flushed::Blocked,
                Err(Errno::INTR) => {}
                Err(_) => return Flushed::Failed,
            }
        }
        conn.file = None;
    }
    Flushed::Done
}
