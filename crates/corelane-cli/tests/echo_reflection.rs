//! `udp echo` is no reflector: spoofed datagrams (sent raw, with a forged source) between two
//! echoes, from the echo's own address and port, or from port 0; replies; one source
//! flooding. Run against another binary with `CORELANE_BIN=/path/to/corelane`.

use std::io::{BufRead, BufReader, Lines};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use corelane::udp::{payload, sockperf};
use socket2::{Domain, Protocol, Socket, Type};

fn binary() -> String {
    std::env::var("CORELANE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_corelane").into())
}

/// A running `udp echo --json`, until its `--duration` ends.
struct Echo {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    addr: SocketAddrV4,
}

impl Echo {
    fn start(addr: &str, extra: &[&str]) -> Self {
        let mut child = Command::new(binary())
            .args(["udp", "echo", addr, "--json", "--rcvbuf", "8M"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start corelane");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let Some(Ok(first)) = lines.next() else {
            let out = child.wait_with_output().unwrap();
            panic!("echo did not start: {}", String::from_utf8_lossy(&out.stderr));
        };
        let ready: serde_json::Value = serde_json::from_str(&first).unwrap();
        assert_eq!(ready["type"], "ready", "{first}");
        let addr = match ready["addr"].as_str().unwrap().parse().unwrap() {
            SocketAddr::V4(a) => a,
            other => panic!("IPv4 expected, got {other}"),
        };
        Self { child, lines, addr }
    }

    /// The address to send to (a wildcard bind is reached on loopback).
    fn target(&self) -> SocketAddrV4 {
        let ip =
            if self.addr.ip().is_unspecified() { Ipv4Addr::LOCALHOST } else { *self.addr.ip() };
        SocketAddrV4::new(ip, self.addr.port())
    }

    /// Waits for the end of its run and returns its summary.
    fn summary(mut self) -> serde_json::Value {
        let mut summary = None;
        for line in self.lines.by_ref().map_while(Result::ok) {
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v["type"] == "summary" {
                summary = Some(v["summary"].clone());
            }
        }
        let status = self.child.wait().unwrap();
        assert!(status.success(), "echo exited {status}");
        summary.expect("a summary line")
    }
}

fn count(s: &serde_json::Value, key: &str) -> u64 {
    s[key].as_u64().unwrap_or_else(|| panic!("{key} missing in {s}"))
}

/// A corelane request of 64 bytes.
fn request(seq: u64) -> Vec<u8> {
    let mut d = vec![0u8; 64];
    payload::prefill(&mut d);
    payload::write_header(&mut d, 1, seq);
    d
}

fn sockperf_request(seq: u64) -> Vec<u8> {
    let mut d = vec![0u8; 64];
    sockperf::write_request(&mut d, seq);
    d
}

/// Sends `data` from the forged source `from` to `to` through a raw IPv4 socket (a UDP
/// checksum of 0 means none). `None` when raw sockets are
/// refused (no CAP_NET_RAW).
fn spoof(from: SocketAddrV4, to: SocketAddrV4, data: &[u8]) -> Option<()> {
    let raw = match Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::from(255))) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("skipped: no raw socket to forge a source ({e}); run as root");
            return None;
        }
    };
    let packet = corelane::xdp::frame::ipv4_udp_packet(from, to, data);
    let dest = SocketAddr::V4(SocketAddrV4::new(*to.ip(), 0));
    raw.send_to(&packet, &dest.into()).expect("send the forged datagram");
    Some(())
}

/// The attack: one forged datagram "from" echo B to echo A (and one the other way, in
/// sockperf's wire). Before, each answer was answered again, forever: about 476,000 datagrams
/// in 2 s. Now each side answers at most once: the answer is a reply, and replies are not
/// answered. One echo receives with recvmmsg, the other with io_uring.
#[test]
fn two_echoes_do_not_bounce_a_forged_datagram() {
    let a = Echo::start("127.0.0.1:0", &["--duration", "2s"]);
    let b = Echo::start("127.0.0.1:0", &["--duration", "2s", "--backend", "uring"]);
    if spoof(b.target(), a.target(), &request(1)).is_none() {
        return;
    }
    spoof(a.target(), b.target(), &sockperf_request(2)).unwrap();
    let (a, b) = (a.summary(), b.summary());
    let total = count(&a, "datagrams") + count(&b, "datagrams");
    assert!(total <= 4, "{total} datagrams exchanged in 2 s from 2 forged: {a}\n{b}");
    assert_eq!(count(&a, "replies") + count(&b, "replies"), 2, "{a}\n{b}");
    assert_eq!(count(&a, "dropped_replies") + count(&b, "dropped_replies"), 2, "{a}\n{b}");
}

/// A request claiming to come from the echo itself (its address and port, or for a wildcard
/// bind, a local address with its port) is never answered: the answer would go to itself.
#[test]
fn a_datagram_from_the_echos_own_address_is_not_answered() {
    for bind in ["127.0.0.1:0", "0.0.0.0:0"] {
        let echo = Echo::start(bind, &["--duration", "1500ms"]);
        let me = echo.target();
        if spoof(me, me, &request(1)).is_none() {
            return;
        }
        let s = echo.summary();
        assert_eq!(count(&s, "datagrams"), 1, "{bind}: {s}");
        assert_eq!(count(&s, "replies"), 0, "{bind}: {s}");
        assert_eq!(count(&s, "dropped_self"), 1, "{bind}: {s}");
    }
}

/// Source port 0: nobody can listen there, and an answer would only be refused.
#[test]
fn a_datagram_from_port_0_is_not_answered() {
    let echo = Echo::start("127.0.0.1:0", &["--duration", "1s"]);
    let from = SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 9), 0);
    if spoof(from, echo.target(), &request(1)).is_none() {
        return;
    }
    let s = echo.summary();
    assert_eq!((count(&s, "replies"), count(&s, "send_errors")), (0, 0), "{s}");
    assert_eq!(count(&s, "dropped_port0"), 1, "{s}");
}

/// Replies (corelane's and sockperf's) and unrecognised bytes get no answer; a request does.
#[test]
fn replies_and_unrecognised_datagrams_are_not_answered() {
    let echo = Echo::start("127.0.0.1:0", &["--duration", "1500ms"]);
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut corelane_reply = request(1);
    assert!(payload::answer_in_place(&mut corelane_reply));
    let mut sockperf_answer = sockperf_request(2);
    assert!(sockperf::answer_in_place(&mut sockperf_answer));
    for d in [&corelane_reply[..], &sockperf_answer, &[0x55u8; 64], &request(3)] {
        client.send_to(d, echo.target()).unwrap();
    }
    let mut buf = [0u8; 128];
    let n = client.recv(&mut buf).expect("the request is answered");
    assert_eq!(payload::read_reply(&buf[..n]).map(|h| h.seq), Ok(3));
    assert!(client.recv(&mut buf).is_err(), "only the request is answered");
    let s = echo.summary();
    assert_eq!((count(&s, "datagrams"), count(&s, "replies")), (4, 1), "{s}");
    assert_eq!(count(&s, "dropped_replies"), 2, "{s}");
    assert_eq!(count(&s, "dropped_unrecognised"), 1, "{s}");
}

/// One source flooding draws no more than its bucket (burst + rate x time), while a second
/// source is answered in full.
#[test]
fn a_flooding_source_is_capped_and_another_is_still_answered() {
    for backend in ["mmsg", "uring"] {
        flood_is_capped(backend);
    }
}

fn flood_is_capped(backend: &str) {
    let (rate, burst) = (1000u64, 100u64);
    let echo = Echo::start(
        "127.0.0.1:0",
        &[
            "--duration",
            "2s",
            "--per-source-rate",
            "1000",
            "--per-source-burst",
            "100",
            "--backend",
            backend,
        ],
    );
    let target = echo.target();
    let flood = UdpSocket::bind("127.0.0.1:0").unwrap();
    flood.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
    socket2::SockRef::from(&flood).set_recv_buffer_size(4 << 20).unwrap();
    let other = UdpSocket::bind("127.0.0.2:0").unwrap();
    other.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let start = Instant::now();
    let (mut flood_answers, mut other_answers) = (0u64, 0u64);
    let mut buf = [0u8; 128];
    for round in 0..20u64 {
        for k in 0..200 {
            flood.send_to(&request(round * 1000 + k), target).unwrap();
        }
        while flood.recv(&mut buf).is_ok() {
            flood_answers += 1;
        }
        other.send_to(&request(round), target).unwrap();
        if other.recv(&mut buf).is_ok() {
            other_answers += 1;
        }
    }
    std::thread::sleep(Duration::from_millis(50));
    while flood.recv(&mut buf).is_ok() {
        flood_answers += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let s = echo.summary();
    let cap = burst + (rate as f64 * elapsed).ceil() as u64;
    assert_eq!(other_answers, 20, "{backend}: the second source is answered in full: {s}");
    let to_flood = count(&s, "replies") - 20;
    assert!(to_flood <= cap, "{backend}: {to_flood} answers to the flood, cap {cap}: {s}");
    assert!(to_flood >= burst, "{backend}: the burst is answered: {to_flood}");
    assert!(flood_answers <= to_flood, "{backend}: {flood_answers} arrived of {to_flood}");
    assert_eq!(count(&s, "dropped_over_budget"), 4000 - to_flood, "{backend}: {s}");
}

/// A GSO datagram of 8 segments (requests, replies, junk, both wires; the last one short)
/// reaches a `--gro` echo as one buffer: each segment is judged on its own and exactly the
/// requests come back, in order, each as its reply.
#[test]
fn each_gro_segment_is_judged_on_its_own() {
    let echo = Echo::start("127.0.0.1:0", &["--duration", "1500ms", "--gro"]);
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let sender = Socket::from(client.try_clone().unwrap());
    let mut reply = request(2);
    assert!(payload::answer_in_place(&mut reply));
    let mut sockperf_answer = sockperf_request(7);
    assert!(sockperf::answer_in_place(&mut sockperf_answer));
    let mut short = request(8);
    short.truncate(40);
    let segments: Vec<Vec<u8>> = vec![
        request(1),
        reply,
        request(3),
        vec![0x55; 64],
        request(5),
        sockperf_request(6),
        sockperf_answer,
        short,
    ];
    // One UDP_SEGMENT control message (SOL_UDP 17, type 103) of 64: cmsghdr, u16, padding.
    let mut control = Vec::new();
    control.extend_from_slice(&18usize.to_ne_bytes());
    control.extend_from_slice(&17i32.to_ne_bytes());
    control.extend_from_slice(&103i32.to_ne_bytes());
    control.extend_from_slice(&64u16.to_ne_bytes());
    control.resize(24, 0);
    let all = segments.concat();
    let to = socket2::SockAddr::from(SocketAddr::V4(echo.target()));
    let bufs = [std::io::IoSlice::new(&all)];
    let msg = socket2::MsgHdr::new().with_addr(&to).with_buffers(&bufs).with_control(&control);
    if let Err(e) = sender.sendmsg(&msg, 0) {
        eprintln!("skipped: the kernel refused UDP_SEGMENT ({e})");
        return;
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 128];
    while let Ok(n) = client.recv(&mut buf) {
        got.push(buf[..n].to_vec());
    }
    let expected: Vec<Vec<u8>> = [0usize, 2, 4, 5, 7]
        .iter()
        .map(|&i| {
            let mut d = segments[i].clone();
            if payload::answer_in_place(&mut d) || sockperf::answer_in_place(&mut d) {
                d
            } else {
                unreachable!("segment {i} is a request")
            }
        })
        .collect();
    let s = echo.summary();
    assert_eq!(got, expected, "{s}");
    assert_eq!((count(&s, "datagrams"), count(&s, "replies")), (8, 5), "{s}");
    assert_eq!(count(&s, "dropped_replies"), 2, "{s}");
    assert_eq!(count(&s, "dropped_unrecognised"), 1, "{s}");
}
