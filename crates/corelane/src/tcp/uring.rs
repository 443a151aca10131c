//! The io_uring lane: one multishot accept fills the ring's fixed-file table (the kernel
//! reuses its slots: fd recycling with no fd-table install per connection), one multishot
//! receive per connection draws from a ring of provided buffers shared by the lane, and every
//! send, shutdown and close of a loop iteration goes to the kernel in one submission, or in
//! none at all with an SQPOLL thread (the syscall lane of seed 003).
//!
//! A file body larger than [`SENDFILE_FROM`] goes out by sendfile(2) from the lane itself,
//! as the epoll lane sends every body: the ring installs a regular descriptor for the
//! connection once (fixed files have none, and io_uring has no inline sendfile: its splice
//! always runs in a worker thread), the lane writes the head and the body through it until
//! the socket is full, and a poll on the fixed file says when to go on. A smaller body is
//! read into the output behind its head and goes out in one send.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::Socket;

use super::config::{Content, TICK};
use super::conn::Verdict;
use super::counters::{bump, ServerCounters};
use super::exchange::{answer, Exchange, Responder};
use super::http::{self, Limits, Status};
use super::recycle::{BufferPool, Recycle};
use super::write_out::{write_out, Flushed};
use crate::lane::StopSignal;
use crate::sys::socket_ring::{Completion, RingConfig, SocketRing};

/// Provided buffers per lane and their size: 8 MiB, drawn only while data is in flight.
const BUFFERS: u16 = 2048;
const BUFFER_BYTES: usize = 4096;
/// A send carries at most this much of a file body (with the response head before it): a
/// connection sending a file holds one such buffer, only while it sends.
const FILE_CHUNK: usize = 64 << 10;
/// A file body with more bytes than this left to send goes by sendfile.
const SENDFILE_FROM: u64 = FILE_CHUNK as u64;
/// Installed descriptors a lane holds at once (one per connection that sent a large body,
/// until it closes): past it, a large body goes by read and send like a small one.
const MAX_DESCRIPTORS: usize = 256;

#[derive(Debug)]
struct Conn {
    exchange: Exchange,
    recv_armed: bool,
    /// Receiving stopped because the answers waiting for the peer passed the cap; resumed
    /// once the peer has read them.
    recv_paused: bool,
    sending: bool,
    /// Bytes of the send in flight.
    in_flight: usize,
    /// The connection's regular descriptor, installed for its first large file body and
    /// kept until it closes.
    socket: Option<OwnedFd>,
    /// The lane itself writes this connection (the answers and the large body after them,
    /// through `socket`) until the body is out; the ring sends nothing for it meanwhile.
    writing_body: bool,
    /// TCP_NODELAY was asked for (once the connection is kept alive, as the epoll lane does).
    nodelay: bool,
    /// A shutdown was asked for: the connection closes once its receive has ended.
    closing: bool,
    last_active: Instant,
}

#[derive(Debug)]
pub(crate) struct UringLane {
    ring: SocketRing,
    listener: Option<Arc<Socket>>,
    /// Connections by fixed-file slot.
    conns: Vec<Option<Conn>>,
    open: usize,
    max_connections: usize,
    responder: Responder,
    /// Input and output buffers lent to a connection only while it has bytes in flight.
    inputs: BufferPool,
    outputs: BufferPool,
    /// Connections holding an installed descriptor; whether this kernel installs them; after
    /// a refusal (out of descriptors), no new one is asked for before this time.
    descriptors: usize,
    can_install: bool,
    install_resume: Option<Instant>,
    counters: Arc<ServerCounters>,
    accepting: bool,
    accept_resume: Option<Instant>,
    drain_deadline: Option<Instant>,
    completions: Vec<Completion>,
}

impl UringLane {
    pub fn new(
        listener: Arc<Socket>,
        content: Arc<Content>,
        recycle: Recycle,
        limits: Limits,
        max_connections: usize,
        sqpoll_cpu: Option<usize>,
        counters: Arc<ServerCounters>,
    ) -> io::Result<Self> {
        // Slots beyond the limit let a refused connection still be answered 503.
        let files = (max_connections + 64) as u32;
        let ring = SocketRing::new(RingConfig {
            files,
            buffers: BUFFERS,
            buffer_size: BUFFER_BYTES,
            sqpoll_cpu,
        })?;
        let mut lane = Self {
            ring,
            listener: Some(listener),
            conns: (0..files).map(|_| None).collect(),
            open: 0,
            max_connections,
            responder: Responder::new(content, limits),
            inputs: BufferPool::new(limits.max_header_bytes, recycle.buffers, 1024),
            outputs: BufferPool::new(0, recycle.buffers, 1024),
            descriptors: 0,
            can_install: true,
            install_resume: None,
            counters,
            accepting: false,
            accept_resume: None,
            drain_deadline: None,
            completions: Vec::with_capacity(1024),
        };
        lane.arm_accept()?;
        Ok(lane)
    }

    fn arm_accept(&mut self) -> io::Result<()> {
        if let Some(listener) = &self.listener {
            let fd = std::os::fd::AsFd::as_fd(&**listener);
            self.ring.accept(fd)?;
            self.accepting = true;
        }
        Ok(())
    }

    pub fn run(&mut self, stop: &StopSignal) -> io::Result<()> {
        let mut last_sweep = Instant::now();
        loop {
            let now = Instant::now();
            if stop.is_stopped() && self.drain_deadline.is_none() {
                self.begin_drain(now)?;
            }
            if let Some(deadline) = self.drain_deadline {
                if self.open == 0 || now >= deadline {
                    break;
                }
            }
            self.ring.submit_and_wait(TICK)?;
            let now = Instant::now();
            self.responder.refresh(now);
            let mut completions = std::mem::take(&mut self.completions);
            self.ring.completions(&mut completions);
            for completion in completions.drain(..) {
                self.on_completion(completion, now)?;
            }
            self.completions = completions;
            if now.duration_since(last_sweep) >= TICK {
                last_sweep = now;
                self.sweep(now)?;
            }
        }
        self.counters.held_bytes.store(0, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    fn on_completion(&mut self, completion: Completion, now: Instant) -> io::Result<()> {
        match completion {
            Completion::Accepted { slot, more } => {
                self.admit(slot, now)?;
                if !more {
                    self.accepting = false;
                    if self.drain_deadline.is_none() {
                        self.arm_accept()?;
                    }
                }
            }
            Completion::AcceptFailed { more, .. } => {
                bump(&self.counters.server_errors, 1);
                if !more {
                    // Out of slots or fds: try again shortly rather than spin.
                    self.accepting = false;
                    self.accept_resume = Some(now + Duration::from_millis(100));
                }
            }
            Completion::Received { slot, buffer, len, more } => {
                self.on_received(slot, buffer, len, more, now)?;
            }
            Completion::RecvEnded { slot, result, .. } => {
                let Some(conn) = slot_mut(&mut self.conns, slot) else { return Ok(()) };
                conn.recv_armed = false;
                // Ended by our backpressure cancel, or for want of provided buffers (each is
                // returned as soon as it is copied, so they are back by now): not the peer.
                let stopped_by_us = result == -libc::ECANCELED || result == -libc::ENOBUFS;
                if stopped_by_us && !conn.closing {
                    // Still paused: re-armed once the peer has read (see Sent). Resumed before
                    // the cancel landed: re-armed now.
                    if !conn.recv_paused {
                        conn.recv_armed = true;
                        self.ring.receive(slot)?;
                    }
                } else {
                    // The peer closed, or the connection failed, or our shutdown took.
                    conn.closing = true;
                    self.close_when_quiet(slot)?;
                }
            }
            Completion::Sent { slot, result, mut buf, offset } => {
                let Some(conn) = slot_mut(&mut self.conns, slot) else { return Ok(()) };
                conn.sending = false;
                conn.in_flight = 0;
                conn.last_active = now;
                if result < 0 {
                    return self.abort(slot);
                }
                bump(&self.counters.bytes_out, result as u64);
                let done = offset + result as usize;
                if done < buf.len() {
                    conn.sending = true;
                    conn.in_flight = buf.len() - done;
                    return self.ring.send(slot, buf, done);
                }
                conn.exchange.clock.sent(now, &self.counters);
                buf.clear();
                if conn.exchange.output.capacity() == 0 {
                    conn.exchange.output = buf; // the sent buffer becomes the next output buffer
                } else {
                    self.outputs.give(buf);
                }
                self.after_send(slot, now)?;
            }
            Completion::Installed { slot, socket } => self.installed(slot, socket, now)?,
            Completion::Writable { slot, result } => {
                let Some(conn) = slot_mut(&mut self.conns, slot) else { return Ok(()) };
                conn.sending = false;
                if result < 0 || result & i32::from(libc::POLLERR | libc::POLLHUP) != 0 {
                    conn.exchange.file = None;
                    return self.abort(slot);
                }
                self.after_send(slot, now)?;
            }
            // Datagram completions: this lane arms none.
            Completion::Done | Completion::ReceivedFrom { .. } | Completion::Replied { .. } => {}
        }
        Ok(())
    }

    /// Bytes in a provided buffer: answered, the buffer given back, the receive paused when
    /// the peer is not reading (or re-armed when the multishot ended), the answers sent.
    fn on_received(
        &mut self,
        slot: u32,
        buffer: u16,
        len: usize,
        more: bool,
        now: Instant,
    ) -> io::Result<()> {
        let bytes = self.ring.buffer(buffer, len);
        let draining = self.drain_deadline.is_some();
        let cap = self.responder.limits.max_pending_output;
        let mut pause = false;
        if let Some(conn) = self.conns.get_mut(slot as usize).and_then(Option::as_mut) {
            if !conn.closing {
                if conn.exchange.input.is_empty() {
                    conn.exchange.input = self.inputs.take();
                }
                if conn.exchange.output.capacity() == 0 {
                    conn.exchange.output = self.outputs.take();
                }
                conn.exchange.append(bytes);
                conn.last_active = now;
                answer(&mut conn.exchange, &mut self.responder, &self.counters, draining, now);
            }
            conn.recv_armed = more;
            // The peer is not reading what it asked for (or its requests wait unparsed
            // behind a full output): stop taking its bytes.
            let backlog = conn.exchange.filled >= self.responder.limits.max_header_bytes;
            if !conn.recv_paused && (conn.pending_output() >= cap || backlog) {
                conn.recv_paused = true;
                pause = more;
            }
        }
        self.ring.give_back(buffer);
        if pause {
            self.ring.cancel_receive(slot)?;
        }
        let rearm = slot_mut(&mut self.conns, slot)
            .is_some_and(|c| !c.recv_armed && !c.closing && !c.recv_paused);
        if rearm {
            self.ring.receive(slot)?;
            if let Some(c) = slot_mut(&mut self.conns, slot) {
                c.recv_armed = true;
            }
        }
        self.flush(slot, now)?;
        self.reclaim(slot);
        Ok(())
    }

    /// A send is done, or a large body is out: requests that arrived while a file body went out (waiting
    /// in the input) are answered, the next bytes sent, a paused receive resumed.
    fn after_send(&mut self, slot: u32, now: Instant) -> io::Result<()> {
        let Some(conn) = slot_mut(&mut self.conns, slot) else { return Ok(()) };
        if conn.exchange.file.is_none() && conn.exchange.filled > 0 && !conn.closing {
            let draining = self.drain_deadline.is_some();
            answer(&mut conn.exchange, &mut self.responder, &self.counters, draining, now);
        }
        self.flush(slot, now)?;
        self.resume_if_read(slot, now)?;
        self.reclaim(slot);
        Ok(())
    }

    /// The connection's descriptor came (or did not): its large body goes on by sendfile
    /// (or by read and send, when the kernel would not install one).
    fn installed(
        &mut self,
        slot: u32,
        socket: Result<OwnedFd, i32>,
        now: Instant,
    ) -> io::Result<()> {
        let Some(conn) = slot_mut(&mut self.conns, slot) else { return Ok(()) };
        conn.sending = false;
        match socket {
            Ok(socket) => conn.socket = Some(socket),
            Err(errno) => {
                self.descriptors -= 1;
                // A kernel before 6.8 has no FIXED_FD_INSTALL: never ask again. Out of
                // descriptors: large bodies go by read and send for a while.
                self.can_install &= errno != -libc::EINVAL;
                self.install_resume = Some(now + Duration::from_millis(100));
            }
        }
        self.flush(slot, now)
    }

    /// Writes the connection's answers and its large file body through its descriptor until
    /// the body is out or the socket is full (then a poll says when to go on).
    fn write_body(&mut self, slot: u32, now: Instant) -> io::Result<()> {
        let Some(conn) = slot_mut(&mut self.conns, slot) else { return Ok(()) };
        let Some(socket) = &conn.socket else { return Ok(()) };
        let mut sent = 0;
        let (flushed, moved) =
            write_out(socket.as_fd(), &mut conn.exchange, &mut sent, &self.counters);
        if moved {
            conn.last_active = now;
        }
        match flushed {
            Flushed::Done => {
                conn.writing_body = false;
                conn.exchange.clock.written(Instant::now(), &self.counters);
                self.after_send(slot, now)
            }
            Flushed::Blocked => {
                // Output the socket took is gone from the buffer; the rest waits with the body.
                conn.exchange.output.drain(..sent);
                conn.writing_body = true;
                conn.sending = true;
                self.ring.when_writable(slot)
            }
            Flushed::Failed => {
                conn.writing_body = false;
                conn.exchange.file = None;
                self.abort(slot)
            }
        }
    }

    fn admit(&mut self, slot: u32, now: Instant) -> io::Result<()> {
        bump(&self.counters.accepted, 1);
        let mut conn = Conn {
            // The header timeout runs from accept: a connection that never sends a byte is
            // closed at it.
            exchange: Exchange { request_since: Some(now), ..Exchange::default() },
            recv_armed: true,
            recv_paused: false,
            sending: false,
            in_flight: 0,
            socket: None,
            writing_body: false,
            nodelay: false,
            closing: false,
            last_active: now,
        };
        let refuse = self.open >= self.max_connections || self.drain_deadline.is_some();
        if refuse {
            http::write_error(
                &mut conn.exchange.output,
                Status::ServiceUnavailable,
                false,
                false,
                &self.responder.cached_date,
            );
            conn.exchange.close_after = true;
            bump(&self.counters.refused, 1);
        }
        if let Some(entry) = self.conns.get_mut(slot as usize) {
            *entry = Some(conn);
            self.open += 1;
        }
        self.counters.open.store(self.open as u64, std::sync::atomic::Ordering::Relaxed);
        self.ring.receive(slot)?;
        self.flush(slot, now)
    }

    /// Sends what the exchange has ready, one send in flight per connection; once everything
    /// is out and the exchange wants to close, shuts the write side (the client's FIN ends
    /// the receive, and the connection closes).
    fn flush(&mut self, slot: u32, now: Instant) -> io::Result<()> {
        let Some(conn) = slot_mut(&mut self.conns, slot) else { return Ok(()) };
        if conn.sending {
            return Ok(());
        }
        if !conn.nodelay && !conn.exchange.close_after && !conn.exchange.output.is_empty() {
            // A response's last short segment goes at once, not after the peer has
            // acknowledged the rest (Nagle): a large body's tail, or a pipelined answer.
            conn.nodelay = true;
            self.ring.no_delay(slot)?;
        }
        let Some(conn) = slot_mut(&mut self.conns, slot) else { return Ok(()) };
        if let Some(body) = &conn.exchange.file {
            if conn.writing_body || body.end - body.offset > SENDFILE_FROM {
                if conn.socket.is_some() {
                    return self.write_body(slot, now);
                }
                let resting = self.install_resume.is_some_and(|t| now < t);
                if self.can_install && !resting && self.descriptors < MAX_DESCRIPTORS {
                    self.descriptors += 1;
                    conn.sending = true;
                    return self.ring.install_descriptor(slot);
                }
            }
            // A small body (or a large one when no descriptor is to be had) is read in behind
            // its head.
            if !fill_from_file(&mut conn.exchange) {
                // The file shrank under us: what was promised cannot be sent, so the
                // connection ends short rather than padded or mixed.
                conn.exchange.file = None;
                return self.abort(slot);
            }
        }
        if !conn.exchange.output.is_empty() {
            if conn.exchange.file.is_none() {
                // Every queued answer is whole in this send (a body not yet read in keeps
                // its round queued until its last part goes).
                conn.exchange.clock.send_begins();
            }
            let buf = std::mem::take(&mut conn.exchange.output);
            conn.sending = true;
            conn.in_flight = buf.len();
            return self.ring.send(slot, buf, 0);
        }
        if conn.exchange.close_after && !conn.closing {
            conn.closing = true;
            return if conn.recv_armed {
                self.ring.shutdown(slot, libc::SHUT_WR)
            } else {
                self.close_when_quiet(slot)
            };
        }
        Ok(())
    }

    /// An idle connection (nothing received, nothing to send or in flight) gives its buffers
    /// back to the lane's pools: what stays per idle connection is its [`Conn`] alone.
    fn reclaim(&mut self, slot: u32) {
        let Some(conn) = slot_mut(&mut self.conns, slot) else { return };
        if conn.exchange.is_idle() && !conn.sending {
            self.inputs.give(std::mem::take(&mut conn.exchange.input));
            self.outputs.give(std::mem::take(&mut conn.exchange.output));
        }
    }

    /// Takes requests again from a connection paused for backpressure once its peer has read
    /// what was waiting: answers what is already buffered first, re-arms the receive if that
    /// stays under the cap.
    fn resume_if_read(&mut self, slot: u32, now: Instant) -> io::Result<()> {
        let cap = self.responder.limits.max_pending_output;
        let draining = self.drain_deadline.is_some();
        let Some(conn) = slot_mut(&mut self.conns, slot) else { return Ok(()) };
        if !conn.recv_paused || conn.pending_output() >= cap || conn.closing {
            return Ok(());
        }
        answer(&mut conn.exchange, &mut self.responder, &self.counters, draining, now);
        let backlog = conn.exchange.filled >= self.responder.limits.max_header_bytes;
        if conn.pending_output() < cap && !backlog {
            conn.recv_paused = false;
            if !conn.recv_armed {
                conn.recv_armed = true;
                self.ring.receive(slot)?;
            }
        }
        self.flush(slot, now)
    }

    /// Closes a connection whose receive has ended, once its send is done.
    fn close_when_quiet(&mut self, slot: u32) -> io::Result<()> {
        let Some(conn) = slot_mut(&mut self.conns, slot) else { return Ok(()) };
        if conn.sending || conn.recv_armed {
            return Ok(());
        }
        if let Some(conn) = self.conns[slot as usize].take() {
            self.inputs.give(conn.exchange.input);
            self.outputs.give(conn.exchange.output);
            if conn.socket.is_some() {
                self.descriptors -= 1;
            }
        }
        self.open -= 1;
        self.counters.open.store(self.open as u64, std::sync::atomic::Ordering::Relaxed);
        self.ring.close(slot)
    }

    /// Ends a connection now: both directions shut, closed once its receive has ended.
    fn abort(&mut self, slot: u32) -> io::Result<()> {
        let Some(conn) = slot_mut(&mut self.conns, slot) else { return Ok(()) };
        conn.closing = true;
        // A send the peer never reads stays in flight until the shutdown fails it.
        if conn.recv_armed || conn.sending {
            self.ring.shutdown(slot, libc::SHUT_RDWR)
        } else {
            self.close_when_quiet(slot)
        }
    }

    fn sweep(&mut self, now: Instant) -> io::Result<()> {
        if self.accept_resume.is_some_and(|t| now >= t) && self.drain_deadline.is_none() {
            self.accept_resume = None;
            if !self.accepting {
                self.arm_accept()?;
            }
        }
        let limits = self.responder.limits;
        let mut held = 0;
        for slot in 0..self.conns.len() as u32 {
            let Some(conn) = slot_mut(&mut self.conns, slot) else { continue };
            held += conn.held_bytes();
            match conn.exchange.verdict(conn.last_active, conn.closing, now, &limits) {
                Verdict::Keep => {}
                Verdict::TimedOut => {
                    conn.exchange.time_out(&self.responder.cached_date, &self.counters);
                    self.flush(slot, now)?;
                }
                Verdict::Close => self.abort(slot)?,
            }
        }
        self.counters.held_bytes.store(held as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    fn begin_drain(&mut self, now: Instant) -> io::Result<()> {
        self.drain_deadline = Some(now + self.responder.limits.drain_timeout);
        if self.accepting {
            self.ring.cancel_accept()?;
        }
        self.listener = None;
        for slot in 0..self.conns.len() as u32 {
            let idle = slot_mut(&mut self.conns, slot)
                .is_some_and(|c| c.exchange.is_between_requests() && !c.sending);
            if idle {
                self.abort(slot)?;
            }
        }
        Ok(())
    }
}

/// Appends the file body's next bytes to the output, up to [`FILE_CHUNK`] in all; false if the
/// file ended before the length its head announced, or was written while it was sent.
///
/// A read into the send buffer, then an io_uring send: for a body that fits in one send behind
/// its head, or when no descriptor is to be had. The read is from the page cache on the lane.
fn fill_from_file(exchange: &mut Exchange) -> bool {
    use std::os::unix::fs::FileExt;
    let Some(body) = &mut exchange.file else { return true };
    let room = FILE_CHUNK.saturating_sub(exchange.output.len());
    let want = (body.end - body.offset).min(room as u64) as usize;
    if want == 0 {
        return true;
    }
    if !body.unchanged() {
        return false;
    }
    let start = exchange.output.len();
    exchange.output.resize(start + want, 0);
    let mut got = 0;
    while got < want {
        match body.file.read_at(&mut exchange.output[start + got..], body.offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    exchange.output.truncate(start + got);
    body.offset += got as u64;
    if got < want {
        return false;
    }
    if body.offset == body.end {
        exchange.file = None;
    }
    true
}

impl Conn {
    /// Its slot in the lane's table and the buffers lent to it, the send in flight included.
    fn held_bytes(&self) -> usize {
        std::mem::size_of::<Option<Conn>>() + self.exchange.lent_bytes() + self.in_flight
    }

    /// Answers waiting for the peer: queued, and in the send in flight.
    fn pending_output(&self) -> usize {
        self.exchange.output.len() + self.in_flight
    }
}

fn slot_mut(conns: &mut [Option<Conn>], slot: u32) -> Option<&mut Conn> {
    conns.get_mut(slot as usize).and_then(Option::as_mut)
}
