//! The UDP path over real loopback sockets: every numbered datagram arrives exactly once,
//! intact, through a single socket, a shared socket, a reuseport group and GSO/GRO.

mod common;

use std::net::SocketAddr;
use std::thread;
use std::time::Duration;

use common::udp::spawn_receiver;
use corelane::lane::{Placement, StopSignal};
use corelane::reuseport::BindError;
use corelane::sched::Kind;
use corelane::udp::dispatch::DispatchConfig;
use corelane::udp::{
    Lanes, ReceivePath, Receiver, ReceiverConfig, RecvBackend, RecvSummary, Sender, SenderConfig,
    SocketMode, UdpError,
};

const N: u64 = 10_000;

fn receiver(threads: usize, sockets: SocketMode, gro: bool) -> ReceiverConfig {
    ReceiverConfig {
        addrs: vec!["127.0.0.1:0".parse().unwrap()],
        lanes: Lanes { threads, ..Lanes::default() },
        receive: ReceivePath { rcvbuf: Some(8 << 20), gro, ..ReceivePath::default() },
        sockets,
        duration: Some(Duration::from_secs(20)),
        until_datagrams: Some(N),
        ..ReceiverConfig::default()
    }
}

/// Starts the receiver, sends N datagrams over `flows` flows, returns the receiver's summary.
fn round_trip(rx: ReceiverConfig, flows: usize, gso: Option<usize>) -> RecvSummary {
    let receiver = Receiver::bind(rx).unwrap();
    let target: SocketAddr = receiver.local_addrs()[0];
    let (stop, handle) = spawn_receiver(receiver);
    let sender = Sender::connect(SenderConfig {
        targets: vec![target],
        flows,
        gso,
        // Paced well below loopback's capacity so no datagram is dropped for a full buffer.
        rate: 100_000,
        count: Some(N),
        duration: Some(Duration::from_secs(20)),
        ..SenderConfig::default()
    })
    .unwrap();
    let sent = sender.run(&StopSignal::new(), |_| {}).unwrap();
    assert_eq!(sent.throughput.datagrams, N);
    // The receiver stops by itself after N datagrams; if some were dropped, give the last
    // ones in flight a moment and stop it.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while !handle.is_finished() && std::time::Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    stop.stop();
    handle.join().unwrap()
}

/// Every datagram arrived exactly once, intact. Loopback loses nothing but what the kernel
/// drops for a full receive buffer (possible on a starved machine, or without root, where the
/// buffer cannot grow past net.core.rmem_max); any such loss must show as kernel drops.
fn assert_exact(s: &RecvSummary, flows: u64, datagrams_per_drop: u64) {
    assert_eq!(s.sequence.flows, flows);
    assert_eq!(
        (s.sequence.duplicates, s.anomalies.corrupt, s.anomalies.foreign, s.anomalies.truncated),
        (0, 0, 0, 0),
        "{s:#?}"
    );
    assert_eq!(s.throughput.datagrams, s.sequence.received);
    assert_eq!(
        s.throughput.datagrams + s.sequence.missing,
        N,
        "every datagram is received or missing: {s:#?}"
    );
    assert_eq!(s.throughput.bytes, s.throughput.datagrams * 32);
    if s.sequence.missing > 0 {
        eprintln!("note: {} datagrams dropped for a full receive buffer", s.sequence.missing);
        assert!(
            s.sequence.missing
                <= s.kernel_drops.expect("/proc/net/snmp is readable") * datagrams_per_drop,
            "lost without a kernel drop: {s:#?}"
        );
    }
}

#[test]
fn single_socket_receives_every_datagram_once_in_order() {
    let s = round_trip(receiver(1, SocketMode::Reuseport, false), 4, None);
    assert_exact(&s, 4, 1);
    assert_eq!(s.sequence.late, 0, "one socket, one lane: no reordering");
}

#[test]
fn shared_socket_with_threads_loses_and_duplicates_nothing() {
    let s = round_trip(receiver(2, SocketMode::Shared, false), 4, None);
    assert_exact(&s, 4, 1);
    assert_eq!(s.lanes.len(), 2);
}

#[test]
fn reuseport_group_spreads_flows_over_its_sockets() {
    let s = round_trip(receiver(2, SocketMode::Reuseport, false), 32, None);
    assert_exact(&s, 32, 1);
    // 32 flows hashed over 2 sockets: each socket gets some (all on one: p = 2^-31).
    assert!(s.lanes.iter().all(|l| l.datagrams > 0), "{:?}", s.lanes);
    assert_eq!(s.sequence.late, 0, "a flow stays on one socket, so it stays in order");
}

#[test]
fn io_uring_lanes_receive_every_datagram_once_with_and_without_sqpoll() {
    for sqpoll_cpu in [None, Some(0)] {
        let mut rx = receiver(2, SocketMode::Reuseport, false);
        rx.receive.backend = RecvBackend::Uring { sqpoll_cpu };
        let s = round_trip(rx, 32, None);
        assert_exact(&s, 32, 1);
        assert!(s.backend.starts_with("uring"), "{}", s.backend);
        if sqpoll_cpu.is_some() && s.backend == "uring" {
            assert!(s.backend_note.as_deref().unwrap_or("").contains("SQPOLL"), "{s:#?}");
        }
        assert_eq!(s.sequence.late, 0, "a flow stays on one socket and one ring");
    }
    let mut rx = receiver(1, SocketMode::Reuseport, true);
    rx.receive.backend = RecvBackend::Uring { sqpoll_cpu: None };
    let refused = Receiver::bind(rx);
    assert!(matches!(refused, Err(UdpError::UringGro)), "{refused:?}");
}

/// Every backend of the table binds, runs and reports over loopback, or its bind says why it
/// cannot run here (the XDP backends without root or AF_XDP; over a veth: `xdp_lanes.rs`).
#[test]
fn every_backend_binds_runs_and_reports_or_says_why_not() {
    for &backend in RecvBackend::ALL {
        let mut rx = receiver(1, SocketMode::Reuseport, false);
        rx.receive.backend = backend;
        match Receiver::bind(rx.clone()) {
            Err(UdpError::Xdp(why)) => {
                eprintln!("{backend}: cannot run over loopback here: {why}");
                continue;
            }
            Err(e) => panic!("{backend}: {e}"),
            Ok(bound) => drop(bound),
        }
        let s = round_trip(rx, 4, None);
        let fell_back = s.backend_note.is_some() && s.backend != backend.name();
        assert!(s.backend == backend.name() || fell_back, "{backend}: {s:#?}");
        assert_eq!(s.throughput.datagrams + s.kernel_drops.unwrap_or(0), N, "{backend}: {s:#?}");
        if backend.reads_headers() {
            assert_exact(&s, 4, 1);
        }
    }
}

#[test]
fn dispatching_to_workers_keeps_flows_in_order_with_rss_and_counts_what_spraying_reorders() {
    for kind in [Kind::Rss, Kind::DswParallel, Kind::Diffuser] {
        let rx = ReceiverConfig {
            dispatch: Some(DispatchConfig { kind, workers: 2, work_ns: 0 }),
            ..receiver(1, SocketMode::Reuseport, false)
        };
        let s = round_trip(rx, 8, None);
        assert_exact(&s, 8, 1);
        let d = s.dispatch.expect("a dispatch report");
        assert_eq!(
            d.per_worker.iter().sum::<u64>(),
            s.throughput.datagrams,
            "{kind}: every datagram came back"
        );
        assert_eq!(d.egress.events, s.throughput.datagrams);
        if kind == Kind::Rss {
            assert_eq!(d.egress.reordered, 0, "a flow hash never reorders");
        }
    }
    let refused = Receiver::bind(ReceiverConfig {
        dispatch: Some(DispatchConfig { kind: Kind::Rss, workers: 2, work_ns: 0 }),
        ..receiver(2, SocketMode::Reuseport, false)
    });
    assert!(matches!(refused, Err(UdpError::Dispatch)), "{refused:?}");
}

#[test]
fn gso_and_gro_round_trip() {
    let s = round_trip(receiver(1, SocketMode::Reuseport, true), 2, Some(16));
    assert!(s.gro.active, "{:?}", s.gro);
    assert_exact(&s, 2, 16);
    // Coalescing shows in the call count: far fewer syscalls than datagrams.
    assert!(s.lanes[0].syscalls < N / 4, "{:?}", s.lanes);
}

#[test]
fn datagrams_longer_than_the_buffer_are_counted_as_truncated() {
    let rx = ReceiverConfig {
        slot: Some(64),
        until_datagrams: Some(100),
        ..receiver(1, SocketMode::Reuseport, false)
    };
    let receiver = Receiver::bind(rx).unwrap();
    let target = receiver.local_addrs()[0];
    let (_stop, handle) = spawn_receiver(receiver);
    let sender = Sender::connect(SenderConfig {
        targets: vec![target],
        size: 1000,
        count: Some(100),
        rate: 10_000,
        ..SenderConfig::default()
    })
    .unwrap();
    sender.run(&StopSignal::new(), |_| {}).unwrap();
    let s = handle.join().unwrap();
    assert_eq!((s.throughput.datagrams, s.anomalies.truncated, s.anomalies.corrupt), (100, 100, 0));
    assert_eq!(s.sequence.missing, 0, "the header survives truncation");
}

#[test]
fn a_busy_port_is_named_with_the_fix() {
    let first = Receiver::bind(receiver(1, SocketMode::Shared, false)).unwrap();
    let taken = first.local_addrs()[0];
    let err = Receiver::bind(ReceiverConfig {
        addrs: vec![taken],
        ..receiver(1, SocketMode::Shared, false)
    })
    .unwrap_err();
    assert!(matches!(err, UdpError::Bind(BindError::AddrInUse { .. })), "{err}");
    assert!(err.to_string().contains("already in use"), "{err}");
}

#[test]
fn bad_configurations_are_refused_before_any_thread_starts() {
    let base = receiver(1, SocketMode::Reuseport, false);
    let with_lanes = |change: fn(&mut Lanes)| {
        let mut config = base.clone();
        change(&mut config.lanes);
        Receiver::bind(config).unwrap_err()
    };
    let err = with_lanes(|l| l.batch = 0);
    assert!(err.to_string().contains("batch 0 is out of range"), "{err}");
    let err = with_lanes(|l| l.batch = 5000);
    assert!(err.to_string().contains("1 to 1024"), "{err}");
    let err = with_lanes(|l| l.threads = 0);
    assert!(matches!(err, UdpError::NoThreads));
    let err = with_lanes(|l| l.placement = Placement::RoundRobin("999".parse().unwrap()));
    assert!(err.to_string().contains("CPU 999 does not exist"), "{err}");
    let err =
        Receiver::bind(ReceiverConfig { addrs: vec!["192.0.2.1:0".parse().unwrap()], ..base })
            .unwrap_err();
    assert!(matches!(err, UdpError::Bind(BindError::AddrNotAvailable { .. })), "{err}");

    let send =
        SenderConfig { targets: vec!["127.0.0.1:9".parse().unwrap()], ..SenderConfig::default() };
    let err = Sender::connect(SenderConfig { size: 8, ..send.clone() }).unwrap_err();
    assert!(err.to_string().contains("payload size 8"), "{err}");
    let err = Sender::connect(SenderConfig { gso: Some(65), ..send.clone() }).unwrap_err();
    assert!(err.to_string().contains("GSO segments 65"), "{err}");
    let err = Sender::connect(SenderConfig { size: 60_000, gso: Some(2), ..send }).unwrap_err();
    assert!(err.to_string().contains("payload size 60000"), "{err}");
}

#[test]
fn a_stop_signal_ends_both_sides_promptly() {
    let receiver = Receiver::bind(ReceiverConfig {
        until_datagrams: None,
        ..receiver(2, SocketMode::Reuseport, false)
    })
    .unwrap();
    let target = receiver.local_addrs()[0];
    let (stop, handle) = spawn_receiver(receiver);
    let sender = Sender::connect(SenderConfig {
        targets: vec![target],
        rate: 50_000,
        duration: Some(Duration::from_secs(30)),
        ..SenderConfig::default()
    })
    .unwrap();
    let tx_stop = stop.clone();
    let started = std::time::Instant::now();
    let sending = thread::spawn(move || sender.run(&tx_stop, |_| {}).unwrap());
    thread::sleep(Duration::from_millis(300));
    stop.stop();
    let sent = sending.join().unwrap();
    let got = handle.join().unwrap();
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(sent.throughput.datagrams > 0 && got.throughput.datagrams > 0);
}
