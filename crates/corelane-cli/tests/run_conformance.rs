//! The conformance suite of `corelane run` (after Onload's socket API suite, which compares
//! every call with the native OS): each program of tests/run/conformance/ runs natively, then
//! under the threads lane and the uring lane, and must print byte for byte what it printed
//! natively and end the same way. Each program prints only what the kernel fixes (results,
//! errno names, data, fd numbers where a call is about numbers). `--json`'s delegated counts
//! prove that the lane carried the program's calls, so the suite cannot pass by the lane
//! being off.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::compile_run_program;

/// Each program, with the kinds of call (`--json`'s `delegated` keys) each lane must have
/// carried for it: threads first, then uring (sends, receives and accept).
const PROGRAMS: &[(&str, &[&str], &[&str])] = &[
    ("epoll", &["recv", "epoll_wait"], &["recv"]),
    ("poll_select", &["poll", "recv"], &["recv"]),
    ("accept", &["accept", "recv", "send"], &["accept", "recv", "send"]),
    ("msg_flags", &["recv"], &["recv"]),
    ("timeouts", &["recv", "send"], &["recv", "send"]),
    ("shutdown", &["recv", "send"], &["recv", "send"]),
    ("sigpipe", &["write", "send"], &["write", "send"]),
    ("eintr", &["recv", "read"], &["recv", "read"]),
    ("fork_exec", &["recv", "send"], &["recv", "send"]),
    ("dup_numbers", &["send", "recv"], &["send", "recv"]),
    ("scm_rights", &["send", "recv", "read"], &["send", "recv", "read"]),
    ("high_fd", &["recv", "send", "poll"], &["recv", "send"]),
    ("ipv6", &["send", "recv"], &["send", "recv"]),
    ("unix", &["send", "recv"], &["send", "recv"]),
    ("udp", &["send", "recv"], &["send", "recv"]),
    ("sendfile_splice", &["sendfile", "read"], &["read"]),
];

/// No program may take longer than this, in any mode.
const LIMIT: Duration = Duration::from_secs(40);

/// What a program printed and how it ended, with the run's summary under a lane.
struct Ran {
    stdout: String,
    stderr: String,
    status: Option<i32>,
    signal: Option<i32>,
    summary: serde_json::Value,
}

/// Every program compiled, or why none can be (printed by the skipping tests).
fn programs() -> Result<&'static [(PathBuf, &'static str)], String> {
    static BUILT: OnceLock<Result<Vec<(PathBuf, &'static str)>, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        PROGRAMS
            .iter()
            .map(|(name, _, _)| Ok((compile_run_program(&format!("conformance/{name}"))?, *name)))
            .collect()
    });
    built.as_deref().map_err(Clone::clone)
}

/// The syscall CPU: 1 (0 on a one-CPU machine).
fn syscall_cpu() -> &'static str {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus >= 2 {
        "1"
    } else {
        "0"
    }
}

fn spawn(program: &Path, lane: Option<&str>, json: Option<&Path>) -> Child {
    let mut cmd = match (lane, json) {
        (Some(lane), Some(json)) => {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_corelane"));
            cmd.args(["run", "--syscall-cpus", syscall_cpu(), "--syscall-lane", lane, "--json"]);
            cmd.arg(json).arg("--").arg(program);
            cmd
        }
        _ => Command::new(program),
    };
    // cargo sets LD_LIBRARY_PATH for tests; a root run would note that it drops it.
    cmd.env_remove("LD_LIBRARY_PATH");
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.spawn().unwrap()
}

/// Waits for `child`, killing it (and failing) after LIMIT.
fn finish(mut child: Child, what: &str) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            panic!("{what} hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// Runs every program at once, natively (`lane` None) or under `corelane run`.
fn run_all(lane: Option<&str>) -> Vec<Ran> {
    let programs = programs().unwrap();
    let jsons: Vec<tempfile::NamedTempFile> =
        programs.iter().map(|_| tempfile::NamedTempFile::new().unwrap()).collect();
    let children: Vec<Child> = programs
        .iter()
        .zip(&jsons)
        .map(|((path, _), json)| spawn(path, lane, lane.map(|_| json.path())))
        .collect();
    children
        .into_iter()
        .zip(programs.iter().zip(&jsons))
        .map(|(child, ((_, name), json))| {
            use std::os::unix::process::ExitStatusExt;
            let out = finish(child, &format!("{name} under {lane:?}"));
            let text = std::fs::read_to_string(json.path()).unwrap_or_default();
            Ran {
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                status: out.status.code(),
                signal: out.status.signal(),
                summary: serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
            }
        })
        .collect()
}

/// The native runs, made once for both lanes' tests.
fn native() -> &'static [Ran] {
    static NATIVE: OnceLock<Vec<Ran>> = OnceLock::new();
    NATIVE.get_or_init(|| run_all(None))
}

/// The lines around each difference, `-` native and `+` the lane's, like a diff.
fn difference(native: &str, lane: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (native.lines().collect(), lane.lines().collect());
    let differs = |i: usize| a.get(i) != b.get(i);
    let near = |i: usize| (i.saturating_sub(2)..=i + 2).any(differs);
    let mut out = String::new();
    for i in 0..a.len().max(b.len()) {
        if !near(i) {
            continue;
        }
        if !differs(i) {
            out += &format!("   {:>3}  {}\n", i + 1, a[i]);
            continue;
        }
        if let Some(line) = a.get(i) {
            out += &format!(" - {:>3}  {line}\n", i + 1);
        }
        if let Some(line) = b.get(i) {
            out += &format!(" + {:>3}  {line}\n", i + 1);
        }
    }
    out
}

/// Runs every program under `lane` and compares with native; returns every divergence found
/// (output, ending, calls not carried), each named by its program.
fn divergences(lane: &str) -> Vec<String> {
    // One mode at a time: the programs of a mode run at once, the modes one after another.
    static ONE_MODE: Mutex<()> = Mutex::new(());
    let _mode = ONE_MODE.lock().unwrap_or_else(|e| e.into_inner());
    let native = native();
    let ran = run_all(Some(lane));
    let mut found = Vec::new();
    for (((name, threads, uring), native), ran) in PROGRAMS.iter().zip(native).zip(&ran) {
        assert!(
            native.stdout.ends_with("done\n") || native.stdout.contains("cannot raise"),
            "{name} did not finish natively:\n{}{}",
            native.stdout,
            native.stderr
        );
        if ran.stdout != native.stdout {
            found.push(format!(
                "{name}: output differs from native (- native, + {lane}):\n{}{}",
                difference(&native.stdout, &ran.stdout),
                ran.stderr
            ));
        }
        if (ran.status, ran.signal) != (native.status, native.signal) {
            found.push(format!(
                "{name}: ended with {:?}/{:?}, natively {:?}/{:?}\n{}",
                ran.status, ran.signal, native.status, native.signal, ran.stderr
            ));
        }
        let kinds = if lane == "uring" { uring } else { threads };
        let delegated = &ran.summary["delegated"];
        let missing: Vec<&&str> =
            kinds.iter().filter(|k| delegated[**k].as_u64().unwrap_or(0) == 0).collect();
        if !missing.is_empty() {
            found.push(format!("{name}: the {lane} lane carried no {missing:?}: {}", ran.summary));
        }
    }
    found
}

fn check(lane: &str) {
    if let Err(why) = programs() {
        eprintln!("skipped: {why}");
        return;
    }
    let found = divergences(lane);
    assert!(
        found.is_empty(),
        "{} divergence(s) under the {lane} lane:\n\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn the_threads_lane_answers_every_call_as_the_kernel_does() {
    check("threads");
}

#[test]
fn the_uring_lane_answers_every_call_as_the_kernel_does() {
    check("uring");
}
