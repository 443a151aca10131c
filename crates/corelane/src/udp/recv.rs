//! The receiver: lanes of recvmmsg (optionally UDP_GRO) over one shared socket or one
//! SO_REUSEPORT socket per lane, a meter that reports every second, and a summary.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use socket2::Socket;

use super::dispatch::{DispatchConfig, DispatchLane, DispatchReport};
use super::payload::{self, PayloadError};
use super::sequence::{SequenceReport, SequenceTracker, MAX_TRACKED_FLOWS};
use super::socket::{bind_receiver, local_addr, WAKE_INTERVAL};
use super::UdpError;
use crate::lane::{LaneSet, Placement, StopSignal};
use crate::reuseport::ReuseportGroup;
use crate::stats::{self, CpuUsage, Interval, LaneCounters, Meter, Rate, Ticker, UdpCounters};
use crate::sys::socket_ring::{self, Completion, RingConfig, SocketRing};
use crate::sys::{mmsg, sockopt};
use crate::topology::{CpuList, Topology};
use crate::xdp::rx::{RxConfig, XdpReceive, XdpReport, XskLane};
use crate::xdp::{Ceiling, XdpError, XdpMode};

/// How receiver lanes share the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SocketMode {
    /// One socket per address, every lane reading it (the seed's "multiple thread" step:
    /// the lanes contend on the socket's lock).
    Shared,
    /// One SO_REUSEPORT socket per lane and address (the seed's "binding port" step).
    Reuseport,
}

/// How a reuseport group picks the socket (and so the lane) for a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Steering {
    /// The kernel's flow hash: a flow sticks to a socket, whichever CPU processed it.
    Hash,
    /// The socket of the lane pinned to the CPU whose softirq processed the datagram, so the
    /// datagram never crosses CPUs between the receive path and the lane that reads it.
    Cpu,
}

/// How a lane asks the kernel for datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvBackend {
    /// recvmmsg batches (optionally with UDP_GRO).
    Mmsg,
    /// io_uring: one multishot receive per socket into a ring of provided buffers, one
    /// datagram per completion; with `sqpoll_cpu`, an SQPOLL thread on that CPU submits for
    /// the lane (seed 003's syscall thread).
    Uring { sqpoll_cpu: Option<usize> },
    /// AF_XDP: corelane's XDP program redirects the bound address and port's frames to one
    /// AF_XDP socket per RX queue, each read by its own lane (`ReceiverConfig::xdp_dev` names
    /// the interface when the address does not).
    Xdp { mode: XdpMode, busy_poll_us: Option<u32> },
    /// The ceiling of any XDP consumer: the same match dropped (XDP_DROP) and counted in the
    /// driver; the count is reported as datagrams, and nothing reaches user space.
    XdpDrop,
}

impl std::fmt::Display for RecvBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Mmsg => "mmsg",
            Self::Uring { sqpoll_cpu: None } => "uring",
            Self::Uring { sqpoll_cpu: Some(_) } => "uring+sqpoll",
            Self::Xdp { .. } => "xdp",
            Self::XdpDrop => "xdp-drop",
        })
    }
}

/// As its name (`mmsg`, `uring`, `uring+sqpoll`, `xdp`).
impl Serialize for RecvBackend {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// What to receive and how.
#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    pub addrs: Vec<SocketAddr>,
    pub threads: usize,
    pub sockets: SocketMode,
    /// Reuseport only: how the group picks a socket.
    pub steering: Steering,
    pub batch: usize,
    /// Which CPU each lane runs on.
    pub placement: Placement,
    pub rcvbuf: Option<usize>,
    pub gro: bool,
    /// Bytes per receive buffer; default 2048, or 64 KiB with GRO (room for 64 segments).
    pub slot: Option<usize>,
    /// Check every datagram's header (loss, duplicates, order, corruption).
    pub check: bool,
    /// After a batch that came back less than half full, wait this long before the next
    /// call so that datagrams accumulate: fewer wake-ups for the receiver and for the CPU that
    /// wakes it (interrupt moderation, done in user space), at up to this much added latency.
    pub coalesce: Option<Duration>,
    pub duration: Option<Duration>,
    /// Stop once this many datagrams arrived.
    pub until_datagrams: Option<u64>,
    pub backend: RecvBackend,
    /// Seed 004: one receive lane dispatching datagrams to worker lanes.
    pub dispatch: Option<DispatchConfig>,
    /// `--backend xdp`: the interface to attach to (default: the one holding the address).
    pub xdp_dev: Option<String>,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        Self {
            addrs: Vec::new(),
            threads: 1,
            sockets: SocketMode::Reuseport,
            steering: Steering::Hash,
            batch: 32,
            placement: Placement::Unpinned,
            rcvbuf: None,
            gro: false,
            slot: None,
            check: true,
            coalesce: None,
            duration: None,
            until_datagrams: None,
            backend: RecvBackend::Mmsg,
            dispatch: None,
            xdp_dev: None,
        }
    }
}

/// One second of receiving.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct RecvInterval {
    #[serde(flatten)]
    pub interval: Interval,
    /// Datagrams the kernel dropped for a full receive buffer this interval (RcvbufErrors of
    /// the whole network namespace: other sockets' drops count too).
    pub kernel_drops: u64,
    /// The receiver process's user+system CPU time per datagram read this interval.
    pub cpu_ns_per_datagram: f64,
    /// With `xdp`: the AF_XDP sockets' kernel counters this interval (frames lost at the
    /// sockets: `rx_ring_full`, `rx_dropped`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub xsk: Option<crate::xdp::rx::XskStats>,
}

/// One lane's totals.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct LaneSummary {
    pub lane: usize,
    pub cpu: Option<usize>,
    pub datagrams: u64,
    pub syscalls: u64,
    pub cpu_user_secs: f64,
    pub cpu_sys_secs: f64,
}

/// Whether GRO was asked for and whether the kernel accepted it.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct OffloadState {
    pub requested: bool,
    pub active: bool,
    pub note: Option<String>,
}

/// Everything a receive run measured.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct RecvSummary {
    pub addrs: Vec<SocketAddr>,
    pub sockets: SocketMode,
    pub steering: Steering,
    pub threads: usize,
    pub batch: usize,
    pub elapsed_secs: f64,
    pub datagrams: u64,
    pub bytes: u64,
    /// Median of the per-second rates over the seconds that carried traffic.
    pub median_pps: f64,
    pub mean: Rate,
    pub kernel_drops: u64,
    pub truncated: u64,
    pub corrupt: u64,
    pub foreign: u64,
    pub sequence: SequenceReport,
    pub cpu_user_secs: f64,
    pub cpu_sys_secs: f64,
    pub cpu_ns_per_datagram: f64,
    pub gro: OffloadState,
    pub rcvbuf_bytes: Option<usize>,
    /// Bytes per receive buffer; longer datagrams were truncated.
    pub slot_bytes: usize,
    /// `mmsg`, `uring` or `uring+sqpoll`.
    pub backend: String,
    /// Why the backend asked for was not the one that ran, if so.
    pub backend_note: Option<String>,
    /// What dispatching to worker lanes did (with `dispatch`).
    pub dispatch: Option<DispatchReport>,
    /// How the AF_XDP receive ran (mode and why, frames dropped and why), with `xdp`.
    pub xdp: Option<XdpReport>,
    pub lanes: Vec<LaneSummary>,
}

/// Bound sockets, ready to run.
#[derive(Debug)]
pub struct Receiver {
    config: ReceiverConfig,
    /// `lane_sockets[i]`: the sockets lane `i` reads (shared ones appear in every lane).
    lane_sockets: Vec<Vec<Arc<Socket>>>,
    bound: Vec<SocketAddr>,
    gro: OffloadState,
    rcvbuf_bytes: Option<usize>,
    backend_note: Option<String>,
    /// With `xdp`: the program attached and one socket per RX queue.
    xdp: Option<XdpReceive>,
    /// With `xdp-drop`: the dropping program and its counter.
    ceiling: Option<Arc<Ceiling>>,
}

impl Receiver {
    /// Validates the configuration and binds every socket, so that a busy port or a wrong
    /// address is reported before any thread starts.
    pub fn bind(config: ReceiverConfig) -> Result<Self, UdpError> {
        if config.addrs.is_empty() {
            return Err(UdpError::NoAddress);
        }
        if config.threads == 0 {
            return Err(UdpError::NoThreads);
        }
        if !(1..=mmsg::MAX_BATCH).contains(&config.batch) {
            return Err(UdpError::Batch(config.batch));
        }
        config.placement.check()?;
        if config.dispatch.is_some()
            && (config.threads != 1 || config.backend != RecvBackend::Mmsg || !config.check)
        {
            return Err(UdpError::Dispatch);
        }
        if config.steering == Steering::Cpu
            && (!config.placement.is_pinned() || config.sockets != SocketMode::Reuseport)
        {
            return Err(UdpError::Steering);
        }
        match config.backend {
            RecvBackend::Xdp { mode, busy_poll_us } => {
                return Self::bind_xdp(config, Some((mode, busy_poll_us)))
            }
            RecvBackend::XdpDrop => return Self::bind_xdp(config, None),
            _ => {}
        }
        let mut config = config;
        let backend_note = settle_backend(&mut config)?;
        let mut lane_sockets: Vec<Vec<Arc<Socket>>> = vec![Vec::new(); config.threads];
        let mut bound = Vec::new();
        let reuseport = config.sockets == SocketMode::Reuseport;
        let members = if reuseport { config.threads } else { 1 };
        for &addr in &config.addrs {
            let group = ReuseportGroup::bind(
                addr,
                members,
                |a| bind_receiver(a, reuseport, config.rcvbuf),
                local_addr,
            )?;
            if config.steering == Steering::Cpu {
                group.steer_by_cpu(&config.placement.lane_cpus(config.threads)).map_err(|e| {
                    UdpError::io("the kernel refused the reuseport CPU-steering program", e)
                })?;
            }
            bound.push(group.addr());
            let sockets: Vec<Arc<Socket>> =
                group.into_sockets().into_iter().map(Arc::new).collect();
            // Shared: every lane reads the one socket; reuseport: lane i owns socket i.
            for (lane, lane_sockets) in lane_sockets.iter_mut().enumerate() {
                lane_sockets.push(Arc::clone(&sockets[lane % sockets.len()]));
            }
        }
        let rcvbuf_bytes = lane_sockets[0][0].recv_buffer_size().ok();
        let mut gro = OffloadState { requested: config.gro, active: false, note: None };
        if config.gro {
            let refused = lane_sockets
                .iter()
                .flatten()
                .find_map(|s| sockopt::set_udp_gro(s.as_fd(), true).err());
            match refused {
                None => gro.active = true,
                Some(e) => {
                    gro.note = Some(format!(
                        "kernel refused UDP_GRO ({e}); receiving datagram by datagram"
                    ))
                }
            }
        }
        Ok(Self {
            config,
            lane_sockets,
            bound,
            gro,
            rcvbuf_bytes,
            backend_note,
            xdp: None,
            ceiling: None,
        })
    }

    /// `xdp`: a plain socket holds the port (and proves the address is this host's), then the
    /// program goes on the interface and one AF_XDP socket binds to each RX queue, each read
    /// by its own lane.
    fn bind_xdp(
        mut config: ReceiverConfig,
        receive: Option<(XdpMode, Option<u32>)>,
    ) -> Result<Self, UdpError> {
        if config.addrs.len() != 1 {
            return Err(XdpError::OneAddress.into());
        }
        if config.gro || config.dispatch.is_some() {
            return Err(XdpError::Options.into());
        }
        crate::xdp::check_available()?;
        let socket = bind_receiver(config.addrs[0], false, None)?;
        let bound = local_addr(&socket)?;
        let Some((mode, busy_poll_us)) = receive else {
            let iface = crate::xdp::Interface::for_address(bound, config.xdp_dev.as_deref())?;
            let ceiling = Ceiling::attach(&iface.name, bound)?;
            config.threads = 1;
            config.check = false;
            return Ok(Self {
                lane_sockets: vec![vec![Arc::new(socket)]],
                bound: vec![bound],
                gro: OffloadState { requested: false, active: false, note: None },
                rcvbuf_bytes: None,
                backend_note: Some(format!(
                    "XDP_DROP ceiling on {} (program {}): datagrams counted are frames dropped in the driver",
                    iface.name,
                    ceiling.prog_id()
                )),
                xdp: None,
                ceiling: Some(Arc::new(ceiling)),
                config,
            });
        };
        let xdp = XdpReceive::setup(&RxConfig {
            addr: bound,
            dev: config.xdp_dev.clone(),
            mode,
            busy_poll_us,
        })?;
        config.threads = xdp.lane_count();
        let note = format!("AF_XDP on {}: {} ({})", xdp.interface().name, xdp.mode(), xdp.why());
        let note = match xdp.removed_stale() {
            Some(id) => format!("{note}; removed corelane XDP program {id} left by a killed run"),
            None => note,
        };
        // The plain socket is every lane's "socket" only to hold the port; lanes read AF_XDP.
        let socket = Arc::new(socket);
        let lane_sockets = vec![vec![Arc::clone(&socket)]; config.threads];
        Ok(Self {
            config,
            lane_sockets,
            bound: vec![bound],
            gro: OffloadState { requested: false, active: false, note: None },
            rcvbuf_bytes: None,
            backend_note: Some(note),
            xdp: Some(xdp),
            ceiling: None,
        })
    }

    /// Why the backend asked for will not run as asked (SQPOLL refused), if so.
    pub fn backend_note(&self) -> Option<&str> {
        self.backend_note.as_deref()
    }

    /// The backend the lanes will run (io_uring and SQPOLL fall back where refused).
    pub fn backend(&self) -> RecvBackend {
        self.config.backend
    }

    /// The addresses actually bound (port 0 resolved).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.bound
    }

    /// Receives until `stop`, the configured duration or datagram count, calling
    /// `on_interval` once a second from the calling thread.
    pub fn run(
        mut self,
        stop: &StopSignal,
        mut on_interval: impl FnMut(&RecvInterval),
    ) -> Result<RecvSummary, UdpError> {
        let mut xsk_lanes: Vec<Option<XskLane>> = match &mut self.xdp {
            Some(x) => x.take_lanes().into_iter().map(Some).collect(),
            None => Vec::new(),
        };
        let cfg = &self.config;
        let slot = cfg.slot.unwrap_or(if self.gro.active { 65_536 } else { 2048 });
        let counters: Arc<Vec<LaneCounters>> =
            Arc::new((0..cfg.threads).map(|_| LaneCounters::default()).collect());
        let lane_stop = StopSignal::new();
        let mut lanes = LaneSet::new("corelane-rx", lane_stop.clone());
        for (index, sockets) in self.lane_sockets.iter().enumerate() {
            let cpu = cfg.placement.cpu_of(index);
            let work = LaneWork {
                sockets: sockets.clone(),
                batch: mmsg::MmsgRecv::new(cfg.batch, slot),
                counters: Arc::clone(&counters),
                index,
                check: cfg.check,
                coalesce: cfg.coalesce,
                backend: cfg.backend,
                slot,
                dispatch: cfg.dispatch,
                worker_cpus: match &cfg.placement {
                    Placement::RoundRobin(list) => list.cpus().iter().skip(1).copied().collect(),
                    Placement::Unpinned => Vec::new(),
                },
                dispatch_lane: None,
                xsk: xsk_lanes.get_mut(index).and_then(Option::take),
                ceiling: self.ceiling.clone(),
                stop: lane_stop.clone(),
            };
            lanes
                .spawn(cpu, move || work.run())
                .map_err(|e| UdpError::io("cannot start a receiver lane", e))?;
        }

        let snmp_start = UdpCounters::read().unwrap_or_default();
        let mut snmp_last = snmp_start;
        // CPU per datagram from the exact runtime; the user/system split below is tick-sampled.
        let cpu_start = stats::process_cpu();
        let runtime_start = stats::process_runtime();
        let mut runtime_last = runtime_start;
        let mut meter = Meter::new(cfg.threads);
        let mut busy_pps: Vec<f64> = Vec::new();
        let mut last_total = 0u64;
        let xsk_total = |x: &XdpReceive| {
            let mut sum = crate::xdp::rx::XskStats::default();
            x.kernel_counters().iter().for_each(|s| sum.add(s));
            sum
        };
        let mut xsk_last = self.xdp.as_ref().map(xsk_total);
        let mut ticker = Ticker::every(Duration::from_secs(1));
        let start = ticker.start();
        let deadline = cfg.duration.map(|d| start + d);
        loop {
            let now = Instant::now();
            let lanes_done = lanes.any_finished();
            let total: u64 = counters.iter().map(LaneCounters::datagrams).sum();
            let reached = cfg.until_datagrams.is_some_and(|n| total >= n);
            if stop.is_stopped() || lanes_done || reached || deadline.is_some_and(|d| now >= d) {
                break;
            }
            if ticker.wait(deadline).is_some() {
                let refs: Vec<&LaneCounters> = counters.iter().collect();
                let interval = meter.tick(&refs);
                let snmp = UdpCounters::read().unwrap_or_default();
                let runtime = stats::process_runtime();
                let used = runtime.saturating_sub(runtime_last);
                let got = interval.datagrams - last_total;
                last_total = interval.datagrams;
                if interval.rate.pps > 0.0 {
                    busy_pps.push(interval.rate.pps);
                }
                let xsk_now = self.xdp.as_ref().map(xsk_total);
                let report = RecvInterval {
                    kernel_drops: snmp.since(&snmp_last).rcvbuf_errors,
                    cpu_ns_per_datagram: ns_per(used, got),
                    interval,
                    xsk: xsk_now.zip(xsk_last).map(|(now, last)| now.since(&last)),
                };
                xsk_last = xsk_now;
                snmp_last = snmp;
                runtime_last = runtime;
                on_interval(&report);
            }
        }
        lane_stop.stop();
        let elapsed = start.elapsed();
        let cpu_end = stats::process_cpu();
        let runtime_end = stats::process_runtime();
        let snmp_end = UdpCounters::read().unwrap_or_default();
        let mut results: Vec<(usize, Option<usize>, LaneResult)> = lanes
            .join()
            .map_err(|e| UdpError::io("a receiver lane failed", e))?
            .into_iter()
            .map(|j| (j.index, j.cpu, j.value))
            .collect();
        let trackers: Vec<&SequenceTracker> = results.iter().map(|(_, _, r)| &r.tracker).collect();
        let sequence = SequenceTracker::report(&trackers);
        let datagrams: u64 = counters.iter().map(LaneCounters::datagrams).sum();
        let bytes: u64 = counters.iter().map(LaneCounters::bytes).sum();
        let used = runtime_end.saturating_sub(runtime_start);
        let xsk_done: Vec<XskLane> =
            results.iter_mut().filter_map(|(_, _, r)| r.xsk.take()).collect();
        // Dropping the receive detaches the program (its bpf_link closes).
        let xdp = self.xdp.take().map(|x| x.finish(&xsk_done));
        Ok(RecvSummary {
            addrs: self.bound.clone(),
            sockets: cfg.sockets,
            steering: cfg.steering,
            threads: cfg.threads,
            batch: cfg.batch,
            elapsed_secs: elapsed.as_secs_f64(),
            datagrams,
            bytes,
            median_pps: stats::median(&busy_pps).unwrap_or(0.0),
            mean: Rate::over(datagrams, bytes, elapsed),
            kernel_drops: snmp_end.since(&snmp_start).rcvbuf_errors,
            truncated: results.iter().map(|(_, _, r)| r.truncated).sum(),
            corrupt: results.iter().map(|(_, _, r)| r.corrupt).sum(),
            foreign: results.iter().map(|(_, _, r)| r.foreign).sum(),
            sequence,
            cpu_user_secs: cpu_end.user.saturating_sub(cpu_start.user).as_secs_f64(),
            cpu_sys_secs: cpu_end.system.saturating_sub(cpu_start.system).as_secs_f64(),
            cpu_ns_per_datagram: ns_per(used, datagrams),
            gro: self.gro.clone(),
            rcvbuf_bytes: self.rcvbuf_bytes,
            slot_bytes: slot,
            backend: cfg.backend.to_string(),
            backend_note: self.backend_note.clone(),
            dispatch: results.iter_mut().find_map(|(_, _, r)| r.dispatch.take()),
            xdp,
            lanes: results
                .iter()
                .map(|(index, cpu, r)| LaneSummary {
                    lane: *index,
                    cpu: *cpu,
                    datagrams: counters[*index].datagrams(),
                    syscalls: r.syscalls,
                    cpu_user_secs: r.cpu.user.as_secs_f64(),
                    cpu_sys_secs: r.cpu.system.as_secs_f64(),
                })
                .collect(),
        })
    }
}

fn settle_backend(config: &mut ReceiverConfig) -> Result<Option<String>, UdpError> {
    settle_uring(&mut config.backend, config.gro, "receiving with recvmmsg")
}

/// Settles the backend this kernel runs: io_uring falls back to recvmmsg (`fallback` says
/// how the lanes then work), and an SQPOLL thread to lanes submitting for themselves, each
/// saying why (the note returned). Used by the receiver and the echo.
pub(super) fn settle_uring(
    backend: &mut RecvBackend,
    gro: bool,
    fallback: &str,
) -> Result<Option<String>, UdpError> {
    let RecvBackend::Uring { sqpoll_cpu } = *backend else { return Ok(None) };
    if gro {
        return Err(UdpError::UringGro);
    }
    if let Err(reason) = socket_ring::probe_datagram_ring() {
        *backend = RecvBackend::Mmsg;
        return Ok(Some(format!("{reason}; {fallback}")));
    }
    let Some(cpu) = sqpoll_cpu else { return Ok(None) };
    Topology::read()?.check(&CpuList::new(vec![cpu]))?;
    match socket_ring::probe_sqpoll(cpu) {
        Ok(()) => Ok(None),
        Err(reason) => {
            *backend = RecvBackend::Uring { sqpoll_cpu: None };
            Ok(Some(format!("{reason}; lanes submit for themselves")))
        }
    }
}

/// CPU time per datagram in ns (0 when none arrived).
pub(super) fn ns_per(cpu: Duration, datagrams: u64) -> f64 {
    if datagrams == 0 {
        return 0.0;
    }
    cpu.as_nanos() as f64 / datagrams as f64
}

/// What a lane owns.
struct LaneWork {
    sockets: Vec<Arc<Socket>>,
    batch: mmsg::MmsgRecv,
    counters: Arc<Vec<LaneCounters>>,
    index: usize,
    check: bool,
    coalesce: Option<Duration>,
    backend: RecvBackend,
    slot: usize,
    dispatch: Option<DispatchConfig>,
    worker_cpus: Vec<usize>,
    dispatch_lane: Option<DispatchLane>,
    /// With `xdp`: this lane's RX queue socket.
    xsk: Option<XskLane>,
    /// With `xdp-drop`: the counter this lane reads every 10 ms.
    ceiling: Option<Arc<Ceiling>>,
    stop: StopSignal,
}

/// What a lane found.
struct LaneResult {
    tracker: SequenceTracker,
    truncated: u64,
    corrupt: u64,
    foreign: u64,
    syscalls: u64,
    cpu: CpuUsage,
    dispatch: Option<DispatchReport>,
    /// The AF_XDP socket handed back for its counters.
    xsk: Option<XskLane>,
}

impl LaneWork {
    fn run(mut self) -> io::Result<LaneResult> {
        let cpu_start = stats::thread_cpu();
        let mut result = LaneResult {
            tracker: SequenceTracker::new(),
            truncated: 0,
            corrupt: 0,
            foreign: 0,
            syscalls: 0,
            cpu: CpuUsage::default(),
            dispatch: None,
            xsk: None,
        };
        if let Some(config) = self.dispatch {
            self.dispatch_lane = Some(DispatchLane::start(config, &self.worker_cpus)?);
        }
        let sockets = std::mem::take(&mut self.sockets);
        if let Some(ceiling) = self.ceiling.take() {
            let mut last = ceiling.dropped()?;
            while !self.stop.is_stopped() {
                std::thread::sleep(Duration::from_millis(10));
                let now = ceiling.dropped()?;
                self.counters[self.index].add(now.saturating_sub(last), 0);
                last = now;
            }
        } else if let Some(mut xsk) = self.xsk.take() {
            self.run_xdp(&mut xsk, &mut result)?;
            result.xsk = Some(xsk);
        } else if let RecvBackend::Uring { sqpoll_cpu } = self.backend {
            self.run_uring(&sockets, sqpoll_cpu, &mut result)?;
        } else if sockets.len() == 1 {
            // One socket: block in recvmmsg (SO_RCVTIMEO wakes us to check the stop signal).
            let fd = sockets[0].as_fd();
            let half = self.batch.batch() / 2;
            while !self.stop.is_stopped() {
                let n = self.receive(fd, libc::MSG_WAITFORONE, &mut result)?;
                if let Some(pause) = self.coalesce.filter(|_| n > 0 && n < half) {
                    std::thread::sleep(pause);
                }
            }
        } else {
            for s in &sockets {
                s.set_nonblocking(true)?;
            }
            let timeout = rustix::event::Timespec::try_from(WAKE_INTERVAL).ok();
            while !self.stop.is_stopped() {
                let mut fds: Vec<rustix::event::PollFd<'_>> = sockets
                    .iter()
                    .map(|s| rustix::event::PollFd::new(s, rustix::event::PollFlags::IN))
                    .collect();
                match rustix::event::poll(&mut fds, timeout.as_ref()) {
                    Ok(_) | Err(rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(e.into()),
                }
                for socket in &sockets {
                    // Drain while batches come back full; an empty socket answers EAGAIN.
                    while self.receive(socket.as_fd(), libc::MSG_DONTWAIT, &mut result)?
                        == self.batch.batch()
                    {}
                }
            }
        }
        if let Some(lane) = self.dispatch_lane.take() {
            result.dispatch = Some(lane.finish()?);
        }
        let cpu_end = stats::thread_cpu();
        result.cpu = CpuUsage {
            user: cpu_end.user.saturating_sub(cpu_start.user),
            system: cpu_end.system.saturating_sub(cpu_start.system),
        };
        Ok(result)
    }

    /// One recvmmsg and the accounting of what it brought; returns the message count.
    #[inline]
    fn receive(
        &mut self,
        fd: BorrowedFd<'_>,
        flags: libc::c_int,
        r: &mut LaneResult,
    ) -> io::Result<usize> {
        r.syscalls += 1;
        let n = match self.batch.recv(fd, flags) {
            Ok(n) => n,
            Err(e)
                if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) =>
            {
                return Ok(0)
            }
            Err(e) => return Err(e),
        };
        let (mut datagrams, mut bytes) = (0u64, 0u64);
        for i in 0..n {
            let (meta, data) = self.batch.message(i);
            if meta.truncated {
                r.truncated += 1;
            }
            let segment = meta.segment_size.unwrap_or(data.len()).max(1);
            for datagram in data.chunks(segment) {
                datagrams += 1;
                bytes += datagram.len() as u64;
                // Dispatch needs the check (bind refuses it without), and reuses its header.
                let header = check_datagram(self.check, datagram, r);
                if let (Some(lane), Some(h)) = (&mut self.dispatch_lane, header) {
                    lane.offer(h.flow, h.seq);
                }
            }
        }
        if let Some(lane) = &mut self.dispatch_lane {
            lane.egress();
        }
        self.counters[self.index].add(datagrams, bytes);
        Ok(n)
    }

    /// The AF_XDP lane: frames straight off the RX ring, through the checked parser, into the
    /// payload check; a poll (which also wakes the kernel when need_wakeup asks) only when the
    /// ring is empty, and the same coalescing pause as recvmmsg after a thin batch.
    fn run_xdp(&mut self, xsk: &mut XskLane, r: &mut LaneResult) -> io::Result<()> {
        const BUDGET: u32 = 64;
        let check = self.check;
        while !self.stop.is_stopped() {
            let (mut datagrams, mut bytes) = (0u64, 0u64);
            let n = xsk.receive(BUDGET, |payload| {
                datagrams += 1;
                bytes += payload.len() as u64;
                check_datagram(check, payload, r);
            });
            self.counters[self.index].add(datagrams, bytes);
            if n == 0 {
                r.syscalls += 1;
                xsk.wait(WAKE_INTERVAL)?;
            } else if let Some(pause) = self.coalesce.filter(|_| n < BUDGET / 2) {
                std::thread::sleep(pause);
            }
        }
        Ok(())
    }

    /// The io_uring lane: a multishot receive per socket, one datagram per completion, every
    /// buffer handed back as soon as it is checked; one io_uring_enter per wait (none for
    /// submissions when an SQPOLL thread takes them).
    fn run_uring(
        &mut self,
        sockets: &[Arc<Socket>],
        sqpoll_cpu: Option<usize>,
        r: &mut LaneResult,
    ) -> io::Result<()> {
        let mut ring = SocketRing::new(RingConfig {
            files: 1,
            buffers: 4096,
            buffer_size: self.slot,
            sqpoll_cpu,
        })?;
        for (token, socket) in sockets.iter().enumerate() {
            ring.receive_datagrams(socket.as_fd(), token as u32)?;
        }
        let mut completions = Vec::with_capacity(4096);
        while !self.stop.is_stopped() {
            ring.submit_and_wait(WAKE_INTERVAL)?;
            r.syscalls += 1;
            ring.completions(&mut completions);
            let (mut datagrams, mut bytes) = (0u64, 0u64);
            for completion in completions.drain(..) {
                let (token, more) = match completion {
                    Completion::Received { slot, buffer, len, more } => {
                        if len > ring.buffer_size() {
                            r.truncated += 1;
                        }
                        let datagram = ring.buffer(buffer, len);
                        datagrams += 1;
                        bytes += datagram.len() as u64;
                        check_datagram(self.check, datagram, r);
                        ring.give_back(buffer);
                        (slot, more)
                    }
                    Completion::RecvEnded { slot, result, more } => {
                        if result == 0 {
                            datagrams += 1; // an empty datagram
                            r.foreign += u64::from(self.check);
                        } else if result != -libc::ENOBUFS {
                            return Err(io::Error::from_raw_os_error(-result));
                        }
                        (slot, more)
                    }
                    _ => continue,
                };
                if !more {
                    if let Some(socket) = sockets.get(token as usize) {
                        ring.receive_datagrams(socket.as_fd(), token)?;
                    }
                }
            }
            self.counters[self.index].add(datagrams, bytes);
        }
        Ok(())
    }
}

/// Checks one datagram's header into the lane's tracker; returns the header when it is valid.
#[inline]
fn check_datagram(check: bool, datagram: &[u8], r: &mut LaneResult) -> Option<payload::Header> {
    if !check {
        return None;
    }
    match payload::read(datagram) {
        // Flow ids come from the network: beyond the tracked range they would grow the
        // dispatch and reorder maps at a peer's will, so they count as foreign.
        Ok(h) if h.flow as usize >= MAX_TRACKED_FLOWS => {
            r.foreign += 1;
            None
        }
        Ok(h) => {
            r.tracker.record(h.flow, h.seq);
            Some(h)
        }
        Err(PayloadError::Corrupt) => {
            r.corrupt += 1;
            None
        }
        Err(PayloadError::Foreign | PayloadError::Short) => {
            r.foreign += 1;
            None
        }
    }
}
