//! `corelane lab affinity`: seed 003's process-core comparisons on this machine. The receive
//! softirq (the stand-in for the NIC's interrupt: RPS steers it) runs on one CPU, and the
//! application — a UDP receiver, then an HTTP server — is placed on that CPU (the seed's NS),
//! on another CPU (NC) or left unpinned (NZ); the HTTP server also runs on io_uring with and
//! without a syscall lane (an SQPOLL thread on the softirq CPU, the seed's syscall thread).
//! Cases that need two processor packages (interrupts near or far from the NIC, a syscall
//! thread on the NIC's package) are reported as not measurable here, and a deterministic
//! cost model shows their expected shape, labelled as a model.

mod figures;
pub mod model;
mod table;

use std::path::PathBuf;
use std::time::Duration;

use corelane::lane::StopSignal;
use corelane::topology::{CpuList, Topology};
use serde::Serialize;

use crate::experiment::{self, Experiment, Measured, Options, Prepare, Progress};
use crate::stage::servers::{self, ServerKind, ServerPin, Stage};
use crate::stage::{self, udp::Config as UdpConfig};
use crate::summary::{Header, Rate, Trials};
use crate::testbed::Testbed;
use crate::workdir::WorkDir;
use crate::{median_of, LabError};

/// `corelane lab affinity` in the list of experiments.
pub const ENTRY: experiment::Entry = experiment::Entry::of::<AffinityArgs>(
    "affinity",
    "003",
    "core partitioning",
    "core partitioning: application on the softirq CPU (NS), off it (NC), unpinned (NZ), io_uring with and without a syscall lane; a cost model for two packages",
    "the testbed and every process it started were removed",
);

/// `corelane lab affinity`'s options.
#[derive(Debug, Clone, clap::Args)]
pub struct AffinityArgs {
    #[command(flatten)]
    pub run: experiment::TrialArgs,
    /// Datagrams/s the paced GSO sender offers the UDP receiver.
    #[arg(long, default_value_t = 1_000_000)]
    pub offered: u64,
    #[command(flatten)]
    pub remote: crate::remote::RemoteArgs,
}

impl experiment::Trials for AffinityLabOptions {
    fn trials(&self) -> usize {
        self.trials
    }
}

impl Options for AffinityArgs {
    type Settings = AffinityLabOptions;
    type Lab<'s> = AffinityLab<'s>;
    type Report = AffinityLabReport;
    fn settings(self) -> Result<AffinityLabOptions, LabError> {
        let exe = crate::corelane_exe()?;
        let mut opts = if self.run.quick {
            AffinityLabOptions::quick(exe)
        } else {
            AffinityLabOptions::full(exe)
        };
        self.run.apply(&mut opts.trials, &mut opts.duration, Duration::from_secs(3))?;
        opts.duration = Duration::from_secs(opts.duration.as_secs());
        if self.offered == 0 {
            return Err(LabError::Options("--offered must be above 0".into()));
        }
        opts.offered_pps = self.offered;
        opts.remote = self.remote.spec()?;
        Ok(opts)
    }
}

#[derive(Debug, Clone)]
pub struct AffinityLabOptions {
    pub exe: PathBuf,
    pub trials: usize,
    /// Per measurement; at least 3 s (the UDP trial's first second is warm-up).
    pub duration: Duration,
    /// Datagrams/s the paced GSO sender offers the UDP receiver.
    pub offered_pps: u64,
    pub connections: usize,
    /// The sides on other machines over SSH; the namespace testbed when `None`.
    pub remote: Option<crate::remote::RemoteSpec>,
}

impl AffinityLabOptions {
    pub fn full(exe: PathBuf) -> Self {
        Self {
            exe,
            trials: 3,
            duration: Duration::from_secs(5),
            offered_pps: 1_000_000,
            connections: 50,
            remote: None,
        }
    }

    pub fn quick(exe: PathBuf) -> Self {
        Self { trials: 1, duration: Duration::from_secs(3), ..Self::full(exe) }
    }
}

/// One placement of one workload over all trials.
#[derive(Debug, Clone, Serialize)]
pub struct AffinityRow {
    /// `udp` or `tcp`.
    pub workload: String,
    /// `NS`, `NC`, `NZ`, `NC+uring`, `NC+syscall-lane`.
    pub kind: String,
    pub label: String,
    /// Datagrams/s (udp) or requests/s (tcp), per trial and median.
    #[serde(flatten)]
    pub rate: Trials<Rate>,
    /// Change against the NC row of the same workload, in %.
    pub gap_pct: Option<f64>,
    /// Receiver CPU per datagram in ns (udp), server CPU per request in ns (tcp).
    pub cpu_ns_per_unit: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct AffinityLabReport {
    /// Where it ran and how it measured.
    #[serde(flatten)]
    pub header: Header,
    /// The CPU doing the receive softirq (the interrupt core).
    pub irq_cpu: usize,
    /// The other CPU of the application's host (NC's; also the load generator's when both
    /// run on one machine).
    pub other_cpu: usize,
    /// The load generator's CPU, on its own host.
    pub load_cpu: usize,
    pub packages: usize,
    pub numa_nodes: usize,
    pub rows: Vec<AffinityRow>,
    /// Seed cases this machine cannot show, with why.
    pub not_measurable: Vec<String>,
    /// The two-package cases, from the cost model (not measured).
    pub model: Vec<model::ModelRow>,
    pub model_assumptions: model::Assumptions,
    pub findings: Vec<String>,
}

/// One placement of one workload.
#[derive(Debug, Clone)]
pub enum Placed {
    Udp(UdpConfig),
    /// The kind (`NS`, `NC`, …), its label, and the server placed so.
    Tcp(&'static str, String, ServerKind),
}

/// The prepared stage: testbed with receive work steered to the softirq CPU.
#[derive(Debug)]
pub struct AffinityLab<'a> {
    opts: &'a AffinityLabOptions,
    testbed: Testbed,
    /// Processor packages and NUMA nodes of the application's host.
    packages: usize,
    numa_nodes: usize,
    irq_cpu: usize,
    other_cpu: usize,
    /// The load generator's CPU (on the tx host).
    load_cpu: usize,
    port: u16,
    scratch: WorkDir,
}

impl<'a> Prepare<'a> for AffinityLab<'a> {
    type Settings = AffinityLabOptions;

    fn prepare(opts: &'a AffinityLabOptions, progress: Progress<'_>) -> Result<Self, LabError> {
        if opts.duration < Duration::from_secs(3) {
            return Err(LabError::Options("--duration must be at least 3s".into()));
        }
        let mut testbed = Testbed::prepare(opts.remote.as_ref(), opts.duration, progress)?;
        let (packages, numa_nodes) = packages_and_nodes(&testbed)?;
        let online = testbed.rx().online_cpus()?;
        let other_cpu = online.cpus()[0];
        let irq_cpu = *online.cpus().last().unwrap_or(&other_cpu);
        let load_cpu = testbed.tx().online_cpus()?.cpus()[0];
        if opts.remote.as_ref().is_some_and(|r| r.dry_run) {
            testbed.preview(&[("every row".into(), CpuList::new(vec![irq_cpu]))])?;
        }
        let port = stage::tcp_port(&testbed)?;
        if !testbed.is_dry_run() {
            testbed.steer_receive_where_possible(&CpuList::new(vec![irq_cpu]))?;
        }
        let scratch = WorkDir::create("affinity")?;
        Ok(Self {
            opts,
            testbed,
            packages,
            numa_nodes,
            irq_cpu,
            other_cpu,
            load_cpu,
            port,
            scratch,
        })
    }
}

impl<'a> AffinityLab<'a> {
    /// The UDP receiver on the softirq CPU, on the other CPU, unpinned; then io_uring
    /// without and with a syscall lane.
    fn udp_placements(&self) -> Vec<UdpConfig> {
        let (irq_cpu, other_cpu, load_cpu) = (self.irq_cpu, self.other_cpu, self.load_cpu);
        let rps = self.testbed.rps_unavailable().is_none().then(|| CpuList::new(vec![irq_cpu]));
        let offered = self.opts.offered_pps;
        let udp_config = |id: &'static str, label: String, lane: usize, pinned: bool| UdpConfig {
            pinned,
            ..UdpConfig::one_lane(id, label, rps.clone(), lane, load_cpu, offered)
        };
        let nc_label = format!("NC: receiver on CPU {other_cpu}, off the softirq CPU");
        let lane_label =
            format!("NC on io_uring with an SQPOLL syscall thread on the softirq CPU {irq_cpu}");
        vec![
            udp_config("NS", format!("NS: receiver on the softirq CPU {irq_cpu}"), irq_cpu, true),
            udp_config("NC", nc_label, other_cpu, true),
            udp_config(
                "NZ",
                "NZ: receiver unpinned (the scheduler places it)".into(),
                irq_cpu,
                false,
            ),
            UdpConfig {
                uring: true,
                ..udp_config(
                    "NC+uring",
                    "NC on io_uring, the lane submits itself".into(),
                    other_cpu,
                    true,
                )
            },
            UdpConfig {
                uring: true,
                sqpoll: Some(irq_cpu),
                ..udp_config("NC+syscall-lane", lane_label, other_cpu, true)
            },
        ]
    }

    /// The HTTP server placed the same five ways.
    fn tcp_placements(&self) -> Vec<Placed> {
        let (irq_cpu, other_cpu) = (self.irq_cpu, self.other_cpu);
        let placed = |cpu: Option<usize>, backend: &'static str, sqpoll: Option<usize>| {
            ServerKind::Placed(ServerPin { cpu, backend, sqpoll })
        };
        vec![
            Placed::Tcp(
                "NS",
                format!("NS: server on the softirq CPU {irq_cpu}"),
                placed(Some(irq_cpu), "epoll", None),
            ),
            Placed::Tcp(
                "NC",
                format!("NC: server on CPU {other_cpu} (beside the client)"),
                placed(Some(other_cpu), "epoll", None),
            ),
            Placed::Tcp("NZ", "NZ: server unpinned".into(), placed(None, "epoll", None)),
            Placed::Tcp(
                "NC+uring",
                "NC on io_uring, the lane submits itself".into(),
                placed(Some(other_cpu), "uring", None),
            ),
            Placed::Tcp(
                "NC+syscall-lane",
                format!(
                    "NC on io_uring with an SQPOLL syscall thread on the softirq CPU {irq_cpu}"
                ),
                placed(Some(other_cpu), "uring", Some(irq_cpu)),
            ),
        ]
    }

    fn stage(&self) -> Stage<'_> {
        Stage {
            testbed: &self.testbed,
            server_cpu: self.irq_cpu,
            client_cpu: self.load_cpu,
            port: self.port,
            connections: self.opts.connections,
            duration: self.opts.duration,
            scratch: self.scratch.path(),
        }
    }

    /// Seed cases this machine cannot show, with why.
    fn not_measurable(&self, packages: usize, numa_nodes: usize) -> Vec<String> {
        let mut out = Vec::new();
        if packages < 2 {
            for case in [
                "interrupts on the NIC's package vs the other package",
                "a syscall thread on the NIC's package serving an application on the other package",
                "cross-package cache-coherence traffic (the study's 70 % figure needs PMU uncore counters and two packages)",
            ] {
                out.push(format!("{case}: not measurable here ({packages} package, {numa_nodes} NUMA node)"));
            }
        }
        if let Some(why) = self.testbed.rps_unavailable() {
            out.push(format!("the softirq CPU: cannot steer receive work here ({why})"));
        }
        out
    }
}

impl Experiment for AffinityLab<'_> {
    type Config = Placed;
    /// Units/s and CPU ns per unit.
    type Trial = (f64, f64);
    type Report = AffinityLabReport;

    fn configurations(&mut self) -> Result<Vec<Placed>, LabError> {
        if self.testbed.is_dry_run() {
            return Ok(Vec::new());
        }
        let mut all: Vec<Placed> = self.udp_placements().into_iter().map(Placed::Udp).collect();
        all.extend(self.tcp_placements());
        Ok(all)
    }

    fn label(&self, placed: &Placed) -> String {
        match placed {
            Placed::Udp(c) => format!("udp {}", c.id),
            Placed::Tcp(kind, ..) => format!("tcp {kind}"),
        }
    }

    fn trial(
        &mut self,
        placed: &Placed,
        _: usize,
        stop: &StopSignal,
    ) -> Result<(f64, f64), LabError> {
        match placed {
            Placed::Udp(config) => {
                let t = stage::udp::run(&self.testbed, config, self.opts.duration, stop)?;
                Ok((t.pps, t.received.cpu_ns_per_datagram))
            }
            Placed::Tcp(_, _, kind) => {
                // The UDP rows set RPS per trial; the server's rows need it on the softirq CPU.
                self.testbed.steer_receive_where_possible(&CpuList::new(vec![self.irq_cpu]))?;
                let m = servers::measure(&self.stage(), *kind, false)?;
                Ok((m.rps, m.cpu_us_per_request * 1000.0))
            }
        }
    }

    fn describe(&self, (rate, cpu_ns): &(f64, f64)) -> String {
        format!("{rate:.0}/s, {cpu_ns:.0} ns CPU per unit")
    }

    fn report(
        self,
        measured: Vec<Measured<Placed, (f64, f64)>>,
    ) -> Result<AffinityLabReport, LabError> {
        let _ = self.testbed.steer_receive_where_possible(&CpuList::new(Vec::new()));
        let mut rows: Vec<AffinityRow> = measured
            .iter()
            .map(|m| {
                let (workload, kind, label) = match &m.config {
                    Placed::Udp(c) => ("udp", c.id, c.label.as_str()),
                    Placed::Tcp(kind, label, _) => ("tcp", *kind, label.as_str()),
                };
                AffinityRow {
                    workload: workload.into(),
                    kind: kind.into(),
                    label: label.into(),
                    rate: Trials::of(m.trials.iter().map(|t| t.0)),
                    gap_pct: None,
                    cpu_ns_per_unit: median_of(m.trials.iter().map(|t| t.1)),
                }
            })
            .collect();
        gaps_against_nc(&mut rows);
        let (packages, numa_nodes) = (self.packages, self.numa_nodes);
        // The model starts from what a request cost here with everything on one package.
        let base_ns = rows
            .iter()
            .find(|r| r.workload == "tcp" && r.kind == "NC")
            .map_or(7000.0, |r| r.cpu_ns_per_unit);
        let model_assumptions = model::Assumptions::typical(base_ns);
        let model = model::two_packages(&model_assumptions);
        let shared = self.testbed.tx() == self.testbed.rx()
            || !matches!(self.testbed.network, crate::testbed::Network::Remote { .. });
        let findings = findings(&rows, &model, self.irq_cpu, self.other_cpu, shared);
        let steering = format!("RPS steering receive work to CPU {}", self.irq_cpu);
        Ok(AffinityLabReport {
            header: Header::of(
                self.testbed.report(Some(steering)),
                self.opts.trials,
                self.opts.duration,
            ),
            irq_cpu: self.irq_cpu,
            other_cpu: self.other_cpu,
            load_cpu: self.load_cpu,
            packages,
            numa_nodes,
            not_measurable: self.not_measurable(packages, numa_nodes),
            rows,
            model,
            model_assumptions,
            findings,
        })
    }
}

/// Processor packages and NUMA nodes of the application's (rx) host: this machine's, or
/// the remote rx host's as its `corelane topo --json` showed them.
fn packages_and_nodes(testbed: &Testbed) -> Result<(usize, usize), LabError> {
    let report = testbed.report(None);
    if let Some(rx) = report.hosts.iter().find(|h| h.role == "rx") {
        let nodes = rx.machine.numa_nodes.len();
        return Ok((rx.machine.packages().max(1), nodes.max(1)));
    }
    let topo = Topology::read().map_err(|e| LabError::Topology(e.to_string()))?;
    let mut packages: Vec<usize> = topo.cpus.iter().map(|c| c.package).collect();
    packages.sort_unstable();
    packages.dedup();
    Ok((packages.len().max(1), topo.nodes.len().max(1)))
}

/// Each row's change against the NC row of its workload.
fn gaps_against_nc(rows: &mut [AffinityRow]) {
    for workload in ["udp", "tcp"] {
        let nc =
            rows.iter().find(|r| r.workload == workload && r.kind == "NC").map(|r| r.rate.median);
        if let Some(nc) = nc.filter(|v| *v > 0.0) {
            for r in rows.iter_mut().filter(|r| r.workload == workload) {
                r.gap_pct = Some((r.rate.median / nc - 1.0) * 100.0);
            }
        }
    }
}

fn findings(
    rows: &[AffinityRow],
    model: &[model::ModelRow],
    irq_cpu: usize,
    other_cpu: usize,
    load_generator_beside: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    let get = |w: &str, k: &str| rows.iter().find(|r| r.workload == w && r.kind == k);
    for (workload, unit) in [("udp", "datagrams/s"), ("tcp", "requests/s")] {
        let best = rows
            .iter()
            .filter(|r| r.workload == workload && ["NS", "NC", "NZ"].contains(&r.kind.as_str()))
            .max_by(|a, b| a.rate.median.total_cmp(&b.rate.median));
        if let Some(best) = best {
            out.push(format!(
                "{workload}: best process-core placement here is {} ({:.0} {unit}); the study found NC best, NS worst (context switches between the interrupt work and the application on one core), NZ between.",
                best.kind, best.rate.median
            ));
        }
        if let (Some(ns), Some(_)) = (get(workload, "NS"), get(workload, "NC")) {
            let why = if load_generator_beside {
                format!("NC shares CPU {other_cpu} with the load generator, so NC trades the softirq's CPU {irq_cpu} for the client's; the study's NC had cores to spare")
            } else {
                format!("the load generator runs on another host, so NC's CPU {other_cpu} is the application's alone, as in the study")
            };
            out.push(format!(
                "{workload}: NS {:+.1}% against NC: {why}.",
                ns.gap_pct.unwrap_or(0.0)
            ));
        }
    }
    for (workload, unit) in [("udp", "datagrams/s"), ("tcp", "requests/s")] {
        let (Some(plain), Some(lane)) =
            (get(workload, "NC+uring"), get(workload, "NC+syscall-lane"))
        else {
            continue;
        };
        let why = if lane.rate.median > plain.rate.median {
            "the SQPOLL thread took the lane's submissions off the application CPU, which here it shares with the load generator, and paid for it in polling time on the softirq CPU"
        } else {
            "the thread polls for a second after each submission, so on 2 CPUs it takes cycles from the softirq work it sits beside, where the study had a spare core sharing the LLC"
        };
        out.push(format!(
            "{workload} syscall lane: {:.0} vs {:.0} {unit} ({:+.1}%) and {:.0} vs {:.0} ns CPU per unit with the SQPOLL thread on the softirq CPU: {why}.",
            lane.rate.median,
            plain.rate.median,
            (lane.rate.median / plain.rate.median.max(1.0) - 1.0) * 100.0,
            lane.cpu_ns_per_unit,
            plain.cpu_ns_per_unit
        ));
    }
    if let (Some(far), Some(lane)) = (
        model.iter().find(|m| m.case == "app-far"),
        model.iter().find(|m| m.case == "app-far+syscall-lane"),
    ) {
        out.push(format!(
            "model (two packages, not measured): an application on the far package runs at {:.2}x the partition's rate, {:.2}x with a syscall thread beside the interrupt core: the thread keeps the socket's cache lines on the NIC's package and sends only small messages across.",
            far.relative_throughput, lane.relative_throughput
        ));
    }
    out
}
