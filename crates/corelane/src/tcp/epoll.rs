//! The epoll lane: a listener (its own, or a share of one), an epoll instance watching it and
//! every connection edge-triggered, a slab of connections and pools of buffers.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::event::epoll::{self, Event, EventData, EventFlags};
use rustix::io::Errno;
use rustix::net::SocketFlags;
use socket2::Socket;

use super::config::{Content, TICK};
use super::conn::Verdict;
use super::counters::{bump, ServerCounters};
use super::exchange::{answer, Exchange, Responder};
use super::http::{self, Limits, Status};
use super::recycle::{BufferPool, Recycle, SlotTable};
use super::write_out::{write_out, Flushed};
use crate::lane::StopSignal;

/// The epoll token of a lane's listener; connections use their slot tokens.
const LISTENER: u64 = u64::MAX;
/// Events one `epoll_wait` returns at most.
const EVENTS: usize = 256;
/// Connections accepted per listener wake-up, so a burst cannot starve open connections.
const ACCEPT_BURST: usize = 128;
/// A response head and a small body fit; larger responses grow the buffer.
const OUTPUT_BYTES: usize = 4096;

/// One connection: its socket, its exchange, and progress on the socket.
#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    exchange: Exchange,
    /// Bytes of `exchange.output` already written.
    sent: usize,
    /// TCP_NODELAY is set once the connection is kept alive (a connection that closes after
    /// one response is spared the call: its single write goes out at once anyway).
    nodelay: bool,
    /// Last read or write progress (for the idle timeout).
    last_active: Instant,
}

impl Conn {
    /// Its slot in the lane's table and the buffers lent to it.
    fn held_bytes(&self) -> usize {
        std::mem::size_of::<Option<Conn>>() + self.exchange.lent_bytes()
    }
}

/// A lane's input and output buffers, lent to a connection only while it has bytes in flight.
#[derive(Debug)]
struct Buffers {
    inputs: BufferPool,
    outputs: BufferPool,
}

impl Buffers {
    /// Lends a connection what it needs to read and answer.
    fn lend(&mut self, conn: &mut Conn) {
        if conn.exchange.input.is_empty() {
            conn.exchange.input = self.inputs.take();
        }
        if conn.exchange.output.capacity() == 0 {
            let mut output = self.outputs.take();
            output.reserve(OUTPUT_BYTES);
            conn.exchange.output = output;
        }
    }

    /// An idle connection (nothing received, nothing to send) gives its buffers back: what
    /// stays per idle connection is its [`Conn`] alone. Recycling on, the lane's pools keep
    /// them for the next connection that reads; off, they are freed.
    fn reclaim_if_idle(&mut self, conn: &mut Conn) {
        if conn.exchange.is_idle() {
            self.inputs.give(std::mem::take(&mut conn.exchange.input));
            self.outputs.give(std::mem::take(&mut conn.exchange.output));
        }
    }
}

/// One lane's event loop and everything it owns.
#[derive(Debug)]
pub(crate) struct EpollLane {
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

impl EpollLane {
    pub fn new(
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

    pub fn run(&mut self, stop: &StopSignal) -> io::Result<()> {
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
        self.counters.held_bytes.store(0, Ordering::Relaxed);
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
                false,
                &self.responder.cached_date,
            );
            let _ = (&stream).write(&out);
            bump(&self.counters.refused, 1);
            return;
        }
        // Buffers are lent when bytes arrive (in `drive`), not held from accept.
        let conn = Conn {
            stream,
            // The header timeout runs from accept: a connection that never sends a byte is
            // closed at it.
            exchange: Exchange { request_since: Some(now), ..Exchange::default() },
            sent: 0,
            nodelay: false,
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
            self.buffers.inputs.give(conn.exchange.input);
            self.buffers.outputs.give(conn.exchange.output);
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
        let mut held = 0;
        for token in self.table.tokens() {
            let Some(conn) = self.table.get_mut(token) else { continue };
            held += conn.held_bytes();
            match conn.exchange.verdict(conn.last_active, false, now, &limits) {
                Verdict::Keep => {}
                Verdict::TimedOut => {
                    conn.exchange.time_out(&self.responder.cached_date, &self.counters);
                    // One try: the connection closes whether or not the peer takes it.
                    let _ = flush(conn, &self.counters, now);
                    self.close(token);
                }
                Verdict::Close => self.close(token),
            }
        }
        self.counters.held_bytes.store(held as u64, Ordering::Relaxed);
    }

    /// Stops accepting and closes the connections with nothing in flight; the rest finish
    /// their current request (answered with `Connection: close`) before the deadline.
    fn begin_drain(&mut self, now: Instant) {
        self.drain_deadline = Some(now + self.responder.limits.drain_timeout);
        if let Some(listener) = self.listener.take() {
            let _ = epoll::delete(&self.epoll, &*listener);
        }
        for token in self.table.tokens() {
            let idle = self.table.get_mut(token).is_some_and(|c| c.exchange.is_between_requests());
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
    buffers.lend(conn);
    let cap = responder.limits.max_pending_output;
    loop {
        // Read until the socket is drained, until a file body must go out first, or until the
        // answers waiting for the peer pass the cap (the peer must read before it may send
        // more: what a connection holds stays bounded).
        while conn.exchange.file.is_none()
            && !conn.exchange.close_after
            && conn.exchange.output.len() < cap
        {
            let space = conn.exchange.input.len() - conn.exchange.filled;
            if space == 0 {
                break;
            }
            match (&conn.stream).read(&mut conn.exchange.input[conn.exchange.filled..]) {
                Ok(0) => {
                    // The client finished sending; answer what it sent, then close.
                    conn.exchange.close_after = true;
                }
                Ok(n) => {
                    conn.exchange.filled += n;
                    conn.last_active = now;
                    answer(&mut conn.exchange, responder, counters, draining, now);
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
        if !conn.nodelay && !conn.exchange.close_after && !conn.exchange.output.is_empty() {
            let _ = conn.stream.set_nodelay(true);
            conn.nodelay = true;
        }
        let paused_for_file = conn.exchange.file.is_some();
        let paused_for_output = conn.exchange.output.len() >= cap;
        match flush(conn, counters, now) {
            Flushed::Done => {}
            // Reading resumes on the EPOLLOUT edge that says the peer made room.
            Flushed::Blocked => return false,
            Flushed::Failed => return true,
        }
        if conn.exchange.close_after {
            return true;
        }
        if !paused_for_file && !paused_for_output {
            buffers.reclaim_if_idle(conn);
            return false;
        }
        // Reading or parsing paused and the output is out: requests may wait in the buffer
        // or the socket (whose edge was already consumed), so go on.
        answer(&mut conn.exchange, responder, counters, draining, now);
    }
}

/// Writes pending output, then the file body with sendfile (no copy through user space);
/// once all is out, its requests' durations are counted.
fn flush(conn: &mut Conn, counters: &ServerCounters, now: Instant) -> Flushed {
    let (flushed, moved) =
        write_out(conn.stream.as_fd(), &mut conn.exchange, &mut conn.sent, counters);
    if moved {
        conn.last_active = now;
    }
    if flushed == Flushed::Done && conn.exchange.clock.is_waiting() {
        conn.exchange.clock.written(Instant::now(), counters);
    }
    flushed
}
