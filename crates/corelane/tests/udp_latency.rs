//! `udp echo` and `udp ping` over real loopback sockets: exact counts, reply-every, open-loop
//! pacing, hostile replies, an unreachable target, bad input.

use std::net::{SocketAddr, UdpSocket};
use std::thread;
use std::time::{Duration, Instant};

use corelane::lane::StopSignal;
use corelane::udp::payload;
use corelane::udp::{Echo, EchoConfig, EchoSummary, Ping, PingConfig, PingMode, PingSummary};

/// An echo server on a free loopback port, run on its own thread until the returned stop.
fn start_echo(config: EchoConfig) -> (SocketAddr, StopSignal, thread::JoinHandle<EchoSummary>) {
    let echo = Echo::bind(config).expect("bind the echo server");
    let addr = echo.local_addr();
    let stop = StopSignal::new();
    let s = stop.clone();
    (addr, stop, thread::spawn(move || echo.run(&s, |_| {}).expect("echo runs")))
}

/// A peer written by the test: `serve` runs on its own thread with a socket bound to a free
/// loopback port, whose reads time out once the client has been silent for `idle`.
fn fake_server<T: Send + 'static>(
    idle: Duration,
    serve: impl FnOnce(UdpSocket) -> T + Send + 'static,
) -> (SocketAddr, thread::JoinHandle<T>) {
    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap();
    server.set_read_timeout(Some(idle)).unwrap();
    (addr, thread::spawn(move || serve(server)))
}

fn ping(config: PingConfig) -> PingSummary {
    Ping::connect(config).expect("connect").run(&StopSignal::new(), |_, _| {}).expect("ping runs")
}

fn config(target: SocketAddr, mode: PingMode, count: u64) -> PingConfig {
    let mut c = PingConfig::new(target, mode);
    c.warmup = Duration::ZERO;
    c.count = Some(count);
    c.duration = Duration::from_secs(20);
    c
}

#[test]
fn ping_pong_through_the_echo_has_exact_counts() {
    let mut echo = EchoConfig::new("127.0.0.1:0".parse().unwrap());
    echo.lanes.threads = 2;
    let (addr, stop, server) = start_echo(echo);
    let mut c = config(addr, PingMode::PingPong, 500);
    c.flows = 4;
    let s = ping(c);
    stop.stop();
    let e = server.join().unwrap();
    assert_eq!((s.sent, s.received, s.lost), (500, 500, 0), "{s:?}");
    assert_eq!((s.duplicates, s.invalid, s.late, s.reordered), (0, 0, 0, 0), "{s:?}");
    assert_eq!((e.datagrams, e.replies, e.send_errors), (500, 500, 0), "{e:?}");
    assert_eq!(s.latency.samples, 500);
    assert!(
        s.latency.p50 > 0.0 && s.latency.p50 <= s.latency.p99 && s.latency.p99 <= s.latency.max
    );
    assert_eq!(s.measure, "round_trip");
    // Closed loop: each message left when it was due, so the two figures agree.
    assert_eq!(s.latency, s.uncorrected);
}

#[test]
fn under_load_is_open_loop_and_counts_every_message() {
    let mut echo = EchoConfig::new("127.0.0.1:0".parse().unwrap());
    echo.receive.rcvbuf = Some(4 << 20);
    let (addr, stop, server) = start_echo(echo);
    let mut c = config(addr, PingMode::UnderLoad { rate: 20_000 }, 4000);
    c.flows = 3;
    let s = ping(c);
    stop.stop();
    let e = server.join().unwrap();
    assert_eq!(s.sent, 4000, "{s:?}");
    assert_eq!(s.received + s.lost, 4000, "{s:?}");
    assert_eq!(e.datagrams, s.sent, "the server saw exactly what was sent: {e:?}");
    assert!(
        s.lost <= 80,
        "loopback at 20k msg/s lost {} (replies the client's buffer dropped)",
        s.lost
    );
    assert_eq!((s.duplicates, s.invalid), (0, 0));
    // Corrected latency is from the scheduled time, never less than from the actual send.
    assert!(s.latency.p50 >= s.uncorrected.p50, "{s:?}");
}

#[test]
fn reply_every_answers_every_nth_datagram() {
    let mut echo = EchoConfig::new("127.0.0.1:0".parse().unwrap());
    echo.reply_every = 2;
    echo.busy_poll_us = Some(50);
    let (addr, stop, server) = start_echo(echo);
    let mut c = config(addr, PingMode::UnderLoad { rate: 10_000 }, 1000);
    c.timeout = Duration::from_millis(200);
    let s = ping(c);
    stop.stop();
    let e = server.join().unwrap();
    assert_eq!((e.datagrams, e.replies), (1000, 500), "{e:?}");
    // Busy polling is taken or its refusal said, never silent.
    assert_eq!(e.busy_poll.requested_us, Some(50));
    assert!(e.busy_poll.active || e.busy_poll.note.is_some(), "{:?}", e.busy_poll);
    assert_eq!((s.received, s.lost), (500, 500), "{s:?}");
}

/// The rate is kept: loose bounds (a loaded CI machine), not a speed assertion.
#[test]
fn under_load_sends_at_the_rate_asked() {
    let (addr, stop, server) = start_echo(EchoConfig::new("127.0.0.1:0".parse().unwrap()));
    let mut c = PingConfig::new(addr, PingMode::UnderLoad { rate: 5000 });
    c.warmup = Duration::from_millis(200);
    c.duration = Duration::from_secs(1);
    let started = Instant::now();
    let s = ping(c);
    stop.stop();
    server.join().unwrap();
    assert!((4500..=5100).contains(&s.sent), "sent {} in 1 s at 5000/s", s.sent);
    assert!((s.achieved_rate - 5000.0).abs() < 500.0, "{s:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// A peer that answers with garbage: short, foreign, the request itself (what a reflector
/// sends back), forged sequence, wrong flow, wrong size, and the right answer twice. All
/// counted, none believed, no panic.
#[test]
fn hostile_replies_are_counted_not_trusted() {
    let (addr, fake) = fake_server(Duration::from_millis(200), |server| {
        let mut buf = [0u8; 2048];
        let mut answered = 0;
        while let Ok((n, from)) = server.recv_from(&mut buf) {
            let h = payload::read(&buf[..n]).expect("the client sends valid requests");
            let reply = |flow: u32, seq: u64| {
                let mut r = buf[..n].to_vec();
                payload::write_header(&mut r, flow, seq);
                assert!(payload::answer_in_place(&mut r));
                r
            };
            let good = reply(h.flow, h.seq);
            let forged = reply(h.flow, h.seq + 1_000_000);
            let wrong_flow = reply(h.flow + 7, h.seq);
            let mut longer = good.clone();
            longer.push(0);
            let request = &buf[..n];
            for bad in [&buf[..3], &[0u8; 64][..], request, &forged, &wrong_flow, &longer, &good] {
                server.send_to(bad, from).unwrap();
            }
            server.send_to(&good, from).unwrap(); // a duplicate
            answered += 1;
        }
        answered
    });
    let s = ping(config(addr, PingMode::PingPong, 50));
    assert_eq!(fake.join().unwrap(), 50);
    assert_eq!((s.sent, s.received, s.lost), (50, 50, 0), "{s:?}");
    assert_eq!(s.invalid, 6 * 50, "6 bad replies per message, each before the good one: {s:?}");
    assert!(s.duplicates >= 49, "{s:?}");
}

#[test]
fn an_unreachable_target_reports_loss_instead_of_hanging() {
    let closed = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    for mode in [PingMode::PingPong, PingMode::UnderLoad { rate: 1000 }] {
        let mut c = PingConfig::new(addr, mode);
        c.warmup = Duration::ZERO;
        c.duration = Duration::from_millis(500);
        c.timeout = Duration::from_millis(100);
        let started = Instant::now();
        let s = ping(c);
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{mode:?} took {:?}",
            started.elapsed()
        );
        assert!(s.sent > 0, "{s:?}");
        assert_eq!(s.received, 0);
        assert_eq!(s.lost, s.sent, "{s:?}");
    }
}

#[test]
fn bad_input_is_refused_with_the_fix() {
    let target: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let err = Ping::connect(PingConfig::new(target, PingMode::UnderLoad { rate: 0 })).unwrap_err();
    assert!(err.to_string().contains("--rate must be above 0"), "{err}");
    let mut c = PingConfig::new(target, PingMode::PingPong);
    c.size = 8;
    assert!(Ping::connect(c).unwrap_err().to_string().contains("16 to"));
    let held = UdpSocket::bind("127.0.0.1:0").unwrap();
    let err = Echo::bind(EchoConfig::new(held.local_addr().unwrap())).unwrap_err();
    assert!(err.to_string().contains("already in use"), "{err}");
    let mut e = EchoConfig::new("127.0.0.1:0".parse().unwrap());
    e.reply_every = 0;
    assert!(Echo::bind(e).unwrap_err().to_string().contains("--reply-every"));
}

/// A stall at the client (here: a server that answers only after a pause, so the under-load
/// client keeps sending) is charged from the scheduled time; the open-loop client does not
/// slow down while replies are late.
#[test]
fn a_stalled_server_does_not_slow_the_open_loop_client() {
    let (addr, stall) = fake_server(Duration::from_millis(300), |server| {
        // Answer nothing for 150 ms (the kernel queues the requests), then everything.
        thread::sleep(Duration::from_millis(150));
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = server.recv_from(&mut buf) {
            assert!(payload::answer_in_place(&mut buf[..n]), "a request");
            server.send_to(&buf[..n], from).unwrap();
        }
    });
    let mut c = config(addr, PingMode::UnderLoad { rate: 1000 }, 1000);
    c.timeout = Duration::from_secs(1);
    let s = ping(c);
    stall.join().unwrap();
    assert_eq!(s.sent, 1000);
    assert!(s.received >= 990, "{s:?}");
    assert!((800.0..1100.0).contains(&s.achieved_rate), "kept its pace through the stall: {s:?}");
    // 150 of the 1000 messages went out during the stall; the first waited ~150 ms.
    assert!(s.latency.max >= 120_000.0, "the stall shows: {s:?}");
    assert!(s.latency.p50 < 100_000.0, "most messages came after it: {s:?}");
}

/// Crossed with sockperf's wire format: corelane ping speaking sockperf's header to corelane
/// echo answering as `sockperf sr` does; garbage and non-requests get no answer and no panic.
#[test]
fn the_sockperf_wire_round_trips_and_ignores_what_is_not_a_request() {
    use corelane::udp::{sockperf, Wire};
    let mut echo = EchoConfig::new("127.0.0.1:0".parse().unwrap());
    echo.wire = Some(Wire::Sockperf);
    let (addr, stop, server) = start_echo(echo);
    let mut c = config(addr, PingMode::PingPong, 300);
    c.wire = Wire::Sockperf;
    let s = ping(c);
    // Garbage, a sockperf message not asking for an answer, and an answer: none answered.
    let raw = UdpSocket::bind("127.0.0.1:0").unwrap();
    raw.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut no_answer = vec![0u8; 64];
    sockperf::write_request(&mut no_answer, 1);
    no_answer[9] = 1; // from a client, no answer asked
    let mut answer = vec![0u8; 64];
    sockperf::write_request(&mut answer, 2);
    assert!(sockperf::answer_in_place(&mut answer));
    for junk in [&[1u8, 2, 3][..], &[0u8; 64][..], &no_answer, &answer] {
        raw.send_to(junk, addr).unwrap();
    }
    let mut buf = [0u8; 128];
    assert!(raw.recv(&mut buf).is_err(), "nothing answers junk");
    stop.stop();
    let e = server.join().unwrap();
    assert_eq!((s.sent, s.received, s.invalid), (300, 300, 0), "{s:?}");
    assert_eq!((e.datagrams, e.replies), (304, 300), "{e:?}");
    let d = e.dropped;
    assert_eq!(
        (d.dropped_unrecognised, d.dropped_not_asked, d.dropped_replies),
        (2, 1, 1),
        "{d:?}"
    );
}

/// GRO on the echo: a GSO sender's segments arrive coalesced and go back as GSO segments,
/// every datagram counted once each way.
#[test]
fn gro_echo_counts_every_segment() {
    use corelane::udp::{Sender, SenderConfig};
    let mut echo = EchoConfig::new("127.0.0.1:0".parse().unwrap());
    echo.receive.gro = true;
    echo.receive.rcvbuf = Some(4 << 20);
    let (addr, stop, server) = start_echo(echo);
    let sender = Sender::connect(SenderConfig {
        targets: vec![addr],
        gso: Some(8),
        count: Some(800),
        rate: 20_000,
        duration: Some(Duration::from_secs(5)),
        ..SenderConfig::default()
    })
    .unwrap();
    let sent = sender.run(&StopSignal::new(), |_| {}).unwrap();
    thread::sleep(Duration::from_millis(200));
    stop.stop();
    let e = server.join().unwrap();
    assert_eq!(sent.throughput.datagrams, 800);
    assert_eq!(e.datagrams, 800, "{e:?}");
    assert_eq!(e.replies, 800, "{e:?}");
    if e.gro.active {
        let syscalls: u64 = e.lanes.iter().map(|l| l.syscalls).sum();
        assert!(syscalls < 800, "coalesced: {syscalls} calls for 800 datagrams");
    }
}

/// The io_uring echo answers from the buffers its requests arrived in: exact counts, for
/// corelane's payload and sockperf's header alike.
#[test]
fn the_io_uring_echo_has_exact_counts() {
    use corelane::udp::{RecvBackend, Wire};
    for wire in [Wire::Corelane, Wire::Sockperf] {
        let mut echo = EchoConfig::new("127.0.0.1:0".parse().unwrap());
        echo.receive.backend = RecvBackend::Uring { sqpoll_cpu: None };
        echo.wire = Some(wire);
        echo.receive.rcvbuf = Some(4 << 20);
        let bound = Echo::bind(echo).unwrap();
        if let Some(note) = bound.backend_note() {
            eprintln!("skipped: io_uring is not available here: {note}");
            return;
        }
        let addr = bound.local_addr();
        let stop = StopSignal::new();
        let s2 = stop.clone();
        let server = thread::spawn(move || bound.run(&s2, |_| {}).unwrap());
        let mut c = config(addr, PingMode::UnderLoad { rate: 10_000 }, 2000);
        c.flows = 3;
        c.wire = wire;
        let s = ping(c);
        thread::sleep(Duration::from_millis(100));
        stop.stop();
        let e = server.join().unwrap();
        assert_eq!(e.backend, "uring");
        assert_eq!((s.sent, s.invalid, s.duplicates), (2000, 0, 0), "{wire:?}: {s:?}");
        assert_eq!(s.received + s.lost, 2000);
        assert!(s.lost <= 40, "{s:?}");
        assert_eq!((e.datagrams, e.replies), (2000, s.received), "{wire:?}: {e:?}");
    }
}
