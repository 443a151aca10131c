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

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use socket2::{Socket, Type};

use super::backend::{self, EchoBatch};
use super::budget::{self, SourceBudget};
use super::judge::{Dropped, EchoTally, Judge, ReplyCounter};
use super::lanes::{Lanes, ReceivePath};
use super::socket::{
    apply_busy_poll, bind_receiver, local_addr, napi_id, settle_gro, slot_bytes, BusyPollState,
    OffloadState,
};
use super::source_check::SourceCheck;
use super::{UdpError, Wire};
use crate::lane::{self, LaneSet, LanesEnd, Monitor, Second, StopSignal, Watch};
use crate::reuseport::ReuseportGroup;
use crate::stats::{Interval, LaneCounters, Meter};

/// What to echo and how.
#[derive(Debug, Clone)]
pub struct EchoConfig {
    pub addr: SocketAddr,
    /// The lanes, each with its own SO_REUSEPORT socket.
    pub lanes: Lanes,
    /// With GRO the answer goes back with GSO in the segment size it came in. Receive
    /// coalescing is off by default (`None` answers at once). The backend: recvmmsg/sendmmsg
    /// batches, or io_uring: a multishot recvmsg into provided buffers and each answer sent
    /// from the buffer it arrived in.
    pub receive: ReceivePath,
    /// SO_BUSY_POLL microseconds (with SO_PREFER_BUSY_POLL where the kernel has it).
    pub busy_poll_us: Option<u32>,
    /// Answer every Nth datagram a lane receives (sockperf's `--reply-every`); 1 answers all.
    pub reply_every: u64,
    /// Which wire's requests to answer: `None` (the default) both corelane's (the magic
    /// turned into the reply's) and sockperf's (as `sockperf sr`: requests flagged for an
    /// answer, the client bit cleared); `Some` only that one.
    pub wire: Option<Wire>,
    /// Answers per second one source address may draw from one lane (its token bucket's rate).
    pub per_source_rate: u64,
    /// Answers one source address may draw at once from one lane (the bucket's size).
    pub per_source_burst: u64,
    pub duration: Option<Duration>,
    /// Stop once this many datagrams were answered.
    pub until_replies: Option<u64>,
}

impl EchoConfig {
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            lanes: Lanes::default(),
            receive: ReceivePath::default(),
            busy_poll_us: None,
            reply_every: 1,
            wire: None,
            per_source_rate: budget::DEFAULT_RATE,
            per_source_burst: budget::DEFAULT_BURST,
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
    /// Receive calls that brought datagrams (a batch-size histogram's count).
    #[serde(default)]
    pub batches: u64,
    pub replies: u64,
    /// Payload bytes of the replies.
    #[serde(default)]
    pub reply_bytes: u64,
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
    /// The backend that ran, by name (`mmsg`, `uring` or `uring+sqpoll`).
    pub backend: String,
    /// Why the backend asked for was not the one that ran, if so.
    pub backend_note: Option<String>,
    pub lanes: Vec<EchoLane>,
}

/// The echo lanes' threads are named `corelane-echo-INDEX`.
pub const LANE_NAME: &str = "corelane-echo";

/// Bound sockets, ready to echo.
#[derive(Debug)]
pub struct Echo {
    config: EchoConfig,
    sockets: Vec<Arc<Socket>>,
    /// One receive-and-answer per socket, the backend's.
    lanes: Vec<Box<dyn EchoBatch>>,
    addr: SocketAddr,
    gro: OffloadState,
    busy_poll: BusyPollState,
    backend_note: Option<String>,
    /// What each lane counts and answers (made at the bind, so a scrape may read them from
    /// the start).
    counters: Arc<Vec<LaneCounters>>,
    replies: Arc<Vec<ReplyCounter>>,
}

impl Echo {
    /// Validates the configuration and binds every lane's socket, so a busy port is named
    /// before any thread starts.
    pub fn bind(config: EchoConfig) -> Result<Self, UdpError> {
        config.lanes.check()?;
        if config.reply_every == 0 {
            return Err(UdpError::ReplyEvery);
        }
        if config.receive.gro && config.reply_every > 1 {
            return Err(UdpError::ReplyEveryGro);
        }
        if !(1..=1_000_000_000).contains(&config.per_source_rate) || config.per_source_burst == 0 {
            return Err(UdpError::Budget);
        }
        let mut config = config;
        let backend_note = backend::settle(
            &mut config.receive.backend,
            config.receive.gro,
            "echoing with recvmmsg/sendmmsg",
        )?;
        let Some(echo_lane) = config.receive.backend.unit().echo() else {
            return Err(UdpError::NoEcho {
                backend: config.receive.backend.name(),
                echoing: backend::echoing(),
            });
        };
        let reuseport = config.lanes.threads > 1;
        let group = ReuseportGroup::bind(
            config.addr,
            config.lanes.threads,
            Type::DGRAM,
            |a| bind_receiver(a, reuseport, config.receive.rcvbuf),
            local_addr,
        )?;
        let addr = group.addr();
        let sockets: Vec<Arc<Socket>> = group.into_sockets().into_iter().map(Arc::new).collect();
        let gro = settle_gro(config.receive.gro, sockets.iter(), "echoing datagram by datagram");
        let busy_poll = apply_busy_poll(sockets.iter().map(|s| &**s), config.busy_poll_us);
        let slot = slot_bytes(None, gro.active);
        let lanes =
            sockets.iter().map(|s| echo_lane(Arc::clone(s), config.lanes.batch, slot)).collect();
        let (counters, replies) = (lane::per_lane(sockets.len()), lane::per_lane(sockets.len()));
        Ok(Self { config, sockets, lanes, addr, gro, busy_poll, backend_note, counters, replies })
    }

    /// What each lane counts and answers, read by a scrape while the echo runs.
    pub(crate) fn lane_counters(&self) -> (Arc<Vec<LaneCounters>>, Arc<Vec<ReplyCounter>>) {
        (Arc::clone(&self.counters), Arc::clone(&self.replies))
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
        mut self,
        stop: &StopSignal,
        on_interval: impl FnMut(&EchoInterval),
    ) -> Result<EchoSummary, UdpError> {
        let threads = self.sockets.len();
        let (counters, replies) = (Arc::clone(&self.counters), Arc::clone(&self.replies));
        let lane_stop = StopSignal::new();
        let lanes = self.spawn_lanes(&counters, &replies, &lane_stop)?;
        let cfg = &self.config;
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
        joined.iter().for_each(|j| dropped.add(&j.value.0));
        Ok(EchoSummary {
            addr: self.addr,
            threads,
            batch: cfg.lanes.batch,
            elapsed_secs: stopped.elapsed.as_secs_f64(),
            datagrams,
            replies: replied(&replies),
            send_errors: joined.iter().map(|j| j.value.1.send_errors).sum(),
            truncated: joined.iter().map(|j| j.value.1.truncated).sum(),
            dropped,
            per_source_rate: cfg.per_source_rate,
            per_source_burst: cfg.per_source_burst,
            reply_every: cfg.reply_every,
            coalesce_us: cfg.receive.coalesce.map_or(0.0, |d| d.as_secs_f64() * 1e6),
            cpu_ns_per_datagram: stopped.cpu_ns_per(datagrams),
            gro: self.gro.clone(),
            busy_poll: self.busy_poll.clone(),
            napi_id: napi,
            backend: cfg.receive.backend.to_string(),
            backend_note: self.backend_note.clone(),
            lanes: joined
                .iter()
                .map(|j| EchoLane {
                    lane: j.index,
                    cpu: j.cpu,
                    datagrams: counters[j.index].datagrams(),
                    batches: counters[j.index].batches().iter().sum(),
                    replies: replies[j.index].load(),
                    reply_bytes: replies[j.index].bytes(),
                    syscalls: j.value.1.syscalls,
                })
                .collect(),
        })
    }
}

/// Replies over every lane.
fn replied(replies: &[ReplyCounter]) -> u64 {
    replies.iter().map(ReplyCounter::load).sum()
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
    /// Starts one lane per socket: its backend's receive-and-answer and its own `Judge`.
    fn spawn_lanes(
        &mut self,
        counters: &Arc<Vec<LaneCounters>>,
        replies: &Arc<Vec<ReplyCounter>>,
        stop: &StopSignal,
    ) -> Result<LaneSet<(Dropped, EchoTally)>, UdpError> {
        let check = self.source_check();
        let cfg = &self.config;
        let mut lanes = LaneSet::new(LANE_NAME, stop.clone());
        for (index, lane) in std::mem::take(&mut self.lanes).into_iter().enumerate() {
            let mut judge = Judge::new(
                cfg.reply_every,
                cfg.wire,
                check.clone(),
                SourceBudget::new(cfg.per_source_rate, cfg.per_source_burst),
            );
            let mut tally = EchoTally::new(Arc::clone(counters), Arc::clone(replies), index);
            let (stop, coalesce) = (stop.clone(), cfg.receive.coalesce);
            let run = move || -> std::io::Result<(Dropped, EchoTally)> {
                backend::echo_until(lane, &mut judge, &mut tally, &stop, coalesce)?;
                Ok((judge.dropped, tally))
            };
            lanes
                .spawn(cfg.lanes.placement.cpu_of(index), run)
                .map_err(|e| UdpError::io("cannot start an echo lane", e))?;
        }
        Ok(lanes)
    }

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
