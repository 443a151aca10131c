//! How `udp recv`, `udp echo` and `udp send` set up their lanes: how many, on which CPUs and
//! how many datagrams a call ([`Lanes`]); and, for the two that read a port, the sockets'
//! buffer and GRO, receive coalescing and the backend that reads them ([`ReceivePath`]).

use std::time::Duration;

use super::backend::RecvBackend;
use super::UdpError;
use crate::lane::Placement;
use crate::sys::mmsg;

/// How many lanes, where they run, and their batch.
#[derive(Debug, Clone)]
pub struct Lanes {
    /// Lanes, each with its own sockets (or, receiving with `SocketMode::Shared`, one socket).
    pub threads: usize,
    /// Which CPU each lane runs on.
    pub placement: Placement,
    /// Messages per recvmmsg/sendmmsg.
    pub batch: usize,
}

impl Default for Lanes {
    fn default() -> Self {
        Self { threads: 1, placement: Placement::Unpinned, batch: 32 }
    }
}

impl Lanes {
    /// Refuses lanes that cannot run: none, a batch out of range, CPUs this machine lacks.
    pub(super) fn check(&self) -> Result<(), UdpError> {
        if self.threads == 0 {
            return Err(UdpError::NoThreads);
        }
        if !(1..=mmsg::MAX_BATCH).contains(&self.batch) {
            return Err(UdpError::Batch(self.batch));
        }
        self.placement.check()?;
        Ok(())
    }
}

/// How a receiving lane reads its socket.
#[derive(Debug, Clone)]
pub struct ReceivePath {
    /// SO_RCVBUF bytes; `None` keeps the kernel's default.
    pub rcvbuf: Option<usize>,
    /// UDP_GRO on receive (falls back to datagram by datagram where the kernel refuses).
    pub gro: bool,
    /// After a batch that came back less than half full, wait this long before the next
    /// call so that datagrams accumulate: fewer wake-ups for the lane and for the CPU that
    /// wakes it (interrupt moderation, done in user space), at up to this much added latency.
    /// `None` receives again at once.
    pub coalesce: Option<Duration>,
    /// recvmmsg batches, io_uring (optionally with an SQPOLL thread) or AF_XDP.
    pub backend: RecvBackend,
}

impl Default for ReceivePath {
    fn default() -> Self {
        Self { rcvbuf: None, gro: false, coalesce: None, backend: RecvBackend::Mmsg }
    }
}
