//! `corelane lab`: list the experiments, or run one (or all) and print its table.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use corelane::lane::StopSignal;
use corelane_lab::affinity::{self as affinity_lab, AffinityLabOptions};
use corelane_lab::copy::{self as copy_lab, CopyLabOptions};
use corelane_lab::report;
use corelane_lab::sched::{self as sched_lab, SchedLabOptions};
use corelane_lab::tcp::{self as tcp_lab, TcpLabOptions};
use corelane_lab::udp::{self, Peer, UdpLabOptions};
use corelane_lab::{LabError, EXPERIMENTS};

use crate::args::{outln, parse_duration, stop_on_signals};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct LabArgs {
    #[command(subcommand)]
    experiment: Option<Experiment>,
}

#[derive(Debug, Subcommand)]
enum Experiment {
    /// Seed 000: UDP receive scaling (Table 1) on a two-namespace testbed, with peers.
    Udp(UdpArgs),
    /// Seed 001: HTTP serving with data-structure recycling, beside nginx, lighttpd and wrk.
    Tcp(TcpArgs),
    /// Seed 003: the application on, off or unpinned from the softirq CPU, and the syscall lane.
    Affinity(AffinityArgs),
    /// Seed 004: flow-aware dispatch over workers (RSS, spray, DSW, Diffuser), simulated and threaded.
    Sched(SchedArgs),
    /// Seed 002: file and tree duplication on a private tmpfs, beside cp, cp -r and dd.
    Copy(CopyArgs),
    /// Every experiment, one after the other (--json r.json writes r.udp.json, r.tcp.json, …).
    All(CommonArgs),
}

#[derive(Debug, Args, Clone)]
struct CommonArgs {
    /// A short run for CI: 1 trial of 3 seconds per configuration.
    #[arg(long)]
    quick: bool,
    /// Write the full results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write one CSV row per configuration to FILE.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct UdpArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Trials per configuration (default 3, 1 with --quick).
    #[arg(long, value_parser = crate::args::parse_count)]
    trials: Option<usize>,
    /// Sending time per trial, at least 3s (default 5s, 3s with --quick).
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Datagrams/s the paced GSO sender offers on the plain rows.
    #[arg(long, default_value_t = 1_500_000)]
    offered: u64,
    /// Datagrams/s offered on the GSO+GRO row.
    #[arg(long, default_value_t = 20_000_000)]
    offered_gro: u64,
    /// Peers to measure beside corelane: c-loop, sockperf, iperf3, or none
    /// (default: every one installed).
    #[arg(long, value_delimiter = ',', value_name = "PEERS")]
    vs: Option<Vec<String>>,
    /// Only these configurations: default, placement, multi-ip, shared-socket, reuseport,
    /// reuseport-cpu, gso-gro, or none (peers only).
    #[arg(long, value_delimiter = ',', value_name = "CONFIGS")]
    configs: Option<Vec<String>>,
}

#[derive(Debug, Args)]
struct TcpArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Trials per configuration (default 3, 1 with --quick).
    #[arg(long, value_parser = crate::args::parse_count)]
    trials: Option<usize>,
    /// Load time per measurement, at least 1s (default 5s, 2s with --quick).
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Client connections, each with one request in flight.
    #[arg(long, default_value_t = 50, value_parser = crate::args::parse_count)]
    connections: usize,
    /// Peers to measure beside corelane: nginx, lighttpd, wrk, or none
    /// (default: every one installed; `apt-get install nginx-light lighttpd wrk`).
    #[arg(long, value_delimiter = ',', value_name = "PEERS")]
    vs: Option<Vec<String>>,
    /// Only these configurations: baseline, flow-to-core, buffers, fd, events, recycling, all, uring, or none
    /// (peers only).
    #[arg(long, value_delimiter = ',', value_name = "CONFIGS")]
    configs: Option<Vec<String>>,
}

#[derive(Debug, Args)]
struct AffinityArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Trials per placement (default 3, 1 with --quick).
    #[arg(long, value_parser = crate::args::parse_count)]
    trials: Option<usize>,
    /// Time per measurement, at least 3s (default 5s, 3s with --quick).
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Datagrams/s the paced GSO sender offers the UDP receiver.
    #[arg(long, default_value_t = 1_000_000)]
    offered: u64,
}

#[derive(Debug, Args)]
struct SchedArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Simulated worker counts (default 4,8,16,64; 8 with --quick).
    #[arg(long, value_delimiter = ',', value_name = "N")]
    workers: Option<Vec<usize>>,
    /// Only these schedulers: rss, spray, dsw-atomic, dsw-parallel, diffuser.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    schedulers: Option<Vec<String>>,
    /// Only these workloads: uniform, zipf, elephant, 10-flows, 1-flow.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    workloads: Option<Vec<String>>,
    /// Peers: dpdk (dpdk-test-eventdev's DSW, when installed: apt-get install dpdk-dev) or none.
    #[arg(long, value_name = "PEERS")]
    vs: Option<String>,
}

#[derive(Debug, Args)]
struct CopyArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Size of the single-file copies (default 1GiB, 64MiB with --quick).
    #[arg(long, value_parser = crate::args::parse_size)]
    size: Option<usize>,
    /// Trials per configuration (default 3, 1 with --quick).
    #[arg(long, value_parser = crate::args::parse_count)]
    trials: Option<usize>,
}

pub fn run(args: LabArgs) -> anyhow::Result<ExitCode> {
    match args.experiment {
        None => {
            outln!("experiments (run one with `corelane lab NAME`, or `corelane lab all`):");
            for e in EXPERIMENTS {
                outln!("  {:<8} seed {}  {}", e.name, e.seed, e.about);
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(Experiment::Udp(args)) => run_udp(args),
        Some(Experiment::Tcp(args)) => run_tcp(args),
        Some(Experiment::Affinity(args)) => run_affinity(args),
        Some(Experiment::Sched(args)) => run_sched(args),
        Some(Experiment::Copy(args)) => run_copy(args),
        Some(Experiment::All(common)) => run_all(common),
    }
}

/// Every experiment in turn, each writing its own report files (FILE.udp.json, …); stops at
/// the first that does not succeed.
fn run_all(common: CommonArgs) -> anyhow::Result<ExitCode> {
    let own = |name: &str| CommonArgs {
        json: common.json.as_ref().map(|p| p.with_extension(format!("{name}.json"))),
        csv: common.csv.as_ref().map(|p| p.with_extension(format!("{name}.csv"))),
        ..common.clone()
    };
    let steps: [&dyn Fn() -> anyhow::Result<ExitCode>; 5] = [
        &|| {
            run_udp(UdpArgs {
                common: own("udp"),
                trials: None,
                duration: None,
                offered: 1_500_000,
                offered_gro: 20_000_000,
                vs: None,
                configs: None,
            })
        },
        &|| {
            run_tcp(TcpArgs {
                common: own("tcp"),
                trials: None,
                duration: None,
                connections: 50,
                vs: None,
                configs: None,
            })
        },
        &|| {
            run_affinity(AffinityArgs {
                common: own("affinity"),
                trials: None,
                duration: None,
                offered: 1_000_000,
            })
        },
        &|| {
            run_sched(SchedArgs {
                common: own("sched"),
                workers: None,
                schedulers: None,
                workloads: None,
                vs: None,
            })
        },
        &|| run_copy(CopyArgs { common: own("copy"), size: None, trials: None }),
    ];
    for step in steps {
        let code = step()?;
        if code != ExitCode::SUCCESS {
            return Ok(code);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn parse_peers(vs: Option<Vec<String>>) -> anyhow::Result<Vec<Peer>> {
    let Some(names) = vs else { return Ok(Peer::ALL.to_vec()) };
    if names.iter().any(|n| n == "none") {
        return Ok(Vec::new());
    }
    names
        .iter()
        .map(|n| {
            Peer::parse(n).with_context(|| {
                format!("unknown peer `{n}`: choose from c-loop, sockperf, iperf3, none")
            })
        })
        .collect()
}

fn run_udp(args: UdpArgs) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe()
        .context("cannot find the corelane binary to run as receiver and sender")?;
    let mut opts =
        if args.common.quick { UdpLabOptions::quick(exe) } else { UdpLabOptions::full(exe) };
    opts.trials = args.trials.unwrap_or(opts.trials);
    if let Some(d) = args.duration {
        opts.duration = Duration::from_secs(d.as_secs());
    }
    anyhow::ensure!(
        args.offered > 0 && args.offered_gro > 0,
        "--offered and --offered-gro must be above 0"
    );
    opts.offered_pps = args.offered;
    opts.offered_gro_pps = args.offered_gro;
    opts.peers = parse_peers(args.vs)?;
    if let Some(configs) = args.configs {
        for c in &configs {
            anyhow::ensure!(
                c == "none" || udp::CONFIG_IDS.contains(&c.as_str()),
                "unknown configuration `{c}`: choose from {}, or none",
                udp::CONFIG_IDS.join(", ")
            );
        }
        opts.only = Some(configs);
    }
    conduct(
        &args.common,
        "the testbed and every process it started were removed",
        |stop, progress| udp::run(&opts, stop, progress),
        report::udp_text,
        report::udp_csv,
    )
}

/// Checks that the reports can be written, runs the experiment (Ctrl-C stops it and says what
/// was cleaned up), then prints its table and writes its JSON and CSV.
fn conduct<R: serde::Serialize>(
    common: &CommonArgs,
    cleaned: &str,
    run: impl FnOnce(&StopSignal, &mut dyn FnMut(&str)) -> Result<R, LabError>,
    text: fn(&R) -> String,
    csv: fn(&R) -> Result<Vec<u8>, LabError>,
) -> anyhow::Result<ExitCode> {
    for path in [&common.json, &common.csv].into_iter().flatten() {
        report::check_writable(path)?;
    }
    let stop = stop_on_signals()?;
    let report = match run(&stop, &mut |line| eprintln!("{line}")) {
        Ok(r) => r,
        Err(LabError::Interrupted) => return interrupted(cleaned),
        Err(e) => return Err(e.into()),
    };
    publish(common, text(&report), serde_json::to_vec_pretty(&report)?, csv(&report)?)
}

/// Ctrl-C during an experiment: say what was cleaned up, exit 130 like a shell would.
fn interrupted(cleaned: &str) -> anyhow::Result<ExitCode> {
    eprintln!("corelane: interrupted; {cleaned}");
    Ok(ExitCode::from(130))
}

/// Prints the table and writes the JSON and CSV reports asked for. Everything is formatted
/// before this is called, so a formatting failure writes neither file.
fn publish(
    common: &CommonArgs,
    text: String,
    json: Vec<u8>,
    csv: Vec<u8>,
) -> anyhow::Result<ExitCode> {
    crate::args::out(text.trim_end_matches('\n'));
    for (path, bytes) in [(&common.json, json), (&common.csv, csv)] {
        if let Some(path) = path {
            report::write_atomic(path, &bytes)?;
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn run_copy(args: CopyArgs) -> anyhow::Result<ExitCode> {
    let mut opts = if args.common.quick { CopyLabOptions::quick() } else { CopyLabOptions::full() };
    if let Some(size) = args.size {
        anyhow::ensure!(size >= 1 << 20, "--size must be at least 1M");
        opts.size = size as u64;
    }
    opts.trials = args.trials.unwrap_or(opts.trials);
    conduct(
        &args.common,
        "the scratch tmpfs was unmounted and removed",
        |stop, progress| copy_lab::run(&opts, stop, progress),
        report::copy_text,
        report::copy_csv,
    )
}

fn run_tcp(args: TcpArgs) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe()
        .context("cannot find the corelane binary to run as server and load generator")?;
    let mut opts =
        if args.common.quick { TcpLabOptions::quick(exe) } else { TcpLabOptions::full(exe) };
    opts.trials = args.trials.unwrap_or(opts.trials);
    if let Some(d) = args.duration {
        anyhow::ensure!(d >= Duration::from_secs(1), "--duration must be at least 1s");
        opts.duration = d;
    }
    opts.connections = args.connections;
    if let Some(names) = args.vs {
        opts.peers = if names.iter().any(|n| n == "none") {
            Vec::new()
        } else {
            names
                .iter()
                .map(|n| {
                    tcp_lab::Peer::parse(n).with_context(|| {
                        format!("unknown peer `{n}`: choose from nginx, lighttpd, wrk, none")
                    })
                })
                .collect::<anyhow::Result<_>>()?
        };
    }
    if let Some(configs) = args.configs {
        for c in &configs {
            anyhow::ensure!(
                c == "none" || tcp_lab::CONFIG_IDS.contains(&c.as_str()),
                "unknown configuration `{c}`: choose from {}, or none",
                tcp_lab::CONFIG_IDS.join(", ")
            );
        }
        opts.only = Some(configs);
    }
    conduct(
        &args.common,
        "the testbed and every server and client it started were removed",
        |stop, progress| tcp_lab::run(&opts, stop, progress),
        report::tcp_text,
        report::tcp_csv,
    )
}

fn run_affinity(args: AffinityArgs) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe()
        .context("cannot find the corelane binary to run as server, receiver and load")?;
    let mut opts = if args.common.quick {
        AffinityLabOptions::quick(exe)
    } else {
        AffinityLabOptions::full(exe)
    };
    opts.trials = args.trials.unwrap_or(opts.trials);
    if let Some(d) = args.duration {
        anyhow::ensure!(d >= Duration::from_secs(3), "--duration must be at least 3s");
        opts.duration = Duration::from_secs(d.as_secs());
    }
    anyhow::ensure!(args.offered > 0, "--offered must be above 0");
    opts.offered_pps = args.offered;
    conduct(
        &args.common,
        "the testbed and every process it started were removed",
        |stop, progress| affinity_lab::run(&opts, stop, progress),
        report::affinity_text,
        report::affinity_csv,
    )
}

fn run_sched(args: SchedArgs) -> anyhow::Result<ExitCode> {
    let mut opts =
        if args.common.quick { SchedLabOptions::quick() } else { SchedLabOptions::full() };
    if let Some(workers) = args.workers {
        anyhow::ensure!(
            !workers.is_empty() && workers.iter().all(|w| (1..=1024).contains(w)),
            "--workers takes counts from 1 to 1024"
        );
        opts.sim_workers = workers;
    }
    match args.vs.as_deref() {
        None | Some("dpdk") => {}
        Some("none") => opts.vs_dpdk = false,
        Some(other) => anyhow::bail!("unknown peer `{other}`: choose dpdk or none"),
    }
    if let Some(names) = args.schedulers {
        opts.schedulers = names
            .iter()
            .map(|n| n.parse::<corelane::sched::Kind>().map_err(anyhow::Error::msg))
            .collect::<anyhow::Result<_>>()?;
    }
    if let Some(names) = args.workloads {
        opts.workloads = names
            .iter()
            .map(|n| {
                corelane::sched::Workload::parse(n).with_context(|| {
                    format!("unknown workload `{n}`: choose from uniform, zipf, elephant, 10-flows, 1-flow")
                })
            })
            .collect::<anyhow::Result<_>>()?;
    }
    conduct(
        &args.common,
        "every worker thread was stopped",
        |stop, progress| sched_lab::run(&opts, stop, progress),
        report::sched_text,
        report::sched_csv,
    )
}
