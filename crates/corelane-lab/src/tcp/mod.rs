//! `corelane lab tcp`: seed 001's table — a baseline server, then flow-to-core and each
//! recycling method alone, then all of them — for keep-alive and `Connection: close` loads,
//! with nginx and lighttpd measured on the same testbed in the same run, and `wrk` beside our
//! load generator.
//!
//! Why CPU per request is reported on every row: on two CPUs the client and the server share
//! the machine. With keep-alive both cores saturate (the client's largely with kernel work),
//! so requests/s shows what the server saves; with `Connection: close` the client saturates
//! first and every server lands near the same rate, so there the server's CPU time per
//! request (user+system of its processes / responses) is the figure that separates them, and
//! its user-space part is what a server's own code (and recycling) decides.

pub(crate) mod servers;

use std::path::PathBuf;
use std::time::Duration;

use corelane::lane::StopSignal;
use corelane::stats::median;
use corelane::topology::{CpuList, Topology};
use serde::Serialize;

use servers::{Config, Measured, ServerKind, Stage, CONFIGS};
pub use servers::{Peer, CONFIG_IDS};

use crate::testbed::{Network, Testbed};
use crate::LabError;

/// The server's port inside the receiving namespace (private to it, so a fixed one is safe).
pub(crate) const NAMESPACE_PORT: u16 = 8080;

/// How to run the experiment.
#[derive(Debug, Clone)]
pub struct TcpLabOptions {
    /// The corelane binary that serves and loads.
    pub exe: PathBuf,
    pub trials: usize,
    /// Load time per measurement.
    pub duration: Duration,
    pub connections: usize,
    pub peers: Vec<Peer>,
    /// Only these configurations (by id); all when `None`.
    pub only: Option<Vec<String>>,
}

impl TcpLabOptions {
    pub fn full(exe: PathBuf) -> Self {
        Self {
            exe,
            trials: 3,
            duration: Duration::from_secs(5),
            connections: 50,
            peers: Peer::ALL.to_vec(),
            only: None,
        }
    }

    /// A short run for CI: one trial of two seconds per row.
    pub fn quick(exe: PathBuf) -> Self {
        Self { trials: 1, duration: Duration::from_secs(2), ..Self::full(exe) }
    }
}

/// One server configuration under one workload, over all trials.
#[derive(Debug, Clone, Serialize)]
pub struct TcpRow {
    /// `keep-alive` or `close`.
    pub workload: String,
    /// `corelane`, `nginx` or `lighttpd`.
    pub server: String,
    pub config: String,
    pub label: String,
    pub trials_rps: Vec<f64>,
    pub median_rps: f64,
    /// Change in requests/s against corelane's baseline row of the same workload, in %.
    pub gain_pct: Option<f64>,
    /// Median over trials of each trial's p99 latency, in microseconds.
    pub p99_us: f64,
    /// Server CPU time per request (exact runtime of all its processes' threads, from
    /// schedstat), in microseconds; median over trials.
    pub cpu_us_per_request: f64,
    /// The user-space part of `cpu_us_per_request`, tick-sampled (utime), so an estimate (the
    /// rest is the kernel's TCP work done in the server's system calls and the softirqs charged
    /// to them).
    pub user_us_per_request: f64,
    /// Change in CPU per request against the baseline row, in %.
    pub cpu_gain_pct: Option<f64>,
    /// Connection errors and timeouts the load generator saw, summed over trials.
    pub errors: u64,
    pub non_2xx: u64,
}

/// A load generator against the same corelane server.
#[derive(Debug, Clone, Serialize)]
pub struct LoadgenRow {
    pub tool: String,
    pub trials_rps: Vec<f64>,
    pub median_rps: f64,
}

/// Everything `corelane lab tcp` measured.
#[derive(Debug, Clone, Serialize)]
pub struct TcpLabReport {
    pub network: String,
    pub fallback_reason: Option<String>,
    pub machine: String,
    pub server_cpu: usize,
    pub client_cpu: usize,
    pub connections: usize,
    pub trials: usize,
    pub duration_secs: f64,
    pub body: String,
    /// Seed 001's interrupt moderation (ITR) row: why it is or is not measured here.
    pub interrupt_moderation: String,
    pub rows: Vec<TcpRow>,
    pub load_generators: Vec<LoadgenRow>,
    pub skipped: Vec<String>,
    pub findings: Vec<String>,
    pub removed_stale_namespaces: Vec<String>,
}

const WORKLOADS: [(&str, bool); 2] = [("keep-alive", false), ("close", true)];

/// Runs the experiment, reporting progress lines through `progress`.
pub fn run(
    opts: &TcpLabOptions,
    stop: &StopSignal,
    progress: &mut dyn FnMut(&str),
) -> Result<TcpLabReport, LabError> {
    let topo = Topology::read().map_err(|e| LabError::Testbed(e.to_string()))?;
    let online = topo.online();
    let client_cpu = online.cpus()[0];
    let server_cpu = *online.cpus().last().unwrap_or(&client_cpu);
    let testbed = Testbed::create();
    for name in &testbed.removed_stale {
        progress(&format!("removed a stale namespace of a killed run: {name}"));
    }
    let (network, fallback_reason, port) = match &testbed.network {
        Network::Namespaces { tx, rx } => {
            (format!("network namespaces {tx} → {rx} over veth"), None, NAMESPACE_PORT)
        }
        Network::Loopback { reason } => {
            progress(&format!("falling back to loopback: {reason}"));
            ("loopback (127.0.0.1)".to_string(), Some(reason.clone()), free_port()?)
        }
    };
    let scratch = crate::workdir::WorkDir::create("tcp")?;
    let stage = Stage {
        testbed: &testbed,
        exe: &opts.exe,
        server_cpu,
        client_cpu,
        port,
        connections: opts.connections,
        duration: opts.duration,
        scratch: scratch.path(),
    };

    let mut skipped = Vec::new();
    let mut kinds: Vec<ServerKind> = CONFIGS
        .iter()
        .filter(|c| opts.only.as_ref().is_none_or(|o| o.iter().any(|id| id == c.id)))
        .map(|c| ServerKind::Corelane(*c))
        .collect();
    for peer in [Peer::Nginx, Peer::Lighttpd] {
        if !opts.peers.contains(&peer) {
            continue;
        }
        if peer.installed() {
            kinds.push(if peer == Peer::Nginx { ServerKind::Nginx } else { ServerKind::Lighttpd });
        } else {
            skipped.push(format!(
                "{}: not installed (apt-get install {})",
                peer.program(),
                if peer == Peer::Nginx { "nginx-light" } else { "lighttpd" }
            ));
        }
    }
    if client_cpu == server_cpu {
        skipped.push("one CPU only: client and server share it".into());
    }

    // results[workload][kind] = one Measured per trial. Trials interleave the rows and rotate
    // their order, so drift on this noisy machine spreads over every row alike.
    let mut results: Vec<Vec<Vec<Measured>>> = vec![vec![Vec::new(); kinds.len()]; 2];
    let total = opts.trials * 2 * kinds.len();
    let mut done = 0;
    for trial in 0..opts.trials {
        for (w, (workload, close)) in WORKLOADS.iter().enumerate() {
            for k in 0..kinds.len() {
                let k = (k + trial) % kinds.len();
                if stop.is_stopped() {
                    return Err(LabError::Interrupted);
                }
                let kind = kinds[k];
                steer(&testbed, kind.flow_to_core(), server_cpu)?;
                let m = servers::measure(&stage, kind, *close)?;
                done += 1;
                progress(&format!(
                    "[{done}/{total}] {workload} {} trial {}/{}: {:.0} req/s, p99 {:.0} us, server CPU {:.2} us/request{}",
                    kind.config_id(),
                    trial + 1,
                    opts.trials,
                    m.rps,
                    m.p99_us,
                    m.cpu_us_per_request,
                    if m.errors > 0 { format!(", {} errors", m.errors) } else { String::new() }
                ));
                results[w][k].push(m);
            }
        }
    }

    let mut load_generators = Vec::new();
    if opts.peers.contains(&Peer::Wrk) {
        if Peer::Wrk.installed() {
            steer(&testbed, false, server_cpu)?;
            let (mut ours, mut wrk) = (Vec::new(), Vec::new());
            for trial in 0..opts.trials {
                if stop.is_stopped() {
                    return Err(LabError::Interrupted);
                }
                let (o, w) = servers::measure_load_generators(&stage, trial % 2 == 1)?;
                progress(&format!(
                    "load generators trial {}/{}: corelane load {o:.0} req/s, wrk {w:.0} req/s",
                    trial + 1,
                    opts.trials
                ));
                ours.push(o);
                wrk.push(w);
            }
            for (tool, trials_rps) in [("corelane load", ours), ("wrk -t1", wrk)] {
                let median_rps = median(&trials_rps).unwrap_or(0.0);
                load_generators.push(LoadgenRow { tool: tool.into(), trials_rps, median_rps });
            }
        } else {
            skipped.push("wrk: not installed (apt-get install wrk)".into());
        }
    }
    let _ = testbed.steer_receive(&CpuList::new(Vec::new()));

    let mut rows = Vec::new();
    for (w, (workload, _)) in WORKLOADS.iter().enumerate() {
        let mut block: Vec<TcpRow> = kinds
            .iter()
            .zip(&results[w])
            .map(|(kind, ms)| summarize(workload, *kind, ms))
            .collect();
        let base = block
            .iter()
            .find(|r| r.config == "baseline")
            .map(|r| (r.median_rps, r.cpu_us_per_request));
        if let Some((rps, cpu)) = base {
            for r in &mut block {
                r.gain_pct = (rps > 0.0).then(|| (r.median_rps / rps - 1.0) * 100.0);
                r.cpu_gain_pct = (cpu > 0.0).then(|| (r.cpu_us_per_request / cpu - 1.0) * 100.0);
            }
        }
        rows.extend(block);
    }
    let interrupt_moderation = format!(
        "not applicable on {}: a veth or loopback device raises no interrupts and has no ethtool coalescing (ITR) to tune; on a NIC, `ethtool -C IFACE rx-usecs N` is the seed's knob",
        if testbed.is_namespaced() { "veth" } else { "loopback" }
    );
    let findings = findings(&rows, &load_generators);
    Ok(TcpLabReport {
        network,
        fallback_reason,
        machine: crate::machine(),
        server_cpu,
        client_cpu,
        connections: opts.connections,
        trials: opts.trials,
        duration_secs: opts.duration.as_secs_f64(),
        body: servers::BODY.into(),
        interrupt_moderation,
        rows,
        load_generators,
        skipped,
        findings,
        removed_stale_namespaces: testbed.removed_stale.clone(),
    })
}

/// Flow-to-core on: receive processing of the server's flows on the server's CPU (RPS);
/// off: on the client's CPU, inside its send (the veth default).
fn steer(testbed: &Testbed, flow_to_core: bool, server_cpu: usize) -> Result<(), LabError> {
    if !testbed.is_namespaced() {
        return Ok(());
    }
    let cpus = if flow_to_core { vec![server_cpu] } else { Vec::new() };
    testbed.steer_receive(&CpuList::new(cpus))
}

pub(crate) fn free_port() -> Result<u16, LabError> {
    let probe = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| LabError::io("cannot find a free TCP port", e))?;
    probe.local_addr().map(|a| a.port()).map_err(|e| LabError::io("cannot find a free TCP port", e))
}

fn summarize(workload: &str, kind: ServerKind, ms: &[Measured]) -> TcpRow {
    let of = |f: fn(&Measured) -> f64| median(&ms.iter().map(f).collect::<Vec<_>>()).unwrap_or(0.0);
    let label = match kind {
        ServerKind::Corelane(Config { label, .. }) => label.to_string(),
        ServerKind::Placed(_) => "corelane, placed".into(),
        ServerKind::Nginx => "nginx, same CPU, body and load".into(),
        ServerKind::Lighttpd => "lighttpd, same CPU, body and load".into(),
    };
    TcpRow {
        workload: workload.into(),
        server: kind.name().into(),
        config: kind.config_id().split(' ').next().unwrap_or("").into(),
        label,
        trials_rps: ms.iter().map(|m| m.rps).collect(),
        median_rps: of(|m| m.rps),
        gain_pct: None,
        p99_us: of(|m| m.p99_us),
        cpu_us_per_request: of(|m| m.cpu_us_per_request),
        user_us_per_request: of(|m| m.user_us_per_request),
        cpu_gain_pct: None,
        errors: ms.iter().map(|m| m.errors).sum(),
        non_2xx: ms.iter().map(|m| m.non_2xx).sum(),
    }
}

fn find<'a>(rows: &'a [TcpRow], workload: &str, config: &str) -> Option<&'a TcpRow> {
    rows.iter().find(|r| r.workload == workload && r.config == config)
}

/// Sentences derived from the figures.
fn findings(rows: &[TcpRow], loadgens: &[LoadgenRow]) -> Vec<String> {
    let mut out = Vec::new();
    for (workload, _) in WORKLOADS {
        if let (Some(all), Some(base)) =
            (find(rows, workload, "all"), find(rows, workload, "baseline"))
        {
            let shares: Vec<String> =
                ["flow-to-core", "buffers", "fd", "events", "recycling", "uring"]
                    .iter()
                    .filter_map(|id| find(rows, workload, id))
                    .map(|r| {
                        format!(
                            "{} {:+.1}% req/s, {:+.1}% CPU/request",
                            r.config,
                            r.gain_pct.unwrap_or(0.0),
                            r.cpu_gain_pct.unwrap_or(0.0)
                        )
                    })
                    .collect();
            out.push(format!(
                "{workload}: all methods together {:+.1}% requests/s and {:+.1}% server CPU per request against the baseline ({:.0} vs {:.0} req/s, {:.2} vs {:.2} us); each alone: {}.",
                all.gain_pct.unwrap_or(0.0),
                all.cpu_gain_pct.unwrap_or(0.0),
                all.median_rps,
                base.median_rps,
                all.cpu_us_per_request,
                base.cpu_us_per_request,
                shares.join("; ")
            ));
        }
        if let (Some(rec), Some(base)) =
            (find(rows, workload, "recycling"), find(rows, workload, "baseline"))
        {
            let kernel_share = 1.0 - base.user_us_per_request / base.cpu_us_per_request.max(1e-9);
            out.push(format!(
                "{workload}: recycling changed the server's own (user-space) CPU per request by {:+.1}% ({:.2} vs {:.2} us); the rest of a request's server CPU, {:.0}% of it in the baseline, is the kernel's TCP work, the same for every configuration, so requests/s differences between the recycling rows are within this machine's run-to-run noise (±15-30%).",
                (rec.user_us_per_request / base.user_us_per_request.max(1e-9) - 1.0) * 100.0,
                rec.user_us_per_request,
                base.user_us_per_request,
                kernel_share * 100.0
            ));
        }
        if let (Some(flow), Some(base)) =
            (find(rows, workload, "flow-to-core"), find(rows, workload, "baseline"))
        {
            if flow.median_rps < base.median_rps {
                out.push(format!(
                    "{workload}: flow-to-core cost {:.1}% here: with one server lane, steering the server's receive processing to its own CPU (RPS) takes work off the client's CPU — where the veth delivers it for free inside the client's send — and puts it on the server's; on a multi-queue NIC with one lane per core the same steering keeps each flow's packets and its lane on one core instead.",
                    -flow.gain_pct.unwrap_or(0.0)
                ));
            }
        }
        for (ours, what) in [("recycling", "epoll"), ("uring", "io_uring")] {
            let Some(ours) = find(rows, workload, ours) else { continue };
            for peer in ["nginx", "lighttpd"] {
                let Some(p) = find(rows, workload, peer) else { continue };
                out.push(format!(
                    "{workload} vs {peer} (same testbed, CPU, body and load): corelane on {what} answers {:.2}x its requests/s ({:.0} vs {:.0}) at {:.2}x its server CPU per request ({:.2} vs {:.2} us; user space alone {:.2}x: {:.2} vs {:.2} us), p99 {:.0} vs {:.0} us.",
                    ours.median_rps / p.median_rps.max(1.0),
                    ours.median_rps,
                    p.median_rps,
                    ours.cpu_us_per_request / p.cpu_us_per_request.max(1e-9),
                    ours.cpu_us_per_request,
                    p.cpu_us_per_request,
                    ours.user_us_per_request / p.user_us_per_request.max(1e-9),
                    ours.user_us_per_request,
                    p.user_us_per_request,
                    ours.p99_us,
                    p.p99_us
                ));
            }
        }
    }
    if let (Some(ours), Some(wrk)) = (
        loadgens.iter().find(|l| l.tool.starts_with("corelane")),
        loadgens.iter().find(|l| l.tool.starts_with("wrk")),
    ) {
        let ratio = ours.median_rps / wrk.median_rps.max(1.0);
        let verdict = if ratio >= 1.0 {
            "at least as fast as wrk, so the generator is not the limit it measures"
        } else {
            "slower than wrk here: the server rows above may be client-bound"
        };
        out.push(format!(
            "load generators against the same corelane server: corelane load {:.0} req/s, wrk {:.0} req/s ({ratio:.2}x): {verdict}.",
            ours.median_rps, wrk.median_rps
        ));
    }
    out
}
