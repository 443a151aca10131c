//! AF_XDP lanes against a real veth pair between two network namespaces this test creates
//! (`corelane-<pid>-xdp<n>-{tx,rx}`): the receiver runs in the rx namespace (a thread moved
//! there with setns), the sender in the tx one. Root only; elsewhere each test says why it
//! skips.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use corelane::lane::StopSignal;
use corelane::udp::payload;
use corelane::udp::{ReceivePath, Receiver, ReceiverConfig, RecvBackend, RecvSummary, UdpError};
use corelane::xdp::{self, XdpMode};

/// Why these tests cannot run here, if so.
fn unavailable() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some("needs root (network namespaces, XDP)".into());
    }
    if let Err(e) = xdp::check_available() {
        return Some(format!("no AF_XDP here: {e}"));
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("needs iproute2's `ip`".into());
    }
    None
}

/// A fresh namespace pair, or the test returns saying why it cannot run here.
macro_rules! pair_or_skip {
    () => {{
        if let Some(why) = unavailable() {
            eprintln!("skipped: {why}");
            return;
        }
        Pair::new()
    }};
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip runs");
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Two namespaces joined by a veth pair, removed on drop.
struct Pair {
    tx_ns: String,
    rx_ns: String,
    tx_dev: String,
    rx_dev: String,
    tx_ip: Ipv4Addr,
    rx_ip: Ipv4Addr,
}

impl Pair {
    fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let pair = Self {
            tx_ns: format!("corelane-{pid}-xdp{n}-tx"),
            rx_ns: format!("corelane-{pid}-xdp{n}-rx"),
            tx_dev: format!("xt{}{n}", pid % 100_000),
            rx_dev: format!("xr{}{n}", pid % 100_000),
            tx_ip: Ipv4Addr::new(10, 231, n as u8, 1),
            rx_ip: Ipv4Addr::new(10, 231, n as u8, 2),
        };
        ip(&["netns", "add", &pair.tx_ns]);
        ip(&["netns", "add", &pair.rx_ns]);
        ip(&["link", "add", &pair.tx_dev, "type", "veth", "peer", "name", &pair.rx_dev]);
        ip(&["link", "set", &pair.tx_dev, "netns", &pair.tx_ns]);
        ip(&["link", "set", &pair.rx_dev, "netns", &pair.rx_ns]);
        for (ns, dev, addr, host) in
            [(&pair.tx_ns, &pair.tx_dev, pair.tx_ip, 1), (&pair.rx_ns, &pair.rx_dev, pair.rx_ip, 2)]
        {
            ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev]);
            let v6 = format!("fd00:231:{n}::{host}/64");
            ip(&["-n", ns, "-6", "addr", "add", &v6, "dev", dev, "nodad"]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        pair
    }

    /// Runs `f` on a thread inside namespace `ns` (threads it starts stay there too).
    fn within<T: Send + 'static>(
        ns: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> thread::JoinHandle<T> {
        let path = format!("/run/netns/{ns}");
        thread::spawn(move || {
            let file = std::fs::File::open(&path).expect("namespace file");
            rustix::thread::move_into_link_name_space(
                std::os::fd::AsFd::as_fd(&file),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )
            .expect("setns");
            f()
        })
    }

    fn in_rx<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        Self::within(&self.rx_ns, f).join().unwrap()
    }

    fn programs_on_rx(&self) -> Vec<u32> {
        let dev = self.rx_dev.clone();
        self.in_rx(move || xdp::programs_on(&dev).unwrap())
    }

    /// Waits (3 s at most) until no program is on the receiving interface. Closing a bpf_link's
    /// last descriptor detaches it, but the kernel releases the last reference in deferred
    /// work, so the program may still be listed for a moment after the receiver returned.
    fn assert_no_program_left(&self, what: &str) {
        let end = std::time::Instant::now() + std::time::Duration::from_secs(3);
        while !self.programs_on_rx().is_empty() {
            assert!(std::time::Instant::now() < end, "still attached 3 s after {what}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in [&self.tx_ns, &self.rx_ns] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

fn rx_ip6(pair: &Pair) -> std::net::Ipv6Addr {
    format!("fd00:231:{}::2", pair.rx_ip.octets()[2]).parse().unwrap()
}

fn config(addr: SocketAddr, n: u64) -> ReceiverConfig {
    ReceiverConfig {
        addrs: vec![addr],
        receive: ReceivePath {
            backend: RecvBackend::Xdp { mode: XdpMode::Auto, busy_poll_us: None },
            ..ReceivePath::default()
        },
        duration: Some(Duration::from_secs(20)),
        until_datagrams: Some(n),
        ..ReceiverConfig::default()
    }
}

/// Starts an AF_XDP receiver in the rx namespace; returns the stop signal and the thread
/// that returns its summary.
fn start_receiver(
    pair: &Pair,
    port: u16,
    n: u64,
) -> (StopSignal, thread::JoinHandle<Result<RecvSummary, UdpError>>) {
    start_receiver_with(pair, config(SocketAddr::from((pair.rx_ip, port)), n))
}

fn start_receiver_with(
    pair: &Pair,
    config: ReceiverConfig,
) -> (StopSignal, thread::JoinHandle<Result<RecvSummary, UdpError>>) {
    let stop = StopSignal::new();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let rx_stop = stop.clone();
    let handle = Pair::within(&pair.rx_ns, move || {
        let receiver = match Receiver::bind(config) {
            Ok(r) => r,
            Err(e) => {
                let _ = ready_tx.send(());
                return Err(e);
            }
        };
        let ready = move || {
            let _ = ready_tx.send(());
        };
        receiver.run_announced(&rx_stop, ready, |_| {})
    });
    ready_rx.recv_timeout(Duration::from_secs(20)).unwrap();
    (stop, handle)
}

/// Receives datagrams 0..n of flow 0, sent to `addr` from the tx namespace, through `backend`
/// and returns the summary; `ready` runs once the receiver is ready, before the first send.
fn receive_numbered(
    pair: &Pair,
    addr: SocketAddr,
    n: u64,
    backend: RecvBackend,
    ready: impl FnOnce(),
) -> RecvSummary {
    let mut config = config(addr, n);
    config.receive.backend = backend;
    let (_stop, handle) = start_receiver_with(pair, config);
    ready();
    send_numbered(pair, addr, n);
    handle.join().unwrap().unwrap()
}

/// Sends datagrams 0..n of flow 0 from the tx namespace, paced so that copy mode keeps up.
fn send_numbered(pair: &Pair, to: SocketAddr, n: u64) {
    Pair::within(&pair.tx_ns, move || {
        let socket = UdpSocket::bind(if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }).unwrap();
        let mut buf = vec![0u8; 64];
        payload::prefill(&mut buf);
        for seq in 0..n {
            payload::write_header(&mut buf, 0, seq);
            socket.send_to(&buf, to).unwrap();
            if seq % 64 == 63 {
                thread::sleep(Duration::from_micros(500));
            }
        }
    })
    .join()
    .unwrap();
}

#[test]
fn numbered_datagrams_arrive_exactly_once_and_the_program_goes_with_the_run() {
    let pair = pair_or_skip!();
    const N: u64 = 20_000;
    let (_stop, handle) = start_receiver(&pair, 4321, N);
    assert_eq!(pair.programs_on_rx().len(), 1, "the program is attached while receiving");
    send_numbered(&pair, SocketAddr::from((pair.rx_ip, 4321)), N);
    let s = handle.join().unwrap().unwrap();
    let x = s.backend_report.xdp.as_ref().expect("an xdp report");
    assert_eq!(s.backend, "xdp");
    assert_eq!(s.throughput.datagrams, N, "{s:?}");
    assert_eq!(s.sequence.received, N);
    assert_eq!((s.sequence.missing, s.sequence.duplicates, s.sequence.late), (0, 0, 0));
    assert_eq!((s.anomalies.corrupt, s.anomalies.foreign), (0, 0));
    assert_eq!(x.counts.lying_length + x.counts.malformed + x.counts.other_port, 0);
    // veth has no XSK buffer pool: zero-copy is tried, refused, and said so.
    assert_eq!(x.mode, "native copy", "{x:?}");
    assert!(x.why.contains("zero-copy refused"), "{}", x.why);
    pair.assert_no_program_left("the run");
}

#[test]
fn other_ports_and_icmp_keep_working_while_attached() {
    let pair = pair_or_skip!();
    let other = SocketAddr::from((pair.rx_ip, 5000));
    let listener = pair.in_rx(move || UdpSocket::bind(other).unwrap());
    listener.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let (stop, handle) = start_receiver(&pair, 4321, u64::MAX);
    let rx_ip = pair.rx_ip;
    let (udp_sent, echo) = Pair::within(&pair.tx_ns, move || {
        let socket = UdpSocket::bind("0.0.0.0:0").unwrap();
        socket.send_to(b"not for corelane", other).unwrap();
        (true, icmp_echo(rx_ip))
    })
    .join()
    .unwrap();
    assert!(udp_sent);
    let mut buf = [0u8; 64];
    let (n, _) = listener.recv_from(&mut buf).expect("the other port still receives");
    assert_eq!(&buf[..n], b"not for corelane");
    assert!(echo, "ICMP echo answered while the program is attached");
    stop.stop();
    let s = handle.join().unwrap().unwrap();
    assert_eq!(s.throughput.datagrams, 0, "nothing of the other port or ICMP reached the lane");
}

/// One ICMP echo request over a raw socket; whether the reply came within 3 s.
fn icmp_echo(to: Ipv4Addr) -> bool {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4)).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut req = [8u8, 0, 0, 0, 0x12, 0x34, 0, 1, b'c', b'l'];
    let sum = checksum(&req);
    req[2..4].copy_from_slice(&sum.to_be_bytes());
    socket.send_to(&req, &SocketAddr::from((to, 0)).into()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut bytes = [0u8; 256];
    while Instant::now() < deadline {
        let Ok(n) = std::io::Read::read(&mut &socket, &mut bytes) else { return false };
        let bytes = &bytes[..n];
        let ihl = usize::from(bytes[0] & 0x0f) * 4;
        if bytes.get(ihl) == Some(&0) && bytes.get(ihl + 4..ihl + 6) == Some(&[0x12, 0x34][..]) {
            return true;
        }
    }
    false
}

fn checksum(b: &[u8]) -> u16 {
    let mut sum: u32 =
        b.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Good frames with one forged between them whose IPv4 total length claims 400 bytes more than
/// the frame carries (its header checksum matching the lie), sent raw through AF_XDP from the
/// tx side: the lie is counted and dropped, the good ones arrive.
#[test]
fn a_frame_whose_ip_length_lies_is_counted_and_dropped() {
    let pair = pair_or_skip!();
    let (stop, handle) = start_receiver(&pair, 4321, 10);
    let rx_mac = {
        let dev = pair.rx_dev.clone();
        pair.in_rx(move || xdp::Interface::by_name(&dev).unwrap().mac)
    };
    let (tx_dev, tx_ip, rx_ip) = (pair.tx_dev.clone(), pair.tx_ip, pair.rx_ip);
    Pair::within(&pair.tx_ns, move || {
        let (mut tx, _) = xdp::tx::XskTx::open(&tx_dev, 0).unwrap();
        let src = SocketAddrV4::new(tx_ip, 999);
        let dst = SocketAddrV4::new(rx_ip, 4321);
        let mut frames = Vec::new();
        for seq in 0..10u64 {
            let mut body = vec![0u8; 32];
            payload::prefill(&mut body);
            payload::write_header(&mut body, 0, seq);
            frames.push(xdp::frame::build_ipv4(tx.iface.mac, rx_mac, src, dst, &body));
            if seq == 4 {
                let mut lie = frames[0].clone();
                let total = u16::from_be_bytes([lie[16], lie[17]]) + 400;
                lie[16..18].copy_from_slice(&total.to_be_bytes());
                lie[24..26].fill(0);
                let sum = checksum(&lie[14..34]);
                lie[24..26].copy_from_slice(&sum.to_be_bytes());
                frames.push(lie);
            }
        }
        tx.send_all(&frames, Duration::from_secs(5)).unwrap();
    })
    .join()
    .unwrap();
    let s = handle.join().unwrap().unwrap();
    stop.stop();
    let x = s.backend_report.xdp.unwrap();
    assert_eq!(x.counts.lying_length, 1, "{x:?}");
    assert_eq!(x.counts.frames, 11);
    assert_eq!(s.throughput.datagrams, 10);
    assert_eq!((s.sequence.missing, s.sequence.duplicates), (0, 0));
}

/// A corelane program attached without a link (what a killed netlink-attaching run leaves)
/// is recognised by name and removed at the next start; a program of anyone else is refused
/// by id and name and stays.
#[test]
fn a_left_over_corelane_program_is_removed_and_a_foreign_one_refused() {
    let pair = pair_or_skip!();
    let (dev, addr) = (pair.rx_dev.clone(), SocketAddr::from((pair.rx_ip, 4321)));
    let stale = pair
        .in_rx(move || xdp::leave_netlink_attached_program(&dev, addr, xdp::PROGRAM_NAME).unwrap());
    assert_eq!(pair.programs_on_rx(), vec![stale]);
    let (stop, handle) = start_receiver(&pair, 4321, u64::MAX);
    stop.stop();
    let s = handle.join().unwrap().unwrap();
    assert_eq!(s.backend_report.xdp.unwrap().removed_stale_program, Some(stale));
    // The link goes with its last descriptor: a process another test forks at that moment
    // holds a copy of every descriptor until it execs, so allow it that long.
    let end = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while !pair.programs_on_rx().is_empty() && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(pair.programs_on_rx().is_empty());

    let dev = pair.rx_dev.clone();
    let foreign = pair
        .in_rx(move || xdp::leave_netlink_attached_program(&dev, addr, "someone_else").unwrap());
    let err = pair.in_rx(move || Receiver::bind(config(addr, 1)).unwrap_err());
    let line = err.to_string();
    assert!(
        line.contains(&format!("program id {foreign}")) && line.contains("someone_else"),
        "{line}"
    );
    assert!(line.contains("never replaces"), "{line}");
    assert_eq!(pair.programs_on_rx(), vec![foreign], "the foreign program stays");
}

#[test]
fn bad_input_is_one_clear_error() {
    let pair = pair_or_skip!();
    let rx_ip = pair.rx_ip;
    let dev = pair.rx_dev.clone();
    let errors = pair.in_rx(move || {
        let with_dev = |addr: &str, dev: &str| {
            let mut c = config(addr.parse().unwrap(), 1);
            c.interface = Some(dev.to_string());
            Receiver::bind(c).unwrap_err().to_string()
        };
        vec![
            with_dev(&format!("{rx_ip}:4321"), "nope0"),
            with_dev("10.99.99.99:4321", &dev),
            Receiver::bind(config("0.0.0.0:4321".parse().unwrap(), 1)).unwrap_err().to_string(),
        ]
    });
    assert!(errors[0].contains("no network interface named \"nope0\""), "{}", errors[0]);
    assert!(errors[1].contains("10.99.99.99"), "{}", errors[1]);
    assert!(errors[2].contains("--xdp-dev"), "{}", errors[2]);
    pair.assert_no_program_left("a refused start");
}

/// The AF_XDP sender (frames built once per flow, rewritten per sequence number, through the
/// TX ring) into a plain recvmmsg receiver: every numbered datagram of every flow arrives
/// exactly once, and the destination MAC came from the neighbour table. Over IPv6 too, where
/// the kernel drops a datagram whose UDP checksum (rewritten per datagram) is wrong.
#[test]
fn the_af_xdp_sender_delivers_every_numbered_datagram_once() {
    let pair = pair_or_skip!();
    sender_delivers_every_datagram_once(SocketAddr::from((pair.rx_ip, 4322)), &pair);
    sender_delivers_every_datagram_once(SocketAddr::from((rx_ip6(&pair), 4325)), &pair);
}

fn sender_delivers_every_datagram_once(addr: SocketAddr, pair: &Pair) {
    const N: u64 = 20_000;
    let stop = StopSignal::new();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let rx_stop = stop.clone();
    let handle = Pair::within(&pair.rx_ns, move || {
        let receiver = Receiver::bind(ReceiverConfig {
            addrs: vec![addr],
            receive: ReceivePath { rcvbuf: Some(8 << 20), ..ReceivePath::default() },
            duration: Some(Duration::from_secs(20)),
            until_datagrams: Some(N),
            ..ReceiverConfig::default()
        })
        .unwrap();
        ready_tx.send(()).unwrap();
        receiver.run(&rx_stop, |_| {}).unwrap()
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let sent = Pair::within(&pair.tx_ns, move || {
        let sender = corelane::udp::Sender::connect(corelane::udp::SenderConfig {
            targets: vec![addr],
            flows: 4,
            rate: 100_000,
            count: Some(N),
            duration: Some(Duration::from_secs(15)),
            backend: corelane::udp::SendBackend::Xdp,
            ..Default::default()
        })
        .unwrap();
        let note = sender.backend_note().unwrap().to_string();
        (sender.run(&StopSignal::new(), |_| {}).unwrap(), note)
    })
    .join()
    .unwrap();
    let (sent, note) = sent;
    assert_eq!(sent.throughput.datagrams, N);
    assert_eq!(sent.backend, "xdp");
    assert!(note.contains("neighbour table") || note.contains("resolved"), "{note}");
    let s = handle.join().unwrap();
    stop.stop();
    assert_eq!(s.throughput.datagrams, N, "{addr}: {s:?}");
    assert_eq!(s.sequence.flows, 4);
    assert_eq!(
        (s.sequence.missing, s.sequence.duplicates, s.anomalies.corrupt, s.anomalies.foreign),
        (0, 0, 0, 0)
    );
}

/// A panic while the program is attached unwinds through the bpf_link's owner: detached.
#[test]
fn a_panic_detaches_the_program() {
    let pair = pair_or_skip!();
    let addr = SocketAddr::from((pair.rx_ip, 4321));
    let dev = pair.rx_dev.clone();
    let outcome = Pair::within(&pair.rx_ns, move || {
        let _receiver = Receiver::bind(config(addr, 1)).unwrap();
        assert_eq!(xdp::programs_on(&dev).unwrap().len(), 1);
        panic!("on purpose, with the program attached");
    })
    .join();
    assert!(outcome.is_err());
    pair.assert_no_program_left("the panic");
}

/// IPv6 (the program's other branch), generic XDP, and busy polling: every numbered datagram
/// arrives once, and the mode that ran is the one asked for.
#[test]
fn ipv6_generic_mode_and_busy_polling_deliver_exactly_once() {
    let pair = pair_or_skip!();
    const N: u64 = 3_000;
    let v6 = SocketAddr::from((rx_ip6(&pair), 4323));
    let v4 = SocketAddr::from((pair.rx_ip, 4324));
    for (addr, mode, busy_poll_us, expect) in [
        (v6, XdpMode::Auto, None, "native copy"),
        (v4, XdpMode::Generic, None, "generic copy"),
        (v4, XdpMode::Copy, Some(50), "native copy"),
    ] {
        let s = receive_numbered(&pair, addr, N, RecvBackend::Xdp { mode, busy_poll_us }, || {});
        let x = s.backend_report.xdp.unwrap();
        assert_eq!(x.mode, expect, "{addr} {mode:?}");
        assert_eq!(x.busy_poll, busy_poll_us.is_some());
        assert_eq!(s.throughput.datagrams, N, "{addr} {mode:?}");
        assert_eq!((s.sequence.missing, s.sequence.duplicates), (0, 0));
        pair.assert_no_program_left("the run");
    }
}

/// `xdp-drop`, the ceiling: the same match dropped in the driver, its per-CPU counter read
/// (the map checked to be a per-CPU array of u64 before the kernel writes into our buffer)
/// and reported as datagrams; the program goes with the run.
#[test]
fn the_drop_ceiling_counts_every_matching_frame_and_detaches() {
    let pair = pair_or_skip!();
    const N: u64 = 5_000;
    let addr = SocketAddr::from((pair.rx_ip, 4323));
    let s = receive_numbered(&pair, addr, N, RecvBackend::XdpDrop, || {
        assert_eq!(pair.programs_on_rx().len(), 1, "the dropping program is attached");
    });
    assert_eq!(s.backend, "xdp-drop");
    assert_eq!(s.throughput.datagrams, N, "{s:?}");
    assert_eq!(s.threads, 1);
    assert!(s.backend_note.as_deref().is_some_and(|n| n.contains("XDP_DROP ceiling")), "{s:?}");
    pair.assert_no_program_left("the run");
}

/// `xdp-return`, the delivery floor: the same program and sockets as `xdp`, every frame
/// handed back to the fill ring unread and counted; the kernel lost none, and the program goes
/// with the run.
#[test]
fn the_delivery_floor_hands_every_frame_back_and_counts_it() {
    let pair = pair_or_skip!();
    const N: u64 = 20_000;
    let addr = SocketAddr::from((pair.rx_ip, 4325));
    let s = receive_numbered(&pair, addr, N, RecvBackend::XdpReturn { mode: XdpMode::Auto }, || {});
    assert_eq!(s.backend, "xdp-return");
    assert_eq!(s.throughput.datagrams, N, "{s:?}");
    let x = s.backend_report.xdp.as_ref().unwrap();
    // More frames than the UMEM holds (10,240): each went back to the fill ring.
    assert_eq!(x.counts.frames, N);
    assert_eq!(x.xsk.map(|k| k.rx_lost()), Some(0));
    assert!(s.backend_note.as_deref().is_some_and(|n| n.contains("delivery floor")), "{s:?}");
    pair.assert_no_program_left("the run");
}

/// Every backend of the table receives numbered datagrams over a veth and reports them: the
/// kernel's sockets and the XDP lanes alike (one table, one way in).
#[test]
fn every_backend_of_the_table_receives_over_a_veth_and_reports() {
    let pair = pair_or_skip!();
    const N: u64 = 2_000;
    for (i, &backend) in RecvBackend::ALL.iter().enumerate() {
        let addr = SocketAddr::from((pair.rx_ip, 4400 + i as u16));
        let mut config = config(addr, N);
        config.receive.backend = backend;
        // Room for the whole burst where the kernel's sockets queue it (mmsg, uring).
        config.receive.rcvbuf = Some(8 << 20);
        let (_stop, handle) = start_receiver_with(&pair, config);
        send_numbered(&pair, addr, N);
        let s = handle.join().unwrap().unwrap();
        let fell_back = s.backend_note.is_some() && s.backend != backend.name();
        assert!(s.backend == backend.name() || fell_back, "{backend}: {s:#?}");
        assert_eq!(s.throughput.datagrams, N, "{backend}: {s:#?}");
        if backend.reads_headers() {
            assert_eq!(s.sequence.received, N, "{backend}");
        }
        pair.assert_no_program_left(backend.name());
    }
}

/// A counter of `dev`'s in namespace `ns` (`/sys/class/net/DEV/statistics/NAME`).
fn link_counter(ns: &str, dev: &str, name: &str) -> u64 {
    let file = format!("/sys/class/net/{dev}/statistics/{name}");
    let out = Command::new("ip").args(["netns", "exec", ns, "cat", &file]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// A burst far larger than the rings into a socket no lane reads: the RX ring fills and
/// every frame after it is counted by the kernel as `rx_ring_full` (never a silent gap), the
/// fill ring never runs dry (it holds twice the RX ring), and the frames on the ring are the
/// burst's first, each once. The sender's veth gets a qdisc so that veth's own 256-frame XDP
/// ring pushes back on the sender instead of dropping (its drops would be `tx_dropped`).
#[test]
fn a_burst_larger_than_the_rings_is_counted_where_it_is_lost() {
    let pair = pair_or_skip!();
    let qdisc = ["-n", &pair.tx_ns, "qdisc", "replace", "dev", &pair.tx_dev, "root"];
    let tc = Command::new("tc").args(qdisc).args(["pfifo", "limit", "10000"]).output();
    if !tc.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: needs iproute2's `tc` to give the sender's veth a qdisc");
        return;
    }
    let ring = u64::from(xdp::rx::RX_RING);
    let n = u64::from(xdp::rx::RX_FRAMES) + ring + 1_000;
    let addr = SocketAddr::from((pair.rx_ip, 4330));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (sent_tx, sent_rx) = std::sync::mpsc::channel::<()>();
    let rx = Pair::within(&pair.rx_ns, move || {
        let rx = xdp::rx::RxConfig { addr, dev: None, mode: XdpMode::Auto, busy_poll_us: None };
        let mut receive = xdp::rx::XdpReceive::setup(&rx).unwrap();
        ready_tx.send(()).unwrap();
        sent_rx.recv().unwrap();
        // Wait until every frame is on the ring or counted lost, then read the ring.
        let end = Instant::now() + Duration::from_secs(5);
        let mut lanes = receive.take_lanes();
        while lanes[0].stats().unwrap().rx_lost() + ring < n && Instant::now() < end {
            thread::sleep(Duration::from_millis(10));
        }
        let mut seqs = Vec::new();
        for lane in &mut lanes {
            while lane.receive(64, |p| seqs.push(payload::read(p).unwrap().seq)) > 0 {}
        }
        (seqs, receive.finish(&lanes))
    });
    ready_rx.recv().unwrap();
    Pair::within(&pair.tx_ns, move || {
        let socket = UdpSocket::bind("0.0.0.0:0").unwrap();
        let mut buf = vec![0u8; 64];
        payload::prefill(&mut buf);
        for seq in 0..n {
            payload::write_header(&mut buf, 0, seq);
            socket.send_to(&buf, addr).unwrap();
        }
    })
    .join()
    .unwrap();
    sent_tx.send(()).unwrap();
    let (seqs, report) = rx.join().unwrap();
    let veth_dropped = link_counter(&pair.tx_ns, &pair.tx_dev, "tx_dropped");
    let k = report.xsk.expect("the counters were read");
    assert_eq!(seqs.len() as u64 + k.rx_lost() + veth_dropped, n, "a silent gap: {k:?}");
    assert_eq!(veth_dropped, 0, "the qdisc pushed back on the sender: {k:?}");
    assert_eq!(seqs, (0..ring).collect::<Vec<_>>(), "the ring holds the first frames, once");
    assert_eq!(k.rx_ring_full, n - ring, "{k:?}");
    assert_eq!((k.rx_dropped, k.rx_fill_ring_empty_descs), (0, 0), "the fill ring never ran dry");
    let per_queue: u64 = report.xsk_per_queue.iter().map(|q| q.unwrap().rx_ring_full).sum();
    assert_eq!(per_queue, n - ring);
    pair.assert_no_program_left("the run");
}
