//! `corelane lab affinity`: seed 003's process-core comparisons on this machine. The receive
//! softirq (the stand-in for the NIC's interrupt: RPS steers it) runs on one CPU, and the
//! application — a UDP receiver, then an HTTP server — is placed on that CPU (the seed's NS),
//! on another CPU (NC) or left unpinned (NZ); the HTTP server also runs on io_uring with and
//! without a syscall lane (an SQPOLL thread on the softirq CPU, the seed's syscall thread).
//! Cases that need two processor packages (interrupts near or far from the NIC, a syscall
//! thread on the NIC's package) are reported as not measurable here, and a deterministic
//! cost model shows their expected shape, labelled as a model.

pub mod model;

use std::path::PathBuf;
use std::time::Duration;

use corelane::lane::StopSignal;
use corelane::stats::median;
use corelane::topology::{CpuList, Topology};
use serde::Serialize;

use crate::tcp::servers::{self, Placement, ServerKind, Stage};
use crate::testbed::{Network, Testbed};
use crate::udp::configs::{Config as UdpConfig, GSO_SEGMENTS};
use crate::udp::UdpLabOptions;
use crate::LabError;

#[derive(Debug, Clone)]
pub struct AffinityLabOptions {
    pub exe: PathBuf,
    pub trials: usize,
    /// Per measurement; at least 3 s (the UDP trial's first second is warm-up).
    pub duration: Duration,
    /// Datagrams/s the paced GSO sender offers the UDP receiver.
    pub offered_pps: u64,
    pub connections: usize,
}

impl AffinityLabOptions {
    pub fn full(exe: PathBuf) -> Self {
        Self {
            exe,
            trials: 3,
            duration: Duration::from_secs(5),
            offered_pps: 1_000_000,
            connections: 50,
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
    pub trials: Vec<f64>,
    pub median: f64,
    /// Change against the NC row of the same workload, in %.
    pub gap_pct: Option<f64>,
    /// Receiver CPU per datagram in ns (udp), server CPU per request in ns (tcp).
    pub cpu_ns_per_unit: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct AffinityLabReport {
    pub network: String,
    pub fallback_reason: Option<String>,
    pub machine: String,
    /// The CPU doing the receive softirq (the interrupt core).
    pub irq_cpu: usize,
    /// The other CPU (the load generator's, and NC's).
    pub other_cpu: usize,
    pub packages: usize,
    pub numa_nodes: usize,
    pub trials: usize,
    pub duration_secs: f64,
    pub rows: Vec<AffinityRow>,
    /// Seed cases this machine cannot show, with why.
    pub not_measurable: Vec<String>,
    /// The two-package cases, from the cost model (not measured).
    pub model: Vec<model::ModelRow>,
    pub model_assumptions: model::Assumptions,
    pub findings: Vec<String>,
}

/// Runs the experiment.
pub fn run(
    opts: &AffinityLabOptions,
    stop: &StopSignal,
    progress: &mut dyn FnMut(&str),
) -> Result<AffinityLabReport, LabError> {
    if opts.duration < Duration::from_secs(3) {
        return Err(LabError::Testbed("--duration must be at least 3s".into()));
    }
    let topo = Topology::read().map_err(|e| LabError::Testbed(e.to_string()))?;
    let online = topo.online();
    let other_cpu = online.cpus()[0];
    let irq_cpu = *online.cpus().last().unwrap_or(&other_cpu);
    let testbed = Testbed::create();
    let (network, fallback_reason, port) = match &testbed.network {
        Network::Namespaces { tx, rx } => (
            format!("network namespaces {tx} → {rx} over veth, RPS steering receive work to CPU {irq_cpu}"),
            None,
            crate::tcp::NAMESPACE_PORT,
        ),
        Network::Loopback { reason } => {
            progress(&format!("falling back to loopback: {reason}"));
            ("loopback (127.0.0.1)".to_string(), Some(reason.clone()), crate::tcp::free_port()?)
        }
    };
    if testbed.is_namespaced() {
        testbed.steer_receive(&CpuList::new(vec![irq_cpu]))?;
    }
    let scratch = crate::workdir::WorkDir::create("affinity")?;

    // UDP placements: the receiver on the softirq CPU, on the other CPU, unpinned.
    let udp_opts = UdpLabOptions {
        trials: opts.trials,
        duration: opts.duration,
        offered_pps: opts.offered_pps,
        ..UdpLabOptions::full(opts.exe.clone())
    };
    let udp_config = |id: &'static str, label: String, lane: usize, pinned: bool| UdpConfig {
        id,
        label,
        rps: testbed.is_namespaced().then(|| CpuList::new(vec![irq_cpu])),
        lanes: CpuList::new(vec![lane]),
        pinned,
        uring: false,
        sqpoll: None,
        shared_socket: false,
        steer_cpu: false,
        gro: false,
        targets: 1,
        sender_threads: 1,
        sender_cpu: other_cpu,
        gso_segments: GSO_SEGMENTS,
        offered_pps: opts.offered_pps,
    };
    let udp_rows = [
        udp_config("NS", format!("NS: receiver on the softirq CPU {irq_cpu}"), irq_cpu, true),
        udp_config(
            "NC",
            format!("NC: receiver on CPU {other_cpu}, off the softirq CPU"),
            other_cpu,
            true,
        ),
        udp_config("NZ", "NZ: receiver unpinned (the scheduler places it)".into(), irq_cpu, false),
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
            ..udp_config(
                "NC+syscall-lane",
                format!(
                    "NC on io_uring with an SQPOLL syscall thread on the softirq CPU {irq_cpu}"
                ),
                other_cpu,
                true,
            )
        },
    ];
    // HTTP placements, then the syscall lane.
    let placed = |cpu: Option<usize>, backend: &'static str, sqpoll: Option<usize>| {
        ServerKind::Placed(Placement { cpu, backend, sqpoll })
    };
    let tcp_rows: [(&str, String, ServerKind); 5] = [
        (
            "NS",
            format!("NS: server on the softirq CPU {irq_cpu}"),
            placed(Some(irq_cpu), "epoll", None),
        ),
        (
            "NC",
            format!("NC: server on CPU {other_cpu} (beside the client)"),
            placed(Some(other_cpu), "epoll", None),
        ),
        ("NZ", "NZ: server unpinned".into(), placed(None, "epoll", None)),
        (
            "NC+uring",
            "NC on io_uring, the lane submits itself".to_string(),
            placed(Some(other_cpu), "uring", None),
        ),
        (
            "NC+syscall-lane",
            format!("NC on io_uring with an SQPOLL syscall thread on the softirq CPU {irq_cpu}"),
            placed(Some(other_cpu), "uring", Some(irq_cpu)),
        ),
    ];
    let stage = Stage {
        testbed: &testbed,
        exe: &opts.exe,
        server_cpu: irq_cpu,
        client_cpu: other_cpu,
        port,
        connections: opts.connections,
        duration: opts.duration,
        scratch: scratch.path(),
    };

    let mut udp_results: Vec<Vec<(f64, f64)>> = vec![Vec::new(); udp_rows.len()];
    let mut tcp_results: Vec<Vec<(f64, f64)>> = vec![Vec::new(); tcp_rows.len()];
    let total = opts.trials * (udp_rows.len() + tcp_rows.len());
    let mut done = 0;
    for trial in 0..opts.trials {
        for k in 0..udp_rows.len() {
            let k = (k + trial) % udp_rows.len();
            if stop.is_stopped() {
                return Err(LabError::Interrupted);
            }
            let t = crate::udp::trial::run(&testbed, &udp_rows[k], &udp_opts, stop)?;
            done += 1;
            progress(&format!(
                "[{done}/{total}] udp {} trial {}/{}: {:.3} Mpps, {:.0} ns CPU/datagram",
                udp_rows[k].id,
                trial + 1,
                opts.trials,
                t.pps / 1e6,
                t.cpu_ns_per_datagram
            ));
            udp_results[k].push((t.pps, t.cpu_ns_per_datagram));
        }
        for k in 0..tcp_rows.len() {
            let k = (k + trial) % tcp_rows.len();
            if stop.is_stopped() {
                return Err(LabError::Interrupted);
            }
            let m = servers::measure(&stage, tcp_rows[k].2, false)?;
            done += 1;
            progress(&format!(
                "[{done}/{total}] tcp {} trial {}/{}: {:.0} req/s, {:.2} us CPU/request",
                tcp_rows[k].0,
                trial + 1,
                opts.trials,
                m.rps,
                m.cpu_us_per_request
            ));
            tcp_results[k].push((m.rps, m.cpu_us_per_request * 1000.0));
        }
    }
    let _ = testbed.steer_receive(&CpuList::new(Vec::new()));

    let summarize = |workload: &str, kind: &str, label: &str, ms: &[(f64, f64)]| AffinityRow {
        workload: workload.into(),
        kind: kind.into(),
        label: label.into(),
        trials: ms.iter().map(|m| m.0).collect(),
        median: median(&ms.iter().map(|m| m.0).collect::<Vec<_>>()).unwrap_or(0.0),
        gap_pct: None,
        cpu_ns_per_unit: median(&ms.iter().map(|m| m.1).collect::<Vec<_>>()).unwrap_or(0.0),
    };
    let mut rows: Vec<AffinityRow> = udp_rows
        .iter()
        .zip(&udp_results)
        .map(|(c, ms)| summarize("udp", c.id, &c.label, ms))
        .chain(tcp_rows.iter().zip(&tcp_results).map(|(r, ms)| summarize("tcp", r.0, &r.1, ms)))
        .collect();
    for workload in ["udp", "tcp"] {
        let nc = rows.iter().find(|r| r.workload == workload && r.kind == "NC").map(|r| r.median);
        if let Some(nc) = nc.filter(|v| *v > 0.0) {
            for r in rows.iter_mut().filter(|r| r.workload == workload) {
                r.gap_pct = Some((r.median / nc - 1.0) * 100.0);
            }
        }
    }

    let packages = {
        let mut p: Vec<usize> = topo.cpus.iter().map(|c| c.package).collect();
        p.sort_unstable();
        p.dedup();
        p.len()
    };
    let numa_nodes = topo.nodes.len().max(1);
    let mut not_measurable = Vec::new();
    if packages < 2 {
        for case in [
            "interrupts on the NIC's package vs the other package",
            "a syscall thread on the NIC's package serving an application on the other package",
            "cross-package cache-coherence traffic (the seed's 70 % figure needs PMU uncore counters and two packages)",
        ] {
            not_measurable.push(format!("{case}: not measurable here ({packages} package, {numa_nodes} NUMA node)"));
        }
    }
    if !testbed.is_namespaced() {
        not_measurable.push("the softirq CPU: loopback cannot steer receive work (RPS)".into());
    }
    // The model starts from what a request cost here with everything on one package.
    let base_ns = rows
        .iter()
        .find(|r| r.workload == "tcp" && r.kind == "NC")
        .map_or(7000.0, |r| r.cpu_ns_per_unit);
    let model_assumptions = model::Assumptions::typical(base_ns);
    let model = model::two_packages(&model_assumptions);
    let findings = findings(&rows, &model, irq_cpu, other_cpu);
    Ok(AffinityLabReport {
        network,
        fallback_reason,
        machine: crate::machine(),
        irq_cpu,
        other_cpu,
        packages,
        numa_nodes,
        trials: opts.trials,
        duration_secs: opts.duration.as_secs_f64(),
        rows,
        not_measurable,
        model,
        model_assumptions,
        findings,
    })
}

fn findings(
    rows: &[AffinityRow],
    model: &[model::ModelRow],
    irq_cpu: usize,
    other_cpu: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    let get = |w: &str, k: &str| rows.iter().find(|r| r.workload == w && r.kind == k);
    for (workload, unit) in [("udp", "datagrams/s"), ("tcp", "requests/s")] {
        let best = rows
            .iter()
            .filter(|r| r.workload == workload && ["NS", "NC", "NZ"].contains(&r.kind.as_str()))
            .max_by(|a, b| a.median.total_cmp(&b.median));
        if let Some(best) = best {
            out.push(format!(
                "{workload}: best process-core placement here is {} ({:.0} {unit}); the seed found NC best, NS worst (context switches between the interrupt work and the application on one core), NZ between.",
                best.kind, best.median
            ));
        }
        if let (Some(ns), Some(nc)) = (get(workload, "NS"), get(workload, "NC")) {
            out.push(format!(
                "{workload}: NS {:+.1}% against NC: on this 2-CPU machine NC shares CPU {other_cpu} with the load generator, so NC trades the softirq's CPU {irq_cpu} for the client's; the seed's NC had cores to spare.",
                ns.gap_pct.unwrap_or(0.0)
            ));
            let _ = nc;
        }
    }
    for (workload, unit) in [("udp", "datagrams/s"), ("tcp", "requests/s")] {
        let (Some(plain), Some(lane)) =
            (get(workload, "NC+uring"), get(workload, "NC+syscall-lane"))
        else {
            continue;
        };
        let why = if lane.median > plain.median {
            "the SQPOLL thread took the lane's submissions off the application CPU, which here it shares with the load generator, and paid for it in polling time on the softirq CPU"
        } else {
            "the thread polls for a second after each submission, so on 2 CPUs it takes cycles from the softirq work it sits beside, where the seed had a spare core sharing the LLC"
        };
        out.push(format!(
            "{workload} syscall lane: {:.0} vs {:.0} {unit} ({:+.1}%) and {:.0} vs {:.0} ns CPU per unit with the SQPOLL thread on the softirq CPU: {why}.",
            lane.median,
            plain.median,
            (lane.median / plain.median.max(1.0) - 1.0) * 100.0,
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
