//! The receivers people use today, measured on the same testbed in the same run: a bare C
//! recvmmsg loop (seed 000's receiver), sockperf and iperf3, each beside corelane receiving
//! from the same sender. Every receiver here is measured the same way, from outside: the
//! receiving namespace's InDatagrams (counted when an application reads a datagram) and the
//! receiver process's CPU time from /proc/PID/stat, over the same steady window.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use corelane::lane::StopSignal;
use serde::Serialize;

use super::trial::{pick_port, wait_ready};
use super::{median_of, PeerRow, UdpLabOptions};
use crate::process::{cpu_time_of, on_path, ChildProcess};
use crate::testbed::Testbed;
use crate::LabError;

/// A peer the lab can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Peer {
    /// Seed 000's receiver: one thread, recvmmsg of 32, compiled here with `cc -O2`.
    CLoop,
    Sockperf,
    Iperf3,
}

impl Peer {
    pub const ALL: [Peer; 3] = [Peer::CLoop, Peer::Sockperf, Peer::Iperf3];

    pub fn name(self) -> &'static str {
        match self {
            Peer::CLoop => "c-loop",
            Peer::Sockperf => "sockperf",
            Peer::Iperf3 => "iperf3",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }

    /// Why the peer cannot run here, if it cannot.
    fn missing(self) -> Option<String> {
        let (program, package) = match self {
            Peer::CLoop => ("cc", "gcc"),
            Peer::Sockperf => ("sockperf", "sockperf"),
            Peer::Iperf3 => ("iperf3", "iperf3"),
        };
        (!on_path(program)).then(|| {
            format!("{}: `{program}` is not installed (apt-get install {package})", self.name())
        })
    }
}

/// A receiving program and the sender that drives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Receiver {
    Corelane,
    /// corelane without user-space coalescing: the bare batched loop.
    CorelaneNoCoalesce,
    CLoop,
    SockperfServer,
    Iperf3Server,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sender {
    /// corelane's sendmmsg sender, one flow, flat out: the seed's sender.
    CorelanePlain,
    SockperfClient,
    Iperf3Client,
}

impl Receiver {
    fn label(self) -> &'static str {
        match self {
            Receiver::Corelane => "corelane udp recv (1 lane)",
            Receiver::CorelaneNoCoalesce => "corelane udp recv --coalesce 0",
            Receiver::CLoop => "C recvmmsg loop (batch 32)",
            Receiver::SockperfServer => "sockperf server",
            Receiver::Iperf3Server => "iperf3 -s",
        }
    }
}

impl Sender {
    fn label(self) -> &'static str {
        match self {
            Sender::CorelanePlain => "corelane udp send (sendmmsg, 1 flow)",
            Sender::SockperfClient => "sockperf tp --mps max",
            Sender::Iperf3Client => "iperf3 -c -u -b 0",
        }
    }
}

struct Setup<'a> {
    testbed: &'a Testbed,
    exe: String,
    c_loop: Option<PathBuf>,
    sender_cpu: usize,
    receiver_cpu: usize,
    duration: Duration,
}

/// Compiles the C loop into a private temporary directory; `None` with a reason on failure.
fn build_c_loop(dir: &std::path::Path) -> Result<PathBuf, String> {
    let src = dir.join("recvmmsg_loop.c");
    let bin = dir.join("recvmmsg_loop");
    std::fs::write(&src, include_str!("../../peers/recvmmsg_loop.c")).map_err(|e| e.to_string())?;
    let out = std::process::Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .map_err(|e| format!("cannot run cc: {e}"))?;
    if !out.status.success() {
        return Err(format!("cc failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(bin)
}

/// Measures every requested peer beside corelane, interleaving them trial by trial.
pub fn run_all(
    testbed: &Testbed,
    sender_cpu: usize,
    receiver_cpu: usize,
    opts: &UdpLabOptions,
    stop: &StopSignal,
    progress: &mut dyn FnMut(&str),
    skipped: &mut Vec<String>,
) -> Result<Vec<PeerRow>, LabError> {
    let mut peers = Vec::new();
    for &peer in &opts.peers {
        match peer.missing() {
            Some(reason) => skipped.push(reason),
            None => peers.push(peer),
        }
    }
    if peers.is_empty() {
        return Ok(Vec::new());
    }
    if testbed.is_namespaced() {
        // The peers run on the default configuration: RPS off.
        testbed.steer_receive(&corelane::topology::CpuList::default())?;
    }
    // The C peer is compiled and run as root from here: a private directory, never a
    // predictable path.
    let workdir = crate::workdir::WorkDir::create("udp")?;
    let mut c_loop = None;
    if peers.contains(&Peer::CLoop) {
        match build_c_loop(workdir.path()) {
            Ok(bin) => c_loop = Some(bin),
            Err(reason) => {
                skipped.push(format!("c-loop: {reason}"));
                peers.retain(|p| *p != Peer::CLoop);
            }
        }
    }
    let setup = Setup {
        testbed,
        exe: opts.exe.to_string_lossy().into_owned(),
        c_loop,
        sender_cpu,
        receiver_cpu,
        duration: opts.duration,
    };
    // corelane first in each pair: the reference the peer's ratio is taken against.
    let mut pairs = vec![(Receiver::Corelane, Sender::CorelanePlain)];
    if peers.contains(&Peer::CLoop) {
        pairs.push((Receiver::CorelaneNoCoalesce, Sender::CorelanePlain));
        pairs.push((Receiver::CLoop, Sender::CorelanePlain));
    }
    if peers.contains(&Peer::Sockperf) {
        pairs.push((Receiver::Corelane, Sender::SockperfClient));
        pairs.push((Receiver::SockperfServer, Sender::SockperfClient));
    }
    if peers.contains(&Peer::Iperf3) {
        pairs.push((Receiver::Iperf3Server, Sender::Iperf3Client));
    }
    let mut results: Vec<Vec<(f64, f64)>> = vec![Vec::new(); pairs.len()];
    for t in 0..opts.trials {
        for (i, &(rx, tx)) in pairs.iter().enumerate() {
            if stop.is_stopped() {
                return Err(LabError::Interrupted);
            }
            let (pps, cpu_ns) = measure(&setup, rx, tx, stop)?;
            progress(&format!(
                "[peers] {} <- {} trial {}/{}: {:.3} Mpps, {:.0} ns CPU/datagram",
                rx.label(),
                tx.label(),
                t + 1,
                opts.trials,
                pps / 1e6,
                cpu_ns
            ));
            results[i].push((pps, cpu_ns));
        }
    }
    drop(workdir);
    let mut rows: Vec<PeerRow> = pairs
        .iter()
        .zip(&results)
        .map(|(&(rx, tx), r)| PeerRow {
            receiver: rx.label().into(),
            sender: tx.label().into(),
            trials_pps: r.iter().map(|x| x.0).collect(),
            median_pps: median_of(r.iter().map(|x| x.0)),
            cpu_ns_per_datagram: median_of(r.iter().map(|x| x.1)),
            corelane_pps_ratio: None,
            corelane_cpu_ratio: None,
        })
        .collect();
    // Ratios against corelane fed by the same sender (iperf3 has no such pair: its server
    // needs its own client's control connection, so it is compared with corelane's plain row).
    for i in 0..rows.len() {
        if pairs[i].0 == Receiver::Corelane {
            continue;
        }
        let reference = pairs
            .iter()
            .position(|&(rx, tx)| rx == Receiver::Corelane && tx == pairs[i].1)
            .unwrap_or(0);
        let (ours, theirs) = (&rows[reference], &rows[i]);
        let pps = ours.median_pps / theirs.median_pps.max(1.0);
        let cpu = theirs.cpu_ns_per_datagram / ours.cpu_ns_per_datagram.max(1.0);
        rows[i].corelane_pps_ratio = Some(pps);
        rows[i].corelane_cpu_ratio = Some(cpu);
    }
    Ok(rows)
}

/// One receiver/sender pair: datagrams/s the receiver read and its CPU per datagram.
fn measure(
    s: &Setup<'_>,
    rx: Receiver,
    tx: Sender,
    stop: &StopSignal,
) -> Result<(f64, f64), LabError> {
    let port = pick_port(s.testbed)?;
    let ip = s.testbed.rx_addrs()[0];
    let target = SocketAddr::new(ip, port);
    let secs = s.duration.as_secs();
    let rcpu = s.receiver_cpu.to_string();
    let scpu = s.sender_cpu.to_string();
    let strings = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    let life = (secs + 5).to_string();
    let mut receiver = match rx {
        Receiver::Corelane | Receiver::CorelaneNoCoalesce => {
            let mut args = strings(&[
                "udp",
                "recv",
                &target.to_string(),
                "--json",
                "--pin",
                &rcpu,
                "--rcvbuf",
                "4M",
                "--duration",
                &life,
            ]);
            if rx == Receiver::CorelaneNoCoalesce {
                args.extend(strings(&["--coalesce", "0"]));
            }
            ChildProcess::spawn("corelane receiver", s.testbed.rx_ns(), &s.exe, &args)?
        }
        Receiver::CLoop => {
            let bin =
                s.c_loop.as_ref().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
            let args = strings(&["-c", &rcpu, &bin, &ip.to_string(), &port.to_string(), &life]);
            ChildProcess::spawn("C recvmmsg loop", s.testbed.rx_ns(), "taskset", &args)?
        }
        Receiver::SockperfServer => {
            let args = strings(&[
                "-c",
                &rcpu,
                "sockperf",
                "server",
                "-i",
                &ip.to_string(),
                "-p",
                &port.to_string(),
            ]);
            ChildProcess::spawn("sockperf server", s.testbed.rx_ns(), "taskset", &args)?
        }
        Receiver::Iperf3Server => {
            let args = strings(&["-s", "-1", "-p", &port.to_string(), "-A", &rcpu]);
            ChildProcess::spawn("iperf3 server", s.testbed.rx_ns(), "iperf3", &args)?
        }
    };
    match rx {
        Receiver::Corelane | Receiver::CorelaneNoCoalesce | Receiver::CLoop => {
            wait_ready(&mut receiver, rx.label())?
        }
        // Neither prints a ready line we can rely on; both bind within milliseconds.
        Receiver::SockperfServer | Receiver::Iperf3Server => {
            std::thread::sleep(Duration::from_millis(500))
        }
    }
    let sender = match tx {
        Sender::CorelanePlain => {
            let args = strings(&[
                "udp",
                "send",
                &target.to_string(),
                "--pin",
                &scpu,
                "--duration",
                &secs.to_string(),
                "--json",
            ]);
            ChildProcess::spawn("corelane sender", s.testbed.tx_ns(), &s.exe, &args)?
        }
        Sender::SockperfClient => {
            let args = strings(&[
                "-c",
                &scpu,
                "sockperf",
                "throughput",
                "-i",
                &ip.to_string(),
                "-p",
                &port.to_string(),
                "-m",
                "32",
                "-t",
                &secs.to_string(),
                "--mps",
                "max",
            ]);
            ChildProcess::spawn("sockperf client", s.testbed.tx_ns(), "taskset", &args)?
        }
        Sender::Iperf3Client => {
            let args = strings(&[
                "-c",
                &ip.to_string(),
                "-p",
                &port.to_string(),
                "-u",
                "-b",
                "0",
                "-l",
                "32",
                "-t",
                &secs.to_string(),
                "-A",
                &scpu,
            ]);
            ChildProcess::spawn("iperf3 client", s.testbed.tx_ns(), "iperf3", &args)?
        }
    };
    let started = Instant::now();
    let sample = |pid: u32| -> Option<(Instant, u64, Duration)> {
        // The receiver's own namespace, never the lab's: a process that is gone reads as None.
        let udp = corelane::stats::UdpCounters::read_for_process(pid).ok()?;
        Some((Instant::now(), udp.in_datagrams, cpu_time_of(pid)?))
    };
    // Measure from 1 s after the sender started to 0.5 s before it stops.
    let wait_until = |at: Duration| -> Result<(), LabError> {
        while started.elapsed() < at {
            if stop.is_stopped() {
                return Err(LabError::Interrupted);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    };
    wait_until(Duration::from_secs(1))?;
    let first = sample(receiver.pid());
    wait_until(s.duration - Duration::from_millis(500))?;
    let last = sample(receiver.pid());
    let (Some((t0, d0, c0)), Some((t1, d1, c1))) = (first, last) else {
        return Err(LabError::Child(format!(
            "{} exited early: {}",
            rx.label(),
            receiver.stderr_text()
        )));
    };
    let _ = sender.finish(Duration::from_secs(10));
    receiver.interrupt();
    drop(receiver);
    let datagrams = d1.saturating_sub(d0);
    let pps = datagrams as f64 / (t1 - t0).as_secs_f64();
    let cpu_ns = if datagrams > 0 { (c1 - c0).as_nanos() as f64 / datagrams as f64 } else { 0.0 };
    Ok((pps, cpu_ns))
}
