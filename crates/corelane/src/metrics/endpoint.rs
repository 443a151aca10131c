//! The endpoint's thread: a non-blocking listener and at most `max_connections` connections,
//! polled every 100 ms at most (so a stop is seen within that). Each connection holds at most
//! one request head (`max_head` bytes) and one answer; its deadline is the idle timeout while
//! it waits for a request, the head timeout once a head has begun, the write timeout while an
//! answer is unsent. At the limit, the connection that has waited longest for its request is
//! closed to admit the new one, so idle or slow clients cannot keep a scraper out; whatever
//! the kernel has not handed over yet waits in its backlog. Memory is bounded by the limits,
//! whatever the clients do.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use prometheus_client::registry::Registry;
use rustix::event::{poll, PollFd, PollFlags};

use super::request::answer;
use super::MetricsError;

/// What the endpoint holds at most, and how long it waits for a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointLimits {
    pub max_connections: usize,
    /// A request's line and headers, at most (431 beyond).
    pub max_head: usize,
    /// A kept-alive connection waiting for its next request is closed after this.
    pub idle_timeout: Duration,
    /// A request head begun must be whole within this (slow clients are closed).
    pub head_timeout: Duration,
    /// An answer must be taken by the client within this.
    pub write_timeout: Duration,
}

impl Default for EndpointLimits {
    fn default() -> Self {
        Self {
            max_connections: 64,
            max_head: 8192,
            idle_timeout: Duration::from_secs(60),
            head_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
        }
    }
}

/// The running endpoint; dropping it stops its thread and closes every connection.
#[derive(Debug)]
pub struct Endpoint {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Endpoint {
    /// Listens on `addr` (only there) and serves `registry` from a thread of its own, placed
    /// on `cpus` when given (else where the caller's thread may run).
    pub fn start(
        addr: SocketAddr,
        registry: Registry,
        limits: EndpointLimits,
        cpus: Option<&[usize]>,
    ) -> Result<Self, MetricsError> {
        let listener =
            TcpListener::bind(addr).map_err(|source| MetricsError::Bind { addr, source })?;
        let local = listener.local_addr().map_err(|source| MetricsError::Bind { addr, source })?;
        listener.set_nonblocking(true).map_err(|source| MetricsError::Bind { addr, source })?;
        let stop = Arc::new(AtomicBool::new(false));
        let (placed, wait) = std::sync::mpsc::sync_channel::<io::Result<()>>(1);
        let cpus = cpus.map(<[usize]>::to_vec);
        let thread_cpus = cpus.clone();
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                let pinned = thread_cpus.as_deref().map_or(Ok(()), pin);
                let ok = pinned.is_ok();
                let _ = placed.send(pinned);
                if ok {
                    Serving { listener, registry, limits, conns: Vec::new() }.run(&thread_stop);
                }
            })
            .map_err(MetricsError::Thread)?;
        let endpoint = Self { addr: local, stop, thread: Some(thread) };
        match wait.recv() {
            Ok(Ok(())) => Ok(endpoint),
            Ok(Err(source)) => Err(MetricsError::Pin { cpus: cpus.unwrap_or_default(), source }),
            Err(_) => Err(MetricsError::Thread(io::Error::other("the thread ended at its start"))),
        }
    }

    /// The address it listens on (the port filled in when 0 was given).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn pin(cpus: &[usize]) -> io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    cpus.iter().filter(|&&c| c < rustix::thread::CpuSet::MAX_CPU).for_each(|&c| set.set(c));
    rustix::thread::sched_setaffinity(None, &set).map_err(io::Error::from)
}

/// One client connection.
struct Conn {
    stream: TcpStream,
    /// The request head so far (at most `max_head` bytes).
    head: Vec<u8>,
    /// The answer not yet written, from `written` on.
    out: Vec<u8>,
    written: usize,
    close_after: bool,
    /// When it began waiting for its current request (accept, or its last answer sent).
    waiting_since: Instant,
    deadline: Instant,
    served: u32,
}

struct Serving {
    listener: TcpListener,
    registry: Registry,
    limits: EndpointLimits,
    conns: Vec<Conn>,
}

/// The longest one poll waits, so that a stop is seen soon.
const TICK: Duration = Duration::from_millis(100);

impl Serving {
    fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            let (listener_ready, ready) = self.poll_once();
            let now = Instant::now();
            // Backwards, so that removing one leaves the indexes still to visit in place.
            for index in (0..self.conns.len()).rev() {
                let flags = ready.get(index).copied().unwrap_or_else(PollFlags::empty);
                let conn = &self.conns[index];
                // A request already read (pipelined behind the last) is answered without
                // waiting for more bytes.
                let waiting = conn.written >= conn.out.len() && !conn.head.is_empty();
                let keep =
                    if flags.is_empty() && !waiting { true } else { self.serve(index, flags) };
                if !keep || now >= self.conns[index].deadline {
                    self.conns.swap_remove(index);
                }
            }
            if listener_ready {
                self.accept_some();
            }
        }
    }

    /// Waits for the listener or a connection; returns which are ready.
    fn poll_once(&self) -> (bool, Vec<PollFlags>) {
        let mut fds = Vec::with_capacity(self.conns.len() + 1);
        fds.push(PollFd::new(&self.listener, PollFlags::IN));
        for conn in &self.conns {
            let want = if conn.written < conn.out.len() { PollFlags::OUT } else { PollFlags::IN };
            fds.push(PollFd::new(&conn.stream, want));
        }
        let timeout = rustix::time::Timespec { tv_sec: 0, tv_nsec: TICK.as_nanos() as i64 };
        if poll(&mut fds, Some(&timeout)).is_err() {
            return (false, Vec::new());
        }
        let listener = !fds[0].revents().is_empty();
        (listener, fds[1..].iter().map(PollFd::revents).collect())
    }

    /// Accepts what is waiting (at most 16 a turn), closing the connection that has waited
    /// longest for its request when the limit is reached.
    fn accept_some(&mut self) {
        for _ in 0..16 {
            let Ok((stream, _)) = self.listener.accept() else { return };
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            if self.conns.len() >= self.limits.max_connections.max(1) {
                let oldest = (0..self.conns.len()).min_by_key(|&i| self.conns[i].waiting_since);
                if let Some(oldest) = oldest {
                    self.conns.swap_remove(oldest);
                }
            }
            let now = Instant::now();
            self.conns.push(Conn {
                stream,
                head: Vec::new(),
                out: Vec::new(),
                written: 0,
                close_after: false,
                waiting_since: now,
                deadline: now + self.limits.idle_timeout,
                served: 0,
            });
        }
    }

    /// Reads or writes what connection `index` is ready for; false when it is to be closed.
    fn serve(&mut self, index: usize, flags: PollFlags) -> bool {
        let conn = &mut self.conns[index];
        if conn.written < conn.out.len() {
            return flush(conn, &self.limits);
        }
        if flags.intersects(PollFlags::ERR | PollFlags::NVAL) {
            return false;
        }
        if flags.intersects(PollFlags::IN | PollFlags::HUP) && !read_head(conn, &self.limits) {
            return false;
        }
        let Some((reply, used)) =
            answer(&conn.head, self.limits.max_head, conn.served, &self.registry)
        else {
            return true;
        };
        conn.head.drain(..used.min(conn.head.len()));
        conn.served += 1;
        conn.close_after = reply.close;
        conn.out = reply.bytes;
        conn.written = 0;
        conn.deadline = Instant::now() + self.limits.write_timeout;
        flush(conn, &self.limits)
    }
}

/// Reads what has arrived, up to the head limit (one byte more tells a head too long); false
/// when the client closed or failed with no request begun, or closed mid-request.
fn read_head(conn: &mut Conn, limits: &EndpointLimits) -> bool {
    let mut chunk = [0u8; 4096];
    loop {
        let room = (limits.max_head + 1).saturating_sub(conn.head.len());
        if room == 0 {
            return true;
        }
        let want = room.min(chunk.len());
        match conn.stream.read(&mut chunk[..want]) {
            Ok(0) => return false,
            Ok(n) => {
                if conn.head.is_empty() {
                    conn.deadline = conn.deadline.min(Instant::now() + limits.head_timeout);
                }
                conn.head.extend_from_slice(&chunk[..n]);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

/// Writes what the socket takes of the answer; once all is written, the connection waits for
/// its next request (or closes). False when it is to be closed.
fn flush(conn: &mut Conn, limits: &EndpointLimits) -> bool {
    while conn.written < conn.out.len() {
        match conn.stream.write(&conn.out[conn.written..]) {
            Ok(0) => return false,
            Ok(n) => conn.written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    if conn.close_after {
        return false;
    }
    conn.out = Vec::new();
    conn.written = 0;
    let now = Instant::now();
    conn.waiting_since = now;
    conn.deadline =
        now + if conn.head.is_empty() { limits.idle_timeout } else { limits.head_timeout };
    true
}
