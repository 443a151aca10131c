//! One trial of one configuration: start the receiver, then the paced sender, read the
//! receiver's per-second JSON into the library's types, and sample /proc/stat over the
//! measured seconds.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use corelane::lane::StopSignal;
use corelane::stats::CpuSplit;
use corelane::udp::{RecvInterval, RecvSummary, SendInterval, SendSummary};
use serde_json::Value;

use super::configs::{Config, XdpRole, FLOWS};
use super::napi::NapiThreads;
use super::{ConfigRow, UdpLabOptions};
use crate::host::Host;
use crate::output::{self, Line};
use crate::process::ChildProcess;
use crate::remote::nic::NicRates;
use crate::testbed::Testbed;
use crate::{median_of, LabError};

/// The port inside the namespaces (private to them, so a fixed one is safe).
const NAMESPACE_PORT: u16 = 4321;

/// What one trial measured over its steady seconds.
#[derive(Debug, Clone)]
pub struct Trial {
    pub pps: f64,
    pub sent_pps: f64,
    pub drops_per_sec: f64,
    pub cpu_ns_per_datagram: f64,
    pub reordered_pct: f64,
    pub lane_pps: Vec<f64>,
    pub cpu: Vec<CpuSplit>,
    pub nic: Option<NicRates>,
    /// AF_XDP rows: the exact runtime of the interface's NAPI threads per datagram received.
    pub napi_ns_per_datagram: Option<f64>,
    /// AF_XDP rows: frames the sockets lost over the whole trial (RX ring full, no fill frame).
    pub xsk_lost: Option<u64>,
}

/// A port for the receiver: fixed inside namespaces and on remote hosts, a free one on a
/// shared loopback.
pub(crate) fn pick_port(testbed: &Testbed) -> Result<u16, LabError> {
    if !matches!(testbed.network, crate::testbed::Network::Loopback { .. }) {
        return Ok(NAMESPACE_PORT);
    }
    let probe = UdpSocket::bind("127.0.0.1:0")
        .map_err(|e| LabError::io("cannot find a free UDP port", e))?;
    probe.local_addr().map(|a| a.port()).map_err(|e| LabError::io("cannot find a free UDP port", e))
}

/// Waits for the child's `{"type":"ready"}` line (or the C loop's bare `ready`).
pub(crate) fn wait_ready(child: &mut ChildProcess, what: &str) -> Result<(), LabError> {
    let waited = Duration::from_secs(10);
    let end = Instant::now() + waited;
    while Instant::now() < end {
        match child.next_line(Duration::from_millis(100)) {
            Some(line) if line == "ready" => return Ok(()),
            Some(line) => {
                if let Line::Ready {} = output::parse::<Value, Value>(what, &line)? {
                    return Ok(());
                }
            }
            None => {
                if let Some(status) = child.wait_timeout(Duration::ZERO) {
                    return Err(child.failed(status));
                }
            }
        }
    }
    Err(child.timed_out("did not report ready", waited))
}

/// The receiver's command line for `cfg`.
fn receiver_args(cfg: &Config, port: u16, secs: u64) -> Vec<String> {
    let mut args: Vec<String> = ["udp", "recv"].map(String::from).to_vec();
    args.push(format!("0.0.0.0:{port}"));
    args.extend([
        "--json".into(),
        "--duration".into(),
        format!("{}", secs + 5),
        "--threads".into(),
        cfg.lanes.len().to_string(),
        "--sockets".into(),
        if cfg.shared_socket { "shared" } else { "reuseport" }.into(),
        "--rcvbuf".into(),
        "4M".into(),
    ]);
    if cfg.pinned {
        args.extend(["--pin".into(), cfg.lanes.to_string()]);
    }
    if cfg.uring {
        args.extend(["--backend".into(), "uring".into()]);
    }
    if let Some(cpu) = cfg.sqpoll {
        args.extend(["--sqpoll".into(), cpu.to_string()]);
    }
    if cfg.gro {
        args.push("--gro".into());
    }
    if cfg.steer_cpu {
        args.extend(["--steer".into(), "cpu".into()]);
    }
    match cfg.xdp {
        XdpRole::Receive => {
            args.extend(["--backend", "xdp", "--xdp-dev", RX_DEV].map(String::from))
        }
        XdpRole::Drop => {
            args.extend(["--backend", "xdp-drop", "--xdp-dev", RX_DEV].map(String::from))
        }
        XdpRole::Off | XdpRole::Send => {}
    }
    args
}

/// The receiving end of the namespace testbed's veth pair.
const RX_DEV: &str = "vrx";

/// A queue on the sending veth for an XDP receive row, removed after it. With XDP on vrx,
/// veth hands frames over through a 256-frame ring and, without a qdisc on vtx, drops what
/// does not fit (vtx's tx_dropped) whenever the NAPI thread is late; with one it stops the
/// queue and the sender waits, as a NIC's driver makes it (the non-XDP path has the
/// 1,000-packet backlog instead).
struct SenderQueue(Host);

impl SenderQueue {
    fn add(tx: Host) -> Result<Self, LabError> {
        tx.run("tc", &["qdisc", "replace", "dev", "vtx", "root", "pfifo", "limit", "1000"])?;
        Ok(Self(tx))
    }
}

impl Drop for SenderQueue {
    fn drop(&mut self) {
        let _ = self.0.run("tc", &["qdisc", "del", "dev", "vtx", "root"]);
    }
}

/// The paced GSO sender's command line for `cfg`.
fn sender_args(testbed: &Testbed, cfg: &Config, port: u16, secs: u64) -> Vec<String> {
    let mut args: Vec<String> = ["udp", "send"].map(String::from).to_vec();
    for addr in testbed.rx_addrs().iter().take(cfg.targets) {
        args.push(SocketAddr::new(*addr, port).to_string());
    }
    args.extend([
        "--json".into(),
        "--duration".into(),
        secs.to_string(),
        "--rate".into(),
        cfg.offered_pps.to_string(),
        "--gso".into(),
        cfg.gso_segments.to_string(),
        "--flows".into(),
        FLOWS.to_string(),
        "--threads".into(),
        cfg.sender_threads.to_string(),
        "--pin".into(),
        cfg.sender_cpu.to_string(),
    ]);
    if cfg.xdp == XdpRole::Send {
        args.extend(["--backend".into(), "xdp".into()]);
    }
    args
}

const RECEIVER: &str = "the corelane receiver";
const SENDER: &str = "the corelane sender";

pub fn run(
    testbed: &Testbed,
    cfg: &Config,
    opts: &UdpLabOptions,
    stop: &StopSignal,
) -> Result<Trial, LabError> {
    match &cfg.rps {
        Some(cpus) => testbed.steer_receive(cpus)?,
        None => testbed.restore_receive()?,
    }
    let (tx, rx) = (testbed.tx(), testbed.rx());
    let port = pick_port(testbed)?;
    let secs = opts.duration.as_secs();
    let xdp_rx = matches!(cfg.xdp, XdpRole::Receive | XdpRole::Drop);
    let _queue = match xdp_rx {
        true => Some(SenderQueue::add(tx.clone())?),
        false => None,
    };
    let napi_before = NapiThreads::before(RX_DEV);
    let mut receiver = rx.spawn(RECEIVER, &rx.corelane()?, &receiver_args(cfg, port, secs))?;
    wait_ready(&mut receiver, RECEIVER)?;
    let napi = match xdp_rx {
        true => Some(NapiThreads::pin(&rx, RX_DEV, &napi_before, cfg.lanes.cpus()[0])?),
        false => None,
    };
    let sender = tx.spawn(SENDER, &tx.corelane()?, &sender_args(testbed, cfg, port, secs))?;
    let nic_before = (testbed.rx_nic_counters()?, Instant::now());
    let steady = read_steady_seconds(
        &testbed.rx(),
        &mut receiver,
        secs,
        opts.duration,
        napi.as_ref(),
        stop,
    )?;
    let nic = match (nic_before, testbed.rx_nic_counters()?) {
        ((Some(before), at), Some(after)) => {
            Some(after.rates_since(&before, at.elapsed().as_secs_f64()))
        }
        _ => None,
    };
    receiver.interrupt();
    let sent: SendSummary =
        output::summary::<SendInterval, _>(SENDER, &sender.finish(Duration::from_secs(5))?)?;
    let received: RecvSummary =
        output::summary::<RecvInterval, _>(RECEIVER, &receiver.finish(Duration::from_secs(5))?)?;
    let sequence = received.sequence;
    let lanes = &steady.lanes;
    let lane_count = lanes.iter().map(Vec::len).max().unwrap_or(0);
    Ok(Trial {
        pps: median_of(steady.pps),
        sent_pps: sent.mean.pps,
        drops_per_sec: median_of(steady.drops),
        cpu_ns_per_datagram: median_of(steady.cpu_ns),
        reordered_pct: 100.0 * sequence.late as f64 / sequence.received.max(1) as f64,
        lane_pps: (0..lane_count)
            .map(|l| median_of(lanes.iter().filter_map(|v| v.get(l).copied())))
            .collect(),
        cpu: steady.cpu,
        nic,
        napi_ns_per_datagram: steady.napi_ns,
        xsk_lost: received.xdp.as_ref().map(|x| x.xsk.rx_lost()),
    })
}

/// The receiver's intervals 2..=secs (the first second is warm-up) and the per-CPU split
/// over the same seconds.
#[derive(Debug, Default)]
struct Steady {
    pps: Vec<f64>,
    drops: Vec<f64>,
    cpu_ns: Vec<f64>,
    lanes: Vec<Vec<f64>>,
    cpu: Vec<CpuSplit>,
    napi_ns: Option<f64>,
}

fn read_steady_seconds(
    rx: &Host,
    receiver: &mut ChildProcess,
    secs: u64,
    duration: Duration,
    napi: Option<&NapiThreads>,
    stop: &StopSignal,
) -> Result<Steady, LabError> {
    let mut steady = Steady::default();
    let mut stat_start = None;
    // NAPI runtime and datagrams received at the end of the warm-up second.
    let mut napi_start = (Duration::ZERO, 0u64);
    let deadline = Instant::now() + duration + Duration::from_secs(5);
    loop {
        if stop.is_stopped() {
            return Err(LabError::Interrupted);
        }
        if Instant::now() > deadline {
            return Err(receiver.timed_out("sent no last interval", duration));
        }
        let Some(line) = receiver.next_line(Duration::from_millis(200)) else {
            // Output ended: the receiver (or, on a remote host, its connection) is gone.
            if let Some(status) = receiver.wait_timeout(Duration::ZERO) {
                return Err(receiver.failed(status));
            }
            continue;
        };
        let Line::Interval { interval } = output::parse::<RecvInterval, Value>(RECEIVER, &line)?
        else {
            continue;
        };
        let index = interval.interval.index;
        if index == 1 {
            stat_start = Some(rx.proc_stat()?);
            napi_start =
                (napi.map(NapiThreads::runtime).unwrap_or_default(), interval.interval.datagrams);
        } else if index >= 2 {
            steady.pps.push(interval.interval.rate.pps);
            steady.drops.push(interval.kernel_drops as f64);
            steady.cpu_ns.push(interval.cpu_ns_per_datagram);
            steady.lanes.push(interval.interval.lane_pps);
        }
        if index >= secs {
            if let Some(start) = &stat_start {
                steady.cpu = rx.proc_stat()?.split_since(start);
            }
            steady.napi_ns = napi.map(|n| {
                let used = n.runtime().saturating_sub(napi_start.0).as_nanos() as f64;
                used / interval.interval.datagrams.saturating_sub(napi_start.1).max(1) as f64
            });
            return Ok(steady);
        }
    }
}

/// Medians over trials; the CPU split is the mean over trials.
pub fn summarize(cfg: &Config, trials: &[Trial]) -> ConfigRow {
    let n = trials.len().max(1) as f64;
    let mut cpu: Vec<CpuSplit> = trials.first().map(|t| t.cpu.clone()).unwrap_or_default();
    for split in &mut cpu {
        let same: Vec<&CpuSplit> =
            trials.iter().filter_map(|t| t.cpu.iter().find(|c| c.cpu == split.cpu)).collect();
        split.user_pct = same.iter().map(|c| c.user_pct).sum::<f64>() / n;
        split.sys_pct = same.iter().map(|c| c.sys_pct).sum::<f64>() / n;
        split.softirq_pct = same.iter().map(|c| c.softirq_pct).sum::<f64>() / n;
        split.idle_pct = same.iter().map(|c| c.idle_pct).sum::<f64>() / n;
    }
    let lane_count = trials.iter().map(|t| t.lane_pps.len()).max().unwrap_or(0);
    ConfigRow {
        config: cfg.id.to_string(),
        label: cfg.label.clone(),
        offered_pps: cfg.offered_pps as f64,
        sent_pps: median_of(trials.iter().map(|t| t.sent_pps)),
        trials_pps: trials.iter().map(|t| t.pps).collect(),
        median_pps: median_of(trials.iter().map(|t| t.pps)),
        gap_pct: None,
        drops_per_sec: median_of(trials.iter().map(|t| t.drops_per_sec)),
        cpu_ns_per_datagram: median_of(trials.iter().map(|t| t.cpu_ns_per_datagram)),
        reordered_pct: median_of(trials.iter().map(|t| t.reordered_pct)),
        lane_pps: (0..lane_count)
            .map(|l| median_of(trials.iter().filter_map(|t| t.lane_pps.get(l).copied())))
            .collect(),
        cpu,
        napi_ns_per_datagram: trials
            .first()
            .and_then(|t| t.napi_ns_per_datagram)
            .map(|_| median_of(trials.iter().filter_map(|t| t.napi_ns_per_datagram))),
        xsk_lost: trials.iter().filter_map(|t| t.xsk_lost).reduce(|a, b| a + b),
        nic: trials.first().and_then(|t| t.nic.as_ref()).map(|_| {
            let rates: Vec<&NicRates> = trials.iter().filter_map(|t| t.nic.as_ref()).collect();
            let queues = rates.iter().map(|r| r.rx_queue_packets_per_sec.len()).min();
            NicRates {
                rx_packets_per_sec: median_of(rates.iter().map(|r| r.rx_packets_per_sec)),
                rx_dropped_per_sec: median_of(rates.iter().map(|r| r.rx_dropped_per_sec)),
                rx_missed_per_sec: median_of(rates.iter().map(|r| r.rx_missed_per_sec)),
                rx_queue_packets_per_sec: (0..queues.unwrap_or(0))
                    .map(|q| median_of(rates.iter().map(|r| r.rx_queue_packets_per_sec[q])))
                    .collect(),
            }
        }),
    }
}
