//! The sender: lanes of sendmmsg, each owning some flows (one connected socket, so one source
//! port, per flow), optionally with UDP GSO so that one message leaves as up to 64 datagrams,
//! paced to a rate cap so that a cheap sender cannot livelock the receiver it measures.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use socket2::Socket;

use super::lanes::Lanes;
use super::payload;
use super::send_xdp::{FlowFrame, XdpSendLane, XdpSendResult};
use super::socket::{local_addr, new_udp};
use super::UdpError;
use crate::lane::{self, LaneSet, LanesEnd, Monitor, Second, StopSignal, Watch};
use crate::stats::{CpuSecs, Interval, LaneCounters, Meter, Throughput};
use crate::sys::{mmsg, sockopt};
use crate::xdp::tx::XskTx;

/// UDP_MAX_SEGMENTS in include/linux/udp.h.
pub const MAX_GSO_SEGMENTS: usize = 64;
/// The largest UDP payload over IPv4.
pub const MAX_PAYLOAD: usize = 65_507;

/// What to send and how.
#[derive(Debug, Clone)]
pub struct SenderConfig {
    pub targets: Vec<SocketAddr>,
    /// How many lanes (each owning some flows), where they run, messages per sendmmsg.
    pub lanes: Lanes,
    /// Payload bytes per datagram.
    pub size: usize,
    /// Distinct flows (source ports); at least one per thread.
    pub flows: usize,
    /// The id of the first flow (the others follow it), so that several senders feeding one
    /// receiver keep their flows apart in its sequence accounting.
    pub first_flow: u32,
    /// Total datagrams per second over all lanes; 0 = as fast as possible.
    pub rate: u64,
    /// Datagrams per GSO message; `None` sends one datagram per message.
    pub gso: Option<usize>,
    pub duration: Option<Duration>,
    /// Stop after this many datagrams in all.
    pub count: Option<u64>,
    /// sendmmsg (default) or AF_XDP frames.
    pub backend: SendBackend,
}

/// How a sender lane hands datagrams to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SendBackend {
    /// sendmmsg on one connected socket per flow (with GSO when asked).
    #[default]
    Mmsg,
    /// Whole frames through an AF_XDP socket's TX ring, one socket per lane on TX queue
    /// `lane % queues` of the route's interface; IPv4 only.
    Xdp,
}

impl SendBackend {
    /// Every send backend, in the order help lists them.
    pub const ALL: &'static [SendBackend] = &[SendBackend::Mmsg, SendBackend::Xdp];

    /// The name the command line takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Mmsg => "mmsg",
            Self::Xdp => "xdp",
        }
    }

    /// One line on what it is, for the command line's help.
    pub fn about(self) -> &'static str {
        match self {
            Self::Mmsg => "sendmmsg, optionally with GSO",
            Self::Xdp => {
                "IPv4 frames built once per flow and pushed through an AF_XDP TX ring on the \
                 route's interface (needs root)"
            }
        }
    }
}

impl std::fmt::Display for SendBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for SendBackend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .copied()
            .find(|b| b.name() == s)
            .ok_or_else(|| format!("unknown send backend {s:?}: use mmsg or xdp"))
    }
}

impl Default for SenderConfig {
    fn default() -> Self {
        Self {
            targets: Vec::new(),
            lanes: Lanes::default(),
            size: 32,
            flows: 1,
            first_flow: 0,
            rate: 0,
            gso: None,
            duration: Some(Duration::from_secs(10)),
            count: None,
            backend: SendBackend::Mmsg,
        }
    }
}

/// One second of sending.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct SendInterval {
    #[serde(flatten)]
    pub interval: Interval,
}

/// Whether GSO ran, and why not when it was asked for.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct GsoState {
    pub requested: Option<usize>,
    pub active: bool,
    pub note: Option<String>,
}

/// Everything a send run did.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct SendSummary {
    pub targets: Vec<SocketAddr>,
    pub threads: usize,
    pub flows: usize,
    #[serde(flatten)]
    pub throughput: Throughput,
    pub syscalls: u64,
    /// Sends the kernel refused for lack of buffer space (ENOBUFS/EAGAIN); retried.
    pub backpressure: u64,
    /// ICMP port unreachable reported back (ECONNREFUSED): nobody listening yet.
    pub refused: u64,
    pub gso: GsoState,
    #[serde(flatten)]
    pub cpu_secs: CpuSecs,
    /// `mmsg` or `xdp`.
    #[serde(default)]
    pub backend: String,
    /// With `xdp`: the interface, the socket mode and how the destination MAC was found.
    #[serde(default)]
    pub backend_note: Option<String>,
}

/// One flow: its id and connected socket.
#[derive(Debug)]
struct Flow {
    id: u32,
    socket: Socket,
    next_seq: u64,
}

/// Connected sockets, ready to send.
#[derive(Debug)]
pub struct Sender {
    config: SenderConfig,
    lane_flows: Vec<Vec<Flow>>,
    gso: GsoState,
    /// With `xdp`: each lane's socket and flow frames, and what was found on the way.
    xdp: Option<XdpLanes>,
}

/// Each AF_XDP lane's socket and flow frames, and a note on how the frames leave.
type XdpLanes = (Vec<(XskTx, Vec<FlowFrame>)>, String);

impl Sender {
    /// Validates the configuration and connects one socket per flow.
    pub fn connect(mut config: SenderConfig) -> Result<Self, UdpError> {
        if config.targets.is_empty() {
            return Err(UdpError::NoAddress);
        }
        config.lanes.check()?;
        if !(payload::HEADER_LEN..=MAX_PAYLOAD).contains(&config.size) {
            return Err(UdpError::Size {
                size: config.size,
                min: payload::HEADER_LEN,
                max: MAX_PAYLOAD,
            });
        }
        if let Some(seg) = config.gso {
            if !(1..=MAX_GSO_SEGMENTS).contains(&seg) {
                return Err(UdpError::Segments(seg));
            }
            let max = MAX_PAYLOAD / seg;
            if config.size * seg > MAX_PAYLOAD {
                return Err(UdpError::Size { size: config.size, min: payload::HEADER_LEN, max });
            }
        }
        config.flows = config.flows.max(config.lanes.threads);
        let mut lane_flows: Vec<Vec<Flow>> =
            (0..config.lanes.threads).map(|_| Vec::new()).collect();
        for id in 0..config.flows {
            let target = config.targets[id % config.targets.len()];
            let socket = new_udp(&target)?;
            let any: IpAddr = match target {
                SocketAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
                SocketAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
            };
            let local = SocketAddr::new(any, 0);
            socket.bind(&local.into()).map_err(|e| UdpError::bind(local, e))?;
            socket
                .connect(&target.into())
                .map_err(|e| UdpError::io(format!("cannot reach {target}"), e))?;
            socket
                .set_write_timeout(Some(super::socket::WAKE_INTERVAL))
                .map_err(|e| UdpError::io("SO_SNDTIMEO", e))?;
            let id32 = u32::try_from(id)
                .ok()
                .and_then(|id| id.checked_add(config.first_flow))
                .ok_or(UdpError::FlowIds { first: config.first_flow, flows: config.flows })?;
            lane_flows[id % config.lanes.threads].push(Flow { id: id32, socket, next_seq: 0 });
        }
        let mut gso = GsoState { requested: config.gso, active: false, note: None };
        if let Some(seg) = config.gso {
            // Probe with setsockopt; a kernel that accepts it may still refuse a send
            // (a device without checksum offload), which the lane handles at run time.
            match sockopt::set_udp_segment(lane_flows[0][0].socket.as_fd(), config.size as u16) {
                Ok(()) if seg > 1 => gso.active = true,
                Ok(()) => gso.note = Some("1 segment per message is plain sending".into()),
                Err(e) => {
                    gso.note = Some(format!(
                        "kernel refused UDP_SEGMENT ({e}); sending datagram by datagram"
                    ))
                }
            }
            if config.size > u16::MAX as usize {
                gso.active = false;
            }
        }
        let xdp = match config.backend {
            SendBackend::Xdp => Some(xdp_lanes(&config, &lane_flows)?),
            SendBackend::Mmsg => None,
        };
        Ok(Self { config, lane_flows, gso, xdp })
    }

    /// With `xdp`: how the frames leave (interface, mode, destination MAC), else `None`.
    pub fn backend_note(&self) -> Option<&str> {
        self.xdp.as_ref().map(|(_, note)| note.as_str())
    }

    /// Sends until `stop`, the duration or the count, calling `on_interval` every second.
    pub fn run(
        mut self,
        stop: &StopSignal,
        on_interval: impl FnMut(&SendInterval),
    ) -> Result<SendSummary, UdpError> {
        let counters: Arc<Vec<LaneCounters>> = lane::per_lane(self.config.lanes.threads);
        let lane_stop = StopSignal::new();
        // Lanes end by themselves at the deadline or with their share of the count.
        let mut monitor = Monitor::new(stop, LanesEnd::AllFinished).until(self.config.duration);
        let (xdp_note, lanes, xdp_results) =
            self.spawn_lanes(&counters, monitor.deadline(), &lane_stop)?;
        let cfg = self.config;
        let mut watch = SendWatch {
            counters: &counters,
            meter: Meter::new(cfg.lanes.threads),
            busy_pps: Vec::new(),
            on_interval,
        };
        let (_, stopped) = monitor.watch(&[&lanes, &xdp_results], &mut watch);
        let sent = join_senders(&monitor, xdp_results, lanes)?;
        let mut gso = self.gso;
        if let Some(note) = sent.gso_fallback {
            gso.active = false;
            gso.note = Some(note);
        }
        Ok(SendSummary {
            targets: cfg.targets,
            threads: cfg.lanes.threads,
            flows: cfg.flows,
            throughput: Throughput::of(&counters, &watch.busy_pps, stopped.elapsed),
            syscalls: sent.syscalls,
            backpressure: sent.backpressure,
            refused: sent.refused,
            gso,
            cpu_secs: CpuSecs::of(stopped.user, stopped.system),
            backend: if xdp_note.is_some() { "xdp" } else { "mmsg" }.to_string(),
            backend_note: xdp_note,
        })
    }
}

/// Joins the AF_XDP lanes, then the sendmmsg lanes: their sums, and a GSO fallback any took.
fn join_senders(
    monitor: &Monitor,
    xdp: LaneSet<XdpSendResult>,
    mmsg: LaneSet<SendResult>,
) -> Result<SendResult, UdpError> {
    let mut sent = SendResult { syscalls: 0, backpressure: 0, refused: 0, gso_fallback: None };
    let (xdp, _) =
        monitor.join(xdp).map_err(|e| UdpError::io("an AF_XDP sender lane failed", e))?;
    for r in xdp {
        sent.syscalls += r.value.0;
        sent.backpressure += r.value.1;
    }
    let (mmsg, _) = monitor.join(mmsg).map_err(|e| UdpError::io("a sender lane failed", e))?;
    for r in mmsg {
        sent.syscalls += r.value.syscalls;
        sent.backpressure += r.value.backpressure;
        sent.refused += r.value.refused;
        sent.gso_fallback = r.value.gso_fallback.or(sent.gso_fallback);
    }
    Ok(sent)
}

/// [`Sender::run`]'s seconds, from the lanes' counters.
struct SendWatch<'a, F> {
    counters: &'a [LaneCounters],
    meter: Meter,
    /// Each second's rate, when any was sent.
    busy_pps: Vec<f64>,
    on_interval: F,
}

impl<F: FnMut(&SendInterval)> Watch for SendWatch<'_, F> {
    fn second(&mut self, _: &Second) {
        let refs: Vec<&LaneCounters> = self.counters.iter().collect();
        let interval = self.meter.tick(&refs);
        if interval.rate.pps > 0.0 {
            self.busy_pps.push(interval.rate.pps);
        }
        (self.on_interval)(&SendInterval { interval });
    }
}

impl Sender {
    /// Starts one lane per lane's flows: an AF_XDP lane where the backend built one, else a
    /// sendmmsg lane; each paced to its share of the rate and count. Returns the XDP note and
    /// the two sets (their results differ).
    #[allow(clippy::type_complexity)]
    fn spawn_lanes(
        &mut self,
        counters: &Arc<Vec<LaneCounters>>,
        deadline: Option<Instant>,
        stop: &StopSignal,
    ) -> Result<(Option<String>, LaneSet<SendResult>, LaneSet<XdpSendResult>), UdpError> {
        let cfg = &self.config;
        let segments = if self.gso.active { cfg.gso.unwrap_or(1) } else { 1 };
        let threads = cfg.lanes.threads as u64;
        let (mut xdp_lanes, xdp_note) = match self.xdp.take() {
            Some((lanes, note)) => (lanes.into_iter().map(Some).collect(), Some(note)),
            None => (Vec::new(), None),
        };
        let mut xdp_results = LaneSet::new("corelane-xtx", stop.clone());
        let mut lanes = LaneSet::new("corelane-tx", stop.clone());
        for (index, flows) in std::mem::take(&mut self.lane_flows).into_iter().enumerate() {
            let share = |total: u64| total / threads + u64::from((index as u64) < total % threads);
            let rate = (cfg.rate > 0).then(|| share(cfg.rate).max(1));
            let count = cfg.count.map(share);
            let (counters, cpu) = (Arc::clone(counters), cfg.lanes.placement.cpu_of(index));
            if let Some((tx, frames)) = xdp_lanes.get_mut(index).and_then(Option::take) {
                let (size, stop) = (cfg.size, stop.clone());
                let work = XdpSendLane {
                    tx,
                    flows: frames,
                    size,
                    rate,
                    count,
                    deadline,
                    counters,
                    index,
                    stop,
                };
                // The flow sockets stay open while the lane runs: they hold the source ports.
                xdp_results
                    .spawn(cpu, move || {
                        let r = work.run();
                        drop(flows);
                        r
                    })
                    .map_err(|e| UdpError::io("cannot start a sender lane", e))?;
                continue;
            }
            let work = SendLane {
                flows,
                batch: mmsg::MmsgSend::new(cfg.lanes.batch, cfg.size * segments),
                batch_len: cfg.lanes.batch,
                size: cfg.size,
                segments,
                rate,
                count,
                deadline,
                counters,
                index,
                stop: stop.clone(),
            };
            lanes
                .spawn(cpu, move || work.run())
                .map_err(|e| UdpError::io("cannot start a sender lane", e))?;
        }
        Ok((xdp_note, lanes, xdp_results))
    }
}

/// `xdp`: one AF_XDP socket per lane on the route's interface and each flow's frame, built
/// from the flow socket's own address (which keeps the source port reserved).
fn xdp_lanes(config: &SenderConfig, lane_flows: &[Vec<Flow>]) -> Result<XdpLanes, UdpError> {
    let header = match config.targets.iter().any(SocketAddr::is_ipv6) {
        true => crate::xdp::frame::IPV6_PAYLOAD_OFFSET,
        false => crate::xdp::frame::IPV4_PAYLOAD_OFFSET,
    };
    let max = crate::xdp::rx::FRAME_SIZE as usize - header;
    if config.gso.is_some_and(|g| g > 1) || config.size > max {
        return Err(crate::xdp::XdpError::SendOptions { max }.into());
    }
    let mut out = Vec::new();
    let mut note = String::new();
    for (index, flows) in lane_flows.iter().enumerate() {
        let mut frames = Vec::new();
        let mut lane_dev: Option<String> = None;
        for (n, flow) in flows.iter().enumerate() {
            let target = config.targets[flow.id as usize % config.targets.len()];
            let egress = crate::xdp::route::resolve(target.ip())?;
            if lane_dev.as_ref().is_some_and(|d| *d != egress.iface.name) {
                return Err(UdpError::io(
                    "--backend xdp: one lane's targets leave through different interfaces",
                    io::Error::from(io::ErrorKind::Unsupported),
                ));
            }
            lane_dev = Some(egress.iface.name.clone());
            let src = local_addr(&flow.socket)?;
            frames.push(FlowFrame::build(flow.id, &egress, src, target, config.size)?);
            if index == 0 && n == 0 {
                note = egress.how.clone();
            }
        }
        let Some(dev) = lane_dev else { continue };
        let queues = crate::xdp::Interface::by_name(&dev)?.rx_queues.max(1);
        let (tx, zerocopy) = XskTx::open(&dev, index as u32 % queues)?;
        if index == 0 {
            let mode = if zerocopy { "zero-copy" } else { "copy mode" };
            note = format!("AF_XDP TX on {dev} ({mode}); destination MAC: {note}");
        }
        out.push((tx, frames));
    }
    Ok((out, note))
}

struct SendLane {
    flows: Vec<Flow>,
    batch: mmsg::MmsgSend,
    batch_len: usize,
    size: usize,
    segments: usize,
    /// Datagrams per second for this lane.
    rate: Option<u64>,
    count: Option<u64>,
    deadline: Option<Instant>,
    counters: Arc<Vec<LaneCounters>>,
    index: usize,
    stop: StopSignal,
}

struct SendResult {
    syscalls: u64,
    backpressure: u64,
    refused: u64,
    gso_fallback: Option<String>,
}

impl SendLane {
    fn run(mut self) -> io::Result<SendResult> {
        let mut r = SendResult { syscalls: 0, backpressure: 0, refused: 0, gso_fallback: None };
        self.prepare();
        let start = Instant::now();
        let mut sent = 0u64;
        let mut turn = 0usize;
        loop {
            if self.stop.is_stopped() || self.count.is_some_and(|c| sent >= c) {
                break;
            }
            let now = Instant::now();
            if self.deadline.is_some_and(|d| now >= d) {
                break;
            }
            if super::pace::wait_for_pace(start, sent, self.rate, now) {
                continue;
            }
            let per_message = self.segments as u64;
            let mut messages = self.batch_len;
            if let Some(c) = self.count {
                let left = c - sent;
                messages = messages.min(left.div_ceil(per_message) as usize);
            }
            let flow_index = turn % self.flows.len();
            turn = turn.wrapping_add(1);
            let (id, first_seq) = (self.flows[flow_index].id, self.flows[flow_index].next_seq);
            let datagrams_planned =
                self.fill(id, first_seq, messages, self.count.map(|c| c - sent));
            r.syscalls += 1;
            let fd = self.flows[flow_index].socket.as_fd();
            match self.batch.send(fd, messages) {
                Ok(n) => {
                    let accepted =
                        if n == messages { datagrams_planned } else { n as u64 * per_message };
                    // Sequences of messages the kernel did not take are sent again next time.
                    self.flows[flow_index].next_seq = first_seq + accepted;
                    sent += accepted;
                    self.counters[self.index].add(accepted, accepted * self.size as u64);
                }
                Err(e) => match e.raw_os_error() {
                    Some(libc::ENOBUFS | libc::EAGAIN | libc::EINTR) => r.backpressure += 1,
                    Some(libc::ECONNREFUSED) => {
                        r.refused += 1;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    Some(libc::EIO | libc::EINVAL) if self.segments > 1 => {
                        r.gso_fallback = Some(format!(
                            "a GSO send failed ({e}); fell back to datagram by datagram"
                        ));
                        self.segments = 1;
                        self.prepare();
                    }
                    _ => return Err(e),
                },
            }
        }
        Ok(r)
    }

    /// Lays out every message once: filler pattern, length and GSO segment size.
    fn prepare(&mut self) {
        let segment = (self.segments > 1).then_some(self.size as u16);
        for i in 0..self.batch_len {
            let buf = self.batch.buffer_mut(i);
            for datagram in buf.chunks_mut(self.size) {
                payload::prefill(datagram);
            }
            self.batch.set_message(i, self.size * self.segments, segment);
        }
    }

    /// Writes the headers of up to `messages` messages of flow `id` from `first_seq`, the last
    /// one shortened when `remaining` datagrams is fewer; returns the datagrams laid out.
    fn fill(&mut self, id: u32, first_seq: u64, messages: usize, remaining: Option<u64>) -> u64 {
        let (size, segments) = (self.size, self.segments);
        let mut left = remaining.unwrap_or(u64::MAX);
        let mut planned = 0u64;
        for m in 0..messages {
            let here = (segments as u64).min(left) as usize;
            let buf = self.batch.buffer_mut(m);
            for s in 0..here {
                payload::write_header(&mut buf[s * size..], id, first_seq + planned + s as u64);
            }
            if here < segments {
                let segment = (segments > 1).then_some(size as u16);
                self.batch.set_message(m, here * size, segment);
            }
            planned += here as u64;
            left -= here as u64;
        }
        planned
    }
}
