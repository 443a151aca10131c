//! One trial of the MapReduce row: Spark's master and two workers started placed (each
//! under `corelane run` with the row's lane) in the receiving namespace, the PySpark driver
//! on the load generator's CPU in the other; once the driver says its executors are up and
//! warm, the lab opens the CPU window and lets the measured job run; the window closes when
//! the driver says the job is done. Every JVM's threads (the workers' executors among them)
//! are read from /proc and must be on their CPUs; the answer must match the one computed
//! apart; then the driver, the workers and the master stop and every process of their trees
//! ends, and the trial's directory is removed.

use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use corelane::lane::StopSignal;
use serde::Deserialize;

use super::placement::Launcher;
use super::spark::{self, Answer, Role, Spark, TrialDir};
use super::threads::{self, Times};
use super::trial::{self, JobTrial, Placed, RunSummary, Running, ServeTrial};
use crate::host::Host;
use crate::LabError;

/// Where one MapReduce trial runs.
#[derive(Debug, Clone, Copy)]
pub struct JobStage<'a> {
    pub rx: &'a Host,
    pub tx: &'a Host,
    /// The cluster's address (rx side) and the driver's (tx side).
    pub cluster: IpAddr,
    pub driver: IpAddr,
    /// The master's port.
    pub port: u16,
    /// The lab's private directory: the trial's directory goes inside it.
    pub dir: &'a Path,
    pub records: u64,
    /// The driver's CPU (the load generator's).
    pub driver_cpu: usize,
    pub spark: &'a Spark,
    pub java: &'a str,
    /// Ctrl-C: a trial lasts minutes, so it is watched throughout, not only between trials.
    pub stop: &'a StopSignal,
}

/// How long the cluster may take to start, the driver to get its executors and warm them
/// up, and the measured job to run, on a busy machine.
const MASTER_WAIT: Duration = Duration::from_secs(120);
const READY_WAIT: Duration = Duration::from_secs(300);
const JOB_WAIT: Duration = Duration::from_secs(600);
const RESULT_WAIT: Duration = Duration::from_secs(60);

/// A line the driver prints (one JSON object each).
#[derive(Debug, Deserialize)]
struct DriverLine {
    ready: Option<bool>,
    done: Option<bool>,
    result: Option<JobResult>,
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
struct JobResult {
    #[serde(flatten)]
    answer: Answer,
    job_s: f64,
    shuffle_write_bytes: u64,
    shuffle_read_bytes: u64,
}

/// The cluster: the master, then the workers, each a placed program.
struct Cluster {
    jvms: Vec<Running>,
}

impl Cluster {
    fn start(at: &JobStage<'_>, dir: &TrialDir, placed: &Placed<'_>) -> Result<Self, LabError> {
        let start = |role: Role| -> Result<Running, LabError> {
            let mut args = spark::environment(at.spark, dir, role, at.cluster);
            args.extend(spark::jvm_command(at.spark, at.java, dir, role, at.cluster, at.port));
            let tag = format!("{}-{}", placed.tag, role.name().replace(' ', "-"));
            let placed = Placed { tag, ..placed.clone() };
            trial::start(at.rx, &role.name(), &placed, dir.path(), "env", &args)
        };
        let mut master = start(Role::Master)?;
        master.wait_until_within(MASTER_WAIT, || {
            if at.stop.is_stopped() {
                return Err(LabError::Interrupted);
            }
            at.rx.tcp_listening(at.port)
        })?;
        let mut jvms = vec![master];
        for n in 1..=spark::WORKERS {
            jvms.push(start(Role::Worker(n))?);
        }
        Ok(Self { jvms })
    }

    fn threads(&self) -> Vec<Vec<threads::Thread>> {
        self.jvms.iter().map(Running::threads).collect()
    }

    /// The error for a JVM of the cluster having exited, if one has.
    fn exited(&mut self) -> Option<LabError> {
        self.jvms.iter_mut().find_map(Running::exited)
    }

    /// Stops the workers, then the master; their run summaries (under `corelane run`).
    fn stop(self) -> Result<Vec<RunSummary>, LabError> {
        let mut summaries = Vec::new();
        for jvm in self.jvms.into_iter().rev() {
            summaries.extend(jvm.stop()?);
        }
        Ok(summaries)
    }
}

/// Reads the driver's lines until one `wanted` says is the awaited one (within `waited`);
/// an error line, the driver or a JVM of the cluster exiting, or the time running out is an
/// error naming it.
fn await_line(
    (driver, cluster): (&mut Running, &mut Cluster),
    stop: &StopSignal,
    waited: Duration,
    what: &'static str,
    wanted: impl Fn(&DriverLine) -> bool,
) -> Result<DriverLine, LabError> {
    let end = Instant::now() + waited;
    while Instant::now() < end {
        if stop.is_stopped() {
            return Err(LabError::Interrupted);
        }
        if let Some(line) = driver.child.next_line(Duration::from_millis(100)) {
            // The driver's JVM shares its stdout: only JSON objects are the driver's.
            let Ok(parsed) = serde_json::from_str::<DriverLine>(&line) else { continue };
            if let Some(error) = parsed.error {
                return Err(LabError::ChildOutput { child: "spark driver".into(), problem: error });
            }
            if wanted(&parsed) {
                return Ok(parsed);
            }
            continue;
        }
        if driver.child.wait_timeout(Duration::ZERO).is_some() {
            // Its JVM holds the stderr pipe a moment longer (it exits when the driver's
            // Python does): the error shows what they printed once it closed.
            std::thread::sleep(Duration::from_secs(2));
        }
        if let Some(error) = driver.exited().or_else(|| cluster.exited()) {
            return Err(error);
        }
    }
    Err(driver.child.timed_out(what, waited))
}

/// The CPU the cluster's trees used between two readings, the JVMs seen, and the syscall
/// threads counted; an error if a thread ran outside `placed` or a worker had no executor.
fn window(
    before: &[Vec<threads::Thread>],
    after: &[Vec<threads::Thread>],
    placed: &Placed<'_>,
) -> Result<(Times, usize, usize), LabError> {
    let mut used = Times::default();
    let (mut jvms, mut lane_threads) = (0, 0);
    for (i, (b, a)) in before.iter().zip(after).enumerate() {
        let t = threads::times(a).since(&threads::times(b));
        used.program += t.program;
        used.lane += t.lane;
        let role = if i == 0 { Role::Master } else { Role::Worker(i) };
        let bad = |problem| LabError::ChildOutput { child: role.name(), problem };
        lane_threads +=
            threads::check_placement(a, &placed.app_cpus, &placed.syscall_cpus).map_err(bad)?;
        let mut pids: Vec<u32> = a.iter().map(|t| t.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        if i > 0 && pids.len() < 2 {
            return Err(bad(format!("had no executor during the job (processes {pids:?})")));
        }
        jvms += pids.len();
    }
    Ok((used, jvms, lane_threads))
}

/// The run summaries of the cluster's JVMs as one: the calls every JVM's lane carried (or
/// left in place) added up; the lane and the first note as they reported them.
fn merged(summaries: Vec<RunSummary>) -> Option<RunSummary> {
    let mut all = summaries.into_iter();
    let mut first = all.next()?;
    for s in all {
        for (kind, n) in s.delegated {
            *first.delegated.entry(kind).or_default() += n;
        }
        first.lane_note = first.lane_note.or(s.lane_note);
        first.in_place += s.in_place;
    }
    Some(first)
}

/// One trial: start the cluster and the driver, measure the job, check its answer, stop all.
pub fn run(at: &JobStage<'_>, placed: &Placed<'_>) -> Result<ServeTrial, LabError> {
    let dir = TrialDir::create(at.dir, &placed.tag)?;
    let mut cluster = Cluster::start(at, &dir, placed)?;
    let mut args = spark::environment(at.spark, &dir, Role::Driver, at.driver);
    let driver_args =
        spark::driver_command(at.spark, &dir, at.cluster, at.port, at.driver, at.records);
    args.extend(driver_args);
    let child = at.tx.spawn_pinned("spark driver", at.driver_cpu, "env", &args)?;
    let mut driver = Running::unplaced(child, "spark driver");
    let ready = |l: &DriverLine| l.ready == Some(true);
    let both = (&mut driver, &mut cluster);
    await_line(both, at.stop, READY_WAIT, "did not get its executors", ready)?;
    let before = cluster.threads();
    crate::apps::programs::write_private(dir.path(), "go", b"")?;
    let done = |l: &DriverLine| l.done == Some(true);
    let both = (&mut driver, &mut cluster);
    await_line(both, at.stop, JOB_WAIT, "did not finish the job", done)?;
    let (used, jvms, lane_threads) = window(&before, &cluster.threads(), placed)?;
    let has_result = |l: &DriverLine| l.result.is_some();
    let both = (&mut driver, &mut cluster);
    let line = await_line(both, at.stop, RESULT_WAIT, "printed no result", has_result)?;
    let result = line.result.ok_or_else(|| LabError::Options("no result".into()))?;
    let checked = check(&result, at.records)?;
    driver.stop()?;
    let run = merged(cluster.stop()?);
    if matches!(placed.launcher, Launcher::Run { .. }) && run.is_none() {
        return Err(LabError::Options("corelane run wrote no summary for the cluster".into()));
    }
    let records = result.answer.records;
    Ok(ServeTrial {
        rps: records as f64 / result.job_s.max(1e-9),
        requests: records,
        p99_us: None,
        program_us_per_request: trial::us_per(used.program, records),
        lane_us_per_request: trial::us_per(used.lane, records),
        lane_threads,
        checked,
        run,
        job: Some(JobTrial {
            job_secs: result.job_s,
            shuffle_write_bytes: result.shuffle_write_bytes,
            shuffle_read_bytes: result.shuffle_read_bytes,
            jvms,
        }),
    })
}

/// The driver's answer against the one computed apart; what was checked.
fn check(result: &JobResult, records: u64) -> Result<String, LabError> {
    let want = spark::expected(records);
    if result.answer != want || result.job_s <= 0.0 {
        return Err(LabError::ChildOutput {
            child: "spark driver".into(),
            problem: format!(
                "the job answered {:?} in {} s; computed apart: {want:?}",
                result.answer, result.job_s
            ),
        });
    }
    Ok(format!(
        "group-by of {} records into {} keys: count and checksum match the values computed apart",
        want.records, want.groups
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(answer: Answer) -> JobResult {
        JobResult { answer, job_s: 1.5, shuffle_write_bytes: 10, shuffle_read_bytes: 10 }
    }

    /// A wrong count, group count or checksum is an error naming both answers.
    #[test]
    fn a_wrong_answer_is_refused() {
        let want = spark::expected(1000);
        assert!(check(&result(want), 1000).unwrap().contains("1000 records into 500 keys"));
        for wrong in [
            Answer { checksum: want.checksum + 1, ..want },
            Answer { records: 999, ..want },
            Answer { groups: 499, ..want },
        ] {
            let err = check(&result(wrong), 1000).unwrap_err().to_string();
            assert!(err.contains("computed apart"), "{err}");
        }
        let line: DriverLine = serde_json::from_str(
            r#"{"result": {"groups": 2, "records": 4, "checksum": 405160, "job_s": 2.0, "shuffle_write_bytes": 7, "shuffle_read_bytes": 7, "stages": 3}}"#,
        )
        .unwrap();
        assert_eq!(line.result.unwrap().answer, spark::expected(4));
    }

    #[test]
    fn the_jvms_calls_are_added_up() {
        let summary = |send: u64, note: Option<&str>| RunSummary {
            corelane_run_summary: 1,
            syscall_lane: "threads".into(),
            lane_note: note.map(String::from),
            delegated: [("send".to_string(), send)].into_iter().collect(),
            in_place: send * 10,
        };
        let m = merged(vec![summary(3, None), summary(4, Some("n")), summary(5, None)]).unwrap();
        assert_eq!((m.delegated["send"], m.lane_note.as_deref()), (12, Some("n")));
        assert_eq!(m.in_place, 120);
        assert!(merged(Vec::new()).is_none());
    }
}
