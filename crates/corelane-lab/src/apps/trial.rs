//! One trial: a program started placed (and with its lane) in the receiving namespace,
//! loaded from the other, its answers checked, its threads' CPU time read over the load and
//! its placement read back from /proc; then it is stopped, every process of its tree ended
//! by PID, and `corelane run`'s summary read.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use corelane::topology::CpuList;
use corelane::udp::{PingInterval, PingSummary};
use serde::Deserialize;

use super::placement::{Lane, Launcher};
use super::programs::{self, App, Stage};
use super::threads::{self, Times};
use crate::host::Host;
use crate::output;
use crate::process::ChildProcess;
use crate::LabError;

/// How one program is placed for a trial.
#[derive(Debug, Clone)]
pub struct Placed<'a> {
    pub launcher: &'a Launcher,
    pub app_cpus: CpuList,
    pub syscall_cpus: CpuList,
    pub lane: Lane,
    /// Names the summary file, so no two trials share one.
    pub tag: String,
}

/// What `corelane run --json` wrote (the fields the lab reads; the contract is in
/// docs/ARCHITECTURE.md).
#[derive(Debug, Clone, Deserialize)]
pub struct RunSummary {
    pub corelane_run_summary: u32,
    pub syscall_lane: String,
    pub lane_note: Option<String>,
    pub delegated: BTreeMap<String, u64>,
    /// Calls left to the program's own threads on a contended syscall CPU.
    #[serde(default)]
    pub in_place: u64,
}

/// A program running placed, with what it needs to be stopped and read.
pub(super) struct Running {
    pub(super) child: ChildProcess,
    /// How errors name it.
    name: String,
    /// Whether the child is `corelane run` (its own threads are not the program's).
    supervised: bool,
    summary: Option<PathBuf>,
    /// Set once the tree was ended.
    ended: bool,
}

/// What one trial of a server measured.
#[derive(Debug, Clone)]
pub struct ServeTrial {
    pub rps: f64,
    pub requests: u64,
    pub p99_us: Option<f64>,
    pub program_us_per_request: f64,
    pub lane_us_per_request: f64,
    /// Syscall threads found (`cl-sys-N`, `iou-sqp-*`).
    pub lane_threads: usize,
    pub checked: String,
    pub run: Option<RunSummary>,
    /// The MapReduce row's own figures (`None` for the servers).
    pub job: Option<JobTrial>,
}

/// What a MapReduce trial measured beyond a row's common figures.
#[derive(Debug, Clone)]
pub struct JobTrial {
    /// The measured job's time, as the driver timed it.
    pub job_secs: f64,
    pub shuffle_write_bytes: u64,
    pub shuffle_read_bytes: u64,
    /// JVM processes seen in the cluster's trees during the job (master, workers, executors).
    pub jvms: usize,
}

/// Starts `program args` on `rx` placed as `placed` says.
pub(super) fn start(
    rx: &Host,
    name: &str,
    placed: &Placed<'_>,
    dir: &std::path::Path,
    program: &str,
    args: &[String],
) -> Result<Running, LabError> {
    let json = dir.join(format!("run-{}.json", placed.tag));
    let (exe, argv) = placed.launcher.command(
        &placed.app_cpus,
        placed.lane,
        &placed.syscall_cpus,
        &json,
        program,
        args,
    );
    let child = rx.spawn(name, &exe, &argv)?;
    let supervised = matches!(placed.launcher, Launcher::Run { .. });
    let summary = supervised.then_some(json);
    Ok(Running { child, name: name.into(), supervised, summary, ended: false })
}

impl Running {
    /// A child the lab started itself, not placed (a client): ended as a placed one is.
    pub(super) fn unplaced(child: ChildProcess, name: &str) -> Self {
        Running { child, name: name.into(), supervised: false, summary: None, ended: false }
    }

    pub(super) fn threads(&self) -> Vec<threads::Thread> {
        threads::threads_of(self.child.pid(), self.supervised)
    }

    /// The error for the program having exited already, if it has.
    pub(super) fn exited(&mut self) -> Option<LabError> {
        let status = self.child.wait_timeout(Duration::ZERO)?;
        Some(self.child.failed(status))
    }

    /// Runs `work` (the load) and returns what it gave, the CPU the program's threads and its
    /// lane's used meanwhile, and how many syscall-lane threads it has; an error if a thread
    /// ran outside `placed`.
    fn measure<T>(
        &self,
        placed: &Placed<'_>,
        work: impl FnOnce() -> Result<T, LabError>,
    ) -> Result<(T, Times, usize), LabError> {
        let before = threads::times(&self.threads());
        let out = work()?;
        let seen = self.threads();
        let used = threads::times(&seen).since(&before);
        let lane_threads = threads::check_placement(&seen, &placed.app_cpus, &placed.syscall_cpus)
            .map_err(|problem| LabError::ChildOutput { child: self.name.clone(), problem })?;
        Ok((out, used, lane_threads))
    }

    /// Waits until `ready` says the program serves (polled every 20 ms), or fails with why.
    fn wait_until(
        &mut self,
        ready: impl FnMut() -> Result<bool, LabError>,
    ) -> Result<(), LabError> {
        self.wait_until_within(Duration::from_secs(15), ready)
    }

    /// [`wait_until`](Self::wait_until) for at most `waited` (a JVM takes longer than 15 s
    /// to listen on a busy machine).
    pub(super) fn wait_until_within(
        &mut self,
        waited: Duration,
        mut ready: impl FnMut() -> Result<bool, LabError>,
    ) -> Result<(), LabError> {
        let end = Instant::now() + waited;
        while Instant::now() < end {
            if ready()? {
                return Ok(());
            }
            if let Some(status) = self.child.wait_timeout(Duration::ZERO) {
                return Err(self.child.failed(status));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(self.child.timed_out("did not start serving", waited))
    }

    /// Stops the program (SIGINT, which `corelane run` forwards), ends by PID any process
    /// of its tree still running after 10 s, and reads `corelane run`'s summary.
    pub(super) fn stop(mut self) -> Result<Option<RunSummary>, LabError> {
        let exited = self.end();
        let Some(path) = self.summary.take() else { return Ok(None) };
        let text = std::fs::read(&path);
        let _ = std::fs::remove_file(&path);
        let text = text.map_err(|e| {
            let why = if exited { "" } else { " (it did not exit within 10 s of SIGINT)" };
            LabError::io(format!("corelane run wrote no summary {}{why}", path.display()), e)
        })?;
        serde_json::from_slice(&text).map(Some).map_err(|source| LabError::ChildJson {
            child: "corelane run".into(),
            line: String::from_utf8_lossy(&text).chars().take(400).collect(),
            source,
        })
    }

    /// SIGINT to the child, then SIGKILL by PID to every process of its tree (taken before
    /// the signal) still running 10 s later — a master killed before its workers leaves
    /// them orphaned, so the child alone is not enough. Returns whether the child exited.
    fn end(&mut self) -> bool {
        if self.ended {
            return true;
        }
        self.ended = true;
        let tree = threads::processes_of(self.child.pid());
        self.child.interrupt();
        let exited = self.child.wait_timeout(Duration::from_secs(10)).is_some();
        for p in tree.iter().filter(|p| p.alive()) {
            p.kill();
        }
        let _ = self.child.wait_timeout(Duration::from_secs(2));
        let end = Instant::now() + Duration::from_secs(5);
        while tree.iter().any(|p| p.alive()) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(10));
        }
        exited
    }
}

/// An error or Ctrl-C mid-trial ends the program's whole tree too.
impl Drop for Running {
    fn drop(&mut self) {
        self.end();
        if let Some(path) = self.summary.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// One trial of `app`: start, load, check, stop. `suite`: run the program's own test suite
/// too (memccapable).
pub fn serve(
    app: App,
    stage: &Stage<'_>,
    placed: &Placed<'_>,
    suite: bool,
    index: usize,
) -> Result<ServeTrial, LabError> {
    let (program, args) = programs::server_command(app, stage)?;
    let mut running = start(stage.rx, app.id(), placed, stage.dir, &program, &args)?;
    let (rx, port) = (stage.rx, stage.port);
    running.wait_until(|| rx.tcp_listening(port))?;
    let requests = programs::requests_for(app, stage)?;
    let (load, used, lane_threads) =
        running.measure(placed, || programs::load(app, stage, requests))?;
    let checked = programs::check(app, stage, suite, index)?;
    let run = running.stop()?;
    Ok(ServeTrial {
        rps: load.rps,
        requests: load.requests,
        p99_us: load.p99_us,
        program_us_per_request: us_per(used.program, load.requests),
        lane_us_per_request: us_per(used.lane, load.requests),
        lane_threads,
        checked,
        run,
        job: None,
    })
}

/// `used` in µs per unit (request, round trip, record) over `units`.
pub(super) fn us_per(used: Duration, units: u64) -> f64 {
    used.as_secs_f64() * 1e6 / units.max(1) as f64
}

/// What one ping-pong trial measured: round trips in µs, CPU per round trip in µs.
#[derive(Debug, Clone)]
pub struct PingTrial {
    pub p50_us: f64,
    pub p99_us: f64,
    pub round_trips: u64,
    pub program_us_per_round_trip: f64,
    pub lane_us_per_round_trip: f64,
    pub run: Option<RunSummary>,
}

/// Where the ping-pong runs: the echo's address and the compiled echo.
#[derive(Debug, Clone)]
pub struct PingStage<'a> {
    pub rx: &'a Host,
    pub tx: &'a Host,
    pub target: std::net::SocketAddr,
    pub echo: PathBuf,
    pub client_cpu: usize,
    pub duration: Duration,
    pub dir: &'a std::path::Path,
}

/// The warm-up before the ping measures (its CPU is read from then on).
const WARMUP: Duration = Duration::from_millis(500);

/// One ping-pong: the C echo placed, `corelane udp ping` against it from the other side;
/// every reply must be an intact answer to a message sent.
pub fn ping(at: &PingStage<'_>, placed: &Placed<'_>) -> Result<PingTrial, LabError> {
    let args = [at.target.ip().to_string(), at.target.port().to_string()];
    let echo = at.echo.display().to_string();
    let mut running = start(at.rx, "udp echo", placed, at.dir, &echo, &args)?;
    let (rx, port) = (at.rx, at.target.port());
    running.wait_until(|| rx.udp_bound(port))?;
    let mut argv = vec!["udp".to_string(), "ping".into(), at.target.to_string(), "--json".into()];
    argv.extend(["--pin".into(), at.client_cpu.to_string(), "--size".into(), "64".into()]);
    argv.extend(["-d".into(), format!("{}ms", at.duration.as_millis())]);
    argv.extend(["--warmup".into(), format!("{}ms", WARMUP.as_millis())]);
    const PING: &str = "corelane ping";
    let client = at.tx.spawn(PING, &at.tx.corelane()?, &argv)?;
    std::thread::sleep(WARMUP);
    let budget = at.duration + WARMUP + Duration::from_secs(20);
    let (lines, used, _) = running.measure(placed, || client.finish(budget))?;
    let s: PingSummary = output::summary::<PingInterval, PingSummary>(PING, &lines)?;
    if s.received == 0 || s.invalid > 0 || s.duplicates > 0 {
        return Err(LabError::ChildOutput {
            child: "udp echo".into(),
            problem: format!(
                "answered {} of {} pings intact ({} damaged or unknown, {} duplicated)",
                s.received, s.sent, s.invalid, s.duplicates
            ),
        });
    }
    let run = running.stop()?;
    Ok(PingTrial {
        p50_us: s.latency.p50,
        p99_us: s.latency.p99,
        round_trips: s.received,
        program_us_per_round_trip: us_per(used.program, s.received),
        lane_us_per_round_trip: us_per(used.lane, s.received),
        run,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary `corelane run --json` writes, as its contract gives it; a summary without
    /// a field the lab reads is an error, never a zero.
    #[test]
    fn run_summaries_are_read_and_a_missing_field_refused() {
        let text = r#"{"corelane_run_summary":1,"command":["redis-server"],"exit_status":0,"signal":2,"app_cpus":"0","syscall_cpus":"1","syscall_lane":"threads","lane_note":null,"delegated":{"send":5,"recv":7,"read":0,"write":0,"accept":1,"connect":0,"poll":3,"epoll_wait":9,"sendfile":0,"close":1,"other":0},"syscall_threads":{"count":1,"cpu_ns":12345},"program":{"cpu_ns":999,"processes":1},"wall_ns":100}"#;
        let s: RunSummary = serde_json::from_str(text).unwrap();
        assert_eq!((s.corelane_run_summary, s.syscall_lane.as_str()), (1, "threads"));
        assert_eq!(s.delegated.values().sum::<u64>(), 26);
        let without = text.replace("\"delegated\"", "\"moved\"");
        let err = serde_json::from_str::<RunSummary>(&without).unwrap_err().to_string();
        assert!(err.contains("delegated"), "{err}");
    }

    /// A program whose child outlives it (SIGINT ignored, as a daemon's worker might): ending
    /// the program must end the child too, by PID, and nothing of the tree may be left.
    #[test]
    fn a_stopped_program_leaves_no_process_of_its_tree() {
        let dir = tempfile::tempdir().unwrap();
        let launcher = Launcher::Taskset;
        let placed = Placed {
            launcher: &launcher,
            app_cpus: CpuList::new(vec![0]),
            syscall_cpus: CpuList::new(vec![0]),
            lane: Lane::None,
            tag: "orphan".into(),
        };
        // The background child ignores SIGINT and SIGTERM; the shell dies of SIGINT.
        let script = "(trap '' INT TERM; exec sleep 300) & echo started; wait";
        let args = ["-c".to_string(), script.into()];
        let running = start(&Host::Local, "sh", &placed, dir.path(), "sh", &args).unwrap();
        assert_eq!(running.child.next_line(Duration::from_secs(10)).as_deref(), Some("started"));
        let tree = threads::processes_of(running.child.pid());
        assert!(tree.len() >= 2, "the shell and its child: {tree:?}");
        assert_eq!(running.stop().unwrap().map(|r| r.corelane_run_summary), None);
        let left: Vec<_> = tree.iter().filter(|p| p.alive()).collect();
        assert!(left.is_empty(), "left running: {left:?}");
    }
}
