//! What a hostile UDP peer can make a receiver hold: forged flow ids and sequence numbers on
//! the dispatch path (seed 004 over real datagrams), over real loopback sockets.

mod common;

use std::net::UdpSocket;
use std::thread;
use std::time::Duration;

use common::rss_kib;
use common::udp::spawn_receiver;
use corelane::lane::Placement;
use corelane::sched::Kind;
use corelane::udp::dispatch::DispatchConfig;
use corelane::udp::{payload, Lanes, ReceivePath, Receiver, ReceiverConfig};

fn datagram(flow: u32, seq: u64) -> [u8; 32] {
    let mut buf = [0u8; 32];
    payload::prefill(&mut buf);
    payload::write_header(&mut buf, flow, seq);
    buf
}

/// One forged datagram with a flow id just under 2^20 made the dispatch and reorder maps
/// allocate a million slots each, ids above grew hash maps without bound, and
/// `seq = u64::MAX` overflowed the sequence tracker. Ids beyond the tracked range now count
/// as foreign and reach no map; any sequence number is ordinary.
#[test]
fn forged_flow_ids_and_sequences_on_the_dispatch_path_are_bounded() {
    let receiver = Receiver::bind(ReceiverConfig {
        addrs: vec!["127.0.0.1:0".parse().unwrap()],
        receive: ReceivePath { rcvbuf: Some(8 << 20), ..ReceivePath::default() },
        dispatch: Some(DispatchConfig { kind: Kind::DswAtomic, workers: 2, work_ns: 0 }),
        duration: Some(Duration::from_secs(20)),
        ..ReceiverConfig::default()
    })
    .unwrap();
    let target = receiver.local_addrs()[0];
    let before = rss_kib();
    let (stop, handle) = spawn_receiver(receiver);

    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    // Distinct huge ids: each would have been a hash-map entry (or a million-slot vector).
    let forged: Vec<u32> = (0..20_000u32)
        .map(|i| (1 << 20) - 1 - i)
        .chain((0..20_000u32).map(|i| u32::MAX - i))
        .collect();
    let mut sent = 0u64;
    for (i, &flow) in forged.iter().enumerate() {
        socket.send_to(&datagram(flow, u64::MAX - i as u64 % 3), target).unwrap();
        sent += 1;
        if i % 1000 == 999 {
            thread::sleep(Duration::from_millis(2)); // stay within the receive buffer
        }
    }
    // A valid flow at the top of the sequence space.
    for seq in [u64::MAX - 1, u64::MAX, u64::MAX, 3] {
        socket.send_to(&datagram(1, seq), target).unwrap();
        sent += 1;
    }
    // Let the receive lane drain what is queued (loopback delivers synchronously).
    thread::sleep(Duration::from_millis(300));
    stop.stop();
    let s = handle.join().unwrap();
    let grown_mib = rss_kib().saturating_sub(before) / 1024;

    eprintln!("{s:#?}\nRSS growth {grown_mib} MiB");
    assert!(s.throughput.datagrams > 0 && s.throughput.datagrams <= sent);
    let valid = s.throughput.datagrams - s.anomalies.foreign - s.anomalies.corrupt;
    assert!(
        s.anomalies.foreign >= s.throughput.datagrams - 4,
        "forged flows count as foreign: {s:#?}"
    );
    assert_eq!(s.sequence.flows, u64::from(valid > 0));
    assert_eq!(s.sequence.untracked, 0, "excess flows never reach the tracker");
    let d = s.dispatch.expect("a dispatch report");
    assert_eq!(d.egress.events, valid, "only tracked flows are dispatched");
    assert!(grown_mib < 64, "the receiver grew by {grown_mib} MiB");
}

/// An empty CPU list given as a pin reached `index % len`, a division by zero in the lane
/// spawner; it is now a bind error that names the fix.
#[test]
fn an_empty_pin_is_refused_at_bind() {
    use corelane::topology::CpuList;
    use corelane::udp::{Sender, SenderConfig};
    let empty = || Placement::RoundRobin(CpuList::default());
    let receiver = Receiver::bind(ReceiverConfig {
        addrs: vec!["127.0.0.1:0".parse().unwrap()],
        lanes: Lanes { placement: empty(), ..Lanes::default() },
        ..ReceiverConfig::default()
    });
    let sender = Sender::connect(SenderConfig {
        targets: vec!["127.0.0.1:9".parse().unwrap()],
        lanes: Lanes { placement: empty(), ..Lanes::default() },
        ..SenderConfig::default()
    });
    for err in [receiver.err(), sender.err()] {
        let err = err.expect("an empty pin is refused");
        assert!(err.to_string().contains("no CPU to pin to"), "{err}");
    }
}
