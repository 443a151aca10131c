//! What the uring lane carries beyond plain send and receive, checked through `corelane run
//! --json`'s delegated counts and the answers the programs get: sendto/recvfrom and
//! sendmsg/recvmsg with addresses, readv/writev, accept4 (tests/run/carried.c), and two real
//! peers that use them, memcached over UDP and sockperf (skipped, saying why, when absent).

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
    let two = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    let sys = if two { "1" } else { "0" };
    let mut args: Vec<String> = ["run", "--app-cpus", "0", "--syscall-cpus", sys]
        .map(String::from)
        .to_vec();
    args.extend(["--syscall-lane".into(), "uring".into(), "--json".into()]);
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
    let prog = match program() {
        Ok(p) => p.to_str().unwrap().to_string(),
        Err(why) => {
            eprintln!("skipped: {why}");
            return None;
        }
    };
    let json = tempfile::NamedTempFile::new().unwrap();
    let child = corelane_run(json.path(), &[&prog, mode])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_bounded(child, Duration::from_secs(30));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let summary = summary(json.path());
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    if summary["lane_note"].is_string() {
        eprintln!("skipped the counts: {}", summary["lane_note"]);
        return None;
    }
    Some((stdout, summary))
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
    let gets: Vec<_> = (3..23).filter_map(|id| memcached_udp(&client, id, "get corelane\r\n")).collect();
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
