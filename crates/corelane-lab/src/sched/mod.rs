//! `corelane lab sched`: seed 004's trade-off — every scheduler on every workload, in a
//! deterministic simulation of 4 to 64 workers and with real threads on this machine (one
//! producer, one worker on two CPUs), with throughput, reordering (RFC 4737), imbalance,
//! latency and each scheduler's ratio to DSW.

use std::time::Duration;

mod figures;
mod table;

use corelane::lane::StopSignal;
use corelane::sched::threads::{self, ThreadsConfig};
use corelane::sched::{simulate, Kind, RunMode, RunResult, SimConfig, Workload};
use corelane::topology::Topology;
use serde::Serialize;

use crate::experiment::{self, Experiment, Measured, Options, Prepare, Progress};
use crate::host::Host;
use crate::summary::Outcome;
use crate::LabError;

/// `corelane lab sched` in the list of experiments.
pub const ENTRY: experiment::Entry = experiment::Entry::of::<SchedArgs>(
    "sched",
    "004",
    "flow scheduling without reordering (Diffuser vs DSW)",
    "flow-aware dispatch: rss, spray, DSW (atomic, parallel), Diffuser on 5 workloads; simulated 4-64 workers and real threads; reordering (RFC 4737), balance, latency",
    "every worker thread was stopped",
);

/// `corelane lab sched`'s options.
#[derive(Debug, Clone, clap::Args)]
pub struct SchedArgs {
    /// A short run for CI: 8 simulated workers, short threaded runs.
    #[arg(long)]
    pub quick: bool,
    /// Simulated worker counts (default 4,8,16,64; 8 with --quick).
    #[arg(long, value_delimiter = ',', value_name = "N")]
    pub workers: Option<Vec<usize>>,
    /// Only these schedulers: rss, spray, dsw-atomic, dsw-parallel, diffuser.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub schedulers: Option<Vec<String>>,
    /// Only these workloads: uniform, zipf, elephant, 10-flows, 1-flow.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub workloads: Option<Vec<String>>,
    /// Peers: dpdk (dpdk-test-eventdev's DSW, when installed: apt-get install dpdk-dev) or none.
    #[arg(long, value_name = "PEERS")]
    pub vs: Option<String>,
}

impl Options for SchedArgs {
    type Settings = SchedLabOptions;
    type Lab<'s> = SchedLab<'s>;
    type Report = SchedLabReport;
    /// The settings these arguments describe.
    fn settings(self) -> Result<SchedLabOptions, LabError> {
        let mut opts = if self.quick { SchedLabOptions::quick() } else { SchedLabOptions::full() };
        if let Some(workers) = self.workers {
            if workers.is_empty() || !workers.iter().all(|w| (1..=1024).contains(w)) {
                return Err(LabError::Options("--workers takes counts from 1 to 1024".into()));
            }
            opts.sim_workers = workers;
        }
        match self.vs.as_deref() {
            None | Some("dpdk") => {}
            Some("none") => opts.vs_dpdk = false,
            Some(other) => {
                return Err(LabError::Options(format!(
                    "unknown peer `{other}`: choose dpdk or none"
                )))
            }
        }
        if let Some(names) = self.schedulers {
            opts.schedulers = names
                .iter()
                .map(|n| n.parse::<Kind>().map_err(LabError::Options))
                .collect::<Result<_, _>>()?;
        }
        if let Some(names) = self.workloads {
            opts.workloads = names
                .iter()
                .map(|n| {
                    Workload::parse(n).ok_or_else(|| {
                        LabError::Options(format!(
                            "unknown workload `{n}`: choose from uniform, zipf, elephant, 10-flows, 1-flow"
                        ))
                    })
                })
                .collect::<Result<_, _>>()?;
        }
        Ok(opts)
    }
}

impl experiment::Trials for SchedLabOptions {
    /// Every case once: the simulation is deterministic; the threaded runs are measured over
    /// `thread_duration` each.
    fn trials(&self) -> usize {
        1
    }
}

impl<'a> Prepare<'a> for SchedLab<'a> {
    type Settings = SchedLabOptions;
    fn prepare(opts: &'a SchedLabOptions, _: Progress<'_>) -> Result<Self, LabError> {
        let online = Topology::read().map_err(|e| LabError::Topology(e.to_string()))?.online();
        let cpus: Vec<usize> = online.cpus().iter().copied().take(2).collect();
        Ok(SchedLab { opts, cpus, skipped: Vec::new() })
    }
}

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
    /// What could not run here, and what the figures say.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// One run: a scheduler on a workload, simulated or threaded, or DPDK's DSW beside them.
#[derive(Debug, Clone, Copy)]
pub enum Case {
    Sim {
        workload: Workload,
        kind: Kind,
        workers: usize,
    },
    /// One producer and one worker, each on its own CPU, with no per-event work, so the
    /// dispatch path itself is measured (as DPDK's perf_queue does).
    Threads {
        workload: Workload,
        kind: Kind,
    },
    Dpdk,
}

/// What one case measured.
#[derive(Debug, Clone)]
pub enum CaseResult {
    Run(RunResult),
    Dpdk(Option<DpdkRun>),
}

#[derive(Debug)]
pub struct SchedLab<'a> {
    opts: &'a SchedLabOptions,
    cpus: Vec<usize>,
    skipped: Vec<String>,
}

impl Experiment for SchedLab<'_> {
    type Config = Case;
    type Trial = CaseResult;
    type Report = SchedLabReport;

    fn configurations(&mut self) -> Result<Vec<Case>, LabError> {
        let o = self.opts;
        let mut cases = Vec::new();
        for &workload in &o.workloads {
            for &workers in &o.sim_workers {
                cases.extend(o.schedulers.iter().map(|&kind| Case::Sim {
                    workload,
                    kind,
                    workers,
                }));
            }
            cases.extend(o.schedulers.iter().map(|&kind| Case::Threads { workload, kind }));
        }
        if o.vs_dpdk {
            if Host::Local.find_program("dpdk-test-eventdev").is_some() {
                cases.push(Case::Dpdk);
            } else {
                self.skipped
                    .push("dpdk-test-eventdev: not installed (apt-get install dpdk-dev)".into());
            }
        }
        if self.cpus.len() < 2 {
            self.skipped.push("one CPU: the threaded producer and worker share it".into());
        }
        Ok(cases)
    }

    fn label(&self, case: &Case) -> String {
        match case {
            Case::Sim { workload, kind, workers } => {
                format!("sim {} {kind} x{workers}", workload.name())
            }
            Case::Threads { workload, kind } => format!("threads {} {kind}", workload.name()),
            Case::Dpdk => "dpdk-test-eventdev DSW perf_queue, 1 producer and 1 worker".into(),
        }
    }

    fn trial(&mut self, case: &Case, _: usize, _: &StopSignal) -> Result<CaseResult, LabError> {
        let o = self.opts;
        match *case {
            Case::Sim { workload, kind, workers } => {
                let config =
                    SimConfig { events: o.sim_events, ..SimConfig::new(kind, workload, workers) };
                simulate(&config).map(CaseResult::Run).map_err(|e| LabError::Options(e.to_string()))
            }
            Case::Threads { workload, kind } => threads::run(&ThreadsConfig {
                kind,
                workload,
                workers: 1,
                duration: o.thread_duration,
                mean_cost_ns: 0.0,
                ring: 1024,
                cpus: self.cpus.clone(),
                seed: 2026,
            })
            .map(CaseResult::Run)
            .map_err(|e| LabError::io("a threaded scheduler run failed", e)),
            Case::Dpdk => {
                let run = run_dpdk(&self.cpus, o.thread_duration.max(Duration::from_secs(3)))?;
                if run.is_none() {
                    self.skipped.push("dpdk-test-eventdev ran but printed no rate".into());
                }
                Ok(CaseResult::Dpdk(run))
            }
        }
    }

    fn describe(&self, result: &CaseResult) -> String {
        match result {
            CaseResult::Run(r) if r.mode == RunMode::Threads => format!(
                "{:.2} Mev/s, scheduling {:.0}% of the producer",
                r.throughput_mevps,
                r.scheduling_share.map_or(String::from("?"), |s| format!("{:.0}", s * 100.0))
            ),
            CaseResult::Run(r) => {
                format!("{:.2} Mev/s, reorder {:.4}", r.throughput_mevps, r.reorder.reorder_ratio)
            }
            CaseResult::Dpdk(d) => {
                d.as_ref().map_or("no rate".into(), |d| format!("{:.2} Mev/s", d.median_mevps))
            }
        }
    }

    fn report(self, measured: Vec<Measured<Case, CaseResult>>) -> Result<SchedLabReport, LabError> {
        let mut runs = Vec::new();
        let mut dpdk = None;
        for m in measured {
            for result in m.trials {
                match result {
                    CaseResult::Run(r) => runs.push(r),
                    CaseResult::Dpdk(d) => dpdk = d,
                }
            }
        }
        let rows = with_dsw_ratios(&runs);
        let findings = findings(&rows, dpdk.as_ref());
        Ok(SchedLabReport {
            machine: crate::machine(),
            sim_events: self.opts.sim_events,
            mean_cost_ns: SimConfig::new(Kind::Rss, Workload::OneFlow, 1).mean_cost_ns,
            thread_cpus: self.cpus,
            rows,
            dpdk,
            outcome: Outcome { skipped: self.skipped, findings },
        })
    }
}

/// Every run with its ratios against the DSW schedulers on the same workload, workers and
/// mode.
fn with_dsw_ratios(runs: &[RunResult]) -> Vec<SchedRow> {
    runs.iter()
        .map(|r| {
            let peer = |kind: Kind| {
                runs.iter().find(|o| {
                    o.scheduler == kind
                        && o.workload == r.workload
                        && o.workers == r.workers
                        && o.mode == r.mode
                })
            };
            let ratio = |a: f64, b: f64| (b > 0.0).then(|| a / b);
            SchedRow {
                run: r.clone(),
                vs_dsw_atomic_throughput: peer(Kind::DswAtomic)
                    .and_then(|p| ratio(r.throughput_mevps, p.throughput_mevps)),
                vs_dsw_parallel_throughput: peer(Kind::DswParallel)
                    .and_then(|p| ratio(r.throughput_mevps, p.throughput_mevps)),
                vs_dsw_parallel_reorder: peer(Kind::DswParallel)
                    .and_then(|p| ratio(r.reorder.reorder_ratio, p.reorder.reorder_ratio)),
            }
        })
        .collect()
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
    let mut child = Host::Local.spawn("dpdk-test-eventdev", "dpdk-test-eventdev", &args)?;
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
            r.run.mode == RunMode::Sim
                && r.run.workers == 8
                && r.run.workload == workload
                && r.run.scheduler == Kind::Diffuser
        }) else {
            continue;
        };
        // A ratio is absent when its DSW run did not run (--schedulers) or moved nothing.
        let (Some(par), Some(reorder), Some(atomic)) =
            (d.vs_dsw_parallel_throughput, d.vs_dsw_parallel_reorder, d.vs_dsw_atomic_throughput)
        else {
            continue;
        };
        out.push(format!(
            "{workload}, 8 simulated workers: Diffuser moves {par:.2}x dsw-parallel's events/s at {reorder:.2}x its reorder ratio, and {atomic:.2}x dsw-atomic's events/s."
        ));
    }
    let threads: Vec<&SchedRow> = rows.iter().filter(|r| r.run.mode == RunMode::Threads).collect();
    let atomic: Vec<f64> = threads
        .iter()
        .filter(|r| r.run.scheduler == Kind::DswAtomic)
        .map(|r| r.run.throughput_mevps)
        .collect();
    if let (Some(d), Some(ours)) = (dpdk, corelane::stats::median(&atomic)) {
        out.push(format!(
            "vs DPDK, same two CPUs, same run: our dsw-atomic threads {ours:.1} M events/s (median over the workloads), dpdk-test-eventdev's DSW perf_queue {:.1} M events/s ({:.2}x).",
            d.median_mevps,
            ours / d.median_mevps.max(1e-9)
        ));
    }
    if let Some(best) = threads
        .iter()
        .filter(|r| r.run.scheduler == Kind::DswAtomic)
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
