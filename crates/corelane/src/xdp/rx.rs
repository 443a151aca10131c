//! Receiving through AF_XDP: the program attached, one socket per RX queue registered in the
//! XSKMAP, the mode settled (zero-copy first, saying why it is not), and the per-queue lane
//! that reads frames through the checked parser and hands the payloads on.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::attach::Attachment;
use super::frame::{self, FrameError};
use super::{Interface, XdpError, XdpMode};
use crate::sys::code_lock::CodeLock;
use crate::sys::xsk::{XskConfig, XskSocket, XskStatsReader};

pub use crate::sys::xsk::XskStats;

/// The size of a UMEM frame (one frame per datagram; MTU 1500 fits).
pub const FRAME_SIZE: u32 = 2048;
/// Entries of each receiving socket's RX ring: 55 ms of frames at 150,000/s before a lane that
/// fell behind (descheduled on a busy CPU) loses any, counted as `rx_ring_full`.
pub const RX_RING: u32 = 8192;
/// UMEM frames of each receiving socket: the RX ring's worth plus 2048, so that with the RX
/// ring full, a batch in the lane's hands (64) and one in the driver's (a NAPI budget) the fill
/// ring still holds frames: the kernel never finds it empty (`rx_dropped`), and a lane that
/// falls behind loses frames only to the RX ring, under that one name. 20 MiB per queue.
pub const RX_FRAMES: u32 = RX_RING + 2048;
/// The fill ring holds every RX frame at once, so giving one back never waits for room.
const FILL_RING: u32 = RX_FRAMES.next_power_of_two();

/// The UMEM a receiving socket locks, for the RLIMIT_MEMLOCK error.
const RX_UMEM_BYTES: u64 = RX_FRAMES as u64 * FRAME_SIZE as u64;

/// What to receive.
#[derive(Debug, Clone)]
pub struct RxConfig {
    pub addr: SocketAddr,
    /// The interface; by default the one that holds `addr`.
    pub dev: Option<String>,
    pub mode: XdpMode,
    /// Busy polling (SO_PREFER_BUSY_POLL with SO_BUSY_POLL of this many µs).
    pub busy_poll_us: Option<u32>,
}

/// Frames one lane saw and what became of them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameCounts {
    pub frames: u64,
    /// An IP or UDP length claiming more than arrived: dropped, never read past.
    pub lying_length: u64,
    /// Not IP, a bad IPv4 header or checksum, cut short.
    pub malformed: u64,
    /// Not UDP, or a fragment.
    pub not_udp: u64,
    /// UDP to another port (the program should have passed it on).
    pub other_port: u64,
}

impl FrameCounts {
    fn add(&mut self, o: &FrameCounts) {
        self.frames += o.frames;
        self.lying_length += o.lying_length;
        self.malformed += o.malformed;
        self.not_udp += o.not_udp;
        self.other_port += o.other_port;
    }
}

/// How the XDP receive ran, for the summary and the JSON.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct XdpReport {
    pub interface: String,
    pub queues: u32,
    pub program_id: u32,
    /// `native zero-copy`, `native copy` or `generic copy`.
    pub mode: String,
    /// Why this mode and not a faster one.
    pub why: String,
    /// A left-over corelane program removed before attaching.
    pub removed_stale_program: Option<u32>,
    pub busy_poll: bool,
    #[serde(flatten)]
    pub counts: FrameCounts,
    /// The kernel's counters of this run's sockets, summed (XDP_STATISTICS): every frame the
    /// program redirected and no lane read is in `rx_ring_full` or `rx_dropped`. `None`
    /// (JSON null): unknown, a socket's counters could not be read (`xsk_error` says why).
    #[serde(default)]
    pub xsk: Option<XskStats>,
    /// Per RX queue, in queue order; `None` where that socket's read failed.
    #[serde(default)]
    pub xsk_per_queue: Vec<Option<XskStats>>,
    /// Why the counters are unknown, when they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xsk_error: Option<String>,
}

/// One reading of the kernel's counters of every socket of a receive. A socket whose
/// XDP_STATISTICS cannot be read is unknown, never zero: a loss must not read as none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XskReading {
    /// Per RX queue, in queue order; `None` where the read failed.
    pub per_queue: Vec<Option<XskStats>>,
    /// The first failure: the queue and the error.
    pub error: Option<String>,
}

impl XskReading {
    fn of(readers: &[XskStatsReader]) -> Self {
        let mut reading = Self::default();
        for (queue, reader) in readers.iter().enumerate() {
            match reader.read() {
                Ok(s) => reading.per_queue.push(Some(s)),
                Err(e) => {
                    reading.per_queue.push(None);
                    reading.error.get_or_insert_with(|| {
                        format!("cannot read XDP_STATISTICS of queue {queue}'s socket: {e}")
                    });
                }
            }
        }
        reading
    }

    /// The counters summed over the sockets; `None` (unknown) when any socket's are.
    pub fn total(&self) -> Option<XskStats> {
        self.per_queue.iter().try_fold(XskStats::default(), |mut sum, q| {
            sum.add(q.as_ref()?);
            Some(sum)
        })
    }
}

/// One RX queue's socket, read by one lane.
#[derive(Debug)]
pub struct XskLane {
    socket: XskSocket,
    pub queue: u32,
    port: u16,
    pub counts: FrameCounts,
    /// SO_BUSY_POLL's time when the lane busy-polls.
    busy_poll_us: Option<u32>,
}

impl XskLane {
    /// Reads up to `budget` frames; each UDP payload for the bound port goes to `each`.
    /// Returns the number of frames.
    pub fn receive(&mut self, budget: u32, mut each: impl FnMut(&[u8])) -> u32 {
        let (port, counts) = (self.port, &mut self.counts);
        self.socket.receive(budget, |f| {
            counts.frames += 1;
            match frame::parse(f) {
                Ok(v) if v.dst.port() == port => each(v.payload),
                Ok(_) => counts.other_port += 1,
                Err(FrameError::LyingLength) => counts.lying_length += 1,
                Err(FrameError::NotUdp) => counts.not_udp += 1,
                Err(FrameError::Short | FrameError::Malformed) => counts.malformed += 1,
            }
        })
    }

    /// Gives up to `budget` frames back to the fill ring unread; returns how many (counted
    /// in `frames`, nothing else).
    pub fn give_back(&mut self, budget: u32) -> u32 {
        let n = self.socket.receive(budget, |_| {});
        self.counts.frames += u64::from(n);
        n
    }

    /// Waits for frames up to `timeout` (poll; it also wakes the kernel when need_wakeup asks).
    /// A busy-polling lane first runs its queue's NAPI itself (recvfrom, the kernel's busy-poll
    /// path) until frames are on the ring or its busy-poll time is up, and sleeps only then.
    pub fn wait(&self, timeout: Duration) -> std::io::Result<()> {
        if let Some(usecs) = self.busy_poll_us {
            let end = std::time::Instant::now() + Duration::from_micros(u64::from(usecs));
            loop {
                self.socket.busy_poll_once()?;
                if self.socket.rx_ready() {
                    return Ok(());
                }
                if std::time::Instant::now() >= end {
                    break;
                }
            }
        }
        self.socket.wait(timeout.as_millis().min(i32::MAX as u128) as i32)
    }

    /// Whether this lane runs its queue's NAPI itself.
    pub fn busy_polling(&self) -> bool {
        self.busy_poll_us.is_some()
    }

    /// The kernel's counters for this lane's socket.
    pub fn stats(&self) -> std::io::Result<XskStats> {
        self.socket.stats()
    }
}

/// The program attached and the sockets bound, ready for lanes.
#[derive(Debug)]
pub struct XdpReceive {
    attachment: Attachment,
    lanes: Vec<XskLane>,
    /// Each socket's counters, readable while its lane runs.
    readers: Vec<XskStatsReader>,
    mode: String,
    why: String,
    busy_poll: bool,
    /// The program's code, locked in memory until the lanes joined; `Err`: why it is not.
    code: Result<CodeLock, String>,
}

fn bind_error(iface: &Interface, queue: u32, e: std::io::Error) -> XdpError {
    match e.raw_os_error() {
        Some(libc::ENOBUFS | libc::ENOMEM) => {
            let limit = rustix::process::getrlimit(rustix::process::Resource::Memlock)
                .current
                .map_or("unlimited".to_string(), |b| format!("{b} bytes"));
            XdpError::Memlock { bytes: RX_UMEM_BYTES, limit }
        }
        Some(libc::EBUSY) => XdpError::io(
            format!(
                "queue {queue} of {} already has an AF_XDP socket (another program's: stop it)",
                iface.name
            ),
            e,
        ),
        _ => XdpError::io(
            format!("cannot bind an AF_XDP socket to queue {queue} of {}", iface.name),
            e,
        ),
    }
}

/// Binds, waiting out EBUSY for up to 3 s: the kernel tears down a closed socket's hold on
/// its queue after an RCU grace period, so a run started right after another (or after a
/// SIGKILL) would otherwise find the queue still taken.
fn bind_when_free(config: &XskConfig) -> std::io::Result<XskSocket> {
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    loop {
        match XskSocket::bind(config) {
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

fn is_refusal(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EINVAL | libc::EPROTONOSUPPORT | 524))
}

/// Locks the program's code in memory before anything is attached: nothing pushes back on an
/// AF_XDP RX ring, so a receiver whose code was still on disk (a cold page cache) waited on
/// it while its ring overflowed (58,864 frames lost as `rx_ring_full` in one such start
/// here). The socket path needs none: its buffer and the kernel's backlog hold what arrives
/// meanwhile.
fn lock_code() -> Result<CodeLock, String> {
    CodeLock::executable().map_err(|e| {
        let fix = match e.raw_os_error() {
            Some(libc::EPERM | libc::ENOMEM) => "; needs CAP_IPC_LOCK or a larger RLIMIT_MEMLOCK",
            _ => "",
        };
        format!(
            "its code is not locked in memory ({e}{fix}): a start on a cold page cache may \
             lose frames as rx_ring_full"
        )
    })
}

impl XdpReceive {
    /// Attaches the program and binds one socket per RX queue, zero-copy first under `auto`.
    pub fn setup(c: &RxConfig) -> Result<Self, XdpError> {
        super::check_available()?;
        let iface = Interface::for_address(c.addr, c.dev.as_deref())?;
        let code = lock_code();
        let (attachment, mut why) = match c.mode {
            XdpMode::Generic => (
                Attachment::redirect(&iface, c.addr, false)?,
                "asked for (--xdp-mode generic)".to_string(),
            ),
            XdpMode::Auto => match Attachment::redirect(&iface, c.addr, true) {
                Ok(a) => (a, String::new()),
                Err(XdpError::ModeRefused { reason, .. }) => {
                    (Attachment::redirect(&iface, c.addr, false)?, format!("{reason}; generic XDP"))
                }
                Err(e) => return Err(e),
            },
            XdpMode::Zerocopy | XdpMode::Copy => {
                (Attachment::redirect(&iface, c.addr, true)?, String::new())
            }
        };
        let mut zerocopy = match c.mode {
            XdpMode::Auto | XdpMode::Zerocopy => attachment.native,
            XdpMode::Copy | XdpMode::Generic => false,
        };
        if c.mode == XdpMode::Copy {
            why = "asked for (--xdp-mode copy)".to_string();
        }
        let (mut lanes, mut readers) = (Vec::new(), Vec::new());
        for queue in 0..iface.rx_queues {
            let mut config = XskConfig {
                ifindex: iface.index,
                queue,
                rx_frames: RX_FRAMES,
                tx_frames: 0,
                frame_size: FRAME_SIZE,
                fill_ring: FILL_RING,
                rx_ring: RX_RING,
                // Receive only: no TX ring.
                tx_ring: 0,
                zerocopy: Some(zerocopy),
                busy_poll_us: c.busy_poll_us,
            };
            let socket = match bind_when_free(&config) {
                Ok(s) => s,
                Err(e) if zerocopy && is_refusal(&e) => {
                    if c.mode == XdpMode::Zerocopy {
                        return Err(XdpError::ModeRefused {
                            mode: "zerocopy",
                            dev: iface.name.clone(),
                            reason: format!("its driver has no AF_XDP zero-copy ({e})"),
                        });
                    }
                    why = format!("zero-copy refused by {}'s driver ({e}): copy mode", iface.name);
                    zerocopy = false;
                    config.zerocopy = Some(false);
                    bind_when_free(&config).map_err(|e| bind_error(&iface, queue, e))?
                }
                Err(e) => return Err(bind_error(&iface, queue, e)),
            };
            attachment
                .register(queue, socket.fd())
                .map_err(|e| XdpError::io("cannot put the AF_XDP socket in the XSKMAP", e))?;
            readers.push(
                socket
                    .stats_reader()
                    .map_err(|e| XdpError::io("cannot duplicate the AF_XDP socket", e))?,
            );
            lanes.push(XskLane {
                socket,
                queue,
                port: c.addr.port(),
                counts: FrameCounts::default(),
                busy_poll_us: c.busy_poll_us,
            });
        }
        let mode = match (attachment.native, zerocopy) {
            (true, true) => "native zero-copy",
            (true, false) => "native copy",
            (false, _) => "generic copy",
        };
        if why.is_empty() {
            why = "the fastest mode tried first".to_string();
        }
        Ok(Self {
            attachment,
            lanes,
            readers,
            mode: mode.to_string(),
            why,
            busy_poll: c.busy_poll_us.is_some(),
            code,
        })
    }

    /// One lane per RX queue, in queue order.
    pub fn take_lanes(&mut self) -> Vec<XskLane> {
        std::mem::take(&mut self.lanes)
    }

    /// Lanes (RX queues) still held.
    pub fn lane_count(&self) -> usize {
        self.lanes.len()
    }

    pub fn mode(&self) -> &str {
        &self.mode
    }

    pub fn why(&self) -> &str {
        &self.why
    }

    pub fn interface(&self) -> &Interface {
        &self.attachment.iface
    }

    pub fn removed_stale(&self) -> Option<u32> {
        self.attachment.removed_stale
    }

    /// Why the program's code could not be locked in memory, when it could not.
    pub fn code_unlocked(&self) -> Option<&str> {
        self.code.as_ref().err().map(String::as_str)
    }

    /// The kernel's counters of every socket, in queue order (read while the lanes run).
    pub fn kernel_counters(&self) -> XskReading {
        XskReading::of(&self.readers)
    }

    /// The report over the lanes handed back; dropping `self` then detaches the program.
    pub fn finish(self, lanes: &[XskLane]) -> XdpReport {
        let mut counts = FrameCounts::default();
        for lane in lanes {
            counts.add(&lane.counts);
            let _ = self.attachment.unregister(lane.queue);
        }
        let reading = self.kernel_counters();
        XdpReport {
            interface: self.attachment.iface.name.clone(),
            queues: self.attachment.iface.rx_queues,
            program_id: self.attachment.prog_id,
            mode: self.mode,
            why: self.why,
            removed_stale_program: self.attachment.removed_stale,
            busy_poll: self.busy_poll,
            counts,
            xsk: reading.total(),
            xsk_error: reading.error,
            xsk_per_queue: reading.per_queue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::OwnedFd;

    /// A reader over a real socket that is not an AF_XDP one: the kernel refuses
    /// XDP_STATISTICS on it (ENOPROTOOPT), as it would any failed read.
    fn failing_reader() -> XskStatsReader {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        XskStatsReader::over(OwnedFd::from(udp))
    }

    #[test]
    fn a_socket_whose_counters_cannot_be_read_makes_the_losses_unknown_not_zero() {
        let reading = XskReading::of(&[failing_reader()]);
        assert_eq!(reading.per_queue, vec![None]);
        assert_eq!(reading.total(), None, "a failed read must not sum to 0 lost");
        let error = reading.error.unwrap();
        assert!(error.contains("queue 0") && error.contains("XDP_STATISTICS"), "{error}");
    }

    #[test]
    fn one_unknown_queue_makes_the_sum_unknown() {
        let known = XskStats { rx_ring_full: 3, ..XskStats::default() };
        let reading = XskReading { per_queue: vec![Some(known), None], error: None };
        assert_eq!(reading.total(), None);
        let both = XskReading { per_queue: vec![Some(known), Some(known)], error: None };
        assert_eq!(both.total().map(|s| s.rx_lost()), Some(6));
    }
}
