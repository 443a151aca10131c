//! recvmmsg batches into preallocated buffers (optionally UDP_GRO: one buffer of several
//! datagrams with their segment size), and for the echo the same buffers handed back to
//! their senders with sendmmsg (a GRO buffer as GSO segments), so an answer is never copied.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;

use socket2::Socket;

use super::{sockets, Backend, BackendOptions, BindRequest, Bound, EchoBatch, EchoLanes};
use super::{ReceiveBatch, RecvBackend};
use crate::sys::mmsg::MmsgRecv;
use crate::udp::check::LaneTally;
use crate::udp::judge::{EchoTally, Judge};
use crate::udp::socket::WAKE_INTERVAL;
use crate::udp::UdpError;

/// The recvmmsg backend: the kernel's sockets read in batches, answered with sendmmsg.
pub(in crate::udp) struct Mmsg {}

impl Backend for Mmsg {
    fn name(&self) -> &'static str {
        "mmsg"
    }

    fn about(&self) -> &'static str {
        "recvmmsg batches (answers: sendmmsg from the same buffers)"
    }

    fn configure(&self, _: &BackendOptions) -> RecvBackend {
        RecvBackend::Mmsg
    }

    fn bind(&self, request: &BindRequest<'_>) -> Result<Bound, UdpError> {
        let batch = request.batch;
        sockets::bind(request, |s, slot| Box::new(MmsgLane::new(s, batch, slot)))
    }

    fn echo(&self) -> Option<EchoLanes> {
        Some(Box::new(|socket, batch, slot| Box::new(MmsgEcho::new(socket, batch, slot))))
    }
}

/// A receive lane's sockets and its batch of buffers.
#[derive(Debug)]
pub(in crate::udp) struct MmsgLane {
    sockets: Vec<Arc<Socket>>,
    batch: MmsgRecv,
}

impl MmsgLane {
    /// `batch` messages of `slot` bytes over `sockets` (at least one).
    pub fn new(sockets: Vec<Arc<Socket>>, batch: usize, slot: usize) -> Self {
        Self { sockets, batch: MmsgRecv::new(batch, slot) }
    }
}

impl ReceiveBatch for MmsgLane {
    fn start(&mut self) -> io::Result<()> {
        if self.sockets.len() > 1 {
            for s in &self.sockets {
                s.set_nonblocking(true)?;
            }
        }
        Ok(())
    }

    fn receive(&mut self, tally: &mut LaneTally) -> io::Result<bool> {
        if let [socket] = &self.sockets[..] {
            // One socket: block in recvmmsg (SO_RCVTIMEO wakes us to check the stop signal).
            let n = receive(&mut self.batch, socket.as_fd(), libc::MSG_WAITFORONE, tally)?;
            return Ok(n > 0 && n < self.batch.batch() / 2);
        }
        let timeout = rustix::event::Timespec::try_from(WAKE_INTERVAL).ok();
        let mut fds: Vec<rustix::event::PollFd<'_>> = self
            .sockets
            .iter()
            .map(|s| rustix::event::PollFd::new(s, rustix::event::PollFlags::IN))
            .collect();
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        for socket in &self.sockets {
            // Drain while batches come back full; an empty socket answers EAGAIN.
            while receive(&mut self.batch, socket.as_fd(), libc::MSG_DONTWAIT, tally)?
                == self.batch.batch()
            {}
        }
        Ok(false)
    }
}

/// One recvmmsg and the accounting of what it brought; returns the message count (0 when
/// the socket had nothing or the call was interrupted).
#[inline]
fn receive(
    batch: &mut MmsgRecv,
    fd: BorrowedFd<'_>,
    flags: libc::c_int,
    tally: &mut LaneTally,
) -> io::Result<usize> {
    tally.syscalls += 1;
    let n = match batch.recv(fd, flags) {
        Ok(n) => n,
        Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => {
            return Ok(0)
        }
        Err(e) => return Err(e),
    };
    for i in 0..n {
        let (meta, data) = batch.message(i);
        tally.anomalies.truncated += u64::from(meta.truncated);
        let segment = meta.segment_size.unwrap_or(data.len()).max(1);
        for datagram in data.chunks(segment) {
            tally.datagram(datagram);
        }
    }
    tally.end_batch();
    Ok(n)
}

/// An echo lane's socket, its batch, and what it decided about each message of the last one.
#[derive(Debug)]
pub(in crate::udp) struct MmsgEcho {
    socket: Arc<Socket>,
    batch: MmsgRecv,
    /// Datagrams in each message of the last batch (a GRO buffer holds several).
    datagrams: Vec<u64>,
    /// The datagram size of each message of the last batch (its GRO segment size).
    segments: Vec<usize>,
    /// Datagrams to answer in each message of the last batch (0: none).
    answers: Vec<u64>,
}

impl MmsgEcho {
    pub fn new(socket: Arc<Socket>, batch: usize, slot: usize) -> Self {
        Self {
            socket,
            batch: MmsgRecv::new(batch, slot),
            datagrams: vec![0; batch],
            segments: vec![0; batch],
            answers: vec![0; batch],
        }
    }
}

impl EchoBatch for MmsgEcho {
    fn echo(&mut self, judge: &mut Judge, tally: &mut EchoTally) -> io::Result<bool> {
        let fd = self.socket.as_fd();
        // Blocks until one datagram (SO_RCVTIMEO wakes it to look at the stop signal); with
        // SO_BUSY_POLL the kernel polls the device first.
        tally.syscalls += 1;
        let n = match self.batch.recv(fd, libc::MSG_WAITFORONE) {
            Ok(n) => n,
            Err(e)
                if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) =>
            {
                return Ok(false)
            }
            Err(e) => return Err(e),
        };
        let (mut datagrams, mut bytes) = (0u64, 0u64);
        for i in 0..n {
            let (meta, data) = self.batch.message(i);
            tally.truncated += u64::from(meta.truncated);
            let segment = meta.segment_size.unwrap_or(data.len()).max(1);
            self.segments[i] = segment;
            self.datagrams[i] = data.len().div_ceil(segment).max(1) as u64;
            datagrams += self.datagrams[i];
            bytes += data.len() as u64;
        }
        let now = judge.now();
        for i in 0..n {
            self.answers[i] = 0;
            if judge.due() {
                let source = self.batch.source(i);
                let message = self.batch.message_mut(i);
                let (granted, len) =
                    judge.answer(source, message, self.segments[i], self.datagrams[i], now);
                if granted > 0 {
                    self.batch.set_reply_len(i, len);
                    self.answers[i] = granted;
                }
            }
        }
        tally.replied += reply_runs(&mut self.batch, &self.answers[..n], fd, tally);
        tally.end_batch(datagrams, bytes);
        Ok(n < self.batch.batch() / 2)
    }
}

/// Sends back the messages of the last batch that have answers (`answers[i] > 0`), each run
/// of neighbours in one sendmmsg; returns the datagrams answered.
fn reply_runs(
    batch: &mut MmsgRecv,
    answers: &[u64],
    fd: BorrowedFd<'_>,
    tally: &mut EchoTally,
) -> u64 {
    let n = answers.len();
    let mut replied = 0;
    let mut run: Option<usize> = None;
    for i in 0..=n {
        match (i < n && answers[i] > 0, run) {
            (true, None) => run = Some(i),
            (false, Some(start)) => {
                replied += reply_range(batch, answers, fd, start..i, tally);
                run = None;
            }
            _ => {}
        }
    }
    replied
}

/// Answers the messages in `range`; returns the datagrams answered. A message the kernel
/// refuses is counted and skipped.
fn reply_range(
    batch: &mut MmsgRecv,
    answers: &[u64],
    fd: BorrowedFd<'_>,
    range: std::ops::Range<usize>,
    tally: &mut EchoTally,
) -> u64 {
    let mut at = range.start;
    let mut answered = 0u64;
    while at < range.end {
        tally.syscalls += 1;
        match batch.reply(fd, at, range.end - at) {
            Ok(0) => break,
            Ok(k) => {
                answered += answers[at..at + k].iter().sum::<u64>();
                // sendmmsg leaves each message's length as the bytes it sent.
                let sent: usize = (at..at + k).map(|i| batch.message_mut(i).len()).sum();
                tally.replied_bytes += sent as u64;
                at += k;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                tally.send_errors += 1;
                at += 1;
            }
        }
    }
    answered
}
