//! `corelane run` must not change what a program's calls are allowed to do, nor which
//! descriptor they act on: a call carried by either syscall lane runs with its calling
//! thread's rights (credentials, capabilities, fsuid, seccomp, Landlock, descriptor table) or
//! is not carried. Each case runs a small C program (tests/run/rights.c) natively and under
//! both lanes and requires the same output, byte for byte, whatever the fix does (rebuild
//! the carriers or stop carrying). Also: the run never hangs on a program that closes
//! descriptors it did not open, never outlives a `kill -9`, writes nothing where the program
//! pointed it, and reads no plan or revert file that never ends.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::is_root;
use serde_json::Value;

/// The compiled tests/run/rights.c, or why there is none.
fn program() -> Result<&'static str, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| common::compile_run_program("rights"));
    built.as_ref().map(|p| p.to_str().unwrap()).map_err(Clone::clone)
}

macro_rules! program_or_skip {
    () => {
        match program() {
            Ok(p) => p,
            Err(why) => return eprintln!("skipped: {why}"),
        }
    };
}

macro_rules! root_or_skip {
    ($why:literal) => {
        if !is_root() {
            return eprintln!(concat!("skipped: not root (", $why, ")"));
        }
    };
}

/// The syscall lane's CPU: 1 on two CPUs (the program on 0), else 0.
fn syscall_cpu() -> &'static str {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus >= 2 {
        "1"
    } else {
        "0"
    }
}

/// How a case is run: natively (`corelane run` without a syscall lane), then under each lane.
const LANES: [&str; 3] = ["native", "threads", "uring"];

fn lane_args(lane: &str) -> Vec<String> {
    let mut args = vec!["--app-cpus".to_string(), "0".to_string()];
    if lane != "native" {
        args.extend(["--syscall-cpus", syscall_cpu(), "--syscall-lane", lane].map(String::from));
    }
    args
}

/// Every process below `pid` (read from /proc while they live), deepest last.
fn descendants(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut queue = vec![pid];
    while let Some(p) = queue.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else { continue };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                if found.len() < 256 && !found.contains(&child) {
                    found.push(child);
                    queue.push(child);
                }
            }
        }
    }
    found
}

fn kill(pid: u32) {
    if let Some(p) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
    }
}

/// Kills a run that overstayed, and every process it started (an old `corelane run` leaves
/// its program behind when killed).
fn kill_tree(child: &mut Child) {
    let below = descendants(child.id());
    let _ = child.kill();
    below.into_iter().for_each(kill);
    let _ = child.wait();
    // An old run leaves its private directory too.
    private_dirs(child.id()).iter().for_each(|d| drop(std::fs::remove_dir_all(d)));
}

/// Runs `corelane run ARGS --json F -- COMMAND` to its end, or fails the test after `bound`
/// (killing it and what it started); its output and summary.
fn run_bounded(args: &[String], command: &[&str], bound: Duration) -> (Output, Value) {
    let json = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_corelane"));
    cmd.arg("run").args(args).arg("--json").arg(json.path()).arg("--").args(command);
    // cargo sets LD_LIBRARY_PATH for tests; a root run would note that it drops it.
    cmd.env_remove("LD_LIBRARY_PATH").stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > bound {
            kill_tree(&mut child);
            panic!("corelane run {args:?} -- {command:?} hung (still running after {bound:?})");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = std::fs::read_to_string(json.path()).unwrap_or_default();
    (out, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// One lane's run of a case.
struct LaneRun {
    lane: &'static str,
    stdout: String,
    summary: Value,
    elapsed: Duration,
}

/// Runs `command` natively and under both lanes (each bounded by `bound`); the problems found
/// (a lane whose output differs from the native run's), and every run.
fn compare_lanes(command: &[&str], bound: Duration) -> (Vec<String>, Vec<LaneRun>) {
    let mut runs = Vec::new();
    for lane in LANES {
        let start = Instant::now();
        let (out, summary) = run_bounded(&lane_args(lane), command, bound);
        let elapsed = start.elapsed();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        eprintln!("[{lane}]\n{stdout}{}", String::from_utf8_lossy(&out.stderr));
        runs.push(LaneRun { lane, stdout, summary, elapsed });
    }
    let native = runs[0].stdout.clone();
    let problems = runs[1..]
        .iter()
        .filter(|r| r.stdout != native)
        .map(|r| format!("{} lane printed\n{}instead of the native\n{native}", r.lane, r.stdout))
        .collect();
    (problems, runs)
}

/// That the summary of a lane's run names a stop for changed rights (`change`, when given,
/// says which call changed them).
fn lane_off_problem(run: &LaneRun, change: Option<&str>) -> Option<String> {
    let entries = run.summary["lane_off"].as_array().cloned().unwrap_or_default();
    let named = entries
        .iter()
        .any(|e| e["reason"] == "rights_changed" && change.is_none_or(|c| e["change"] == c));
    (!named).then(|| {
        format!(
            "{} lane: no lane_off entry with reason rights_changed{} in {}",
            run.lane,
            change.map(|c| format!(" and change {c}")).unwrap_or_default(),
            run.summary["lane_off"]
        )
    })
}

/// That the native run printed `line` (what the case is about), so that the comparison means
/// something.
fn assert_native_shows(runs: &[LaneRun], line: &str) {
    let native = &runs[0].stdout;
    assert!(native.lines().any(|l| l == line), "the native run printed no `{line}`:\n{native}");
}

/// Runs a rights case on every lane: same output as native (which shows `native_line`), and
/// (with `lane_off`) each lane's summary names why it stopped carrying.
fn rights_case(command: &[&str], native_line: &str, lane_off: Option<Option<&str>>) {
    let (mut problems, runs) = compare_lanes(command, Duration::from_secs(30));
    assert_native_shows(&runs, native_line);
    if let Some(change) = lane_off {
        problems.extend(runs[1..].iter().filter_map(|r| lane_off_problem(r, change)));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// glibc's setresuid reaches every thread: a send after the drop carries nobody's
/// credentials, and a netlink socket opened as root no longer adds addresses.
#[test]
fn a_send_after_setuid_carries_the_new_uid_and_netlink_is_refused() {
    let prog = program_or_skip!();
    root_or_skip!("the program drops from root to nobody");
    rights_case(&[prog, "setuid"], "nobody recv 1 uid 65534", None);
}

/// A raw capset to empty sets (as libcap makes it): the netlink request that needs
/// CAP_NET_ADMIN is refused, as it is natively.
#[test]
fn after_capset_to_nothing_netlink_is_refused_as_natively() {
    let prog = program_or_skip!();
    root_or_skip!("adding an address needs CAP_NET_ADMIN to begin with");
    rights_case(&[prog, "capset"], "no caps add 10.9.9.2 error 1", Some(Some("capset")));
}

/// setfsuid(nobody): the path of a unix socket in root's 0700 directory is looked up as
/// nobody, so connect is refused.
#[test]
fn after_setfsuid_a_connect_to_a_root_only_path_is_refused() {
    let prog = program_or_skip!();
    root_or_skip!("the program changes its fsuid from root to nobody");
    let dir = tempfile::tempdir().unwrap();
    let command = [prog, "setfsuid", dir.path().to_str().unwrap()];
    rights_case(&command, "fsuid nobody connect -1 errno 13", None);
}

/// A raw setresuid in one thread: that thread's send carries nobody's credentials, the
/// others' still root's.
#[test]
fn a_thread_that_dropped_root_by_itself_sends_as_nobody() {
    let prog = program_or_skip!();
    root_or_skip!("the thread drops from root to nobody");
    rights_case(&[prog, "thread-uid"], "thread recv 1 uid 65534", Some(None));
}

/// A seccomp filter that refuses the send calls, on this thread only and then on every
/// thread (TSYNC): send fails with EPERM, as it does natively.
#[test]
fn a_seccomp_filter_refuses_the_carried_send_too() {
    let prog = program_or_skip!();
    let refused = "after filter send -1 errno 1";
    rights_case(&[prog, "seccomp"], refused, Some(None));
    rights_case(&[prog, "seccomp-tsync"], refused, None);
}

/// A Landlock domain that handles TCP connect with no rule: a connect to a loopback
/// listener is refused (EACCES), as it is natively.
#[test]
fn a_landlock_domain_refuses_the_carried_connect_too() {
    let prog = program_or_skip!();
    let (out, _) = run_bounded(&lane_args("native"), &[prog, "landlock"], Duration::from_secs(30));
    let native = String::from_utf8_lossy(&out.stdout);
    if let Some(why) = native.strip_prefix("skip: ") {
        return eprintln!("skipped: this kernel has no Landlock network rules ({})", why.trim());
    }
    rights_case(&[prog, "landlock"], "restricted connect -1 errno 13", Some(None));
}

/// A program that closes every descriptor it did not open (as daemons do), the lane's own
/// among them, then sends again: it finishes within 5 s with the native output.
#[test]
fn closing_descriptors_the_program_did_not_open_does_not_hang_it() {
    let prog = program_or_skip!();
    let (mut problems, runs) = compare_lanes(&[prog, "close-fds"], Duration::from_secs(10));
    assert_native_shows(&runs, "after closing recv 1 uid 0");
    for run in runs.iter().filter(|r| r.elapsed > Duration::from_secs(5)) {
        problems.push(format!("{} lane took {:?}", run.lane, run.elapsed));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A thread with a descriptor table of its own (unshare(CLONE_FILES)) sends on a number that
/// names another socket in the main table: the datagram goes where the thread's socket points.
#[test]
fn a_thread_with_its_own_descriptor_table_sends_on_its_own_socket() {
    let prog = program_or_skip!();
    let (problems, runs) = compare_lanes(&[prog, "unshare-files"], Duration::from_secs(30));
    assert_native_shows(&runs, "thread's receiver got thread");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// bash reads a script's input through descriptor 100 (`exec 100<FILE`) and runs other
/// programs between two reads: the lane must not have taken that number.
#[test]
fn bash_keeps_its_descriptor_100_across_a_child() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lines");
    std::fs::write(&file, "one\ntwo\n").unwrap();
    let script = format!(
        "exec 100<{}; read -u 100 a; /bin/true; read -u 100 b; echo \"$a|$b\"",
        file.display()
    );
    let (problems, runs) = compare_lanes(&["bash", "-c", &script], Duration::from_secs(30));
    assert_native_shows(&runs, "one|two");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// With --no-follow-exec the programs bash starts have neither the library nor any
/// CORELANE_ variable (grep -c prints 0 and exits 1 when nothing matches: the output counts).
#[test]
fn no_follow_exec_leaves_neither_the_library_nor_its_environment_to_children() {
    let script = "true; grep -c corelane_preload /proc/self/maps; env | grep -c '^CORELANE_'; true";
    for lane in LANES {
        let mut args = lane_args(lane);
        args.push("--no-follow-exec".into());
        let (out, _) = run_bounded(&args, &["bash", "-c", script], Duration::from_secs(30));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout, "0\n0\n", "{lane}: library mappings, then CORELANE_ variables");
    }
}

/// Whether process `pid` is gone (reaped, or a zombie that runs no more).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        }
    }
}

/// The private directories of the run whose `corelane` has process id `pid`.
fn private_dirs(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("corelane-run-{pid}-");
    let Ok(entries) = std::fs::read_dir("/tmp") else { return Vec::new() };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// Starts `corelane run ARGS -- sh -c 'echo $$; exec sleep 30'`; the run and the program's pid.
fn start_sleeper(args: &[String]) -> (Child, u32) {
    let mut run = Command::new(env!("CARGO_BIN_EXE_corelane"))
        .arg("run")
        .args(args)
        .args(["--", "sh", "-c", "echo $$; exec sleep 30"])
        .env_remove("LD_LIBRARY_PATH")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = run.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let Ok(line) = rx.recv_timeout(Duration::from_secs(10)) else {
        kill_tree(&mut run);
        panic!("the program never printed its pid");
    };
    (run, line.trim().parse().unwrap())
}

/// `kill -9` of `corelane run`: its program is gone within 1 s, and its private directory
/// once the next `corelane run` has started.
#[test]
fn a_killed_run_takes_its_program_and_its_directory_with_it() {
    let mut problems = Vec::new();
    for lane_cpus in [&[][..], &["--syscall-cpus", syscall_cpu()][..]] {
        let args: Vec<String> = lane_cpus.iter().map(|s| s.to_string()).collect();
        let (mut run, program) = start_sleeper(&args);
        let corelane = run.id();
        if !lane_cpus.is_empty() && private_dirs(corelane).is_empty() {
            problems.push(format!("no /tmp/corelane-run-{corelane}-* while the run lives"));
        }
        run.kill().unwrap();
        run.wait().unwrap();
        let start = Instant::now();
        while !gone(program) && start.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if !gone(program) {
            problems.push(format!("{args:?}: the program (pid {program}) outlived a killed run"));
        }
        kill(program); // the test's own leftover, whatever the verdict
        let next = ["--syscall-cpus".to_string(), syscall_cpu().to_string()];
        let (out, _) = run_bounded(&next, &["true"], Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(0));
        let left = private_dirs(corelane);
        left.iter().for_each(|d| drop(std::fs::remove_dir_all(d)));
        if !left.is_empty() {
            problems.push(format!("{args:?}: {left:?} left after the next run started"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The program replaces the --json file's directory by a link to another: the summary goes
/// to the directory corelane opened at the start (now D.old), nothing where the link points.
#[test]
fn the_summary_is_not_written_where_the_program_moved_its_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let (d, x, old) = (tmp.path().join("D"), tmp.path().join("X"), tmp.path().join("D.old"));
    std::fs::create_dir(&d).unwrap();
    let script =
        format!("mv {0} {1}; mkdir {2}; ln -s {2} {0}", d.display(), old.display(), x.display());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_corelane"));
    cmd.arg("run").arg("--json").arg(d.join("out.json")).args(["--", "sh", "-c", &script]);
    let out = cmd.env_remove("LD_LIBRARY_PATH").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(x.exists() && std::fs::symlink_metadata(&d).unwrap().is_symlink(), "the program ran");
    assert!(!x.join("out.json").exists(), "the summary was written where the program pointed");
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(old.join("out.json")).unwrap()).unwrap();
    assert_eq!(summary["corelane_run_summary"], 1);
}

/// A network namespace of this test's own with two veth pairs (removed on drop).
struct Netns(String);

impl Netns {
    fn with_two_pairs() -> Option<Self> {
        let ns = Self(format!("corelane-rights-{}", std::process::id()));
        let ip = |args: &[&str]| Command::new("ip").args(args).status().is_ok_and(|s| s.success());
        let made = ip(&["netns", "add", &ns.0])
            && ip(&[
                "-n",
                &ns.0,
                "link",
                "add",
                "cl-top",
                "type",
                "veth",
                "peer",
                "name",
                "cl-top-peer",
            ])
            && ip(&[
                "-n",
                &ns.0,
                "link",
                "add",
                "cl-stranger",
                "type",
                "veth",
                "peer",
                "name",
                "cl-str-peer",
            ]);
        made.then_some(ns)
    }

    fn corelane(&self, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.0, env!("CARGO_BIN_EXE_corelane")])
            .args(args)
            .output()
            .unwrap()
    }

    fn rps(&self, nic: &str) -> String {
        let path = format!("/sys/class/net/{nic}/queues/rx-0/rps_cpus");
        let out = Command::new("ip").args(["netns", "exec", &self.0, "cat", &path]).output();
        String::from_utf8_lossy(&out.unwrap().stdout).trim().to_string()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// A plan for `cl-top` whose lower device is `cl-stranger`, a device not under it.
const FOREIGN_LOWER: &str = "nic = \"cl-top\"\nrps_cpus = \"0\"\npolicy = \"custom\"\nnuma_node = 0\n\
irq_cpus = \"0\"\nsyscall_cpus = \"1\"\napp_cpus = \"0\"\n\n[[lower]]\nnic = \"cl-stranger\"\nrps_cpus = \"2\"\n";

/// A plan's `[[lower]]` device must be under its interface: one that is not is refused by
/// name, in the dry run and with --yes, and nothing changes.
#[test]
fn a_lower_device_not_under_the_plans_interface_is_refused() {
    root_or_skip!("the test makes a network namespace");
    let Some(ns) = Netns::with_two_pairs() else {
        return eprintln!("skipped: cannot make a namespace with veth pairs (ip netns add)");
    };
    let dir = tempfile::tempdir().unwrap();
    let (plan, revert) = (dir.path().join("plan.toml"), dir.path().join("revert.json"));
    std::fs::write(&plan, FOREIGN_LOWER).unwrap();
    let before = (ns.rps("cl-top"), ns.rps("cl-stranger"));
    for extra in [&[][..], &["--yes", "--revert", revert.to_str().unwrap()][..]] {
        let mut args = vec!["apply", plan.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = ns.corelane(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{extra:?}: accepted:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(err.contains("cl-stranger"), "{extra:?}: the refusal does not name it: {err}");
        let after = (ns.rps("cl-top"), ns.rps("cl-stranger"));
        assert_eq!(after, before, "{extra:?}: an RPS mask was changed");
    }
    assert!(!revert.exists(), "a refused apply saved a revert file");
}

/// Runs `corelane ARGS`, bounded by 15 s; its output, or why it failed the bound.
fn corelane_bounded(args: &[&str]) -> Result<Output, String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_corelane"))
        .args(args)
        .env_remove("LD_LIBRARY_PATH")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(15) {
            kill_tree(&mut child);
            return Err(format!("corelane {args:?} still reads after 15 s"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(child.wait_with_output().unwrap())
}

/// A device that never ends and a FIFO whose writer stays silent, as a plan (run --plan,
/// apply) and as a revert file: one clear error each, non-zero exit, within 15 s.
#[test]
fn a_plan_or_revert_file_that_never_ends_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from_raw_mode(0o600)).unwrap();
    // Read and write: a writer that opened it and stays silent, without waiting for a reader.
    let _writer = std::fs::OpenOptions::new().read(true).write(true).open(&fifo).unwrap();
    let mut problems = Vec::new();
    for file in [Path::new("/dev/zero"), fifo.as_path()] {
        let f = file.to_str().unwrap();
        for args in [&["run", "--plan", f, "--", "true"][..], &["apply", f], &["revert", f]] {
            match corelane_bounded(args) {
                Err(why) => problems.push(why),
                Ok(out) => {
                    let err = String::from_utf8_lossy(&out.stderr);
                    if out.status.success() || err.lines().count() != 1 || !err.contains(f) {
                        problems.push(format!("corelane {args:?}: {:?} {err}", out.status));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The lane's CPU is counted when the program ends by `_exit` and when SIGTERM (forwarded by
/// `corelane run`) ends it: 100000 carried sends cost more than nothing.
#[test]
fn the_lanes_cpu_is_counted_after_exit_and_after_sigterm() {
    let prog = program_or_skip!();
    let mut problems = Vec::new();
    for lane in ["threads", "uring"] {
        let (_, summary) =
            run_bounded(&lane_args(lane), &[prog, "cpu-exit"], Duration::from_secs(30));
        let cpu = summary["syscall_threads"]["cpu_ns"].as_u64();
        if cpu.is_none_or(|ns| ns == 0) {
            problems.push(format!(
                "{lane} lane after _exit: syscall_threads {}",
                summary["syscall_threads"]
            ));
        }
        let summary = run_until_ready_then_term(&lane_args(lane), &[prog, "cpu-term"]);
        let cpu = summary["syscall_threads"]["cpu_ns"].as_u64();
        if cpu.is_none_or(|ns| ns == 0) {
            problems.push(format!(
                "{lane} lane after SIGTERM: syscall_threads {}",
                summary["syscall_threads"]
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Runs the program until it prints "ready", sends SIGTERM to `corelane run`; the summary.
fn run_until_ready_then_term(args: &[String], command: &[&str]) -> Value {
    let json = tempfile::NamedTempFile::new().unwrap();
    let mut run = Command::new(env!("CARGO_BIN_EXE_corelane"))
        .arg("run")
        .args(args)
        .arg("--json")
        .arg(json.path())
        .arg("--")
        .args(command)
        .env_remove("LD_LIBRARY_PATH")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = run.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let ready = BufReader::new(stdout).lines().map_while(Result::ok).any(|l| l == "ready");
        let _ = tx.send(ready);
    });
    if rx.recv_timeout(Duration::from_secs(20)) != Ok(true) {
        kill_tree(&mut run);
        panic!("{command:?} never got ready");
    }
    let pid = rustix::process::Pid::from_child(&run);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let start = Instant::now();
    while run.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(10) {
            kill_tree(&mut run);
            panic!("corelane run {args:?} still runs 10 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = std::fs::read_to_string(json.path()).unwrap_or_default();
    serde_json::from_str(&text).unwrap_or(Value::Null)
}
