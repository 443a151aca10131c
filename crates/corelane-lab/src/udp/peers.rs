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

use super::{PeerRow, UdpLabOptions};
use crate::process::{on_path, ChildProcess};
use crate::stage::{udp_port, wait_ready};
use crate::summary::Trials;
use crate::testbed::Testbed;
use crate::workdir::WorkDir;
use crate::{median_of, LabError};

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

/// A receiving program and the sender that drives it: one peer row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    rx: Receiver,
    tx: Sender,
}

impl Pair {
    pub fn label(&self) -> String {
        format!("{} <- {}", self.rx.label(), self.tx.label())
    }
}

/// What one trial of a pair measured.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub pps: f64,
    pub cpu_ns_per_datagram: f64,
}

/// What the peer rows need: the binaries, the CPUs, the peers that can run here.
#[derive(Debug)]
pub struct Stage {
    exe: String,
    c_loop: Option<PathBuf>,
    /// Holds the compiled C loop; removed with the stage.
    _workdir: Option<WorkDir>,
    peers: Vec<Peer>,
    sender_cpu: usize,
    receiver_cpu: usize,
    duration: Duration,
}

impl Stage {
    /// Checks which peers are installed (the others go to `skipped` with the reason) and
    /// compiles the C loop into a private directory.
    pub fn prepare(
        opts: &UdpLabOptions,
        sender_cpu: usize,
        receiver_cpu: usize,
        skipped: &mut Vec<String>,
    ) -> Result<Self, LabError> {
        let mut peers = Vec::new();
        for &peer in &opts.peers {
            match peer.missing() {
                Some(reason) => skipped.push(reason),
                None => peers.push(peer),
            }
        }
        let (mut c_loop, mut workdir) = (None, None);
        if peers.contains(&Peer::CLoop) {
            // Compiled and run as root: a private directory, never a predictable path.
            let dir = WorkDir::create("udp")?;
            match build_c_loop(dir.path()) {
                Ok(bin) => c_loop = Some(bin),
                Err(reason) => {
                    skipped.push(format!("c-loop: {reason}"));
                    peers.retain(|p| *p != Peer::CLoop);
                }
            }
            workdir = Some(dir);
        }
        Ok(Self {
            exe: opts.exe.to_string_lossy().into_owned(),
            c_loop,
            _workdir: workdir,
            peers,
            sender_cpu,
            receiver_cpu,
            duration: opts.duration,
        })
    }

    /// The pairs to measure; corelane first in each group, as the reference the peer's
    /// ratio is taken against.
    pub fn pairs(&self) -> Vec<Pair> {
        let pair = |rx, tx| Pair { rx, tx };
        if self.peers.is_empty() {
            return Vec::new();
        }
        let mut pairs = vec![pair(Receiver::Corelane, Sender::CorelanePlain)];
        if self.peers.contains(&Peer::CLoop) {
            pairs.push(pair(Receiver::CorelaneNoCoalesce, Sender::CorelanePlain));
            pairs.push(pair(Receiver::CLoop, Sender::CorelanePlain));
        }
        if self.peers.contains(&Peer::Sockperf) {
            pairs.push(pair(Receiver::Corelane, Sender::SockperfClient));
            pairs.push(pair(Receiver::SockperfServer, Sender::SockperfClient));
        }
        if self.peers.contains(&Peer::Iperf3) {
            pairs.push(pair(Receiver::Iperf3Server, Sender::Iperf3Client));
        }
        pairs
    }
}

/// The peer rows, with ratios against corelane fed by the same sender (iperf3 has no such
/// pair: its server needs its own client's control connection, so it is compared with
/// corelane's plain row).
pub fn rows(measured: &[(Pair, Vec<Sample>)]) -> Vec<PeerRow> {
    let mut rows: Vec<PeerRow> = measured
        .iter()
        .map(|(pair, r)| PeerRow {
            receiver: pair.rx.label().into(),
            sender: pair.tx.label().into(),
            pps: Trials::of(r.iter().map(|x| x.pps)),
            cpu_ns_per_datagram: median_of(r.iter().map(|x| x.cpu_ns_per_datagram)),
            corelane_pps_ratio: None,
            corelane_cpu_ratio: None,
        })
        .collect();
    for i in 0..rows.len() {
        let this = measured[i].0;
        if this.rx == Receiver::Corelane {
            continue;
        }
        let reference = measured
            .iter()
            .position(|(p, _)| p.rx == Receiver::Corelane && p.tx == this.tx)
            .unwrap_or(0);
        let (ours, theirs) = (&rows[reference], &rows[i]);
        let pps = ours.pps.median / theirs.pps.median.max(1.0);
        let cpu = theirs.cpu_ns_per_datagram / ours.cpu_ns_per_datagram.max(1.0);
        rows[i].corelane_pps_ratio = Some(pps);
        rows[i].corelane_cpu_ratio = Some(cpu);
    }
    rows
}

/// Compiles the C loop into a private temporary directory; `None` with a reason on failure.
fn build_c_loop(dir: &std::path::Path) -> Result<PathBuf, String> {
    let src = dir.join("recvmmsg_loop.c");
    let bin = dir.join("recvmmsg_loop");
    corelane::fs::create_new(&src)
        .and_then(|mut f| {
            std::io::Write::write_all(
                &mut f,
                include_str!("../../peers/recvmmsg_loop.c").as_bytes(),
            )
        })
        .map_err(|e| e.to_string())?;
    let mut cc = std::process::Command::new("cc");
    cc.args(["-O2", "-o"]).arg(&bin).arg(&src);
    let out = corelane::child_output::run(&mut cc, None, &corelane::child_output::Limits::REPLY)
        .map_err(|e| format!("cannot run cc: {e}"))?;
    if !out.status.success() {
        let said = corelane::child_output::printable(&String::from_utf8_lossy(&out.stderr), 2000);
        return Err(format!("cc failed: {said}"));
    }
    Ok(bin)
}

impl Stage {
    /// One trial of `pair`: datagrams/s the receiver read and its CPU per datagram, both
    /// read from outside the receiver over the same steady window. The peers run on the
    /// default configuration: RPS off.
    pub fn measure(
        &self,
        testbed: &Testbed,
        pair: Pair,
        stop: &StopSignal,
    ) -> Result<Sample, LabError> {
        testbed.steer_receive_where_possible(&corelane::topology::CpuList::default())?;
        let target = SocketAddr::new(testbed.rx_addrs()[0], udp_port(testbed)?);
        let mut receiver = self.start_receiver(testbed, pair.rx, target)?;
        match pair.rx {
            Receiver::Corelane | Receiver::CorelaneNoCoalesce | Receiver::CLoop => {
                wait_ready(&mut receiver, pair.rx.label())?
            }
            // Neither prints a ready line we can rely on; both bind within milliseconds.
            Receiver::SockperfServer | Receiver::Iperf3Server => {
                std::thread::sleep(Duration::from_millis(500))
            }
        }
        let sender = self.start_sender(testbed, pair.tx, target)?;
        let started = Instant::now();
        let rx_host = testbed.rx();
        let sample = |pid: u32| -> Option<(Instant, u64, Duration)> {
            // The receiver's own namespace, never the lab's: a process that is gone reads as None.
            let udp = rx_host.udp_counters_of(pid)?;
            Some((Instant::now(), udp.in_datagrams, rx_host.cpu_time(pid)?))
        };
        // Measure from 1 s after the sender started to 0.5 s before it stops.
        wait_until(started, Duration::from_secs(1), stop)?;
        let first = sample(receiver.pid());
        wait_until(started, self.duration - Duration::from_millis(500), stop)?;
        let last = sample(receiver.pid());
        let (Some((t0, d0, c0)), Some((t1, d1, c1))) = (first, last) else {
            return Err(LabError::ChildOutput {
                child: pair.rx.label().into(),
                problem: format!("exited early: {}", receiver.stderr_text()),
            });
        };
        let _ = sender.finish(Duration::from_secs(10));
        receiver.interrupt();
        drop(receiver);
        let datagrams = d1.saturating_sub(d0);
        Ok(Sample {
            pps: datagrams as f64 / (t1 - t0).as_secs_f64(),
            cpu_ns_per_datagram: if datagrams > 0 {
                (c1 - c0).as_nanos() as f64 / datagrams as f64
            } else {
                0.0
            },
        })
    }

    fn start_receiver(
        &self,
        testbed: &Testbed,
        rx: Receiver,
        target: SocketAddr,
    ) -> Result<ChildProcess, LabError> {
        let host = testbed.rx();
        let (ip, port) = (target.ip().to_string(), target.port().to_string());
        let life = (self.duration.as_secs() + 5).to_string();
        let cpu = self.receiver_cpu;
        match rx {
            Receiver::Corelane | Receiver::CorelaneNoCoalesce => {
                let mut args = strings(&["udp", "recv", &target.to_string(), "--json"]);
                args.extend(strings(&["--pin", &cpu.to_string(), "--rcvbuf", "4M"]));
                args.extend(strings(&["--duration", &life]));
                if rx == Receiver::CorelaneNoCoalesce {
                    args.extend(strings(&["--coalesce", "0"]));
                }
                host.spawn("corelane receiver", &self.exe, &args)
            }
            Receiver::CLoop => {
                let bin = self.c_loop.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
                host.spawn_pinned(rx.label(), cpu, &bin, &strings(&[&ip, &port, &life]))
            }
            Receiver::SockperfServer => {
                let args = strings(&["server", "-i", &ip, "-p", &port]);
                host.spawn_pinned("sockperf server", cpu, "sockperf", &args)
            }
            Receiver::Iperf3Server => {
                let args = strings(&["-s", "-1", "-p", &port, "-A", &cpu.to_string()]);
                host.spawn("iperf3 server", "iperf3", &args)
            }
        }
    }

    fn start_sender(
        &self,
        testbed: &Testbed,
        tx: Sender,
        target: SocketAddr,
    ) -> Result<ChildProcess, LabError> {
        let host = testbed.tx();
        let (ip, port) = (target.ip().to_string(), target.port().to_string());
        let secs = self.duration.as_secs().to_string();
        let cpu = self.sender_cpu;
        match tx {
            Sender::CorelanePlain => {
                let mut args = strings(&["udp", "send", &target.to_string(), "--json"]);
                args.extend(strings(&["--pin", &cpu.to_string(), "--duration", &secs]));
                host.spawn("corelane sender", &self.exe, &args)
            }
            Sender::SockperfClient => {
                let mut args = strings(&["throughput", "-i", &ip, "-p", &port, "-m", "32"]);
                args.extend(strings(&["-t", &secs, "--mps", "max"]));
                host.spawn_pinned("sockperf client", cpu, "sockperf", &args)
            }
            Sender::Iperf3Client => {
                let mut args = strings(&["-c", &ip, "-p", &port, "-u", "-b", "0", "-l", "32"]);
                args.extend(strings(&["-t", &secs, "-A", &cpu.to_string()]));
                host.spawn("iperf3 client", "iperf3", &args)
            }
        }
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// Sleeps until `at` after `started`, or fails as soon as the lab is interrupted.
fn wait_until(started: Instant, at: Duration, stop: &StopSignal) -> Result<(), LabError> {
    while started.elapsed() < at {
        if stop.is_stopped() {
            return Err(LabError::Interrupted);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}
