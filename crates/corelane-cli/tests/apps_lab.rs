//! `corelane lab apps` as CI runs it: every installed program's rows have their answers
//! checked (or the program is skipped with what to install), lane rows run or are skipped
//! because this build has no `corelane run`, and neither a finished run nor Ctrl-C leaves a
//! process it started (watched in its process tree while it runs: Spark's JVMs among them), a
//! namespace, its private directory or a directory of Spark's behind.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::is_root;

const APPS: [&str; 6] = ["nginx", "memcached", "redis", "apache", "apache-prefork", "mapreduce"];

/// A process: PID and start time (so a reused PID is not mistaken for it).
type Proc = (u32, u64);

fn state_and_start(pid: u32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    corelane::stats::stat_state_and_start(&stat)
}

fn alive((pid, start): Proc) -> bool {
    matches!(state_and_start(pid), Some((state, s)) if s == start && state != 'Z')
}

/// Every descendant of `root` now (the lab's own walk of a process tree, `root` left out).
fn descendants(root: u32) -> Vec<Proc> {
    let tree = corelane_lab::apps::threads::processes_of(root);
    tree.iter()
        .filter(|p| p.pid != root)
        .filter_map(|p| Some((p.pid, state_and_start(p.pid)?.1)))
        .collect()
}

/// Watches the lab's process tree every 20 ms while it runs: every process it ever started
/// (the programs, their workers, load generators), with their names.
struct Watch {
    seen: std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<Proc, String>>>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watch {
    fn start(root: u32) -> Self {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::new()));
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s, d) = (seen.clone(), done.clone());
        let thread = std::thread::spawn(move || {
            while !d.load(std::sync::atomic::Ordering::Relaxed) {
                for p in descendants(root) {
                    let comm =
                        std::fs::read_to_string(format!("/proc/{}/comm", p.0)).unwrap_or_default();
                    s.lock().unwrap().insert(p, comm.trim().to_string());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Self { seen, done, thread: Some(thread) }
    }

    /// Whether a process named `comm` was seen.
    fn saw(&self, comm: &str) -> bool {
        self.seen.lock().unwrap().values().any(|c| c == comm)
    }

    /// Stops watching; returns every process seen that still runs.
    fn left(self) -> Vec<String> {
        self.left_within(Duration::ZERO)
    }

    /// Stops watching; returns every process seen that still runs `grace` later (or sooner,
    /// once none does).
    fn left_within(mut self, grace: Duration) -> Vec<String> {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap();
        let seen = self.seen.lock().unwrap();
        let end = Instant::now() + grace;
        loop {
            let left: Vec<String> = seen
                .iter()
                .filter(|(p, _)| alive(**p))
                .map(|(p, c)| format!("{c} (pid {})", p.0))
                .collect();
            if left.is_empty() || Instant::now() >= end {
                return left;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Starts `corelane lab apps --quick ARGS` (its stderr piped) and watches its process tree.
fn start_lab_apps(args: &[&str], stdout: Stdio) -> (std::process::Child, u32, Watch) {
    let child = Command::new(env!("CARGO_BIN_EXE_corelane"))
        .args(["lab", "apps", "--quick"])
        .args(args)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    (child, pid, Watch::start(pid))
}

/// Whether a private directory of lab run `pid` is still in the temporary directory.
fn dir_left(pid: u32) -> bool {
    let mark = format!("corelane-lab-apps-{pid}-");
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with(&mark))
}

fn namespaces_of(pid: u32) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let prefix = format!("corelane-{pid}-");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .map(str::to_string)
        .collect()
}

/// Where CI keeps this test's reports, as `lab all --json STEM.json --csv STEM.csv --report
/// STEM.html` would write the apps experiment's (`STEM.apps.json`, …): CI runs `lab all
/// --quick --skip apps` and reports these, so the quick apps run (Spark's JVMs the longest
/// of it) is made once. Unset, they go to a temporary directory.
const KEEP_REPORTS: &str = "CORELANE_CI_LAB_STEM";

#[test]
fn every_installed_program_is_checked_or_skipped_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let stem = std::env::var_os(KEEP_REPORTS)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.path().join("lab"));
    let [json, csv, html] =
        ["json", "csv", "html"].map(|ext| stem.with_extension(format!("apps.{ext}")));
    let mut args = vec!["--json", json.to_str().unwrap(), "--csv", csv.to_str().unwrap()];
    if std::env::var_os(KEEP_REPORTS).is_some() {
        args.extend(["--report", html.to_str().unwrap()]);
    }
    let (child, pid, watch) = start_lab_apps(&args, Stdio::piped());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = report["rows"].as_array().unwrap();
    let skipped: Vec<&str> =
        report["skipped"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    let with_run = report["launcher"] == "corelane run";
    if !with_run {
        let reason = "threads and uring lane rows: corelane run is not available in this build";
        assert!(skipped.contains(&reason), "{skipped:?}");
    }
    for app in APPS {
        let mine: Vec<&serde_json::Value> = rows.iter().filter(|r| r["app"] == app).collect();
        if mine.is_empty() {
            let why = format!("{app}: ");
            // pyspark is not a Debian package: its reason says how to install it with pip.
            let says_how = |s: &str| s.contains("apt-get install") || s.contains("pip install");
            assert!(
                skipped.iter().any(|s| s.starts_with(&why) && says_how(s)),
                "{app} neither measured nor skipped with a reason: {skipped:?}"
            );
            eprintln!("not checked here: {app} is not installed");
            continue;
        }
        let lanes: Vec<&str> = mine.iter().map(|r| r["lane"].as_str().unwrap()).collect();
        // MapReduce's JVMs start slowly: --quick runs it without a lane and with threads.
        let uring = with_run
            && app != "mapreduce"
            && !skipped.iter().any(|s| s.contains("offers no uring lane"));
        let expected = [("none", true), ("threads", with_run), ("uring", uring)];
        let expected: Vec<&str> = expected.iter().filter(|e| e.1).map(|e| e.0).collect();
        assert_eq!(lanes, expected, "{app}");
        for row in mine {
            assert!(row["median_rps"].as_f64().unwrap() > 0.0, "{row}");
            assert!(row["cpu_us_per_request"].as_f64().unwrap() > 0.0, "{row}");
            assert!(!row["checked"].as_array().unwrap().is_empty(), "{row}");
            if app == "mapreduce" {
                let job = &row["job"];
                assert!(job["median_secs"].as_f64().unwrap() > 0.0, "job time: {row}");
                assert!(job["shuffle_write_bytes"].as_f64().unwrap() > 0.0, "{row}");
                // The master, two workers and an executor under each: every one's threads read.
                assert!(job["jvms"].as_u64().unwrap() >= 5, "{row}");
            }
            if row["lane"] != "none" {
                assert!(row["lane_threads"].as_u64().unwrap() > 0, "no syscall thread: {row}");
                assert!(row["lane_us_per_request"].as_f64().unwrap() > 0.0, "{row}");
                let calls: u64 = row["delegated"]
                    .as_object()
                    .unwrap()
                    .values()
                    .map(|v| v.as_u64().unwrap())
                    .sum();
                assert!(calls > 0, "nothing delegated: {row}");
            }
        }
    }
    if rows.iter().any(|r| r["app"] == "memcached") {
        let text = std::fs::read_to_string(&json).unwrap();
        assert!(text.contains("memccapable passed"), "memccapable was not run");
    }
    let header = std::fs::read_to_string(&csv).unwrap().lines().next().unwrap().to_owned();
    for column in
        ["app", "placement", "lane", "median_rps", "cpu_us_per_request", "lane_us_per_request"]
    {
        assert!(header.split(',').any(|c| c == column), "{header}");
    }
    assert_eq!(watch.left(), Vec::<String>::new(), "processes left running");
    assert!(!dir_left(pid), "the private directory was left behind");
    assert_eq!(namespaces_of(pid), Vec::<String>::new());
}

/// Ctrl-C while a program serves: the lab says what it removed, exits 130, and leaves no
/// program, namespace or private directory.
#[test]
fn ctrl_c_mid_trial_leaves_nothing_behind() {
    if !is_root() || !std::path::Path::new("/usr/sbin/nginx").exists() {
        eprintln!("skipped: needs root and nginx (apt-get install nginx-light wrk curl)");
        return;
    }
    let nginx = ["--apps", "nginx", "--lanes", "none", "--placements", "NS,NC,NZ"];
    let (mut child, pid, watch) = start_lab_apps(&nginx, Stdio::null());
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let started = lines.by_ref().map_while(Result::ok).any(|l| l.contains("programs start under"));
    assert!(started, "the lab never got to its trials");
    // Until nginx serves, then mid-trial.
    let end = Instant::now() + Duration::from_secs(30);
    while !watch.saw("nginx") && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(watch.saw("nginx"), "nginx never started");
    std::thread::sleep(Duration::from_millis(700));
    let lab = rustix::process::Pid::from_raw(pid as i32).unwrap();
    rustix::process::kill_process(lab, rustix::process::Signal::INT).unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{rest:?}");
    assert!(rest.iter().any(|l| l.contains("interrupted")), "{rest:?}");
    assert_eq!(watch.left(), Vec::<String>::new(), "processes left running");
    assert!(!dir_left(pid), "the private directory was left behind");
    assert_eq!(namespaces_of(pid), Vec::<String>::new());
}

/// Spark's files and directories in the temporary directory now (a JVM's `spark-*`,
/// `blockmgr-*`, `hsperfdata_*`, extracted native libraries): none may be the lab's.
fn spark_entries_in_tmp() -> std::collections::BTreeSet<String> {
    let marks = ["spark", "blockmgr", "hsperfdata", "liblz4", "snappy", "zstd"];
    std::fs::read_dir("/tmp")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| marks.iter().any(|m| n.contains(m)))
        .collect()
}

/// The lab's stderr lines, as read after the start.
type Lines = std::io::Lines<BufReader<std::process::ChildStderr>>;

/// Starts the MapReduce row under the threads lane with a job long enough to stop in, and
/// waits until its executors run (a JVM under each worker; with the master, the workers and
/// the driver's, six), then 5 s more: mid-job. `None`, after saying why, when mapreduce
/// cannot run here.
fn lab_mid_job() -> Option<(std::process::Child, u32, Watch, Lines)> {
    if !is_root() || !std::path::Path::new("/usr/bin/java").exists() {
        eprintln!("skipped: needs root and Java (apt-get install openjdk-17-jre-headless)");
        return None;
    }
    let args = ["--apps", "mapreduce", "--lanes", "threads", "--records", "20000000"];
    let (mut child, pid, watch) = start_lab_apps(&args, Stdio::null());
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    if !lines.by_ref().map_while(Result::ok).any(|l| l.contains("programs start under")) {
        let status = child.wait().unwrap();
        panic!("the lab never got to its trials ({status})");
    }
    let end = Instant::now() + Duration::from_secs(300);
    let jvms = || watch.seen.lock().unwrap().values().filter(|c| *c == "java").count();
    while jvms() < 6 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    if jvms() < 6 {
        signal(pid, rustix::process::Signal::INT);
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        let _ = child.wait();
        if rest.iter().any(|l| l.contains("mapreduce: ")) {
            eprintln!("skipped: mapreduce cannot run here: {rest:?}");
            return None;
        }
        panic!("the cluster's JVMs never started: {rest:?}");
    }
    std::thread::sleep(Duration::from_secs(5));
    Some((child, pid, watch, lines))
}

fn signal(pid: u32, signal: rustix::process::Signal) {
    let lab = rustix::process::Pid::from_raw(pid as i32).unwrap();
    rustix::process::kill_process(lab, signal).unwrap();
}

/// Ctrl-C while the MapReduce job runs under the threads lane: no JVM of the lab's (master,
/// workers, executors, the driver's) is left, and no directory of Spark's in the lab's
/// private directory (removed whole) or in /tmp.
#[test]
fn ctrl_c_mid_job_leaves_no_jvm_and_no_spark_directory() {
    let before = spark_entries_in_tmp();
    let Some((mut child, pid, watch, lines)) = lab_mid_job() else { return };
    signal(pid, rustix::process::Signal::INT);
    let lines: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{lines:?}");
    assert!(watch.saw("java"), "no JVM was watched");
    assert_eq!(watch.left(), Vec::<String>::new(), "processes left running");
    assert!(!dir_left(pid), "the private directory (Spark's directories in it) was left behind");
    let new: Vec<String> = spark_entries_in_tmp().difference(&before).cloned().collect();
    assert_eq!(new, Vec::<String>::new(), "Spark wrote into /tmp");
    assert_eq!(namespaces_of(pid), Vec::<String>::new());
}

/// SIGKILL of the lab while the MapReduce job runs: it cannot clean up, yet within seconds no
/// process it started is left (each had a parent-death signal: the JVMs through `corelane
/// run`, which passes it on to their process group, the driver's Python, whose JVM ends with
/// its stdin) and its private directory, Spark's directories in it, is gone (removed by the
/// guard it left for that). Its namespaces stay until the next lab start removes them.
#[test]
fn sigkill_mid_job_leaves_no_jvm_and_no_spark_directory() {
    let before = spark_entries_in_tmp();
    let Some((mut child, pid, watch, _lines)) = lab_mid_job() else { return };
    signal(pid, rustix::process::Signal::KILL);
    let status = child.wait().unwrap();
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9));
    assert!(watch.saw("java") && watch.saw("python"), "no JVM or driver was watched");
    let left = watch.left_within(Duration::from_secs(30));
    assert_eq!(left, Vec::<String>::new(), "processes left running");
    let end = Instant::now() + Duration::from_secs(10);
    while dir_left(pid) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!dir_left(pid), "the private directory (Spark's directories in it) was left behind");
    let new: Vec<String> = spark_entries_in_tmp().difference(&before).cloned().collect();
    assert_eq!(new, Vec::<String>::new(), "Spark wrote into /tmp");
}
