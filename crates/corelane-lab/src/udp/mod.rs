//! `corelane lab udp`: seed 000's Table 1 on a two-namespace testbed, with the peers beside it.
//!
//! Why the load comes from a paced GSO sender: on a small machine the kernel runs the receive
//! path inside the *sender's* softirq, and a plain sender's core saturates first (≈0.3 Mpps
//! here), so a naive lab measures the sender and every receiver configuration looks alike.
//! A GSO sender hands the kernel up to 64 datagrams per send, so offering load costs it little;
//! pacing it keeps it from livelocking the receiver. RPS masks then decide which CPU does the
//! receive work, standing in for RSS queues and IRQ affinity. Every row also reports the
//! receiver's CPU time per datagram and each CPU's user/sys/softirq split, which stay
//! meaningful whichever side is the bottleneck.

mod bypass;
mod configs;
mod figures;
mod peers;
mod rows;
mod table;

use std::path::PathBuf;
use std::time::Duration;

use corelane::lane::StopSignal;
use corelane::stats::CpuSplit;
use corelane::topology::CpuList;
use serde::Serialize;

pub use configs::IDS as CONFIG_IDS;
pub use peers::Peer;

use crate::experiment::{self, Experiment, Measured, Options, Prepare, Progress};
use crate::stage::udp::{self as trial, Config};
use crate::summary::{change_pct, Header, Outcome, Pps, Trials};
use crate::testbed::Testbed;
use crate::LabError;

/// `corelane lab udp` in the list of experiments.
pub const ENTRY: experiment::Entry = experiment::Entry::of::<UdpArgs>(
    "udp",
    "000",
    "UDP receive scaling (Table 1)",
    "UDP receive scaling: default, placement, multiple IPs, shared socket, reuseport, GSO/GRO, AF_XDP; vs a C recvmmsg loop, sockperf, iperf3",
    "the testbed and every process it started were removed",
);

/// `corelane lab udp`'s options.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_arg("vs", |a| a.help("Peers to measure beside corelane: c-loop, sockperf, iperf3, or none (default: every one installed)")))]
#[command(mut_arg("configs", |a| a.help("Only these configurations: default, placement, multi-ip, shared-socket, reuseport, reuseport-cpu, gso-gro, the kernel-bypass rows recvmmsg, af-xdp, af-xdp-bp, xdp-floor, af-xdp-tx (namespace testbed only), af-xdp-max, xdp-drop (on the namespace testbed's veth or the rx host's NIC), or none (peers only)")))]
pub struct UdpArgs {
    #[command(flatten)]
    pub run: experiment::TrialArgs,
    /// Datagrams/s the paced GSO sender offers on the plain rows.
    #[arg(long, default_value_t = 1_500_000)]
    pub offered: u64,
    /// Datagrams/s offered on the GSO+GRO row.
    #[arg(long, default_value_t = 20_000_000)]
    pub offered_gro: u64,
    /// Datagrams/s offered on the recvmmsg, af-xdp and af-xdp-tx rows (CPU per datagram is
    /// compared there, below every receiver's ceiling).
    #[arg(long, default_value_t = 150_000)]
    pub offered_xdp: u64,
    #[command(flatten)]
    pub select: experiment::SelectArgs,
}

impl experiment::Trials for UdpLabOptions {
    fn trials(&self) -> usize {
        self.trials
    }
}

impl Options for UdpArgs {
    type Settings = UdpLabOptions;
    type Lab<'s> = UdpLab<'s>;
    type Report = UdpLabReport;
    /// The settings these arguments describe, with the corelane binary that serves and loads.
    fn settings(self) -> Result<UdpLabOptions, LabError> {
        let exe = crate::corelane_exe()?;
        let mut opts =
            if self.run.quick { UdpLabOptions::quick(exe) } else { UdpLabOptions::full(exe) };
        self.run.apply(&mut opts.trials, &mut opts.duration, Duration::from_secs(3))?;
        // Whole seconds: the receiver reports one interval a second.
        opts.duration = Duration::from_secs(opts.duration.as_secs());
        if self.offered == 0 || self.offered_gro == 0 || self.offered_xdp == 0 {
            return Err(LabError::Options(
                "--offered, --offered-gro and --offered-xdp must be above 0".into(),
            ));
        }
        opts.offered_xdp_pps = self.offered_xdp;
        opts.offered_pps = self.offered;
        opts.offered_gro_pps = self.offered_gro;
        (opts.peers, opts.only, opts.remote) =
            self.select.choose(&Peer::ALL.map(|p| (p.name(), p)), &CONFIG_IDS)?;
        Ok(opts)
    }
}

/// How to run the experiment.
#[derive(Debug, Clone)]
pub struct UdpLabOptions {
    /// The corelane binary that runs as receiver and sender.
    pub exe: PathBuf,
    pub trials: usize,
    /// Sending time per trial (whole seconds, at least 3: the first second is warm-up).
    pub duration: Duration,
    /// Datagrams per second the paced GSO sender offers on the plain rows.
    pub offered_pps: u64,
    /// Offered load on the GSO+GRO row.
    pub offered_gro_pps: u64,
    /// Offered load on the rows that compare AF_XDP with recvmmsg.
    pub offered_xdp_pps: u64,
    pub peers: Vec<Peer>,
    /// Only these configurations (by id); all when `None`.
    pub only: Option<Vec<String>>,
    /// The sides on other machines over SSH; the namespace testbed when `None`.
    pub remote: Option<crate::remote::RemoteSpec>,
}

impl UdpLabOptions {
    pub fn full(exe: PathBuf) -> Self {
        Self {
            exe,
            trials: 3,
            duration: Duration::from_secs(5),
            offered_pps: 1_500_000,
            offered_gro_pps: 20_000_000,
            offered_xdp_pps: 150_000,
            peers: Peer::ALL.to_vec(),
            only: None,
            remote: None,
        }
    }

    /// A short run for CI: one trial of three seconds per row.
    pub fn quick(exe: PathBuf) -> Self {
        Self { trials: 1, duration: Duration::from_secs(3), ..Self::full(exe) }
    }
}

/// One configuration of Table 1, over all trials.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigRow {
    pub config: String,
    pub label: String,
    pub offered_pps: f64,
    /// Per trial and their median.
    #[serde(flatten)]
    pub pps: Trials<Pps>,
    /// Change against the `default` row, in percent (absent when `default` did not run).
    pub gap_pct: Option<f64>,
    /// What was sent and received, and the receiver's CPU (medians over trials).
    #[serde(flatten)]
    pub received: crate::stage::udp::Received,
    /// The CPU charged beyond the receiver: NAPI threads, sender, ksoftirqd (medians over
    /// trials).
    #[serde(flatten)]
    pub charged: crate::stage::ChargedNs,
    /// XDP rows: the mode the receiver reported (`native zero-copy`, `native copy`,
    /// `generic copy`; `native` for XDP_DROP), the trials' distinct modes joined by ` / `.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdp_mode: Option<String>,
    /// AF_XDP rows: frames the AF_XDP sockets lost, summed over the trials (XDP_STATISTICS).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xsk_lost: Option<u64>,
    /// AF_XDP rows: the sockets' kernel counters summed over the trials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xsk: Option<corelane::xdp::rx::XskStats>,
    /// AF_XDP rows whose sockets' counters could not be read in some trial: their losses are
    /// unknown (`xsk_lost` and `xsk` absent), never reported as none.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub xsk_unknown: bool,
    /// Per-CPU split over the measured seconds (mean over trials).
    pub cpu: Vec<CpuSplit>,
    /// Each load host's part when the load came from several (or remote) hosts: what it was
    /// offered and sent, its sender's CPU per datagram and its clock offset (medians over
    /// trials); the row's own figures are the totals at the receiver.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<crate::stage::load::HostFigures>,
    /// A remote rx NIC's own counters per second over the trial (warm-up second included;
    /// medians over trials).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nic: Option<crate::rx_nic::NicRates>,
}

/// A peer receiver measured on the same testbed in the same run.
#[derive(Debug, Clone, Serialize)]
pub struct PeerRow {
    pub receiver: String,
    pub sender: String,
    /// Per trial and their median.
    #[serde(flatten)]
    pub pps: Trials<Pps>,
    pub cpu_ns_per_datagram: f64,
    /// corelane's pps / this row's pps, against corelane receiving from the same sender.
    pub corelane_pps_ratio: Option<f64>,
    /// this row's CPU per datagram / corelane's (above 1: corelane is cheaper).
    pub corelane_cpu_ratio: Option<f64>,
}

/// Everything `corelane lab udp` measured.
#[derive(Debug, Clone, Serialize)]
pub struct UdpLabReport {
    /// Where it ran and how it measured (`duration_secs` in whole seconds: the receiver
    /// reports one interval a second).
    #[serde(flatten)]
    pub header: Header,
    pub sender_cpu: usize,
    pub receiver_cpus: String,
    pub rows: Vec<ConfigRow>,
    pub peers: Vec<PeerRow>,
    /// How the CPU columns are measured, and what none of them sees.
    pub cpu_accounting: String,
    /// Rows or peers that could not run here, with the reason, and what the figures say.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// What one trial measures: a row of Table 1, or a peer receiver and its sender.
#[derive(Debug, Clone)]
pub enum Row {
    Table(Config),
    Peer(peers::Pair),
}

/// What one trial of a [`Row`] measured.
#[derive(Debug, Clone)]
pub enum RowTrial {
    Table(Box<trial::Trial>),
    Peer(peers::Sample),
}

/// The prepared stage: testbed, CPUs, the configurations that can run here, the peers.
#[derive(Debug)]
pub struct UdpLab<'a> {
    opts: &'a UdpLabOptions,
    testbed: Testbed,
    online: CpuList,
    sender_cpu: usize,
    plan: configs::Plan,
    peers: peers::Stage,
    skipped: Vec<String>,
    /// A dry run's XDP rows: what each would run on the rx host.
    xdp_steps: Vec<crate::testbed::PeerStep>,
}

impl<'a> Prepare<'a> for UdpLab<'a> {
    type Settings = UdpLabOptions;

    fn prepare(opts: &'a UdpLabOptions, progress: Progress<'_>) -> Result<Self, LabError> {
        if opts.duration < Duration::from_secs(3) {
            return Err(LabError::Options(
                "--duration must be at least 3s (1s warm-up, 2 measured)".into(),
            ));
        }
        let mut testbed = Testbed::prepare(opts.remote.as_ref(), opts.duration, progress)?;
        let (tx, rx) = (testbed.tx(), testbed.rx());
        let online = rx.online_cpus()?;
        let sender_cpu = tx.online_cpus()?.cpus()[0];
        // On one machine the receiver stays off the sender's CPU where it can.
        let shared = (tx == rx
            || !matches!(testbed.network, crate::testbed::Network::Remote { .. }))
        .then_some(sender_cpu);
        let stage = configs::Stage {
            online: online.clone(),
            sender_cpu,
            shared_cpu: shared,
            no_rps: testbed.rps_unavailable(),
            rx_addrs: testbed.rx_addrs().len(),
            default_as_found: opts.remote.is_some(),
        };
        let mut plan = configs::plan(&stage, opts);
        if let Some(only) = &opts.only {
            plan.configs.retain(|c| only.iter().any(|o| o == c.id));
        }
        let mut skipped = plan.skipped.clone();
        let mut xdp_steps = Vec::new();
        if opts.remote.as_ref().is_some_and(|r| r.dry_run) {
            for config in &plan.configs {
                if let Some(command) = trial::xdp_receiver_step(&testbed, config, opts.duration)? {
                    let (row, host) = (format!("row {}", config.id), testbed.rx().name());
                    xdp_steps.push(crate::testbed::PeerStep { row, host, command });
                }
            }
            let rows: Vec<(String, CpuList)> = plan
                .configs
                .iter()
                .filter_map(|c| Some((format!("row {}", c.id), c.rps.clone()?)))
                .collect();
            testbed.preview(&rows)?;
            plan.configs.clear();
        }
        let receiver_cpu = plan.receiver_cpu;
        let peers = peers::Stage::prepare(opts, &testbed, sender_cpu, receiver_cpu, &mut skipped)?;
        Ok(Self { opts, testbed, online, sender_cpu, plan, peers, skipped, xdp_steps })
    }
}

impl Experiment for UdpLab<'_> {
    type Config = Row;
    type Trial = RowTrial;
    type Report = UdpLabReport;

    fn configurations(&mut self) -> Result<Vec<Row>, LabError> {
        let table = self.plan.configs.iter().cloned().map(Row::Table);
        Ok(table.chain(self.peers.pairs().into_iter().map(Row::Peer)).collect())
    }

    fn label(&self, row: &Row) -> String {
        match row {
            Row::Table(config) => config.id.to_string(),
            Row::Peer(pair) => format!("[peers] {}", pair.label()),
        }
    }

    fn trial(&mut self, row: &Row, _: usize, stop: &StopSignal) -> Result<RowTrial, LabError> {
        match row {
            Row::Table(config) => trial::run(&self.testbed, config, self.opts.duration, stop)
                .map(|t| RowTrial::Table(Box::new(t))),
            Row::Peer(pair) => self.peers.measure(&self.testbed, *pair, stop).map(RowTrial::Peer),
        }
    }

    fn describe(&self, trial: &RowTrial) -> String {
        let (pps, cpu_ns) = match trial {
            RowTrial::Table(t) => (t.pps, t.received.cpu_ns_per_datagram),
            RowTrial::Peer(p) => (p.pps, p.cpu_ns_per_datagram),
        };
        format!("{:.3} Mpps received, {cpu_ns:.0} ns CPU/datagram", pps / 1e6)
    }

    fn report(self, measured: Vec<Measured<Row, RowTrial>>) -> Result<UdpLabReport, LabError> {
        let (mut rows, mut pairs) = (Vec::new(), Vec::new());
        for Measured { config, trials } in measured {
            match config {
                Row::Table(c) => {
                    let t: Vec<trial::Trial> = trials
                        .into_iter()
                        .filter_map(|t| if let RowTrial::Table(t) = t { Some(*t) } else { None })
                        .collect();
                    rows.push(rows::summarize(&c, &t));
                }
                Row::Peer(pair) => {
                    let s = trials
                        .into_iter()
                        .filter_map(|t| if let RowTrial::Peer(s) = t { Some(s) } else { None })
                        .collect();
                    pairs.push((pair, s));
                }
            }
        }
        if let Some(default) = rows.iter().find(|r| r.config == "default").map(|r| r.pps.median) {
            for row in &mut rows {
                row.gap_pct = change_pct(row.pps.median, default);
            }
        }
        let peer_rows = peers::rows(&pairs);
        let findings = findings(&rows, &peer_rows, &self.online);
        let mut testbed = self.testbed.report(None);
        if testbed.is_dry_run() {
            testbed.peer_steps = self.peers.steps(&self.testbed)?;
            testbed.xdp_steps = self.xdp_steps;
        }
        Ok(UdpLabReport {
            header: Header::of(testbed, self.opts.trials, self.opts.duration),
            sender_cpu: self.sender_cpu,
            receiver_cpus: self.plan.receiver_cpus.to_string(),
            rows,
            peers: peer_rows,
            cpu_accounting: CPU_ACCOUNTING.into(),
            outcome: Outcome { skipped: self.skipped, findings },
        })
    }
}

/// What the CPU columns measure, and what none of them can see.
pub(crate) const CPU_ACCOUNTING: &str = "rx ns/dgram is exact: the scheduler's runtime of the receiver's threads (schedstat), which includes the receive softirq the kernel ran on a receiver CPU while a receiver thread was current. Softirq that ran on an otherwise idle CPU, or inside the sender's system calls, is in no receiver's runtime: it shows only in the per-CPU usr/sys/si % columns, which are tick-sampled from /proc/stat (HZ ticks, no IRQ-time accounting on this kernel), so a short burst can be missed or over-counted.";

fn row<'a>(rows: &'a [ConfigRow], id: &str) -> Option<&'a ConfigRow> {
    rows.iter().find(|r| r.config == id)
}

/// Sentences derived from the measured figures: which step paid, and why where it did not.
fn findings(rows: &[ConfigRow], peers: &[PeerRow], online: &CpuList) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(best) = rows
        .iter()
        .filter(|r| !matches!(r.config.as_str(), "gso-gro" | "xdp-drop" | "xdp-floor"))
        .max_by(|a, b| a.pps.median.total_cmp(&b.pps.median))
    {
        let gap = best.gap_pct.map_or(String::new(), |g| format!(" ({g:+.1}% vs default)"));
        out.push(format!(
            "Best plain configuration: {} at {:.3} Mpps{gap}.",
            best.config,
            best.pps.median / 1e6
        ));
    }
    for r in rows {
        if r.received.sent_pps < 0.9 * r.offered_pps {
            out.push(format!(
                "{}: the sender offered only {:.3} of {:.3} Mpps: its CPU also ran receive work (see the CPU split), so this row is partly sender-bound.",
                r.config,
                r.received.sent_pps / 1e6,
                r.offered_pps / 1e6
            ));
        }
    }
    if let (Some(place), Some(default)) = (row(rows, "placement"), row(rows, "default")) {
        if place.pps.median < default.pps.median {
            out.push(format!(
                "placement lost {:.0}% against default: the lane shares CPU {} with the receive softirq, and at {:.2} Mpps offered the softirq takes the CPU first ({:.0} drops/s, receive livelock); the default row pipelines softirq and lane on two CPUs instead. The UDP study's same-CPU gain (Table 1) needs a CPU whose softirq is not saturated.",
                -place.gap_pct.unwrap_or(0.0),
                place.cpu.iter().max_by(|a, b| a.softirq_pct.total_cmp(&b.softirq_pct)).map_or(0, |c| c.cpu),
                place.offered_pps / 1e6,
                place.received.drops_per_sec
            ));
        } else {
            out.push(format!(
                "placement gained {:+.1}% over default: the receive work and the lane share a warm cache.",
                place.gap_pct.unwrap_or(0.0)
            ));
        }
    }
    if let (Some(shared), Some(reuse)) = (row(rows, "shared-socket"), row(rows, "reuseport")) {
        let ratio = reuse.pps.median / shared.pps.median.max(1.0);
        if ratio >= 1.0 {
            out.push(format!(
                "reuseport beats the shared socket by {:.0}% at {:.0} vs {:.0} ns CPU per datagram: lanes no longer contend on one socket's lock and queue.",
                (ratio - 1.0) * 100.0, reuse.received.cpu_ns_per_datagram, shared.received.cpu_ns_per_datagram
            ));
        } else {
            let saved = 1.0
                - reuse.received.cpu_ns_per_datagram / shared.received.cpu_ns_per_datagram.max(1.0);
            let cpu = if saved > 0.0 {
                format!("but spent {:.0}% less CPU per datagram", saved * 100.0)
            } else {
                "and no less CPU per datagram".to_string()
            };
            out.push(format!(
                "reuseport did not beat the shared socket on rate here ({:.3} vs {:.3} Mpps) {cpu} ({:.0} vs {:.0} ns): with {} CPUs one lane shares the sender's CPU, so the rate measures CPU contention; the socket lock reuseport removes shows as CPU per datagram.",
                reuse.pps.median / 1e6,
                shared.pps.median / 1e6,
                reuse.received.cpu_ns_per_datagram,
                shared.received.cpu_ns_per_datagram,
                online.len()
            ));
        }
    }
    if let Some(shared) = row(rows, "shared-socket").filter(|r| r.received.reordered_pct > 0.0) {
        out.push(format!(
            "shared-socket reordered {:.3}% of datagrams within their flows (lanes race for one queue); a reuseport socket keeps a flow on one lane, so its rows reorder {:.3}%.",
            shared.received.reordered_pct,
            row(rows, "reuseport").map_or(0.0, |r| r.received.reordered_pct)
        ));
    }
    out.extend(beyond_the_seed(rows, peers, online));
    out.extend(bypass::findings(rows));
    out
}

/// Findings on the rows beyond the seed (CPU steering, GRO), the per-core prediction and
/// the peers.
fn beyond_the_seed(rows: &[ConfigRow], peers: &[PeerRow], online: &CpuList) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some(hash), Some(cpu)) = (row(rows, "reuseport"), row(rows, "reuseport-cpu")) {
        out.push(format!(
            "CPU steering vs flow hash: {:.3} vs {:.3} Mpps, {:.0} vs {:.0} ns CPU per datagram; lanes received {} (CPU-steered) vs {} (hashed).",
            cpu.pps.median / 1e6,
            hash.pps.median / 1e6,
            cpu.received.cpu_ns_per_datagram,
            hash.received.cpu_ns_per_datagram,
            lanes_text(&cpu.received.lane_pps),
            lanes_text(&hash.received.lane_pps)
        ));
    }
    if let Some(reuse) = row(rows, "reuseport") {
        if reuse.received.cpu_ns_per_datagram > 0.0 {
            let per_core = 1e9 / reuse.received.cpu_ns_per_datagram;
            out.push(format!(
                "Per-core prediction: a reuseport lane spends {:.0} ns of CPU per datagram (receive softirq on its CPU included), so one dedicated core sustains ≈{:.2} Mpps and N cores with RSS ≈N×{:.2} Mpps; this machine has {} CPUs, one of them the sender's, so the multi-core gain cannot show here.",
                reuse.received.cpu_ns_per_datagram, per_core / 1e6, per_core / 1e6, online.len()
            ));
        }
    }
    if let (Some(gro), Some(default)) = (row(rows, "gso-gro"), row(rows, "default")) {
        out.push(format!(
            "GSO+GRO moves {:.1}x the datagrams of the default path ({:.3} vs {:.3} Mpps) at {:.0} vs {:.0} ns CPU per datagram: one buffer carries up to 64 datagrams through the stack.",
            gro.pps.median / default.pps.median.max(1.0),
            gro.pps.median / 1e6,
            default.pps.median / 1e6,
            gro.received.cpu_ns_per_datagram,
            default.received.cpu_ns_per_datagram
        ));
    }
    for p in peers {
        if let (Some(pps), Some(cpu)) = (p.corelane_pps_ratio, p.corelane_cpu_ratio) {
            out.push(format!(
                "vs {} (sender: {}): corelane receives {:.2}x its datagrams/s and it spends {:.2}x corelane's CPU per datagram.",
                p.receiver, p.sender, pps, cpu
            ));
        }
    }
    out
}

fn lanes_text(pps: &[f64]) -> String {
    pps.iter().map(|p| format!("{:.3}M", p / 1e6)).collect::<Vec<_>>().join(" + ")
}
