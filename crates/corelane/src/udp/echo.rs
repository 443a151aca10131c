//! The echo server (`udp echo`): one SO_REUSEPORT socket per pinned lane, each answering
//! requests to their senders — a recvmmsg batch goes back in one sendmmsg from the same
//! buffers (no copy), a GRO buffer goes back as GSO segments of the size it came in.
//! sockperf's `sr` and netperf's UDP_RR server, on corelane's lanes.
//!
//! It is not a reflector: only requests (corelane's or sockperf's) are answered, each turned
//! into its reply in place ([`answer`](super::answer)); never a datagram from the echo's own
//! address and port or from port 0 ([`source_check`](super::source_check)); and no source
//! address draws more than its token bucket ([`budget`](super::budget)). Everything not
//! answered is counted by reason.
//!
//! Receive coalescing is off by default here: a service that answers requests must not hold
//! them back to save wake-ups. `coalesce` turns on the same rule `udp recv` uses (after a
//! batch less than half full, wait before the next call) so the lab can show its price.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use socket2::Socket;

use super::answer::{self, Verdict};
use super::budget::{self, SourceBudget};
use super::recv::settle_uring;
use super::recv::{OffloadState, RecvBackend};
use super::socket::{apply_busy_poll, bind_receiver, local_addr, napi_id, BusyPollState};
use super::source_check::{Refused, SourceCheck};
use super::{UdpError, Wire};
use crate::lane::{LaneSet, LanesEnd, Monitor, Placement, Second, StopSignal, Watch};
use crate::reuseport::ReuseportGroup;
use crate::stats::{Interval, LaneCounters, Meter};
use crate::sys::socket_ring::{Completion, RingConfig, SocketRing};
use crate::sys::{mmsg, sockopt};

/// What to echo and how.
#[derive(Debug, Clone)]
pub struct EchoConfig {
    pub addr: SocketAddr,
    /// Lanes, each with its own SO_REUSEPORT socket.
    pub threads: usize,
    pub placement: Placement,
    /// Messages per recvmmsg/sendmmsg.
    pub batch: usize,
    pub rcvbuf: Option<usize>,
    /// UDP_GRO on receive; the answer goes back with GSO in the segment size it came in.
    pub gro: bool,
    /// SO_BUSY_POLL microseconds (with SO_PREFER_BUSY_POLL where the kernel has it).
    pub busy_poll_us: Option<u32>,
    /// Answer every Nth datagram a lane receives (sockperf's `--reply-every`); 1 answers all.
    pub reply_every: u64,
    /// After a batch less than half full, wait this long before the next receive (receive
    /// coalescing, as `ReceiverConfig::coalesce`); `None`, the default, answers at once.
    pub coalesce: Option<Duration>,
    /// Which wire's requests to answer: `None` (the default) both corelane's (the magic
    /// turned into the reply's) and sockperf's (as `sockperf sr`: requests flagged for an
    /// answer, the client bit cleared); `Some` only that one.
    pub wire: Option<Wire>,
    /// Answers per second one source address may draw from one lane (its token bucket's rate).
    pub per_source_rate: u64,
    /// Answers one source address may draw at once from one lane (the bucket's size).
    pub per_source_burst: u64,
    /// recvmmsg/sendmmsg batches, or io_uring: a multishot recvmsg into provided buffers and
    /// each answer sent from the buffer it arrived in (optionally with an SQPOLL thread).
    pub backend: RecvBackend,
    pub duration: Option<Duration>,
    /// Stop once this many datagrams were answered.
    pub until_replies: Option<u64>,
}

impl EchoConfig {
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            threads: 1,
            placement: Placement::Unpinned,
            batch: 32,
            rcvbuf: None,
            gro: false,
            busy_poll_us: None,
            reply_every: 1,
            coalesce: None,
            wire: None,
            per_source_rate: budget::DEFAULT_RATE,
            per_source_burst: budget::DEFAULT_BURST,
            backend: RecvBackend::Mmsg,
            duration: None,
            until_replies: None,
        }
    }
}

/// One second of echoing.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EchoInterval {
    #[serde(flatten)]
    pub interval: Interval,
    /// Datagrams answered this interval.
    pub replies: u64,
    /// The process's exact CPU time per datagram received this interval.
    pub cpu_ns_per_datagram: f64,
}

/// One lane's totals.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EchoLane {
    pub lane: usize,
    pub cpu: Option<usize>,
    pub datagrams: u64,
    pub replies: u64,
    pub syscalls: u64,
}

/// Everything an echo run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EchoSummary {
    pub addr: SocketAddr,
    pub threads: usize,
    pub batch: usize,
    pub elapsed_secs: f64,
    /// Datagrams received (GRO segments counted one by one).
    pub datagrams: u64,
    pub replies: u64,
    /// Answers the kernel refused (an unroutable sender, a full buffer): counted, not fatal.
    pub send_errors: u64,
    pub truncated: u64,
    /// Datagrams not answered, by reason (GRO segments counted one by one).
    #[serde(flatten)]
    pub dropped: Dropped,
    /// The per-source budget: answers per second and at once, per source address and lane.
    pub per_source_rate: u64,
    pub per_source_burst: u64,
    pub reply_every: u64,
    /// Receive coalescing delay in µs (0: off).
    pub coalesce_us: f64,
    pub cpu_ns_per_datagram: f64,
    pub gro: OffloadState,
    pub busy_poll: BusyPollState,
    /// The NAPI id the sockets last saw (0: none on this path, so busy polling polls nothing).
    pub napi_id: u32,
    /// `mmsg`, `uring` or `uring+sqpoll`.
    pub backend: String,
    /// Why the backend asked for was not the one that ran, if so.
    pub backend_note: Option<String>,
    pub lanes: Vec<EchoLane>,
}

/// Datagrams the echo did not answer, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    /// Already replies (corelane's reply magic, or a sockperf answer).
    pub dropped_replies: u64,
    /// sockperf messages that ask for no answer.
    pub dropped_not_asked: u64,
    /// Neither wire's request (or a wire `--wire` excludes), or no IP source address.
    pub dropped_unrecognised: u64,
    /// From the echo's own address and port, or an unspecified address.
    pub dropped_self: u64,
    /// From source port 0.
    pub dropped_port0: u64,
    /// Requests beyond their source address's budget, or from an address the full table
    /// could not take in yet.
    pub dropped_over_budget: u64,
}

impl Dropped {
    fn add(&mut self, o: &Self) {
        self.dropped_replies += o.dropped_replies;
        self.dropped_not_asked += o.dropped_not_asked;
        self.dropped_unrecognised += o.dropped_unrecognised;
        self.dropped_self += o.dropped_self;
        self.dropped_port0 += o.dropped_port0;
        self.dropped_over_budget += o.dropped_over_budget;
    }

    fn refused(&mut self, why: Refused, datagrams: u64) {
        match why {
            Refused::Itself => self.dropped_self += datagrams,
            Refused::Port0 => self.dropped_port0 += datagrams,
        }
    }

    fn not_answered(&mut self, verdict: Verdict) {
        match verdict {
            Verdict::Answer => {}
            Verdict::Reply => self.dropped_replies += 1,
            Verdict::NotAsked => self.dropped_not_asked += 1,
            Verdict::Unrecognised => self.dropped_unrecognised += 1,
        }
    }
}

/// Bound sockets, ready to echo.
#[derive(Debug)]
pub struct Echo {
    config: EchoConfig,
    sockets: Vec<Arc<Socket>>,
    addr: SocketAddr,
    gro: OffloadState,
    busy_poll: BusyPollState,
    backend_note: Option<String>,
}

/// Replies per lane counter, read once a second.
#[derive(Debug, Default)]
#[repr(align(128))]
struct ReplyCounter(std::sync::atomic::AtomicU64);

impl Echo {
    /// Validates the configuration and binds every lane's socket, so a busy port is named
    /// before any thread starts.
    pub fn bind(config: EchoConfig) -> Result<Self, UdpError> {
        if config.threads == 0 {
            return Err(UdpError::NoThreads);
        }
        if !(1..=mmsg::MAX_BATCH).contains(&config.batch) {
            return Err(UdpError::Batch(config.batch));
        }
        if config.reply_every == 0 {
            return Err(UdpError::ReplyEvery);
        }
        if config.gro && config.reply_every > 1 {
            return Err(UdpError::ReplyEveryGro);
        }
        if !(1..=1_000_000_000).contains(&config.per_source_rate) || config.per_source_burst == 0 {
            return Err(UdpError::Budget);
        }
        config.placement.check()?;
        let mut config = config;
        let backend_note = settle_backend(&mut config)?;
        let reuseport = config.threads > 1;
        let group = ReuseportGroup::bind(
            config.addr,
            config.threads,
            |a| bind_receiver(a, reuseport, config.rcvbuf),
            local_addr,
        )?;
        let addr = group.addr();
        let sockets: Vec<Arc<Socket>> = group.into_sockets().into_iter().map(Arc::new).collect();
        let mut gro = OffloadState { requested: config.gro, active: false, note: None };
        if config.gro {
            match sockets.iter().find_map(|s| sockopt::set_udp_gro(s.as_fd(), true).err()) {
                None => gro.active = true,
                Some(e) => {
                    gro.note =
                        Some(format!("kernel refused UDP_GRO ({e}); echoing datagram by datagram"))
                }
            }
        }
        let busy_poll = apply_busy_poll(sockets.iter().map(|s| &**s), config.busy_poll_us);
        Ok(Self { config, sockets, addr, gro, busy_poll, backend_note })
    }

    /// The address bound (port 0 resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Busy polling as the kernel took it.
    pub fn busy_poll(&self) -> &BusyPollState {
        &self.busy_poll
    }

    /// Why the backend asked for is not the one that runs, if so.
    pub fn backend_note(&self) -> Option<&str> {
        self.backend_note.as_deref()
    }

    /// GRO as the kernel took it.
    pub fn gro(&self) -> &OffloadState {
        &self.gro
    }

    /// Echoes until `stop`, the duration or the reply count, calling `on_interval` once a
    /// second from the calling thread.
    pub fn run(
        self,
        stop: &StopSignal,
        on_interval: impl FnMut(&EchoInterval),
    ) -> Result<EchoSummary, UdpError> {
        let cfg = &self.config;
        let slot = if self.gro.active { 65_536 } else { 2048 };
        let threads = self.sockets.len();
        let check = self.source_check();
        let counters: Arc<Vec<LaneCounters>> =
            Arc::new((0..threads).map(|_| LaneCounters::default()).collect());
        let replies: Arc<Vec<ReplyCounter>> =
            Arc::new((0..threads).map(|_| ReplyCounter::default()).collect());
        let lane_stop = StopSignal::new();
        let mut lanes = LaneSet::new("corelane-echo", lane_stop.clone());
        for (index, socket) in self.sockets.iter().enumerate() {
            let lane = EchoLaneWork {
                socket: Arc::clone(socket),
                batch: mmsg::MmsgRecv::new(cfg.batch, slot),
                counters: Arc::clone(&counters),
                replies: Arc::clone(&replies),
                index,
                reply_every: cfg.reply_every,
                coalesce: cfg.coalesce,
                wire: cfg.wire,
                check: check.clone(),
                budget: SourceBudget::new(cfg.per_source_rate, cfg.per_source_burst),
                clock: Instant::now(),
                backend: cfg.backend,
                datagrams: vec![0; cfg.batch],
                segments: vec![0; cfg.batch],
                answers: vec![0; cfg.batch],
                stop: lane_stop.clone(),
            };
            lanes
                .spawn(cfg.placement.cpu_of(index), move || lane.run())
                .map_err(|e| UdpError::io("cannot start an echo lane", e))?;
        }
        let mut monitor = Monitor::new(stop, LanesEnd::AnyFinished).until(cfg.duration);
        let mut watch = EchoWatch {
            counters: &counters,
            replies: &replies,
            until: cfg.until_replies,
            meter: Meter::new(threads),
            last_datagrams: 0,
            last_replies: 0,
            on_interval,
        };
        let (_, stopped) = monitor.watch(&[&lanes], &mut watch);
        let napi = self.sockets.iter().map(|s| napi_id(s)).max().unwrap_or(0);
        let (joined, _) =
            monitor.join(lanes).map_err(|e| UdpError::io("an echo lane failed", e))?;
        let datagrams: u64 = counters.iter().map(LaneCounters::datagrams).sum();
        let mut dropped = Dropped::default();
        joined.iter().for_each(|j| dropped.add(&j.value.dropped));
        Ok(EchoSummary {
            addr: self.addr,
            threads,
            batch: cfg.batch,
            elapsed_secs: stopped.elapsed.as_secs_f64(),
            datagrams,
            replies: replied(&replies),
            send_errors: joined.iter().map(|j| j.value.send_errors).sum(),
            truncated: joined.iter().map(|j| j.value.truncated).sum(),
            dropped,
            per_source_rate: cfg.per_source_rate,
            per_source_burst: cfg.per_source_burst,
            reply_every: cfg.reply_every,
            coalesce_us: cfg.coalesce.map_or(0.0, |d| d.as_secs_f64() * 1e6),
            cpu_ns_per_datagram: stopped.cpu_ns_per(datagrams),
            gro: self.gro.clone(),
            busy_poll: self.busy_poll.clone(),
            napi_id: napi,
            backend: cfg.backend.to_string(),
            backend_note: self.backend_note.clone(),
            lanes: joined
                .iter()
                .map(|j| EchoLane {
                    lane: j.index,
                    cpu: j.cpu,
                    datagrams: counters[j.index].datagrams(),
                    replies: replies[j.index].0.load(Ordering::Relaxed),
                    syscalls: j.value.syscalls,
                })
                .collect(),
        })
    }
}

/// Replies over every lane.
fn replied(replies: &[ReplyCounter]) -> u64 {
    replies.iter().map(|c| c.0.load(Ordering::Relaxed)).sum()
}

/// [`Echo::run`]'s seconds and reply target, from the lanes' counters.
struct EchoWatch<'a, F> {
    counters: &'a [LaneCounters],
    replies: &'a [ReplyCounter],
    until: Option<u64>,
    meter: Meter,
    last_datagrams: u64,
    last_replies: u64,
    on_interval: F,
}

impl<F: FnMut(&EchoInterval)> Watch for EchoWatch<'_, F> {
    fn reached(&mut self) -> bool {
        self.until.is_some_and(|n| replied(self.replies) >= n)
    }

    fn second(&mut self, second: &Second) {
        let refs: Vec<&LaneCounters> = self.counters.iter().collect();
        let interval = self.meter.tick(&refs);
        let got = interval.datagrams - self.last_datagrams;
        let total_replies = replied(self.replies);
        let report = EchoInterval {
            replies: total_replies - self.last_replies,
            cpu_ns_per_datagram: second.cpu_ns_per(got),
            interval,
        };
        self.last_datagrams = report.interval.datagrams;
        self.last_replies = total_replies;
        (self.on_interval)(&report);
    }
}

impl Echo {
    /// The sources never answered: this echo's address and port (with a wildcard bind, every
    /// address the host has now, and loopback).
    fn source_check(&self) -> SourceCheck {
        let host = if self.addr.ip().is_unspecified() {
            crate::xdp::netlink::addresses().unwrap_or_default()
        } else {
            Vec::new()
        };
        SourceCheck::new(self.addr, host.into_iter().map(|(_, ip)| ip))
    }
}

fn settle_backend(config: &mut EchoConfig) -> Result<Option<String>, UdpError> {
    settle_uring(&mut config.backend, config.gro, "echoing with recvmmsg/sendmmsg")
}

/// What one lane owns.
struct EchoLaneWork {
    socket: Arc<Socket>,
    batch: mmsg::MmsgRecv,
    counters: Arc<Vec<LaneCounters>>,
    replies: Arc<Vec<ReplyCounter>>,
    index: usize,
    reply_every: u64,
    coalesce: Option<Duration>,
    wire: Option<Wire>,
    check: SourceCheck,
    budget: SourceBudget,
    /// The budget's clock starts with the lane.
    clock: Instant,
    backend: RecvBackend,
    /// Datagrams in each message of the last batch (a GRO buffer holds several).
    datagrams: Vec<u64>,
    /// The datagram size of each message of the last batch (its GRO segment size).
    segments: Vec<usize>,
    /// Datagrams to answer in each message of the last batch (0: none).
    answers: Vec<u64>,
    stop: StopSignal,
}

/// What one lane counted.
#[derive(Debug, Default)]
struct EchoLaneResult {
    syscalls: u64,
    send_errors: u64,
    truncated: u64,
    dropped: Dropped,
}

impl EchoLaneWork {
    fn run(mut self) -> io::Result<EchoLaneResult> {
        let mut r = EchoLaneResult::default();
        let socket = Arc::clone(&self.socket);
        let fd = socket.as_fd();
        if let RecvBackend::Uring { sqpoll_cpu } = self.backend {
            self.run_uring(fd, sqpoll_cpu, &mut r)?;
            return Ok(r);
        }
        let mut seen = 0u64;
        let mut replied = 0u64;
        while !self.stop.is_stopped() {
            // Blocks until one datagram (SO_RCVTIMEO wakes it to look at the stop signal);
            // with SO_BUSY_POLL the kernel polls the device first.
            r.syscalls += 1;
            let n = match self.batch.recv(fd, libc::MSG_WAITFORONE) {
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) =>
                {
                    continue
                }
                Err(e) => return Err(e),
            };
            let (mut datagrams, mut bytes) = (0u64, 0u64);
            for i in 0..n {
                let (meta, data) = self.batch.message(i);
                r.truncated += u64::from(meta.truncated);
                let segment = meta.segment_size.unwrap_or(data.len()).max(1);
                self.segments[i] = segment;
                self.datagrams[i] = data.len().div_ceil(segment).max(1) as u64;
                datagrams += self.datagrams[i];
                bytes += data.len() as u64;
            }
            self.counters[self.index].add(datagrams, bytes);
            let now = self.now();
            for i in 0..n {
                seen += 1;
                let every = self.reply_every == 1 || seen % self.reply_every == 0;
                self.answers[i] =
                    if every { self.judge_message(i, now, &mut r.dropped) } else { 0 };
            }
            replied += self.reply_runs(fd, n, &mut r);
            self.replies[self.index].0.store(replied, std::sync::atomic::Ordering::Relaxed);
            if let Some(pause) = self.coalesce.filter(|_| n < self.batch.batch() / 2) {
                std::thread::sleep(pause);
            }
        }
        Ok(r)
    }

    /// The io_uring lane: one multishot recvmsg into provided buffers; each answer is sent
    /// from the buffer its request arrived in, to the address the kernel wrote beside it,
    /// and the buffer goes back when the send completes. One io_uring_enter per wait.
    fn run_uring(
        &mut self,
        fd: std::os::fd::BorrowedFd<'_>,
        sqpoll_cpu: Option<usize>,
        r: &mut EchoLaneResult,
    ) -> io::Result<()> {
        // Room for the kernel's recvmsg header and any address before a 2 KiB datagram.
        let config = RingConfig { files: 1, buffers: 4096, buffer_size: 4096, sqpoll_cpu };
        let mut ring = SocketRing::new(config)?;
        ring.receive_datagrams_from(fd, 0)?;
        let mut completions = Vec::with_capacity(4096);
        let (mut seen, mut replied) = (0u64, 0u64);
        while !self.stop.is_stopped() {
            ring.submit_and_wait(super::socket::WAKE_INTERVAL)?;
            r.syscalls += 1;
            ring.completions(&mut completions);
            let now = self.now();
            let (mut datagrams, mut bytes) = (0u64, 0u64);
            for completion in completions.drain(..) {
                match completion {
                    Completion::ReceivedFrom { buffer, len, more } => {
                        datagrams += 1;
                        seen += 1;
                        let Some(parts) = ring.datagram_from(buffer, len) else {
                            r.truncated += 1;
                            ring.give_back(buffer);
                            continue;
                        };
                        bytes += parts.payload.len() as u64;
                        r.truncated += u64::from(parts.truncated);
                        let answer = !parts.truncated && seen % self.reply_every == 0 && {
                            let name = &ring.buffer(buffer, len)[parts.name.clone()];
                            let source = crate::sys::sockaddr::from_bytes(name);
                            let payload = &mut ring.buffer_mut(buffer, len)[parts.payload.clone()];
                            self.judge_datagram(payload, source, now, &mut r.dropped)
                        };
                        if answer {
                            ring.reply_from_buffer(fd, buffer, &parts)?;
                        } else {
                            ring.give_back(buffer);
                        }
                        if !more {
                            ring.receive_datagrams_from(fd, 0)?;
                        }
                    }
                    Completion::Replied { buffer, result } => {
                        ring.give_back(buffer);
                        if result >= 0 {
                            replied += 1;
                        } else {
                            r.send_errors += 1;
                        }
                    }
                    Completion::RecvEnded { result, more, .. } => {
                        if result < 0 && result != -libc::ENOBUFS {
                            return Err(io::Error::from_raw_os_error(-result));
                        }
                        // An empty datagram: counted, and no request.
                        datagrams += u64::from(result == 0);
                        r.dropped.dropped_unrecognised += u64::from(result == 0);
                        if !more {
                            ring.receive_datagrams_from(fd, 0)?;
                        }
                    }
                    _ => {}
                }
            }
            self.counters[self.index].add(datagrams, bytes);
            self.replies[self.index].0.store(replied, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }

    /// Nanoseconds on the lane's clock (the budget's), above 0; read once per batch.
    fn now(&self) -> u64 {
        u64::try_from(self.clock.elapsed().as_nanos()).unwrap_or(u64::MAX - 1) + 1
    }

    /// Decides message `i` of the last batch: its source is checked, each of its datagrams
    /// (GRO segments one by one) classified and each request turned into its reply in place,
    /// the rest squeezed out, and the answers taken from the source's budget. Returns how
    /// many datagrams go back; the message is shortened to them.
    fn judge_message(&mut self, i: usize, now: u64, dropped: &mut Dropped) -> u64 {
        let count = self.datagrams[i];
        let Some(source) = self.batch.source(i) else {
            dropped.dropped_unrecognised += count;
            return 0;
        };
        if let Some(why) = self.check.refuse(source) {
            dropped.refused(why, count);
            return 0;
        }
        let segment = self.segments[i];
        let (requests, len) =
            answer_segments(self.batch.message_mut(i), segment, self.wire, dropped);
        if requests == 0 {
            return 0;
        }
        let granted = self.budget.take(source.ip(), requests, now);
        dropped.dropped_over_budget += requests - granted;
        let len = if granted == requests { len } else { granted as usize * segment };
        self.batch.set_reply_len(i, len);
        granted
    }

    /// Decides one datagram of the io_uring lane (as [`judge_message`](Self::judge_message)):
    /// true when `payload`, now the reply, goes back to `source`.
    fn judge_datagram(
        &mut self,
        payload: &mut [u8],
        source: Option<SocketAddr>,
        now: u64,
        dropped: &mut Dropped,
    ) -> bool {
        let Some(source) = source else {
            dropped.dropped_unrecognised += 1;
            return false;
        };
        if let Some(why) = self.check.refuse(source) {
            dropped.refused(why, 1);
            return false;
        }
        let verdict = answer::answer_in_place(payload, self.wire);
        if verdict != Verdict::Answer {
            dropped.not_answered(verdict);
            return false;
        }
        let granted = self.budget.take(source.ip(), 1, now) == 1;
        dropped.dropped_over_budget += u64::from(!granted);
        granted
    }

    /// Sends back the messages of the last batch that have answers, each run of neighbours
    /// in one sendmmsg; returns the datagrams answered.
    fn reply_runs(
        &mut self,
        fd: std::os::fd::BorrowedFd<'_>,
        n: usize,
        r: &mut EchoLaneResult,
    ) -> u64 {
        let mut replied = 0;
        let mut run: Option<usize> = None;
        for i in 0..=n {
            match (i < n && self.answers[i] > 0, run) {
                (true, None) => run = Some(i),
                (false, Some(start)) => {
                    replied += self.reply_range(fd, start, i - start, r);
                    run = None;
                }
                _ => {}
            }
        }
        replied
    }

    /// Answers messages `start..start + count`; returns the datagrams answered. A message the
    /// kernel refuses is counted and skipped.
    fn reply_range(
        &mut self,
        fd: std::os::fd::BorrowedFd<'_>,
        start: usize,
        count: usize,
        r: &mut EchoLaneResult,
    ) -> u64 {
        let end = start + count;
        let mut at = start;
        let mut answered = 0u64;
        while at < end {
            r.syscalls += 1;
            match self.batch.reply(fd, at, end - at) {
                Ok(0) => break,
                Ok(k) => {
                    answered += self.answers[at..at + k].iter().sum::<u64>();
                    at += k;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    r.send_errors += 1;
                    at += 1;
                }
            }
        }
        answered
    }
}

/// Classifies the `segment`-byte datagrams of `data` (one message, a GRO buffer holding
/// several), turning each request into its reply in place and moving the requests to the
/// front, in order, over what is not answered (counted in `dropped`). Returns the requests
/// and the bytes they now fill. Only the last datagram may be shorter than `segment`, so
/// the requests stay GSO segments of that size.
fn answer_segments(
    data: &mut [u8],
    segment: usize,
    wire: Option<Wire>,
    dropped: &mut Dropped,
) -> (u64, usize) {
    if data.len() <= segment {
        let verdict = answer::answer_in_place(data, wire);
        dropped.not_answered(verdict);
        return if verdict == Verdict::Answer { (1, data.len()) } else { (0, 0) };
    }
    let (mut requests, mut end, mut at) = (0u64, 0usize, 0usize);
    while at < data.len() {
        let next = (at + segment).min(data.len());
        let verdict = answer::answer_in_place(&mut data[at..next], wire);
        if verdict == Verdict::Answer {
            if end != at {
                data.copy_within(at..next, end);
            }
            end += next - at;
            requests += 1;
        } else {
            dropped.not_answered(verdict);
        }
        at = next;
    }
    (requests, end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udp::{payload, sockperf};
    use proptest::prelude::*;

    fn request(flow: u32, seq: u64, len: usize) -> Vec<u8> {
        let mut d = vec![0u8; len];
        payload::prefill(&mut d);
        payload::write_header(&mut d, flow, seq);
        d
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// A GRO buffer of requests, replies and junk in any order: exactly the requests go
        /// back, each as its reply, in order, as segments of the size they came in.
        #[test]
        fn each_gro_segment_is_judged_on_its_own(
            kinds in proptest::collection::vec(0u8..4, 1..20),
            segment in 16usize..80,
            last_short in 0usize..16,
        ) {
            let mut data = Vec::new();
            let mut expect = Vec::new();
            for (k, kind) in kinds.iter().enumerate() {
                let len = if k + 1 == kinds.len() { segment - last_short } else { segment };
                let mut d = match kind {
                    0 | 1 => request(7, k as u64, len.max(payload::HEADER_LEN)),
                    2 => { let mut d = request(7, k as u64, len.max(payload::HEADER_LEN)); payload::answer_in_place(&mut d); d }
                    _ => vec![0x55; len],
                };
                d.truncate(len);
                if *kind == 1 && len >= sockperf::HEADER_LEN {
                    d = vec![0; len];
                    sockperf::write_request(&mut d, k as u64);
                }
                data.extend_from_slice(&d);
                let mut answered = d.clone();
                if answer::answer_in_place(&mut answered, None) == Verdict::Answer {
                    expect.extend_from_slice(&answered);
                }
            }
            let mut dropped = Dropped::default();
            let (requests, end) = answer_segments(&mut data, segment, None, &mut dropped);
            prop_assert_eq!(&data[..end], &expect[..]);
            let not = dropped.dropped_replies + dropped.dropped_unrecognised + dropped.dropped_not_asked;
            prop_assert_eq!(requests + not, kinds.len() as u64);
        }
    }
}
