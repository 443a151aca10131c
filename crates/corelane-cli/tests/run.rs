//! `corelane run` with small C programs (tests/run/*.c, compiled here with `cc`): the
//! semantics a program relies on through the syscall lane, placement read back from /proc,
//! exit status and signals, nothing left behind, a hostile environment, and workers that
//! drop root.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::compile_run_program as compile;

/// The compiled test program (tests/run/semantics.c), or why there is none.
fn program() -> Result<&'static Path, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT.get_or_init(|| compile("semantics")).as_deref().map_err(Clone::clone)
}

macro_rules! program_or_skip {
    () => {
        match program() {
            Ok(p) => p,
            Err(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        }
    };
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Two CPUs: the program on 0, the syscall thread on 1 (one CPU: both on 0).
fn placement_args() -> Vec<String> {
    let sys = if cpus() >= 2 { "1" } else { "0" };
    ["--app-cpus", "0", "--syscall-cpus", sys].map(String::from).to_vec()
}

/// Runs `corelane run ARGS -- PROGRAM…`, failing the test if it takes more than 30 s.
fn run_with(
    args: &[String],
    command: &[&str],
    env: &[(&str, &str)],
) -> (Output, serde_json::Value) {
    let json = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_corelane"));
    cmd.arg("run").args(args).arg("--json").arg(json.path()).arg("--").args(command);
    // cargo sets LD_LIBRARY_PATH for tests; a root run would note that it drops it.
    cmd.env_remove("LD_LIBRARY_PATH");
    cmd.envs(env.iter().copied()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("corelane run {args:?} -- {command:?} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = std::fs::read_to_string(json.path()).unwrap_or_default();
    let summary = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
    (out, summary)
}

fn run_mode(mode: &[&str]) -> (String, i32, serde_json::Value) {
    let prog = program().unwrap().to_str().unwrap().to_string();
    let mut command = vec![prog.as_str()];
    command.extend_from_slice(mode);
    let (out, summary) = run_with(&placement_args(), &command, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    (stdout, out.status.code().unwrap_or(-1), summary)
}

fn delegated(summary: &serde_json::Value, kind: &str) -> u64 {
    summary["delegated"][kind].as_u64().unwrap()
}

#[test]
fn socket_calls_go_to_the_syscall_thread_and_the_summary_says_so() {
    program_or_skip!();
    let (stdout, code, summary) = run_mode(&["echo"]);
    assert_eq!((stdout.trim(), code), ("echo ok", 0));
    assert_eq!(summary["corelane_run_summary"], 1);
    assert_eq!(summary["syscall_lane"], "threads");
    assert_eq!(summary["exit_status"], 0);
    assert_eq!(summary["signal"], serde_json::Value::Null);
    assert_eq!((delegated(&summary, "read"), delegated(&summary, "write")), (1, 1));
    assert_eq!(delegated(&summary, "close"), 2);
    assert_eq!(summary["syscall_threads"]["count"], 1);
    assert!(summary["syscall_threads"]["cpu_ns"].as_u64().unwrap() > 0);
    assert!(summary["program"]["cpu_ns"].as_u64().unwrap() > 0);
}

/// readv/writev and recvmsg/sendmsg on a socket (a non-blocking writer) go to the syscall
/// thread with every buffer of the vector in order (counted as read, write, recv and send);
/// on a pipe they stay the program's own calls.
#[test]
fn vectored_and_message_calls_on_sockets_are_delegated_whole() {
    program_or_skip!();
    let (stdout, code, summary) = run_mode(&["vectored"]);
    assert_eq!((stdout.trim(), code), ("vectored ok", 0));
    let kinds = ["read", "write", "recv", "send"].map(|k| delegated(&summary, k));
    assert_eq!(kinds, [1, 1, 1, 1], "{summary}");
    assert_eq!(delegated(&summary, "close"), 2, "the pipe's ends are not counted");
}

#[test]
fn blocking_accept_in_one_thread_while_another_closes_the_listener() {
    program_or_skip!();
    // The kernel leaves the accept waiting; close and every other call must not wait for it.
    let (stdout, code, summary) = run_mode(&["accept-close"]);
    assert_eq!(code, 0);
    let line = stdout.lines().find(|l| l.starts_with("close ")).unwrap();
    let secs: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(line.starts_with("close 0") && secs < 0.5, "{line}");
    assert!(stdout.contains("other calls ok"));
    assert!(delegated(&summary, "close") >= 1);
}

#[test]
fn a_signal_interrupts_a_blocking_recv_as_the_kernel_would() {
    program_or_skip!();
    let (stdout, _, _) = run_mode(&["eintr"]);
    assert_eq!(stdout.trim(), "recv -1 errno 4 data -", "no SA_RESTART: EINTR");
    let (stdout, _, _) = run_mode(&["restart"]);
    assert_eq!(stdout.trim(), "recv 4 errno 0 data late", "SA_RESTART: restarted");
}

#[test]
fn sigpipe_is_raised_in_the_writer_unless_ignored_or_declined() {
    program_or_skip!();
    let (stdout, code, summary) = run_mode(&["sigpipe", "default"]);
    assert_eq!((stdout.as_str(), code), ("", 141), "killed by SIGPIPE, as a shell reports it");
    assert_eq!(summary["signal"], 13);
    assert_eq!(delegated(&summary, "write"), 1);
    let (stdout, code, _) = run_mode(&["sigpipe", "ignore"]);
    assert_eq!((stdout.trim(), code), ("write -1 errno 32", 0));
    let (stdout, code, _) = run_mode(&["sigpipe", "nosignal"]);
    assert_eq!((stdout.trim(), code), ("send -1 errno 32", 0));
}

#[test]
fn errno_failing_calls_and_nonblocking_sockets_answer_at_once() {
    program_or_skip!();
    let (stdout, code, summary) = run_mode(&["errors"]);
    assert_eq!(code, 0);
    for expected in [
        "send 1 errno 1234",        // success leaves errno alone
        "empty recv -1 errno 11",   // EAGAIN on a non-blocking socket
        "empty accept -1 errno 11", // and a non-blocking listener
        "bad fd recv -1 errno 9",
        "bad fd read -1 errno 9",
        "bad buffer send -1 errno 14",
        "bad poll -1 errno 14",
        "bad close -1 errno 9",
    ] {
        assert!(stdout.lines().any(|l| l == expected), "missing {expected:?} in {stdout}");
    }
    let elapsed: f64 =
        stdout.lines().last().unwrap().trim_start_matches("elapsed ").parse().unwrap();
    assert!(elapsed < 0.9, "a failing call took {elapsed} s (the lane's give-up time is 1 s)");
    assert!(delegated(&summary, "recv") >= 2 && delegated(&summary, "accept") == 1);
}

#[test]
fn pipes_and_files_are_untouched() {
    program_or_skip!();
    let (stdout, code, summary) = run_mode(&["files"]);
    assert_eq!((stdout.trim(), code), ("errno after file io 4321", 0));
    let total: u64 =
        summary["delegated"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(total, 0, "no call on a pipe or a file was delegated: {summary}");
    assert_eq!(summary["syscall_threads"]["count"], 0, "no call needed a syscall thread");
}

#[test]
fn a_forked_child_of_a_threaded_program_gets_its_own_syscall_thread() {
    program_or_skip!();
    let (stdout, code, summary) = run_mode(&["fork"]);
    assert_eq!(code, 0, "{stdout}");
    assert!(stdout.contains("child echo ok"));
    // The child has its main thread and a fresh cl-sys-0, nothing inherited.
    let tasks: Vec<&str> = stdout.lines().filter(|l| l.starts_with("task ")).collect();
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    assert!(tasks.iter().any(|t| t.starts_with("task cl-sys-0 ")), "{tasks:?}");
    assert_eq!(summary["program"]["processes"], 2);
    assert_eq!(summary["syscall_threads"]["count"], 2);
}

#[test]
fn posix_spawn_works_and_the_library_follows_exec_unless_told_not_to() {
    program_or_skip!();
    let (stdout, code, _) = run_mode(&["spawn"]);
    assert_eq!(
        (stdout.trim(), code),
        ("spawned grep status 0", 0),
        "the spawned grep has the library"
    );
    let sh = ["sh", "-c", "grep -q libcorelane_preload /proc/self/maps"];
    let (out, _) = run_with(&placement_args(), &sh, &[]);
    assert_eq!(out.status.code(), Some(0), "followed into exec");
    let mut args = placement_args();
    args.push("--no-follow-exec".into());
    let (out, _) = run_with(&args, &sh, &[]);
    assert_eq!(out.status.code(), Some(1), "dropped at exec");
}

#[test]
fn threads_on_the_application_cpus_syscall_threads_on_the_syscall_cpus() {
    program_or_skip!();
    if cpus() < 2 {
        eprintln!("skipped: one CPU, nothing to tell apart");
        return;
    }
    let (stdout, code, summary) = run_mode(&["placement"]);
    assert_eq!(code, 0);
    let tasks: Vec<&str> = stdout.lines().filter(|l| l.starts_with("task ")).collect();
    assert_eq!(tasks.len(), 3, "{tasks:?}");
    for task in tasks {
        let expected = if task.starts_with("task cl-sys-") { "1" } else { "0" };
        assert!(task.ends_with(&format!("cpus {expected}")), "{task}");
    }
    assert_eq!(
        (summary["app_cpus"].as_str(), summary["syscall_cpus"].as_str()),
        (Some("0"), Some("1"))
    );
}

#[test]
fn exit_status_is_returned_and_sigterm_reaches_the_program() {
    let (out, summary) = run_with(&[], &["sh", "-c", "exit 7"], &[]);
    assert_eq!((out.status.code(), summary["exit_status"].as_i64()), (Some(7), Some(7)));
    assert_eq!(summary["syscall_lane"], "none");
    let mut child = Command::new(env!("CARGO_BIN_EXE_corelane"))
        .args(["run", "--", "sleep", "30"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(10), "SIGTERM did not reach sleep");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(child.wait().unwrap().code(), Some(128 + 15));
}

/// SIGUSR1 (memcached's graceful stop, nginx's log reopen) reaches the program, which handles
/// it and ends as it chooses; before, it ended `corelane run` and the program with it.
#[test]
fn usr1_and_usr2_reach_the_program() {
    let script = "trap 'echo got USR1' USR1; trap 'echo got USR2; exit 3' USR2; \
                  echo ready; i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done";
    let mut child = Command::new(env!("CARGO_BIN_EXE_corelane"))
        .args(["run", "--", "sh", "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line, "ready\n");
    let pid = rustix::process::Pid::from_child(&child);
    for signal in [rustix::process::Signal::USR1, rustix::process::Signal::USR2] {
        rustix::process::kill_process(pid, signal).unwrap();
        std::thread::sleep(Duration::from_millis(300));
    }
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(10), "USR2 did not end the program");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert_eq!((rest.as_str(), child.wait().unwrap().code()), ("got USR1\ngot USR2\n", Some(3)));
}

#[test]
fn nothing_is_left_behind_and_daemonized_children_are_waited_for() {
    program_or_skip!();
    let (stdout, code, _) = run_mode(&["env"]);
    assert_eq!(code, 0);
    let library = stdout.trim().strip_prefix("LD_PRELOAD=").unwrap();
    assert!(
        library.starts_with("/tmp/corelane-run-") && library.ends_with("/libcorelane_preload.so")
    );
    assert!(!Path::new(library).exists(), "{library} was left behind");
    assert!(!Path::new(library).parent().unwrap().exists());
    // A grandchild that left the session still counts: corelane run returns after it.
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("daemon-done");
    let (_, code, summary) = run_mode(&["daemon", marker.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(marker.exists(), "corelane run returned before the daemonized grandchild ended");
    assert_eq!(summary["program"]["processes"], 3);
}

/// A library whose constructor leaves a mark when it runs inside the test program.
const EVIL: &str = r#"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
    char comm[32] = {0};
    int fd = open("/proc/self/comm", O_RDONLY);
    if (fd < 0 || read(fd, comm, sizeof comm - 1) <= 0 || strncmp(comm, "sem", 3)) return;
    const char *mark = getenv("EVIL_MARK");
    if (mark) close(open(mark, O_CREAT | O_WRONLY, 0600));
}
"#;

#[test]
fn a_crafted_environment_cannot_make_root_load_another_library() {
    let prog = program_or_skip!();
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: not root (only root's run drops LD_PRELOAD)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("evil.c");
    std::fs::write(&source, EVIL).unwrap();
    let evil = dir.path().join("evil.so");
    let built =
        Command::new("cc").args(["-shared", "-fPIC", "-o"]).arg(&evil).arg(&source).status();
    assert!(built.unwrap().success());
    let mark = dir.path().join("mark");
    let env = [
        ("LD_PRELOAD", evil.to_str().unwrap()),
        ("LD_LIBRARY_PATH", dir.path().to_str().unwrap()),
        ("EVIL_MARK", mark.to_str().unwrap()),
        ("CORELANE_SYSCALL_CPUS", "0-63"),
        ("CORELANE_SYSCALL_LANE", "bogus"),
        ("CORELANE_STATS_FD", "0"),
    ];
    let (out, summary) = run_with(&placement_args(), &[prog.to_str().unwrap(), "env"], &env);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(!mark.exists(), "the planted library ran in the program");
    assert!(
        stdout.trim().ends_with("/libcorelane_preload.so") && !stdout.contains(':'),
        "{stdout}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("not passing"));
    assert_eq!(summary["syscall_cpus"], placement_args()[3].as_str());
    assert!(delegated(&summary, "write") >= 1, "ours still runs: {summary}");
}

#[test]
fn bad_arguments_fail_with_one_clear_line() {
    let (out, _) = run_with(&["--syscall-cpus".into(), "4000".into()], &["true"], &[]);
    assert_ne!(out.status.code(), Some(0));
    let (out, _) = run_with(&["--app-cpus".into(), "1023".into()], &["true"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("application CPU 1023 is not available here"), "{err}");
    // A missing program is 127, one that cannot be executed 126, as shells and env say.
    let sys = ["--syscall-cpus".to_string(), "0".to_string()];
    let (out, _) = run_with(&sys, &["/nonexistent/program"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim(), "corelane run: /nonexistent/program: not found");
    assert_eq!(out.status.code(), Some(127));
    let (out, _) = run_with(&[], &["corelane-no-such-program"], &[("PATH", "/usr/bin:/bin")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        (err.trim(), out.status.code()),
        (
            "corelane run: corelane-no-such-program: not found (looked in PATH=/usr/bin:/bin)",
            Some(127)
        )
    );
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::write(&data, "not a program").unwrap();
    let (out, _) = run_with(&sys, &[data.to_str().unwrap()], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(126), "{err}");
    assert!(err.contains("cannot be executed") && err.lines().count() == 1, "{err}");
}

/// One syscall thread per CPU named: a CPU named twice is a mistake, refused; the
/// application and syscall lists may share CPUs.
#[test]
fn a_cpu_named_twice_in_one_list_is_refused() {
    for list in ["1,1", "0-2,1"] {
        for flag in ["--syscall-cpus", "--app-cpus"] {
            let (out, _) = run_with(&[flag.into(), list.into()], &["true"], &[]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{flag} {list}: {err}");
            assert!(err.lines().next().unwrap_or("").contains("is named twice"), "{err}");
        }
    }
    let (out, summary) = run_with(
        &["--app-cpus".into(), "0".into(), "--syscall-cpus".into(), "0".into()],
        &["true"],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        (summary["app_cpus"].as_str(), summary["syscall_cpus"].as_str()),
        (Some("0"), Some("0"))
    );
}

/// The start time (field 22 of /proc/PID/stat) of a live, non-zombie process.
fn live_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    (fields.first() != Some(&"Z")).then(|| fields.get(19)?.parse().ok()).flatten()
}

/// SIGKILL to `corelane run` (no lane, and with one): the program is gone within 1 s, not
/// left running unsupervised. The old supervisor left `sleep 60` running its full minute.
#[test]
fn the_program_never_outlives_a_killed_corelane_run() {
    for lane in [vec![], placement_args()] {
        let mut run = Command::new(env!("CARGO_BIN_EXE_corelane"))
            .arg("run")
            .args(&lane)
            .args(["--", "sleep", "60"])
            .env_remove("LD_LIBRARY_PATH")
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let children = format!("/proc/{0}/task/{0}/children", run.id());
        let start = Instant::now();
        let program = loop {
            let text = std::fs::read_to_string(&children).unwrap_or_default();
            if let Some(pid) = text.split_whitespace().find_map(|p| p.parse::<u32>().ok()) {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                if comm.trim() == "sleep" {
                    break pid;
                }
            }
            assert!(start.elapsed() < Duration::from_secs(10), "{lane:?}: sleep never started");
            std::thread::sleep(Duration::from_millis(20));
        };
        let started = live_start(program).unwrap();
        run.kill().unwrap();
        run.wait().unwrap();
        let killed = Instant::now();
        while live_start(program) == Some(started) {
            if killed.elapsed() > Duration::from_secs(1) {
                let _ = rustix::process::kill_process(
                    rustix::process::Pid::from_raw(program as i32).unwrap(),
                    rustix::process::Signal::KILL,
                );
                panic!("{lane:?}: the program outlived a killed corelane run by over 1 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[test]
fn a_plan_gives_the_cpus_and_a_malformed_one_is_named() {
    program_or_skip!();
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    let sys = placement_args()[3].clone();
    let text = format!(
        "nic = \"lo\"\npolicy = \"custom\"\nnuma_node = 0\nirq_cpus = \"0\"\nsyscall_cpus = \"{sys}\"\n\
         app_cpus = \"0\"\nrps_cpus = \"\"\nirqs = []\n"
    );
    std::fs::write(&plan, text).unwrap();
    let prog = program().unwrap().to_str().unwrap();
    let args = ["--plan".to_string(), plan.to_str().unwrap().to_string()];
    let (out, summary) = run_with(&args, &[prog, "echo"], &[]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        (summary["app_cpus"].as_str(), summary["syscall_cpus"].as_str()),
        (Some("0"), Some(sys.as_str()))
    );
    assert_eq!(delegated(&summary, "write"), 1);
    std::fs::write(&plan, "nic = 3").unwrap();
    let (out, _) = run_with(&args, &[prog, "echo"], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a plan written by `corelane plan`"), "{err}");
}

/// A network namespace of this test's own (removed on drop), for changing its `lo`.
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Option<Self> {
        let name = format!("corelane-run-{tag}-{}", std::process::id());
        let made = Command::new("ip").args(["netns", "add", &name]).status();
        made.is_ok_and(|s| s.success()).then_some(Self(name))
    }

    fn sh(&self, script: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.0, "sh", "-c", script]);
        cmd
    }

    fn rps(&self) -> String {
        let out = self.sh("cat /sys/class/net/lo/queues/rx-0/rps_cpus").output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn apply_changes_the_nic_for_the_run_and_a_kill_still_reverts_it() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: not root (--apply changes a NIC)");
        return;
    }
    let Some(ns) = Netns::new("apply") else {
        eprintln!("skipped: cannot make a network namespace (ip netns add)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    let text =
        "nic = \"lo\"\npolicy = \"custom\"\nnuma_node = 0\nirq_cpus = \"0\"\nsyscall_cpus = \"\"\n\
                app_cpus = \"0\"\nrps_cpus = \"1\"\nirqs = []\n";
    std::fs::write(&plan, text).unwrap();
    let before = ns.rps();
    let exe = env!("CARGO_BIN_EXE_corelane");
    let script = format!(
        "exec {exe} run --plan {} --apply -- cat /sys/class/net/lo/queues/rx-0/rps_cpus",
        plan.display()
    );
    let out = ns.sh(&script).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1", "changed for the run");
    assert_eq!(ns.rps(), before, "reverted when the program exited");
    // SIGKILL to corelane run: the keeper still restores the NIC.
    let script = format!("exec {exe} run --plan {} --apply -- sleep 30", plan.display());
    let mut run = ns.sh(&script).stderr(Stdio::null()).spawn().unwrap();
    let start = Instant::now();
    while ns.rps() != "1" {
        assert!(start.elapsed() < Duration::from_secs(10), "the plan was never applied");
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = run.id();
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    run.kill().unwrap();
    run.wait().unwrap();
    for child in children.split_whitespace().filter_map(|c| c.parse::<i32>().ok()) {
        if let Some(p) = rustix::process::Pid::from_raw(child) {
            let _ = rustix::process::kill_process_group(p, rustix::process::Signal::KILL);
        }
    }
    let start = Instant::now();
    while ns.rps() != before {
        assert!(start.elapsed() < Duration::from_secs(10), "a killed run left the NIC changed");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_uring_lane_runs_the_calls_on_its_sqpoll_thread_with_the_same_semantics() {
    let prog = program_or_skip!().to_str().unwrap();
    let mut args = placement_args();
    args.extend(["--syscall-lane".to_string(), "uring".to_string()]);
    let (out, summary) = run_with(&args, &[prog, "placement"], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert_eq!(summary["syscall_lane"], "uring");
    if summary["lane_note"].is_string() {
        eprintln!("skipped the SQPOLL checks: {}", summary["lane_note"]);
    } else {
        let sqpoll: Vec<&str> = stdout.lines().filter(|l| l.starts_with("task iou-sqp-")).collect();
        assert_eq!(sqpoll.len(), 1, "{stdout}");
        assert!(sqpoll[0].ends_with(&format!("cpus {}", placement_args()[3])), "{stdout}");
        assert!(!stdout.contains("cl-sys-"), "no syscall threads of ours: {stdout}");
    }
    // (In "placement" another thread's first call starts the ring; calls meanwhile go direct.)
    let (_, summary) = run_with(&args, &[prog, "echo"], &[]);
    assert_eq!((delegated(&summary, "read"), delegated(&summary, "write")), (1, 1));
    for (mode, expected) in [
        (&["errors"][..], "empty recv -1 errno 11"),
        (&["eintr"][..], "recv -1 errno 4 data -"),
        (&["restart"][..], "recv 4 errno 0 data late"),
        (&["sigpipe", "ignore"][..], "write -1 errno 32"),
    ] {
        let mut command = vec![prog];
        command.extend_from_slice(mode);
        let (out, _) = run_with(&args, &command, &[]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.lines().any(|l| l == expected), "{mode:?}: {stdout}");
    }
    let (out, summary) = run_with(&args, &[prog, "sigpipe", "default"], &[]);
    assert_eq!((out.status.code(), summary["signal"].as_i64()), (Some(141), Some(13)));
}

#[test]
fn a_forked_worker_that_drops_root_cannot_use_the_parents_ring() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: not root (the workers drop from root to nobody)");
        return;
    }
    let prog = match compile("inherited_ring") {
        Ok(prog) => prog,
        Err(why) => return eprintln!("skipped: {why}"),
    };
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "root only\n").unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let mut args = placement_args();
    args.extend(["--syscall-lane".to_string(), "uring".to_string()]);
    let command = [prog.to_str().unwrap(), secret.to_str().unwrap()];
    let (out, summary) = run_with(&args, &command, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    if stdout.contains("parent: io_uring fds 0") {
        return eprintln!("skipped: no io_uring here ({})", summary["lane_note"]);
    }
    let lines: Vec<&str> = stdout.lines().collect();
    for expected in [
        "parent: io_uring fds 1 mappings 2",
        // The ring takes only the lane's own operations, from anyone.
        "parent: own ring OPENAT res=-13",
        // A forked worker has neither the parent's fd nor its mappings...
        "fork child: uid 65534 io_uring fds 0 mappings 0",
        // ...and its own first call makes its own ring, as restricted.
        "fork child: own ring fds 1 mappings 2",
        "fork child: own ring OPENAT res=-13",
        // A raw clone skips atfork: it keeps the fd (no close-on-fork exists), not the
        // mappings (MADV_DONTFORK); mapping the fd itself, it finds the ring restricted.
        "clone child: inherited fd OPENAT res=-13",
        "clone child: inherited fd REGISTER_PERSONALITY res=-13",
        // The restricted ring still carries the lane's calls.
        "parent: send after 1",
    ] {
        assert!(lines.contains(&expected), "no `{expected}` in:\n{stdout}");
    }
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("clone child: uid 65534 ") && l.ends_with(" mappings 0")),
        "{stdout}"
    );
    assert!(delegated(&summary, "send") >= 2, "{summary}");
}

/// Runs as PID 1 of a new PID namespace (after the reviewer's reuse.sh): `corelane run` a
/// program that daemonizes and exits at once, give its PID to a new process group leader
/// (the victim), then SIGTERM corelane run. Prints who got the signal.
const PID_REUSE: &str = r#"
B=$1; D=$2
"$B" run -- sh -c "echo \$\$ > $D/leader; setsid sleep 30 </dev/null >/dev/null 2>&1 & exit 0" 2>"$D/run.err" &
RUN=$!
for i in $(seq 200); do [ -s "$D/leader" ] && break; sleep 0.05; done
L=$(cat "$D/leader")
# Until corelane run has reaped the program, its PID is not free.
for i in $(seq 200); do [ -e /proc/$L ] || break; sleep 0.05; done
echo $((L - 1)) > /proc/sys/kernel/ns_last_pid
setsid sh -c "trap 'echo victim got SIGTERM; exit' TERM; echo \$\$ > $D/victim; while :; do sleep 0.1; done" >>"$D/victim.log" &
for i in $(seq 200); do [ -s "$D/victim" ] && break; sleep 0.05; done
[ "$(cat "$D/victim")" = "$L" ] && echo "victim has the program's pid $L" || echo "victim did not get pid $L"
kill -TERM $RUN
# The daemon gets it instead: its sleep ends, and corelane run with it.
for i in $(seq 100); do kill -0 $RUN 2>/dev/null || break; sleep 0.05; done
kill -0 $RUN 2>/dev/null && echo "corelane run still waits" || echo "corelane run ended"
sleep 0.3
cat "$D/victim.log"
"#;

#[test]
fn signals_never_reach_a_process_group_that_reused_the_programs_pid() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: not root (the test needs a PID namespace of its own)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "bash", "-c", PID_REUSE, "bash"])
        .arg(env!("CARGO_BIN_EXE_corelane"))
        .arg(dir.path())
        .env_remove("LD_LIBRARY_PATH")
        .output();
    let out = match out {
        Ok(out) if out.status.success() => out,
        Ok(out) if String::from_utf8_lossy(&out.stderr).contains("unshare") => {
            return eprintln!("skipped: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        Ok(out) => panic!("{out:?}"),
        Err(e) => return eprintln!("skipped: no unshare ({e})"),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let run_err = std::fs::read_to_string(dir.path().join("run.err")).unwrap_or_default();
    assert!(stdout.contains("victim has the program's pid"), "{stdout}");
    assert!(!stdout.contains("victim got SIGTERM"), "{stdout}");
    assert!(stdout.contains("corelane run ended"), "{stdout}{run_err}");
    assert!(run_err.contains("exited with status 0"), "{run_err}");
}

/// After the program (its group's leader) has exited, a signal still reaches the rest of its
/// group while a child corelane holds is in it: here a grandchild whose parent is alive, which
/// would otherwise keep `corelane run` waiting long after Ctrl-C.
#[test]
fn a_signal_after_the_program_exits_still_reaches_its_group() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_corelane"))
        .args(["run", "--", "sh", "-c", "sh -c 'sleep 20; true' & exit 0"])
        .env_remove("LD_LIBRARY_PATH")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill(); // its `sleep 20` ends by itself
            panic!("corelane run still waits 10 s after SIGTERM: its program's group never got it");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `bash`, or why a test needing it skips.
fn bash() -> Option<&'static str> {
    let found = Command::new("bash").args(["-c", "true"]).status().is_ok_and(|s| s.success());
    if !found {
        eprintln!("skipped: no bash");
    }
    found.then_some("bash")
}

#[test]
fn a_program_closing_fds_it_did_not_open_never_hangs_the_uring_lane() {
    let prog = match compile("ring_closed") {
        Ok(prog) => prog,
        Err(why) => return eprintln!("skipped: {why}"),
    };
    let mut args = placement_args();
    args.extend(["--syscall-lane".to_string(), "uring".to_string()]);
    // close() and syscall(SYS_close) are seen; the bare instruction is not (the lane notices
    // within a second that its ring is gone, or finds the ring still running).
    for how in ["libc", "syscall", "asm"] {
        let native = Command::new(&prog).arg(how).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&native.stdout), "send 3\nrecv 3\nsend 3\nrecv 3\n");
        let start = Instant::now();
        let (out, summary) = run_with(&args, &[prog.to_str().unwrap(), how], &[]);
        assert!(start.elapsed() < Duration::from_secs(5), "{how}: {:?}", start.elapsed());
        assert_eq!(out.status.code(), Some(0), "{how}: {summary}");
        assert_eq!(out.stdout, native.stdout, "{how}: {summary}");
    }
}

#[test]
fn a_program_that_put_its_own_file_at_the_counters_number_keeps_it_untouched() {
    let Some(bash) = bash() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lines");
    std::fs::write(&file, "first\nsecond\n").unwrap();
    // Each program bash executes loads the library, which finds the counters' fd number
    // (CORELANE_STATS=FD:DEV:INO) is not the counters any more: it must neither seek nor
    // change it.
    let script = format!(
        "fd=${{CORELANE_STATS%%:*}}; eval \"exec $fd<'{}'\"; read -u $fd a; /bin/true; \
         read -u $fd b; echo \"$a $b\"",
        file.display()
    );
    let (out, summary) = run_with(&placement_args(), &[bash, "-c", &script], &[]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "first second\n", "{summary}");
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn no_follow_exec_holds_under_bash_which_has_its_own_environment_functions() {
    let Some(bash) = bash() else { return };
    let script = "grep -c libcorelane_preload /proc/self/maps; env | grep -c '^CORELANE_'";
    let mut args = placement_args();
    args.push("--no-follow-exec".into());
    let (out, _) = run_with(&args, &[bash, "-c", script], &[]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "0\n0\n", "nothing reaches bash's children");
    let (out, _) = run_with(&placement_args(), &[bash, "-c", script], &[]);
    let counts = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!counts.starts_with("0\n"), "followed into exec: {counts}");
}

/// `--json` is opened before the program starts: a program that swaps the summary's directory
/// for a symlink to another one cannot move where the summary is written. The old run
/// resolved the path at the end and wrote through the symlink.
#[test]
fn a_directory_swapped_for_a_symlink_does_not_move_the_summary() {
    let top = tempfile::tempdir().unwrap();
    let (out_dir, moved, elsewhere) =
        (top.path().join("out"), top.path().join("moved"), top.path().join("elsewhere"));
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::create_dir(&elsewhere).unwrap();
    let script = format!(
        "mv {0} {1} && ln -s {2} {0}",
        out_dir.display(),
        moved.display(),
        elsewhere.display()
    );
    let out = Command::new(env!("CARGO_BIN_EXE_corelane"))
        .args(["run", "--json"])
        .arg(out_dir.join("summary.json"))
        .args(["--", "sh", "-c", &script])
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0, "written through the symlink");
    let text = std::fs::read_to_string(moved.join("summary.json")).unwrap();
    assert!(text.contains("\"corelane_run_summary\""), "{text}");
}

/// An idle program's carriers cost next to nothing: a loop of 1 ms epoll and poll waits
/// where nothing arrives, 3 s under each lane, leaves the syscall threads (their exact
/// schedstat runtime, `corelane run`'s summary) under 2 % of a CPU. A carrier that spins
/// after every probed wait, or a wait probed on the carrier every time, fails it.
#[test]
fn an_idle_programs_carriers_cost_under_two_percent_of_a_cpu() {
    let prog = match compile("idle_wait") {
        Ok(p) => p,
        Err(why) => return eprintln!("skipped: {why}"),
    };
    let seconds = 3.0;
    for lane in ["threads", "uring"] {
        let mut args = placement_args();
        args.extend(["--syscall-lane".to_string(), lane.to_string()]);
        let (out, summary) = run_with(&args, &[prog.to_str().unwrap(), "3"], &[]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{lane}: {stdout}");
        assert!(stdout.contains(" ready 0"), "{lane}: nothing ever arrives: {stdout}");
        assert!(delegated(&summary, "send") >= 1, "{lane}: the lane carried: {summary}");
        let cpu_ns = summary["syscall_threads"]["cpu_ns"].as_u64().unwrap();
        let share = cpu_ns as f64 / (seconds * 1e9);
        eprintln!(
            "{lane}: carriers {cpu_ns} ns over {seconds} s ({:.3} % of a CPU)",
            share * 100.0
        );
        assert!(share < 0.02, "{lane}: idle carriers used {:.1} % of a CPU", share * 100.0);
    }
}

/// The summary reaches stderr in one write: a test harness that shares the stream (perl's
/// TAP in memcached's suite) once read an `ok` line that began inside the summary's pieces.
#[test]
fn the_summary_is_one_write_on_stderr() {
    if Command::new("strace").arg("-V").output().is_err() {
        return eprintln!("skipped: no strace (apt-get install strace; .ci/run does)");
    }
    let trace = tempfile::NamedTempFile::new().unwrap();
    let mut args: Vec<String> =
        ["-qq", "-e", "trace=write", "-e", "signal=none", "-s", "4096", "-o"]
            .map(String::from)
            .to_vec();
    args.push(trace.path().to_str().unwrap().to_string());
    args.push(env!("CARGO_BIN_EXE_corelane").to_string());
    args.push("run".to_string());
    args.extend(placement_args());
    args.extend(["--", "true"].map(String::from));
    let out = Command::new("strace").args(&args).env_remove("LD_LIBRARY_PATH").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(trace.path()).unwrap();
    let to_stderr: Vec<&str> = text.lines().filter(|l| l.starts_with("write(2,")).collect();
    assert_eq!(to_stderr.len(), 1, "the summary took several writes: {to_stderr:#?}");
    let one = to_stderr[0];
    assert!(one.contains("exited with status 0") && one.contains("calls: send"), "{one}");
}
