//! io_uring: one multishot receive per socket into a ring of provided buffers, one datagram
//! per completion, every buffer handed back as soon as it is read; one io_uring_enter per
//! wait (none for submissions when an SQPOLL thread takes them). For the echo, a multishot
//! recvmsg, and each answer sent from the buffer its request arrived in, to the address the
//! kernel wrote beside it; the buffer goes back when the send completes.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;

use socket2::Socket;

use super::{sockets, Backend, BackendOptions, BindRequest, Bound, EchoBatch, EchoLanes};
use super::{ReceiveBatch, RecvBackend};
use crate::sys::socket_ring;
use crate::sys::socket_ring::{Completion, RingConfig, SocketRing};
use crate::topology::{CpuList, Topology};
use crate::udp::check::LaneTally;
use crate::udp::judge::{EchoTally, Judge};
use crate::udp::socket::WAKE_INTERVAL;
use crate::udp::UdpError;

/// Provided buffers per ring, and completions taken per wait.
const BUFFERS: u16 = 4096;

/// The io_uring backend, optionally with an SQPOLL thread on `sqpoll_cpu` submitting.
pub(in crate::udp) struct Uring {
    pub sqpoll_cpu: Option<usize>,
}

impl Backend for Uring {
    fn name(&self) -> &'static str {
        match self.sqpoll_cpu {
            None => "uring",
            Some(_) => "uring+sqpoll",
        }
    }

    fn about(&self) -> &'static str {
        "a multishot io_uring receive into provided buffers (answers: sent from the request's \
         buffer; no --gro, --coalesce unused; --sqpoll CPU for an SQPOLL thread)"
    }

    fn options(&self) -> &'static [&'static str] {
        &["--sqpoll"]
    }

    fn configure(&self, options: &BackendOptions) -> RecvBackend {
        RecvBackend::Uring { sqpoll_cpu: options.sqpoll_cpu.or(self.sqpoll_cpu) }
    }

    /// io_uring is probed and falls back to recvmmsg, SQPOLL to lanes submitting for
    /// themselves. GRO is refused (it receives datagram by datagram).
    fn settle(&self, gro: bool, fallback: &str) -> Result<Option<(RecvBackend, String)>, UdpError> {
        if gro {
            return Err(UdpError::UringGro);
        }
        if let Err(reason) = socket_ring::probe_datagram_ring() {
            return Ok(Some((RecvBackend::Mmsg, format!("{reason}; {fallback}"))));
        }
        let Some(cpu) = self.sqpoll_cpu else { return Ok(None) };
        Topology::read()?.check(&CpuList::new(vec![cpu]))?;
        Ok(socket_ring::probe_sqpoll(cpu).err().map(|reason| {
            let instead = RecvBackend::Uring { sqpoll_cpu: None };
            (instead, format!("{reason}; lanes submit for themselves"))
        }))
    }

    fn bind(&self, request: &BindRequest<'_>) -> Result<Bound, UdpError> {
        let sqpoll_cpu = self.sqpoll_cpu;
        sockets::bind(request, |s, slot| Box::new(UringLane::new(s, slot, sqpoll_cpu)))
    }

    fn echo(&self) -> Option<EchoLanes> {
        let sqpoll_cpu = self.sqpoll_cpu;
        Some(Box::new(move |socket, _, _| Box::new(UringEcho::new(socket, sqpoll_cpu))))
    }
}

/// The ring, made in the lane's thread by `start`.
fn ring(
    buffer_size: usize,
    sqpoll_cpu: Option<usize>,
) -> io::Result<(SocketRing, Vec<Completion>)> {
    let config = RingConfig { files: 1, buffers: BUFFERS, buffer_size, sqpoll_cpu };
    Ok((SocketRing::new(config)?, Vec::with_capacity(usize::from(BUFFERS))))
}

fn not_started() -> io::Error {
    io::Error::other("an io_uring lane received before its ring was made")
}

/// A receive lane's sockets and, once started, its ring.
#[derive(Debug)]
pub(in crate::udp) struct UringLane {
    sockets: Vec<Arc<Socket>>,
    slot: usize,
    sqpoll_cpu: Option<usize>,
    ring: Option<(SocketRing, Vec<Completion>)>,
}

impl UringLane {
    /// Buffers of `slot` bytes (a longer datagram counts as truncated).
    pub fn new(sockets: Vec<Arc<Socket>>, slot: usize, sqpoll_cpu: Option<usize>) -> Self {
        Self { sockets, slot, sqpoll_cpu, ring: None }
    }
}

impl ReceiveBatch for UringLane {
    fn start(&mut self) -> io::Result<()> {
        let (mut ring, completions) = ring(self.slot, self.sqpoll_cpu)?;
        for (token, socket) in self.sockets.iter().enumerate() {
            ring.receive_datagrams(socket.as_fd(), token as u32)?;
        }
        self.ring = Some((ring, completions));
        Ok(())
    }

    fn receive(&mut self, tally: &mut LaneTally) -> io::Result<bool> {
        let (ring, completions) = self.ring.as_mut().ok_or_else(not_started)?;
        ring.submit_and_wait(WAKE_INTERVAL)?;
        tally.syscalls += 1;
        ring.completions(completions);
        for completion in completions.drain(..) {
            let (token, more) = match completion {
                Completion::Received { slot, buffer, len, more } => {
                    tally.anomalies.truncated += u64::from(len > ring.buffer_size());
                    tally.datagram(ring.buffer(buffer, len));
                    ring.give_back(buffer);
                    (slot, more)
                }
                Completion::RecvEnded { slot, result, more } => {
                    if result == 0 {
                        tally.empty();
                    } else if result != -libc::ENOBUFS {
                        return Err(io::Error::from_raw_os_error(-result));
                    }
                    (slot, more)
                }
                _ => continue,
            };
            if !more {
                if let Some(socket) = self.sockets.get(token as usize) {
                    ring.receive_datagrams(socket.as_fd(), token)?;
                }
            }
        }
        tally.end_batch();
        Ok(false)
    }
}

/// An echo lane's socket and, once started, its ring.
#[derive(Debug)]
pub(in crate::udp) struct UringEcho {
    socket: Arc<Socket>,
    sqpoll_cpu: Option<usize>,
    ring: Option<(SocketRing, Vec<Completion>)>,
}

impl UringEcho {
    pub fn new(socket: Arc<Socket>, sqpoll_cpu: Option<usize>) -> Self {
        Self { socket, sqpoll_cpu, ring: None }
    }
}

impl EchoBatch for UringEcho {
    fn start(&mut self) -> io::Result<()> {
        // Room for the kernel's recvmsg header and any address before a 2 KiB datagram.
        let (mut ring, completions) = ring(4096, self.sqpoll_cpu)?;
        ring.receive_datagrams_from(self.socket.as_fd(), 0)?;
        self.ring = Some((ring, completions));
        Ok(())
    }

    fn echo(&mut self, judge: &mut Judge, tally: &mut EchoTally) -> io::Result<bool> {
        let fd = self.socket.as_fd();
        let (ring, completions) = self.ring.as_mut().ok_or_else(not_started)?;
        ring.submit_and_wait(WAKE_INTERVAL)?;
        tally.syscalls += 1;
        ring.completions(completions);
        let now = judge.now();
        let (mut datagrams, mut bytes) = (0u64, 0u64);
        for completion in completions.drain(..) {
            match completion {
                Completion::ReceivedFrom { buffer, len, more } => {
                    datagrams += 1;
                    bytes += answer(ring, fd, buffer, len, judge, now, tally)?;
                    if !more {
                        ring.receive_datagrams_from(fd, 0)?;
                    }
                }
                Completion::Replied { buffer, result } => {
                    ring.give_back(buffer);
                    if result >= 0 {
                        tally.replied += 1;
                        tally.replied_bytes += result as u64;
                    } else {
                        tally.send_errors += 1;
                    }
                }
                Completion::RecvEnded { result, more, .. } => {
                    if result < 0 && result != -libc::ENOBUFS {
                        return Err(io::Error::from_raw_os_error(-result));
                    }
                    // An empty datagram: counted, and no request.
                    datagrams += u64::from(result == 0);
                    judge.unrecognised(u64::from(result == 0));
                    if !more {
                        ring.receive_datagrams_from(fd, 0)?;
                    }
                }
                _ => {}
            }
        }
        tally.end_batch(datagrams, bytes);
        Ok(false)
    }
}

/// Judges the datagram in provided buffer `buffer` and sends it back from there if it is
/// answered, else gives the buffer back; returns its payload's length.
fn answer(
    ring: &mut SocketRing,
    fd: BorrowedFd<'_>,
    buffer: u16,
    len: usize,
    judge: &mut Judge,
    now: u64,
    tally: &mut EchoTally,
) -> io::Result<u64> {
    let due = judge.due();
    let Some(parts) = ring.datagram_from(buffer, len) else {
        tally.truncated += 1;
        ring.give_back(buffer);
        return Ok(0);
    };
    tally.truncated += u64::from(parts.truncated);
    let answer = !parts.truncated && due && {
        let source =
            crate::sys::sockaddr::from_bytes(&ring.buffer(buffer, len)[parts.name.clone()]);
        let payload = &mut ring.buffer_mut(buffer, len)[parts.payload.clone()];
        let segment = payload.len();
        judge.answer(source, payload, segment, 1, now).0 == 1
    };
    if answer {
        ring.reply_from_buffer(fd, buffer, &parts)?;
    } else {
        ring.give_back(buffer);
    }
    Ok(parts.payload.len() as u64)
}
