//! `corelane run`: an unmodified program placed on the application CPUs, its network system
//! calls carried by syscall threads on the syscall CPUs (the preloaded library), its exit
//! status returned, and a summary of what moved where.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::Args;
use corelane::run::{abi, preloadable, program_environment, LaneReport, LaneSetting};
use corelane::run::{lane_off_entries, supervise, Delegated, Ended, LaneCpu, LaneMode};
use corelane::run::{not_carried, program_shown, resolve_program, LaneOffEntry, NoWatch};
use corelane::run::{PrivateLibrary, Program, SharedStats, Watch};
use corelane::topology::CpuList;
use rustix::thread::CpuSet;
use serde::Serialize;

/// The system-call library, built from crates/corelane-preload by build.rs.
static PRELOAD_LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libcorelane_preload.so"));

/// At most this many syscall threads per process (the library's bound).
const MAX_SYSCALL_CPUS: usize = abi::MAX_THREADS;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Take the application and syscall CPUs from a plan written by `corelane plan`.
    #[arg(long, value_name = "FILE")]
    plan: Option<PathBuf>,
    /// CPUs for the program's threads and children, e.g. 0 or 2-7 (default: as inherited).
    #[arg(long, value_name = "LIST", value_parser = distinct_cpus)]
    app_cpus: Option<CpuList>,
    /// CPUs for the syscall threads; without it (or a plan) no library is preloaded.
    #[arg(long, value_name = "LIST", value_parser = distinct_cpus)]
    syscall_cpus: Option<CpuList>,
    /// How the network calls reach the syscall CPUs.
    #[arg(long, value_enum, default_value = "threads")]
    syscall_lane: LaneKind,
    /// With --plan: also apply its NIC settings for the run, reverted when the program exits.
    #[arg(long, requires = "plan")]
    apply: bool,
    /// Programs this one executes run without the library (it follows exec by default).
    #[arg(long)]
    no_follow_exec: bool,
    /// Also write the summary as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArgs,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<OsString>,
}

/// A CPU list as the user wrote it: each CPU once (the application and syscall lists may
/// still share CPUs).
fn distinct_cpus(text: &str) -> Result<CpuList, corelane::topology::CpuListError> {
    CpuList::parse_distinct(text)
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LaneKind {
    /// Syscall threads of the library's own, one per syscall CPU (the core-partitioning study's design); where several processes' threads contend for one CPU, their calls are made in place.
    Threads,
    /// An io_uring per process whose SQPOLL thread is pinned to the first syscall CPU.
    Uring,
}

impl LaneKind {
    fn name(self) -> &'static str {
        match self {
            LaneKind::Threads => "threads",
            LaneKind::Uring => "uring",
        }
    }
}

/// What the processes' lanes became, when it is not what was asked.
fn lane_note(kind: LaneKind, report: &LaneReport) -> Option<String> {
    let count = |mode: LaneMode| report.lane_modes[mode as usize];
    let mut notes = Vec::new();
    if matches!(kind, LaneKind::Uring) {
        if count(LaneMode::UringPlain) > 0 {
            notes.push(format!(
                "the kernel refused SQPOLL in {} process(es): a plain io_uring, entered by the program's own threads",
                count(LaneMode::UringPlain)
            ));
        }
        if count(LaneMode::UringUnavailable) > 0 {
            notes.push(format!(
                "no io_uring that could be restricted to the lane's operations in {} process(es) (refused by kernel.io_uring_disabled, a seccomp policy or RLIMIT_MEMLOCK, or a kernel before 5.10): the threads lane ran instead",
                count(LaneMode::UringUnavailable)
            ));
        }
    }
    (!notes.is_empty()).then(|| notes.join("; "))
}

/// What the lane as it ran may cost this program, when the run shows it: several processes
/// with an SQPOLL thread each on the syscall CPU.
fn lane_warning(kind: LaneKind, report: &LaneReport) -> Option<String> {
    let sqpoll = report.lane_modes[LaneMode::UringSqpoll as usize];
    (matches!(kind, LaneKind::Uring) && sqpoll > 1).then(|| {
        format!(
            "{sqpoll} processes each ran an SQPOLL thread on the syscall CPU: each polls its ring for 10 ms after its process's last call, so where busy ones run at once they take that CPU from each other and from whatever else runs there (a pre-forking server placed with its processes on the syscall CPU kept 0.04x of its requests/s); --syscall-lane threads shares a CPU among processes"
        )
    })
}

#[derive(Debug, Serialize)]
struct Summary {
    corelane_run_summary: u32,
    command: Vec<String>,
    exit_status: i32,
    signal: Option<i32>,
    app_cpus: String,
    syscall_cpus: String,
    syscall_lane: &'static str,
    lane_note: Option<String>,
    /// What the lane as it ran may cost (`lane_warning`).
    lane_warning: Option<String>,
    delegated: Delegated,
    syscall_threads: SyscallThreads,
    program: ProgramCpu,
    wall_ns: u64,
    /// The processes whose lane turned itself off.
    lane_off: Vec<LaneOffEntry>,
    /// Times the carriers were rebuilt after a change of credentials every thread followed.
    rebuilt: u64,
    /// Calls the program's threads made themselves because several processes' syscall threads
    /// contended for the syscall CPU (the threads lane stepped aside).
    in_place: u64,
    /// Whether the library could carry the program's calls (false: a static or Go program).
    carried: bool,
    /// Why not, when `carried` is false.
    not_carried: Option<String>,
}

#[derive(Debug, Serialize)]
struct SyscallThreads {
    count: u64,
    cpu_ns: u64,
}

#[derive(Debug, Serialize)]
struct ProgramCpu {
    cpu_ns: u64,
    processes: u64,
}

/// The CPUs this process may use, as a list.
fn allowed_cpus() -> anyhow::Result<CpuList> {
    let set = rustix::thread::sched_getaffinity(None).context("cannot read the CPU affinity")?;
    Ok(CpuList::new((0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect()))
}

fn check_cpus(what: &str, list: &CpuList, allowed: &CpuList) -> anyhow::Result<()> {
    if let Some(cpu) = list.cpus().iter().find(|&&c| !allowed.contains(c)) {
        bail!("{what} CPU {cpu} is not available here (this process may use {allowed}); pick from those");
    }
    Ok(())
}

/// The application and syscall CPUs: from the flags, else from the plan.
fn placement(args: &RunArgs) -> anyhow::Result<(Option<CpuList>, Option<CpuList>)> {
    let plan = args.plan.as_deref().map(crate::apply::read_plan).transpose()?;
    let from_plan = |text: Option<&String>, what: &str| -> anyhow::Result<Option<CpuList>> {
        text.filter(|t| !t.trim().is_empty())
            .map(|t| {
                CpuList::parse_distinct(t)
                    .with_context(|| format!("the plan's {what} CPUs `{t}` are not a CPU list"))
            })
            .transpose()
    };
    let app = match &args.app_cpus {
        Some(list) => Some(list.clone()),
        None => from_plan(plan.as_ref().map(|p| &p.app_cpus), "application")?,
    };
    let syscall = match &args.syscall_cpus {
        Some(list) => Some(list.clone()),
        None => from_plan(plan.as_ref().map(|p| &p.syscall_cpus), "syscall")?,
    };
    let allowed = allowed_cpus()?;
    if let Some(app) = &app {
        check_cpus("application", app, &allowed)?;
    }
    if let Some(sys) = &syscall {
        check_cpus("syscall", sys, &allowed)?;
        if sys.len() > MAX_SYSCALL_CPUS {
            bail!("--syscall-cpus names {} CPUs; at most {MAX_SYSCALL_CPUS} syscall threads are supported", sys.len());
        }
    }
    Ok((app, syscall))
}

/// What a run with a syscall lane holds: the counters and the library's private copy.
struct LaneFiles {
    stats: Arc<SharedStats>,
    library: PrivateLibrary,
}

impl LaneFiles {
    fn create() -> anyhow::Result<Self> {
        let stats = SharedStats::create().context("cannot create the counters")?;
        let library =
            PrivateLibrary::write(PRELOAD_LIBRARY).context("cannot write the syscall library")?;
        if !preloadable(library.path()) {
            bail!("the library path {} cannot go into LD_PRELOAD", library.path().display());
        }
        Ok(Self { stats: Arc::new(stats), library })
    }
}

/// The program's environment (with the lane's variables when there is one).
fn environment(
    args: &RunArgs,
    files: Option<&LaneFiles>,
    syscall: Option<&CpuList>,
) -> anyhow::Result<Vec<(OsString, OsString)>> {
    let lane = match (files, syscall) {
        (Some(files), Some(cpus)) => Some(LaneSetting {
            library: files.library.path(),
            syscall_cpus: cpus,
            lane: args.syscall_lane.name(),
            stats: Some(files.stats.env_value().context("cannot read the counters' identity")?),
            follow_exec: !args.no_follow_exec,
        }),
        _ => None,
    };
    let root = rustix::process::geteuid().is_root();
    let (env, dropped) = program_environment(std::env::vars_os(), root, lane.as_ref());
    let loaders: Vec<&String> =
        dropped.iter().filter(|d| !d.starts_with(abi::ENV_PREFIX)).collect();
    if !loaders.is_empty() {
        eprintln!("corelane run: as root, not passing {loaders:?} to the program (only corelane's library is preloaded)");
    }
    Ok(env)
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let (app, syscall) = placement(&args)?;
    // Directories of killed runs (a SIGKILL leaves no chance to remove them).
    if let Err(e) = corelane::run::remove_dead_runs() {
        eprintln!("corelane run: cannot look for the directories of killed runs in /tmp: {e}");
    }
    let _applied = match (&args.plan, args.apply) {
        (Some(plan), true) => Some(crate::apply::apply_for_run(plan)?),
        _ => None,
    };
    let files = syscall.as_ref().map(|_| LaneFiles::create()).transpose()?;
    let env = environment(&args, files.as_ref(), syscall.as_ref())?;
    // The summary's directory is opened now, once: a program that swaps it for a symlink
    // meanwhile cannot move where the summary (root's, often) is written.
    let json = args
        .json
        .as_deref()
        .map(|path| {
            corelane::fs::OutputFile::open(path)
                .with_context(|| format!("cannot write {}", path.display()))
        })
        .transpose()?;
    // The syscall threads' CPU, read from the kernel while the program runs.
    let lane_cpu = files.as_ref().map(|f| Arc::new(LaneCpu::new(f.stats.clone())));
    let watch: Arc<dyn Watch> = match &lane_cpu {
        Some(cpu) => cpu.clone(),
        None => Arc::new(NoWatch),
    };
    let uncarried = files.as_ref().and_then(|_| uncarried_note(&args.command, &env));
    if let Some(note) = &uncarried {
        eprintln!("corelane run: {note}");
    }
    let _endpoint = match (&files, args.metrics.metrics) {
        (Some(f), Some(_)) => {
            let metrics = corelane::metrics::RunMetrics::new(f.stats.clone());
            let cpus = app.as_ref().map(|a| a.cpus().to_vec());
            crate::metrics::start(&args.metrics, metrics, cpus)?
        }
        (None, Some(_)) => bail!("--metrics needs a syscall lane (--syscall-cpus or a plan): without one nothing is carried to count"),
        _ => None,
    };
    let program = Program { command: &args.command, env, app_cpus: app.as_ref() };
    let ended = match supervise(program, watch) {
        Ok(ended) => ended,
        Err(e) => {
            eprintln!("corelane run: {e}");
            return Ok(ExitCode::from(e.exit_status()));
        }
    };
    let mut report = files.as_ref().map(|f| f.stats.read()).transpose()?.unwrap_or_default();
    if let Some(cpu) = &lane_cpu {
        cpu.sample_now();
        report.syscall_thread_cpu_ns = report.syscall_thread_cpu_ns.max(cpu.total_ns());
    }
    drop(files);
    let mut summary = summarize(&args, app, syscall.as_ref(), &ended, &report)?;
    summary.carried = uncarried.is_none();
    summary.not_carried = uncarried;
    print_summary(&summary);
    if let (Some(out), Some(path)) = (&json, &args.json) {
        let text = serde_json::to_vec_pretty(&summary)?;
        out.write(&text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(ExitCode::from(ended.exit_status.clamp(0, 255) as u8))
}

fn summarize(
    args: &RunArgs,
    app: Option<CpuList>,
    syscall: Option<&CpuList>,
    ended: &Ended,
    report: &LaneReport,
) -> anyhow::Result<Summary> {
    let children = corelane::stats::children_cpu();
    let program_ns = (children.user + children.system).as_nanos() as u64;
    let app = match app {
        Some(list) => list,
        None => allowed_cpus()?,
    };
    Ok(Summary {
        corelane_run_summary: 1,
        command: args.command.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
        exit_status: ended.exit_status,
        signal: ended.signal,
        app_cpus: app.to_string(),
        syscall_cpus: syscall.map(ToString::to_string).unwrap_or_default(),
        syscall_lane: if syscall.is_some() { args.syscall_lane.name() } else { "none" },
        lane_note: syscall.and_then(|_| lane_note(args.syscall_lane, report)),
        lane_warning: syscall.and_then(|_| lane_warning(args.syscall_lane, report)),
        delegated: report.delegated.clone(),
        syscall_threads: SyscallThreads {
            count: report.syscall_threads,
            cpu_ns: report.syscall_thread_cpu_ns,
        },
        program: ProgramCpu {
            cpu_ns: program_ns.saturating_sub(report.syscall_thread_cpu_ns),
            processes: ended.reaped.max(report.processes),
        },
        wall_ns: ended.wall.as_nanos() as u64,
        lane_off: lane_off_entries(&report.lane_off, ended.started_ns),
        rebuilt: report.rebuilt,
        in_place: report.in_place,
        carried: true,
        not_carried: None,
    })
}

/// The one line saying the program's calls cannot be carried (a static or Go program), if so.
fn uncarried_note(command: &[OsString], env: &[(OsString, OsString)]) -> Option<String> {
    let path = resolve_program(command, env)?;
    let kind = not_carried(&path)?;
    Some(format!(
        "{} is {}; its calls will not be carried (it runs all the same)",
        program_shown(&path),
        kind.what()
    ))
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// The summary on stderr in one write, so that it never lands inside a line another
/// process sharing the stream (a test harness's TAP, a shell's log) is writing.
fn print_summary(s: &Summary) {
    use std::io::Write as _;
    let _ = std::io::stderr().write_all(summary_text(s).as_bytes());
}

fn summary_text(s: &Summary) -> String {
    let mut out = Vec::new();
    let how = match s.signal {
        Some(sig) => format!("killed by signal {sig} (status {})", s.exit_status),
        None => format!("exited with status {}", s.exit_status),
    };
    out.push(format!("corelane run: {} {how} after {:.1} ms", s.command.join(" "), ms(s.wall_ns)));
    out.push(format!(
        "  program on CPUs {}: {:.3} ms CPU over {} process(es)",
        s.app_cpus,
        ms(s.program.cpu_ns),
        s.program.processes
    ));
    if s.syscall_lane == "none" {
        out.push(
            "  no syscall lane (no --syscall-cpus): every call ran in the program's threads".into(),
        );
        return out.join("\n") + "\n";
    }
    for line in s.lane_note.iter().chain(&s.lane_warning) {
        out.push(format!("  {line}"));
    }
    let d = &s.delegated;
    out.push(format!(
        "  {} syscall thread(s) on CPUs {} ({}): {:.3} ms CPU, {} calls: send {} recv {} read {} \
         write {} accept {} connect {} poll {} epoll_wait {} sendfile {} close {} other {}",
        s.syscall_threads.count,
        s.syscall_cpus,
        s.syscall_lane,
        ms(s.syscall_threads.cpu_ns),
        d.total(),
        d.send,
        d.recv,
        d.read,
        d.write,
        d.accept,
        d.connect,
        d.poll,
        d.epoll_wait,
        d.sendfile,
        d.close,
        d.other
    ));
    lane_changes(s, &mut out);
    out.join("\n") + "\n"
}

/// The lanes that turned themselves off, the carriers' rebuilds, and the calls the lane left
/// in place.
fn lane_changes(s: &Summary, out: &mut Vec<String>) {
    for off in &s.lane_off {
        out.push(format!(
            "  process {}: the lane turned itself off {:.1} ms after the start: {}; its calls ran in its own threads from then on",
            off.pid, off.after_ms, off.words
        ));
    }
    if s.rebuilt > 0 {
        out.push(format!(
            "  carriers rebuilt {} time(s) after a change of credentials every thread followed",
            s.rebuilt
        ));
    }
    if s.in_place > 0 {
        out.push(format!(
            "  {} calls made in the program's own threads, not carried: several processes' syscall threads contended for the syscall CPU, and there a carried call costs the program's CPU more than the call itself (a process switch or a spin for each); the lane carries where one busy process has a syscall CPU",
            s.in_place
        ));
    }
}
