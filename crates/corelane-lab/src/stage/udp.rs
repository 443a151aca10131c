//! One UDP trial, shared by `lab udp` and `lab affinity`: start the receiver, then the paced
//! sender, read the receiver's per-second JSON into the library's types, and sample
//! /proc/stat over the measured seconds.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use corelane::lane::StopSignal;
use corelane::stats::CpuSplit;
use corelane::topology::CpuList;
use corelane::udp::{
    FlowGroup, FlowGroupReport, RecvInterval, RecvSummary, SendInterval, SendSummary,
};
use corelane::xdp::rx::XskStats;
use serde_json::Value;

use super::charged::{Charged, ChargedNs, ChargedRuntime};
use super::load::{self, HostClock, HostFigures, Share};
use super::napi::NapiThreads;
use super::{udp_port, wait_ready};
use crate::host::Host;
use crate::median_of;
use crate::output::{self, Line};
use crate::process::ChildProcess;
use crate::rx_nic::NicRates;
use crate::testbed::{LoadHost, Testbed, RX_DEV};
use crate::LabError;

/// Flows (source ports) every sender spreads its load over, so RPS and reuseport hashing
/// have flows to spread.
pub const FLOWS: usize = 8;
/// The busy-poll row's SO_BUSY_POLL time (µs), as `docs/results/xdp-floor.sh xdp-bp` runs it.
pub const BUSY_POLL_US: u32 = 50;
/// Datagrams per GSO message on the plain rows: cheap to send, still segmented by the
/// receiver-side stack, which is the work being measured.
pub const GSO_SEGMENTS: usize = 16;

/// What XDP does on a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpRole {
    /// Nothing: the kernel's UDP stack all the way.
    Off,
    /// The receiver is `udp recv --backend xdp` (AF_XDP lanes).
    Receive,
    /// AF_XDP lanes that busy-poll their queues (`--busy-poll BUSY_POLL_US`).
    ReceiveBusyPoll,
    /// The receiver is the XDP_DROP ceiling (`--backend xdp-drop`).
    Drop,
    /// The sender is `udp send --backend xdp` (frames through an AF_XDP TX ring).
    Send,
}

/// One configuration: network steering, receiver lanes, and the load offered.
#[derive(Debug, Clone)]
pub struct Config {
    pub id: &'static str,
    pub label: String,
    /// RPS CPUs for the receiver's RX queues: empty turns RPS off; `None` leaves it alone
    /// (loopback, where it cannot be set).
    pub rps: Option<CpuList>,
    /// CPUs the receiver lanes are pinned to, one lane each.
    pub lanes: CpuList,
    /// Whether the lanes are pinned to `lanes` (false: as many unpinned lanes).
    pub pinned: bool,
    /// Receive through io_uring, and with an SQPOLL thread on this CPU when `Some`.
    pub uring: bool,
    pub sqpoll: Option<usize>,
    pub shared_socket: bool,
    /// Reuseport group steered by CPU (`--steer cpu`) instead of the flow hash.
    pub steer_cpu: bool,
    pub gro: bool,
    /// How many of the receiver's addresses the sender targets.
    pub targets: usize,
    pub sender_threads: usize,
    pub sender_cpu: usize,
    pub gso_segments: usize,
    pub offered_pps: u64,
    pub xdp: XdpRole,
}

impl Config {
    /// One receiver lane on `lane` (pinned) fed by one plain paced GSO sender on
    /// `sender_cpu` to one address: the default row, which the others change.
    pub fn one_lane(
        id: &'static str,
        label: String,
        rps: Option<CpuList>,
        lane: usize,
        sender_cpu: usize,
        offered_pps: u64,
    ) -> Self {
        Self {
            id,
            label,
            rps,
            lanes: CpuList::new(vec![lane]),
            pinned: true,
            uring: false,
            sqpoll: None,
            shared_socket: false,
            steer_cpu: false,
            gro: false,
            targets: 1,
            sender_threads: 1,
            sender_cpu,
            gso_segments: GSO_SEGMENTS,
            offered_pps,
            xdp: XdpRole::Off,
        }
    }
}

/// What the receiver got and what it cost: one trial's figures over its steady seconds, or a
/// row's medians over its trials (flattened into the row's JSON).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Received {
    /// What the sender actually sent: its mean rate over the trial (median over trials).
    pub sent_pps: f64,
    /// Datagrams the kernel dropped at the receiving sockets per second (RcvbufErrors; with
    /// GRO one drop may be a whole coalesced buffer).
    pub drops_per_sec: f64,
    /// Receiver process CPU per datagram read, exact (the runtime of its threads); includes
    /// the softirq work the kernel ran on the receiver's CPU while one of its threads was
    /// current, not softirq run on an idle CPU (see `cpu_accounting`).
    pub cpu_ns_per_datagram: f64,
    /// Datagrams that arrived after a later one of their flow, in % of those received.
    pub reordered_pct: f64,
    /// Each lane's datagrams/s.
    pub lane_pps: Vec<f64>,
}

impl Received {
    /// The median of each figure over `all` (each lane's over the trials that had it).
    pub fn median<'a>(all: impl Iterator<Item = &'a Received> + Clone) -> Self {
        let of = |f: fn(&Received) -> f64| median_of(all.clone().map(f));
        Self {
            sent_pps: of(|r| r.sent_pps),
            drops_per_sec: of(|r| r.drops_per_sec),
            cpu_ns_per_datagram: of(|r| r.cpu_ns_per_datagram),
            reordered_pct: of(|r| r.reordered_pct),
            lane_pps: median_per_lane(all.map(|r| r.lane_pps.as_slice())),
        }
    }
}

/// Each lane's median over `samples` (each a figure per lane; a lane a sample lacks is left
/// out of that lane's median).
pub fn median_per_lane<'a>(samples: impl Iterator<Item = &'a [f64]> + Clone) -> Vec<f64> {
    let lanes = samples.clone().map(<[f64]>::len).max().unwrap_or(0);
    (0..lanes).map(|l| median_of(samples.clone().filter_map(|v| v.get(l).copied()))).collect()
}

/// What one trial measured over its steady seconds.
#[derive(Debug, Clone)]
pub struct Trial {
    pub pps: f64,
    pub received: Received,
    pub cpu: Vec<CpuSplit>,
    pub nic: Option<NicRates>,
    /// The exact runtime per datagram received of what the trial charges beyond the receiver:
    /// the interface's NAPI threads (AF_XDP rows); the sender, when it runs on this machine
    /// (with RPS off it includes the receive softirq its sends ran), and then this machine's
    /// ksoftirqd threads.
    pub charged: ChargedNs,
    /// AF_XDP rows: frames the sockets lost over the whole trial (RX ring full, no fill frame);
    /// `None` there when their counters could not be read.
    pub xsk_lost: Option<u64>,
    /// AF_XDP rows: the sockets' kernel counters over the whole trial, when read.
    pub xsk: Option<XskStats>,
    /// Each remote load host's part (empty when the load comes from this machine or the
    /// namespace testbed's one sender).
    pub hosts: Vec<HostFigures>,
    /// XDP rows: the mode the receiver reports it ran in (`native zero-copy`, `native copy`,
    /// `generic copy`; `native` for the XDP_DROP rows, whose program attaches natively or
    /// not at all).
    pub xdp_mode: Option<String>,
}

/// The receiver's command line for `cfg`; `xdp_dev` is the interface the AF_XDP rows attach
/// to; `groups`, each load host's flows when the row reports its hosts apart.
fn receiver_args(
    cfg: &Config,
    port: u16,
    secs: u64,
    xdp_dev: &str,
    groups: &[FlowGroup],
) -> Vec<String> {
    let mut args = vec!["udp".into(), "recv".into(), format!("0.0.0.0:{port}"), "--json".into()];
    if !groups.is_empty() {
        let list: Vec<String> = groups.iter().map(|g| format!("{}-{}", g.first, g.last)).collect();
        args.extend(["--flow-groups".into(), list.join(",")]);
    }
    let sockets = if cfg.shared_socket { "shared" } else { "reuseport" };
    push_options(
        &mut args,
        [
            ("--duration", (secs + 5).to_string()),
            ("--threads", cfg.lanes.len().to_string()),
            ("--sockets", sockets.into()),
            ("--rcvbuf", "4M".into()),
        ],
    );
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
    let xdp_backend = match cfg.xdp {
        XdpRole::Receive | XdpRole::ReceiveBusyPoll => Some("xdp"),
        XdpRole::Drop => Some("xdp-drop"),
        XdpRole::Off | XdpRole::Send => None,
    };
    if let Some(backend) = xdp_backend {
        args.extend(["--backend", backend, "--xdp-dev", xdp_dev].map(String::from));
    }
    if cfg.xdp == XdpRole::ReceiveBusyPoll {
        args.extend(["--busy-poll".into(), BUSY_POLL_US.to_string()]);
    }
    args
}

/// What an XDP receive row would run on `testbed`'s rx side for a dry run: the receiver's
/// command line; `None` for a row without XDP on the receiving side.
pub fn xdp_receiver_step(
    testbed: &Testbed,
    cfg: &Config,
    duration: Duration,
) -> Result<Option<String>, LabError> {
    let receives = matches!(cfg.xdp, XdpRole::Receive | XdpRole::ReceiveBusyPoll | XdpRole::Drop);
    let Some(dev) = testbed.rx_xdp_dev().filter(|_| receives) else { return Ok(None) };
    let groups = host_flow_groups(testbed, cfg);
    let args = receiver_args(cfg, udp_port(testbed)?, duration.as_secs(), &dev, &groups);
    Ok(Some(format!("{} {}", testbed.rx().corelane()?, shell_words::join(args))))
}

/// Each load host's flows, when the row reports its hosts apart (remote load hosts, whose
/// clocks were measured); none for the one local or namespace sender.
/// The XDP_DROP rows' receiver reads no datagram, so it counts none apart: none there either.
fn host_flow_groups(testbed: &Testbed, cfg: &Config) -> Vec<FlowGroup> {
    let load = testbed.load_hosts();
    if !lists_hosts(&load) || cfg.xdp == XdpRole::Drop {
        return Vec::new();
    }
    load::shares(cfg.offered_pps, FLOWS, load.len()).iter().map(Share::flow_group).collect()
}

/// Whether a row lists its load hosts: when they are remote (their clocks measured).
fn lists_hosts(load: &[LoadHost]) -> bool {
    load.iter().any(|l| l.clock.is_some())
}

/// Appends each option and its value.
fn push_options<const N: usize>(args: &mut Vec<String>, options: [(&str, String); N]) {
    args.extend(options.into_iter().flat_map(|(option, value)| [option.to_string(), value]));
}

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

/// The paced GSO sender's command line for `cfg`, offering `share` of its load. It sends one
/// second longer than the receiver's measured seconds, so that it is still running (its
/// runtime readable) when the last of them ends: started after the receiver, it would
/// otherwise end about then.
fn sender_args(
    testbed: &Testbed,
    cfg: &Config,
    share: &Share,
    port: u16,
    secs: u64,
) -> Vec<String> {
    let mut args: Vec<String> = ["udp", "send"].map(String::from).to_vec();
    for addr in testbed.rx_addrs().iter().take(cfg.targets) {
        args.push(SocketAddr::new(*addr, port).to_string());
    }
    args.push("--json".into());
    push_options(
        &mut args,
        [
            ("--duration", (secs + 1).to_string()),
            ("--rate", share.rate.to_string()),
            ("--gso", cfg.gso_segments.to_string()),
            ("--flows", share.flows.to_string()),
            ("--first-flow", share.first_flow.to_string()),
            ("--threads", cfg.sender_threads.to_string()),
            ("--pin", cfg.sender_cpu.to_string()),
        ],
    );
    if cfg.xdp == XdpRole::Send {
        args.extend(["--backend".into(), "xdp".into()]);
    }
    args
}

const RECEIVER: &str = "the corelane receiver";
const SENDER: &str = "the corelane sender";

/// One trial of `cfg` on `testbed`, measuring for `duration` (whole seconds, the first a
/// warm-up).
pub fn run(
    testbed: &Testbed,
    cfg: &Config,
    duration: Duration,
    stop: &StopSignal,
) -> Result<Trial, LabError> {
    match &cfg.rps {
        Some(cpus) => testbed.steer_receive(cpus)?,
        None => testbed.restore_receive()?,
    }
    let (tx, rx) = (testbed.tx(), testbed.rx());
    let port = udp_port(testbed)?;
    let secs = duration.as_secs();
    let xdp_rx = matches!(cfg.xdp, XdpRole::Receive | XdpRole::ReceiveBusyPoll | XdpRole::Drop);
    let xdp_dev = testbed.rx_xdp_dev();
    let dev = match (xdp_rx, &xdp_dev) {
        (true, None) => {
            return Err(LabError::Options(format!(
                "row {}: AF_XDP needs the namespace testbed or a remote rx host's NIC",
                cfg.id
            )))
        }
        (_, dev) => dev.clone().unwrap_or_default(),
    };
    let on_veth = testbed.is_namespaced();
    let _queue = match xdp_rx && on_veth {
        true => Some(SenderQueue::add(tx.clone())?),
        false => None,
    };
    let napi_before = NapiThreads::before(RX_DEV);
    let groups = host_flow_groups(testbed, cfg);
    let mut receiver =
        rx.spawn(RECEIVER, &rx.corelane()?, &receiver_args(cfg, port, secs, &dev, &groups))?;
    wait_ready(&mut receiver, RECEIVER)?;
    let napi = match (xdp_rx, on_veth) {
        (true, true) => Some(NapiThreads::pin(&rx, RX_DEV, &napi_before, cfg.lanes.cpus()[0])?),
        (true, false) => NapiThreads::found(&rx, &dev),
        (false, _) => None,
    };
    let load = testbed.load_hosts();
    let shares = load::shares(cfg.offered_pps, FLOWS, load.len());
    let senders = load::start_all(&load, SENDER, |i| {
        Ok((load[i].host.corelane()?, sender_args(testbed, cfg, &shares[i], port, secs)))
    })?;
    // The sender's runtime is charged where it runs on this machine: the one sender side.
    let local_sender = load.len() == 1 && matches!(tx, Host::Local | Host::Namespace(_));
    let charged = Charged::new(napi, local_sender.then(|| senders[0].pid()));
    let nic_before = (testbed.rx_nic_counters()?, Instant::now());
    let steady = read_steady_seconds(&testbed.rx(), &mut receiver, secs, duration, &charged, stop)?;
    let nic = match (nic_before, testbed.rx_nic_counters()?) {
        ((Some(before), at), Some(after)) => {
            Some(after.rates_since(&before, at.elapsed().as_secs_f64()))
        }
        _ => None,
    };
    receiver.interrupt();
    let received: RecvSummary =
        output::summary::<RecvInterval, _>(RECEIVER, &receiver.finish(Duration::from_secs(5))?)?;
    let pps = median_of(steady.pps.iter().copied());
    let arrived = arrived_per_host(&received, &groups, pps)?;
    let mut hosts = sender_figures(senders, &load, &shares, &arrived)?;
    let sent_pps = hosts.iter().map(|h| h.sent_pps).sum();
    if !lists_hosts(&load) {
        hosts.clear();
    }
    let xdp_mode = match cfg.xdp {
        XdpRole::Drop => Some("native".to_string()),
        _ => received.backend_report.xdp.as_ref().map(|x| x.mode.clone()),
    };
    let sequence = received.sequence;
    Ok(Trial {
        pps,
        received: Received {
            sent_pps,
            drops_per_sec: median_of(steady.drops),
            cpu_ns_per_datagram: median_of(steady.cpu_ns),
            reordered_pct: 100.0 * sequence.late as f64 / sequence.received.max(1) as f64,
            lane_pps: median_per_lane(steady.lanes.iter().map(Vec::as_slice)),
        },
        cpu: steady.cpu,
        nic,
        charged: steady.charged,
        xsk_lost: received.backend_report.xdp.as_ref().and_then(|x| x.xsk).map(|k| k.rx_lost()),
        xsk: received.backend_report.xdp.as_ref().and_then(|x| x.xsk),
        hosts,
        xdp_mode,
    })
}

/// Each load host's figures: what it was offered and sent (its sender's summary, once it
/// ended), what arrived of it (`arrived`, in load-host order) and its sender's CPU.
fn sender_figures(
    senders: Vec<ChildProcess>,
    load: &[LoadHost],
    shares: &[Share],
    arrived: &[(f64, u64)],
) -> Result<Vec<HostFigures>, LabError> {
    let mut hosts = Vec::new();
    for (((sender, l), share), i) in senders.into_iter().zip(load).zip(shares).zip(0..) {
        let sent: SendSummary =
            output::summary::<SendInterval, _>(SENDER, &sender.finish(Duration::from_secs(5))?)?;
        let (received_pps, missing) = arrived.get(i).copied().unzip();
        hosts.push(HostFigures {
            host: l.host.name(),
            offered_pps: share.rate as f64,
            sent_pps: sent.throughput.mean.pps,
            received_pps,
            missing,
            cpu_ns_per_datagram: (sent.cpu_secs.user + sent.cpu_secs.system) * 1e9
                / sent.throughput.datagrams.max(1) as f64,
            clock: HostClock::of(l.clock),
        });
    }
    Ok(hosts)
}

/// Each load host's received rate and missing datagrams, from the receiver's count of the
/// `groups` asked for (its flow ids): its part of everything received times the row's rate
/// `pps`. The receiver must report exactly the groups asked for, in order (its output is
/// another host's word); none asked for, none returned.
fn arrived_per_host(
    received: &RecvSummary,
    groups: &[FlowGroup],
    pps: f64,
) -> Result<Vec<(f64, u64)>, LabError> {
    arrived_of(&received.flow_groups, received.sequence.received, groups, pps)
}

/// [`arrived_per_host`] from the receiver's groups and the datagrams it counted in all.
fn arrived_of(
    counted: &[FlowGroupReport],
    total: u64,
    groups: &[FlowGroup],
    pps: f64,
) -> Result<Vec<(f64, u64)>, LabError> {
    let reported: Vec<FlowGroup> = counted.iter().map(|g| g.group).collect();
    if reported != groups {
        return Err(LabError::ChildOutput {
            child: RECEIVER.into(),
            problem: format!(
                "reported flow groups {reported:?}, not the {groups:?} asked for (an older corelane on the rx host? redeploy it)"
            ),
        });
    }
    if !groups.is_empty() && total == 0 && pps > 0.0 {
        return Err(LabError::ChildOutput {
            child: RECEIVER.into(),
            problem: format!("counted no datagram's sequence while receiving {pps:.0}/s"),
        });
    }
    Ok(counted
        .iter()
        .map(|g| (pps * g.sequence.received as f64 / total.max(1) as f64, g.sequence.missing))
        .collect())
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
    /// What the trial charges beyond the receiver, per datagram over the same seconds.
    charged: ChargedNs,
}

fn read_steady_seconds(
    rx: &Host,
    receiver: &mut ChildProcess,
    secs: u64,
    duration: Duration,
    charged: &Charged,
    stop: &StopSignal,
) -> Result<Steady, LabError> {
    let mut steady = Steady::default();
    let mut stat_start = None;
    // The charged runtimes and datagrams received at the end of the warm-up second.
    let mut charged_start = (ChargedRuntime::default(), 0u64);
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
            charged_start = (charged.runtime(), interval.interval.datagrams);
        } else if index >= 2 {
            steady.pps.push(interval.interval.rate.pps);
            let drops = interval.kernel_drops.ok_or_else(|| LabError::ChildOutput {
                child: RECEIVER.into(),
                problem: format!("could not read {}'s UDP counters (/proc/net/snmp)", rx.name()),
            })?;
            steady.drops.push(drops as f64);
            steady.cpu_ns.push(interval.cpu_ns_per_datagram);
            steady.lanes.push(interval.interval.lane_pps);
        }
        if index >= secs {
            if let Some(start) = &stat_start {
                steady.cpu = rx.proc_stat()?.split_since(start);
            }
            let got = interval.interval.datagrams.saturating_sub(charged_start.1);
            steady.charged = charged.runtime().per_datagram_since(&charged_start.0, got);
            return Ok(steady);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The receiver's per-group counts are another host's word: taken only for exactly the
    /// groups asked for, in order, and never made up from nothing.
    #[test]
    fn each_hosts_arrivals_come_only_from_the_groups_asked_for() {
        let g = |first, last| FlowGroup { first, last };
        let counted = |group, received, missing| FlowGroupReport {
            group,
            sequence: corelane::udp::SequenceReport { received, missing, ..Default::default() },
        };
        let asked = [g(0, 3), g(4, 7)];
        let both = [counted(g(0, 3), 300, 5), counted(g(4, 7), 100, 0)];
        let got = arrived_of(&both, 400, &asked, 1000.0).unwrap();
        assert_eq!(got, vec![(750.0, 5), (250.0, 0)]);
        let swapped = [both[1], both[0]];
        assert!(arrived_of(&swapped, 400, &asked, 1000.0).is_err(), "reordered groups");
        assert!(arrived_of(&both[..1], 300, &asked, 1000.0).is_err(), "a group missing");
        assert!(arrived_of(&both, 0, &asked, 1000.0).is_err(), "a rate but nothing counted");
        assert_eq!(arrived_of(&[], 0, &[], 1000.0).unwrap(), vec![]);
    }

    #[test]
    fn the_receivers_command_line_pairs_each_option_with_its_value() {
        let cfg = Config {
            uring: true,
            xdp: XdpRole::Drop,
            ..Config::one_lane("default", "default".into(), None, 1, 0, 1000)
        };
        let args = receiver_args(&cfg, 4321, 3, RX_DEV, &[]);
        let expected = "udp recv 0.0.0.0:4321 --json --duration 8 --threads 1 --sockets reuseport --rcvbuf 4M --pin 1 --backend uring --backend xdp-drop --xdp-dev vrx";
        assert_eq!(args.join(" "), expected);
        // Two load hosts: the receiver counts each one's flows apart.
        let groups: Vec<FlowGroup> =
            load::shares(1000, FLOWS, 2).iter().map(Share::flow_group).collect();
        let args = receiver_args(&cfg, 4321, 3, RX_DEV, &groups).join(" ");
        assert!(args.contains(" --flow-groups 0-3,4-7 "), "{args}");
    }
}
