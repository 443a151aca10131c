//! What the lanes carry beyond plain send and receive, checked through `corelane run --json`'s
//! delegated counts and the answers the programs get (tests/run/carried.c): under the uring
//! lane sendto/recvfrom and sendmsg/recvmsg with addresses, readv/writev, accept4, and two
//! real peers that use them, memcached over UDP and sockperf (skipped, saying why, when
//! absent); under the threads lane select/pselect, splice, and a socket cache that follows
//! descriptors however they are made, copied or closed.

mod common;

use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::compile_run_program as compile;

fn program() -> Result<&'static Path, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT.get_or_init(|| compile("carried")).as_deref().map_err(Clone::clone)
}

/// The program on CPU 0, the SQPOLL thread on 1 (one CPU: both on 0), the uring lane.
fn uring_args(json: &Path) -> Vec<String> {
    lane_args(json, "uring")
}

fn lane_args(json: &Path, lane: &str) -> Vec<String> {
    let two = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    let sys = if two { "1" } else { "0" };
    let mut args: Vec<String> =
        ["run", "--app-cpus", "0", "--syscall-cpus", sys].map(String::from).to_vec();
    args.extend(["--syscall-lane".into(), lane.into(), "--json".into()]);
    args.push(json.to_str().unwrap().into());
    args.push("--".into());
    args
}

fn corelane_run(json: &Path, command: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_corelane"));
    cmd.args(uring_args(json)).args(command).env_remove("LD_LIBRARY_PATH");
    cmd
}

/// Waits for `child` at most `limit`, killing it (and failing) past that.
fn wait_bounded(mut child: Child, limit: Duration) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("corelane run hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn summary(json: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(json).unwrap_or_default())
        .unwrap_or(serde_json::Value::Null)
}

fn delegated(summary: &serde_json::Value, kind: &str) -> u64 {
    summary["delegated"][kind].as_u64().unwrap_or(0)
}

/// Runs carried.c's `mode` under the uring lane: its output and summary, or None (printed
/// why) when there is no compiler or no io_uring with SQPOLL here.
fn run_mode(mode: &str) -> Option<(String, serde_json::Value)> {
    run_mode_in(mode, "uring")
}

fn run_mode_in(mode: &str, lane: &str) -> Option<(String, serde_json::Value)> {
    let (stdout, _, summary) = run_program(mode, lane)?;
    if summary["lane_note"].is_string() {
        eprintln!("skipped the counts: {}", summary["lane_note"]);
        return None;
    }
    Some((stdout, summary))
}

/// Runs carried.c's `mode` under `lane` (exit status 0 checked): its output, error output and
/// summary, or None (printed why) when there is no compiler.
fn run_program(mode: &str, lane: &str) -> Option<(String, String, serde_json::Value)> {
    let prog = match program() {
        Ok(p) => p.to_str().unwrap().to_string(),
        Err(why) => {
            eprintln!("skipped: {why}");
            return None;
        }
    };
    let json = tempfile::NamedTempFile::new().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_corelane"))
        .args(lane_args(json.path(), lane))
        .args([&prog, mode])
        .env_remove("LD_LIBRARY_PATH")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_bounded(child, Duration::from_secs(30));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{stdout}{stderr}");
    let summary = summary(json.path());
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    Some((stdout, stderr, summary))
}

/// sendto/recvfrom with an address (also one too small for it), sendmsg/recvmsg with one,
/// and an empty non-blocking recvfrom: every one answered right and carried by the ring.
#[test]
fn the_uring_lane_carries_datagrams_with_their_addresses() {
    let Some((stdout, summary)) = run_mode("udp") else { return };
    assert_eq!(stdout.trim(), "udp ok");
    // sendto, sendmsg, sendto; recvfrom, recvmsg, recvfrom (short address), recvfrom (EAGAIN).
    assert_eq!((delegated(&summary, "send"), delegated(&summary, "recv")), (3, 4), "{summary}");
}

/// accept4 (nothing pending: EAGAIN at once; then with its flags and address), accept on a
/// blocking listener with a connection waiting, readv/writev, and a blocking writev and
/// sendmsg of 8 MiB each that the ring can only partly send: all of it arrives, in order.
#[test]
fn the_uring_lane_carries_accept_and_vectors_and_finishes_long_blocking_sends() {
    let Some((stdout, summary)) = run_mode("stream") else { return };
    assert_eq!(stdout.trim(), "stream ok");
    assert_eq!(delegated(&summary, "accept"), 3, "{summary}");
    assert!(delegated(&summary, "write") >= 2, "writev, twice: {summary}");
    assert!(delegated(&summary, "send") >= 1, "sendmsg: {summary}");
    assert!(delegated(&summary, "read") >= 1, "readv: {summary}");
}

/// Four processes at once under the uring lane (a parent and three children, as a pre-forking
/// server runs): every call is carried, and the summary says that four SQPOLL threads shared
/// the syscall CPU and what that costs.
#[test]
fn several_processes_under_the_uring_lane_are_carried_and_their_shared_cpu_is_named() {
    let Some((stdout, stderr, summary)) = run_program("forked", "uring") else { return };
    assert_eq!(stdout.trim(), "forked ok");
    let note = summary["lane_note"].as_str().unwrap_or("").to_string();
    if note.contains("refused SQPOLL") || note.contains("no io_uring") {
        return eprintln!("skipped the lanes' modes: {note}");
    }
    // The lane ran as asked (no note); what it may cost is a warning of its own.
    assert!(summary["lane_note"].is_null(), "{summary}");
    let warning = summary["lane_warning"].as_str().unwrap_or("");
    assert!(
        warning.contains("4 processes each ran an SQPOLL thread on the syscall CPU"),
        "{summary}"
    );
    assert!(stderr.contains("--syscall-lane threads shares a CPU among processes"), "{stderr}");
    // Every exchange's 50 sends and receives: the parent's two rounds, each child's two.
    assert_eq!(delegated(&summary, "send"), 8 * 50, "{summary}");
    assert_eq!(delegated(&summary, "recv"), 8 * 50, "{summary}");
}

/// A free UDP port on loopback (bound and let go: another program could take it meanwhile,
/// which fails the peer's start, not the check).
fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Stops a peer started under `corelane run` (SIGTERM to corelane, which forwards it) and
/// returns its summary.
fn stop(child: Child, json: &Path) -> serde_json::Value {
    let pid = rustix::process::Pid::from_child(&child);
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    let out = wait_bounded(child, Duration::from_secs(20));
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    summary(json)
}

/// One memcached UDP request (frame header: id, sequence 0, one datagram) and its answer's
/// text, or None after 200 ms.
fn memcached_udp(client: &UdpSocket, id: u16, text: &str) -> Option<String> {
    let mut request = id.to_be_bytes().to_vec();
    request.extend([0, 0, 0, 1, 0, 0]);
    request.extend(text.as_bytes());
    client.send(&request).ok()?;
    let mut buf = [0u8; 2048];
    let n = client.recv(&mut buf).ok()?;
    (n >= 8 && buf[..2] == id.to_be_bytes()).then(|| String::from_utf8_lossy(&buf[8..n]).into())
}

#[test]
fn memcached_over_udp_is_carried_by_the_uring_lane() {
    if !have("memcached") {
        return eprintln!("skipped: memcached is not installed");
    }
    let json = tempfile::NamedTempFile::new().unwrap();
    let port = free_udp_port().to_string();
    let mut command = vec!["memcached", "-U", &port, "-p", "0", "-l", "127.0.0.1", "-t", "1"];
    if common::is_root() {
        command.extend(["-u", "root"]);
    }
    let child = corelane_run(json.path(), &command)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client.connect(format!("127.0.0.1:{port}")).unwrap();
    client.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut stored = None;
    while stored.is_none() && Instant::now() < deadline {
        stored = memcached_udp(&client, 1, "set corelane 0 0 5\r\nlane!\r\n");
    }
    let got = memcached_udp(&client, 2, "get corelane\r\n");
    let gets: Vec<_> =
        (3..23).filter_map(|id| memcached_udp(&client, id, "get corelane\r\n")).collect();
    let summary = stop(child, json.path());
    assert_eq!(stored.as_deref(), Some("STORED\r\n"));
    assert_eq!(got.as_deref(), Some("VALUE corelane 0 5\r\nlane!\r\nEND\r\n"));
    assert_eq!(gets.len(), 20);
    if summary["lane_note"].is_string() {
        return eprintln!("skipped the counts: {}", summary["lane_note"]);
    }
    // Each request is one receive and one send on the server's UDP socket.
    assert!(delegated(&summary, "recv") >= 22, "{summary}");
    assert!(delegated(&summary, "send") >= 22, "{summary}");
}

#[test]
fn sockperf_ping_pong_is_carried_by_the_uring_lane() {
    if !have("sockperf") {
        return eprintln!("skipped: sockperf is not installed");
    }
    let json = tempfile::NamedTempFile::new().unwrap();
    let port = free_udp_port().to_string();
    let child = corelane_run(json.path(), &["sockperf", "sr", "-i", "127.0.0.1", "-p", &port])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let client = Command::new("sockperf")
        .args(["pp", "-i", "127.0.0.1", "-p", &port, "-t", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let client = wait_bounded(client, Duration::from_secs(20));
    let summary = stop(child, json.path());
    let report = String::from_utf8_lossy(&client.stdout);
    assert!(client.status.success(), "{report}");
    let received = report
        .lines()
        .find_map(|l| l.split("ReceivedMessages=").nth(1))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(received > 0, "the client got no answer: {report}");
    if summary["lane_note"].is_string() {
        return eprintln!("skipped the counts: {}", summary["lane_note"]);
    }
    assert!(delegated(&summary, "recv") >= received, "{summary}");
    assert!(delegated(&summary, "send") >= received, "{summary}");
}

/// A number past the first 65,536 (where the hard limit allows; the program says on stderr
/// when it does not) and one a file left (closed behind the library's back) made socket copies
/// by fcntl F_DUPFD: their writes are carried. A socket's number closed by close_range, and
/// two closed behind the library's back then filled by SCM_RIGHTS (through recvmsg and
/// recvmmsg), all reused by a pipe: the pipe's reads stay the program's own (the old cache
/// carried them as a stale "socket" and counted them).
#[test]
fn the_socket_cache_follows_every_descriptor() {
    let Some((stdout, summary)) = run_mode_in("fds", "threads") else { return };
    assert_eq!(stdout.trim(), "fds ok");
    let kinds = ["write", "read", "recv"].map(|k| delegated(&summary, k));
    assert_eq!(
        kinds,
        [3, 1, 1],
        "write: the two copies and the pair's; read: the pair's, not the pipes'; recv: the \
         rights (recvmmsg on a blocking socket is the program's own): {summary}"
    );
}

/// select and pselect (ready at once, and a zero timeout with nothing ready) answered by the
/// syscall thread's probe on copies, counted as poll; a select that has to wait is the
/// program's own and sees what the kernel sees.
#[test]
fn select_and_pselect_are_probed_on_the_syscall_thread() {
    let Some((stdout, summary)) = run_mode_in("select", "threads") else { return };
    assert_eq!(stdout.trim(), "select ok");
    assert!(delegated(&summary, "poll") >= 3, "{summary}");
}

/// A splice from a non-blocking socket asked not to block is carried (its EAGAIN and its
/// data alike, counted as other); one that may block is the program's own.
#[test]
fn splice_is_carried_only_when_it_cannot_block() {
    let Some((stdout, summary)) = run_mode_in("splice", "threads") else { return };
    assert_eq!(stdout.trim(), "splice ok");
    assert_eq!(delegated(&summary, "other"), 2, "{summary}");
}

fn carried_total(summary: &serde_json::Value) -> u64 {
    summary["delegated"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum()
}

/// Four processes exchanging at once under the threads lane, their carriers on one syscall
/// CPU: the lane steps aside (the processes make calls themselves, counted as in place, and
/// the summary says why), every answer is right, and every call is either carried or made in
/// place — none lost, none counted twice. One process alone never steps aside.
#[test]
fn the_threads_lane_steps_aside_where_several_processes_contend_for_its_cpu() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return eprintln!("skipped: one CPU (the program and its carriers would share it)");
    }
    let Some((stdout, stderr, summary)) = run_program("contended", "threads") else { return };
    assert_eq!(stdout.trim(), "contended ok");
    // Each exchange: 50 sends, 50 receives and two closes of a socket pair; 4 x 40 of them.
    let in_place = summary["in_place"].as_u64().unwrap();
    assert_eq!(carried_total(&summary) + in_place, 4 * 40 * 102, "{summary}");
    assert!(in_place > 0, "nothing made in place: {summary}");
    assert!(carried_total(&summary) > 0, "until the contention is seen, calls are carried");
    assert!(stderr.contains("calls made in the program's own threads"), "{stderr}");

    let Some((stdout, stderr, summary)) = run_program("select", "threads") else { return };
    assert_eq!(stdout.trim(), "select ok");
    assert_eq!(summary["in_place"], 0, "{summary}");
    assert!(!stderr.contains("calls made in the program's own threads"), "{stderr}");
}

/// carried.c linked statically (`cc -static`), or why there is none.
fn static_program() -> Result<PathBuf, String> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/run/carried.c");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("run-carried-static");
    let status = Command::new("cc")
        .args(["-static", "-O1", "-w", "-pthread", "-o"])
        .arg(&out)
        .arg(source)
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("no C compiler (cc: {e})"))?;
    status
        .success()
        .then_some(out)
        .ok_or_else(|| format!("cc -static failed ({status}): no libc.a?"))
}

/// A static program cannot load the library: `corelane run` says so in one line and in the
/// summary (`carried` false, with the reason), and runs it all the same; a dynamic one is
/// `carried`.
#[test]
fn a_static_program_is_named_as_not_carried_and_still_runs() {
    let prog = match static_program() {
        Ok(p) => p,
        Err(why) => return eprintln!("skipped: {why}"),
    };
    let json = tempfile::NamedTempFile::new().unwrap();
    let prog = prog.to_str().unwrap();
    let out = corelane_run(json.path(), &[prog, "udp"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "udp ok");
    assert_eq!(out.status.code(), Some(0));
    let note = format!("corelane run: {prog} is a statically linked program");
    let line = stderr.lines().find(|l| l.starts_with(&note));
    assert!(line.is_some_and(|l| l.contains("will not be carried")), "{stderr}");
    let summary = summary(json.path());
    assert_eq!(summary["carried"], false, "{summary}");
    assert!(summary["not_carried"].as_str().unwrap().contains("statically linked"));
    assert_eq!(delegated(&summary, "send") + delegated(&summary, "recv"), 0);
    // Found through PATH as the program is.
    let dir = Path::new(prog).parent().unwrap().to_str().unwrap();
    let name = Path::new(prog).file_name().unwrap().to_str().unwrap();
    let out = corelane_run(json.path(), &[name, "udp"]).env("PATH", dir).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a statically linked program"));
    let Some((_, summary)) = run_mode("udp") else { return };
    assert_eq!(
        (summary["carried"].as_bool(), &summary["not_carried"]),
        (Some(true), &serde_json::Value::Null)
    );
}

/// A Go program: the real thing when Go is installed (skipped, saying so, when it is not; the
/// library crate's tests judge a crafted file with a `.go.buildinfo` section either way).
#[test]
fn a_go_program_is_named_as_not_carried() {
    if !have("go") {
        return eprintln!("skipped: Go is not installed (program_kind's tests use a crafted file)");
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("main.go"),
        "package main\nfunc main() { println(\"go ok\") }\n",
    )
    .unwrap();
    let built = Command::new("go")
        .args(["build", "-o", "hello", "main.go"])
        .current_dir(dir.path())
        .env("GOCACHE", dir.path().join("cache"))
        .env("GO111MODULE", "off")
        .status();
    if !built.is_ok_and(|s| s.success()) {
        return eprintln!("skipped: go build failed");
    }
    let json = tempfile::NamedTempFile::new().unwrap();
    let prog = dir.path().join("hello");
    let out = corelane_run(json.path(), &[prog.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a Go program"));
    assert_eq!(summary(json.path())["carried"], false);
}
