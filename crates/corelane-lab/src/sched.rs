//! `corelane lab sched`: seed 004's trade-off — every scheduler on every workload, in a
//! deterministic simulation of 4 to 64 workers and with real threads on this machine (one
//! producer, one worker on two CPUs), with throughput, reordering (RFC 4737), imbalance,
//! latency and each scheduler's ratio to DSW.

use std::time::Duration;

use corelane::lane::StopSignal;
use corelane::sched::threads::{self, ThreadsConfig};
use corelane::sched::{simulate, Kind, RunResult, SimConfig, Workload};
use corelane::topology::Topology;
use serde::Serialize;

use crate::LabError;

#[derive(Debug, Clone)]
pub struct SchedLabOptions {
    /// Worker counts simulated.
    pub sim_workers: Vec<usize>,
    /// Completions per simulation.
    pub sim_events: u64,
    /// Time per threaded run.
    pub thread_duration: Duration,
    pub schedulers: Vec<Kind>,
    pub workloads: Vec<Workload>,
    /// Run DPDK's dpdk-test-eventdev (DSW, 1 producer, 1 worker) beside the threaded runs.
    pub vs_dpdk: bool,
}

impl SchedLabOptions {
    pub fn full() -> Self {
        Self {
            sim_workers: vec![4, 8, 16, 64],
            sim_events: 1_000_000,
            thread_duration: Duration::from_secs(2),
            schedulers: Kind::ALL.to_vec(),
            workloads: Workload::ALL.to_vec(),
            vs_dpdk: true,
        }
    }

    pub fn quick() -> Self {
        Self {
            sim_workers: vec![8],
            sim_events: 100_000,
            thread_duration: Duration::from_millis(500),
            ..Self::full()
        }
    }
}

/// One run with its ratios against the DSW scheduler of the same workload and workers.
#[derive(Debug, Clone, Serialize)]
pub struct SchedRow {
    #[serde(flatten)]
    pub run: RunResult,
    /// Throughput / dsw-atomic's throughput.
    pub vs_dsw_atomic_throughput: Option<f64>,
    /// Throughput and reorder ratio / dsw-parallel's.
    pub vs_dsw_parallel_throughput: Option<f64>,
    pub vs_dsw_parallel_reorder: Option<f64>,
}

/// dpdk-test-eventdev's perf_queue test on the DSW event device.
#[derive(Debug, Clone, Serialize)]
pub struct DpdkRun {
    pub command: String,
    /// Its per-second rates, in M events/s.
    pub samples: Vec<f64>,
    pub median_mevps: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SchedLabReport {
    pub machine: String,
    pub sim_events: u64,
    pub mean_cost_ns: f64,
    pub thread_cpus: Vec<usize>,
    pub rows: Vec<SchedRow>,
    /// DPDK's DSW on the same two CPUs, if it ran.
    pub dpdk: Option<DpdkRun>,
    pub skipped: Vec<String>,
    pub findings: Vec<String>,
}

pub fn run(
    opts: &SchedLabOptions,
    stop: &StopSignal,
    progress: &mut dyn FnMut(&str),
) -> Result<SchedLabReport, LabError> {
    let topo = Topology::read().map_err(|e| LabError::Testbed(e.to_string()))?;
    let online = topo.online();
    let cpus: Vec<usize> = online.cpus().iter().copied().take(2).collect();
    let mut runs = Vec::new();
    let total = opts.workloads.len() * opts.schedulers.len() * (opts.sim_workers.len() + 1);
    let mut done = 0;
    let mean_cost_ns = SimConfig::new(Kind::Rss, Workload::OneFlow, 1).mean_cost_ns;
    for &workload in &opts.workloads {
        for &workers in &opts.sim_workers {
            for &kind in &opts.schedulers {
                if stop.is_stopped() {
                    return Err(LabError::Interrupted);
                }
                let r = simulate(&SimConfig {
                    events: opts.sim_events,
                    ..SimConfig::new(kind, workload, workers)
                })
                .map_err(|e| LabError::Options(e.to_string()))?;
                done += 1;
                progress(&format!(
                    "[{done}/{total}] sim {} {} x{workers}: {:.2} Mev/s, reorder {:.4}",
                    workload.name(),
                    kind,
                    r.throughput_mevps,
                    r.reorder.reorder_ratio
                ));
                runs.push(r);
            }
        }
        // Threads on this machine: one producer and one worker, each on its own CPU, with no
        // per-event work, so the dispatch path itself is measured (as DPDK's perf_queue does).
        for &kind in &opts.schedulers {
            if stop.is_stopped() {
                return Err(LabError::Interrupted);
            }
            let r = threads::run(&ThreadsConfig {
                kind,
                workload,
                workers: 1,
                duration: opts.thread_duration,
                mean_cost_ns: 0.0,
                ring: 1024,
                cpus: cpus.clone(),
                seed: 2026,
            })
            .map_err(|e| LabError::io("a threaded scheduler run failed", e))?;
            done += 1;
            progress(&format!(
                "[{done}/{total}] threads {} {}: {:.2} Mev/s, scheduling {:.0}% of the producer",
                workload.name(),
                kind,
                r.throughput_mevps,
                r.scheduling_share.unwrap_or(0.0) * 100.0
            ));
            runs.push(r);
        }
    }
    let rows: Vec<SchedRow> = runs
        .iter()
        .map(|r| {
            let peer = |name: &str| {
                runs.iter().find(|o| {
                    o.scheduler == name
                        && o.workload == r.workload
                        && o.workers == r.workers
                        && o.mode == r.mode
                })
            };
            let ratio = |a: f64, b: f64| (b > 0.0).then(|| a / b);
            SchedRow {
                run: r.clone(),
                vs_dsw_atomic_throughput: peer("dsw-atomic")
                    .and_then(|p| ratio(r.throughput_mevps, p.throughput_mevps)),
                vs_dsw_parallel_throughput: peer("dsw-parallel")
                    .and_then(|p| ratio(r.throughput_mevps, p.throughput_mevps)),
                vs_dsw_parallel_reorder: peer("dsw-parallel")
                    .and_then(|p| ratio(r.reorder.reorder_ratio, p.reorder.reorder_ratio)),
            }
        })
        .collect();
    let mut skipped = Vec::new();
    let mut dpdk = None;
    if opts.vs_dpdk {
        if crate::process::on_path("dpdk-test-eventdev") {
            progress("dpdk-test-eventdev: DSW perf_queue, 1 producer and 1 worker");
            dpdk = run_dpdk(&cpus, opts.thread_duration.max(Duration::from_secs(3)))?;
            if dpdk.is_none() {
                skipped.push("dpdk-test-eventdev ran but printed no rate".into());
            }
        } else {
            skipped.push("dpdk-test-eventdev: not installed (apt-get install dpdk-dev)".into());
        }
    }
    if cpus.len() < 2 {
        skipped.push("one CPU: the threaded producer and worker share it".into());
    }
    let findings = findings(&rows, dpdk.as_ref());
    Ok(SchedLabReport {
        machine: crate::machine(),
        sim_events: opts.sim_events,
        mean_cost_ns,
        thread_cpus: cpus,
        rows,
        dpdk,
        skipped,
        findings,
    })
}

/// Runs DPDK's event device perf test (the command line of ../shared/notes/scheduling.md) for
/// `duration`, then interrupts it and reads its per-second rates.
fn run_dpdk(cpus: &[usize], duration: Duration) -> Result<Option<DpdkRun>, LabError> {
    let (p, w) = (cpus.first().copied().unwrap_or(0), cpus.get(1).copied().unwrap_or(0));
    let args: Vec<String> = [
        format!("--lcores=0@{p},1@{p},2@{w}"),
        "--no-huge".into(),
        "-m".into(),
        "512".into(),
        "--no-pci".into(),
        "--no-telemetry".into(),
        "--vdev=event_dsw0".into(),
        "--".into(),
        "--test=perf_queue".into(),
        "--plcores=1".into(),
        "--wlcores=2".into(),
        "--stlist=a".into(),
        "--nb_pkts=0".into(),
    ]
    .to_vec();
    let command = format!("dpdk-test-eventdev {}", args.join(" "));
    // DPDK keeps runtime files under /var/run/dpdk (--in-memory cannot go with --no-huge):
    // the lab removes them afterwards if it was the one to create them.
    let runtime = std::path::Path::new("/var/run/dpdk");
    let created = !runtime.exists();
    let child = crate::process::ChildProcess::spawn(
        "dpdk-test-eventdev",
        None,
        "dpdk-test-eventdev",
        &args,
    )?;
    std::thread::sleep(duration);
    child.interrupt();
    let text = child.output_after(Duration::from_secs(5)).join("\n");
    if created {
        let _ = std::fs::remove_dir_all(runtime);
    }
    // Its rate lines read `3.699 mpps avg 3.699 mpps` between colour codes.
    let samples: Vec<f64> = text
        .split("mpps avg")
        .filter_map(|before| {
            before.rsplit(|c: char| !(c.is_ascii_digit() || c == '.')).find(|t| !t.is_empty())
        })
        .filter_map(|n| n.parse::<f64>().ok())
        .filter(|v| *v > 0.0)
        .collect();
    let Some(median_mevps) = corelane::stats::median(&samples) else { return Ok(None) };
    Ok(Some(DpdkRun { command, samples, median_mevps }))
}

fn findings(rows: &[SchedRow], dpdk: Option<&DpdkRun>) -> Vec<String> {
    let mut out = Vec::new();
    for workload in ["10-flows", "1-flow"] {
        let Some(d) = rows.iter().find(|r| {
            r.run.mode == "sim"
                && r.run.workers == 8
                && r.run.workload == workload
                && r.run.scheduler == "diffuser"
        }) else {
            continue;
        };
        out.push(format!(
            "{workload}, 8 simulated workers: Diffuser moves {:.2}x dsw-parallel's events/s at {:.2}x its reorder ratio, and {:.2}x dsw-atomic's events/s (issue targets: ≥ 0.9x, ≤ {}x, ≥ 1.2x).",
            d.vs_dsw_parallel_throughput.unwrap_or(0.0),
            d.vs_dsw_parallel_reorder.unwrap_or(0.0),
            d.vs_dsw_atomic_throughput.unwrap_or(0.0),
            if workload == "10-flows" { "0.35" } else { "0.5" }
        ));
    }
    let threads: Vec<&SchedRow> = rows.iter().filter(|r| r.run.mode == "threads").collect();
    let atomic: Vec<f64> = threads
        .iter()
        .filter(|r| r.run.scheduler == "dsw-atomic")
        .map(|r| r.run.throughput_mevps)
        .collect();
    if let (Some(d), Some(ours)) = (dpdk, corelane::stats::median(&atomic)) {
        out.push(format!(
            "vs DPDK, same two CPUs, same run: our dsw-atomic threads {ours:.1} M events/s (median over the workloads), dpdk-test-eventdev's DSW perf_queue {:.1} M events/s ({:.2}x); the issue asks for at least 1x.",
            d.median_mevps,
            ours / d.median_mevps.max(1e-9)
        ));
    }
    if let Some(best) = threads
        .iter()
        .filter(|r| r.run.scheduler == "dsw-atomic")
        .map(|r| r.run.throughput_mevps)
        .reduce(f64::max)
    {
        out.push(format!(
            "threads (1 producer, 1 worker, no per-event work): dsw-atomic moves up to {best:.1} M events/s here; scheduling takes {:.0}–{:.0}% of the producer's time across schedulers and workloads.",
            threads.iter().filter_map(|r| r.run.scheduling_share).fold(f64::MAX, f64::min) * 100.0,
            threads.iter().filter_map(|r| r.run.scheduling_share).fold(0.0, f64::max) * 100.0
        ));
    }
    out
}
