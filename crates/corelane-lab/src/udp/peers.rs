//! The receivers people use today, measured on the same testbed in the same run: a bare C
//! recvmmsg loop (seed 000's receiver), sockperf and iperf3, each beside corelane receiving
//! from the same sender. Every receiver here is measured the same way, from outside: the
//! receiving namespace's InDatagrams (counted when an application reads a datagram) and the
//! receiver process's CPU time from /proc/PID/stat, over the same steady window.
//!
//! Across hosts the two sides run where corelane's rows run theirs: the receiver on the rx
//! host, the sender on the (first) tx host, each under `corelane guard` there, and both
//! figures are read on the rx host. sockperf and iperf3 are taken from each host's own PATH;
//! the C loop is compiled with that host's `cc` into the run's private directory there, which
//! its keeper removes when the lab lets go or dies.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use corelane::lane::StopSignal;
use serde::Serialize;

use super::{PeerRow, UdpLabOptions};
use crate::host::Host;
use crate::process::{strings, ChildProcess};
use crate::stage::servers::Launch;
use crate::stage::{udp_port, wait_ready};
use crate::summary::Trials;
use crate::testbed::{PeerStep, Testbed};
use crate::workdir::WorkDir;
use crate::{median_of, LabError};

/// A peer the lab can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Peer {
    /// Seed 000's receiver: one thread, recvmmsg of 32, compiled with `cc -O2` on the host
    /// that runs it.
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

    /// The program the peer needs on the receiving host (and, for a pair of its own, on the
    /// sending host), and the Debian/Ubuntu package that installs it.
    fn program(self) -> (&'static str, &'static str) {
        match self {
            Peer::CLoop => ("cc", "gcc"),
            Peer::Sockperf => ("sockperf", "sockperf"),
            Peer::Iperf3 => ("iperf3", "iperf3"),
        }
    }

    /// `program` as found on `host` (its path there), or the one-line reason the peer is
    /// skipped, naming the host when it is another machine and how to install it.
    fn find(self, host: &Host) -> Result<String, String> {
        let (program, _) = self.program();
        let remote = matches!(host, Host::Remote(_)).then(|| host.name());
        host.find_program(program).ok_or_else(|| self.not_installed(remote.as_deref()))
    }

    /// Why the peer is skipped: its program is not installed here, or on `remote`.
    fn not_installed(self, remote: Option<&str>) -> String {
        let (program, package) = self.program();
        match remote {
            Some(host) => format!(
                "{}: `{program}` is not installed on {host} (apt-get install {package} there)",
                self.name()
            ),
            None => {
                format!("{}: `{program}` is not installed (apt-get install {package})", self.name())
            }
        }
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

/// The receiving host's counters for the receiver at one moment.
#[derive(Debug, Clone, Copy)]
struct Reading {
    at: Instant,
    /// InDatagrams of the receiver's network namespace.
    datagrams: u64,
    /// The receiver's CPU time (its threads' schedstat runtime).
    cpu: Duration,
}

impl Sample {
    /// The rate and CPU per datagram between two readings. A remote host's counters that run
    /// backwards read as nothing done, never as a panic.
    fn between(first: Reading, last: Reading) -> Self {
        let datagrams = last.datagrams.saturating_sub(first.datagrams);
        let secs = last.at.saturating_duration_since(first.at).as_secs_f64();
        let cpu = last.cpu.saturating_sub(first.cpu).as_nanos() as f64;
        Sample {
            pps: if secs > 0.0 { datagrams as f64 / secs } else { 0.0 },
            cpu_ns_per_datagram: if datagrams > 0 { cpu / datagrams as f64 } else { 0.0 },
        }
    }
}

/// The C loop, compiled where it runs: on a remote rx host in the run's private directory
/// there (removed with it, by its keeper if the lab dies), else in a private work directory
/// here, removed with the stage.
#[derive(Debug)]
struct CLoop {
    bin: String,
    /// The compiler that built it, as found on its host.
    cc: String,
    _here: Option<WorkDir>,
}

/// A program's path on the receiving and on the sending host.
#[derive(Debug, Clone)]
struct Found {
    rx: String,
    tx: String,
}

/// What the peer rows need: the programs on each side, the CPUs, the peers that can run.
#[derive(Debug)]
pub struct Stage {
    /// corelane on the rx and on the tx host.
    corelane: Found,
    c_loop: Option<CLoop>,
    sockperf: Option<Found>,
    iperf3: Option<Found>,
    sender_cpu: usize,
    receiver_cpu: usize,
    duration: Duration,
    /// A dry run: the programs are found, nothing is compiled or started.
    dry_run: bool,
}

impl Stage {
    /// Finds each peer's programs on the hosts that run them (a peer missing on either goes
    /// to `skipped` with the reason) and compiles the C loop on the rx host (not in a dry
    /// run).
    pub fn prepare(
        opts: &UdpLabOptions,
        testbed: &Testbed,
        sender_cpu: usize,
        receiver_cpu: usize,
        skipped: &mut Vec<String>,
    ) -> Result<Self, LabError> {
        let (rx, tx) = (testbed.rx(), testbed.tx());
        let corelane = Found { rx: rx.corelane()?, tx: tx.corelane()? };
        let dry_run = testbed.is_dry_run();
        let mut stage = Self {
            corelane,
            c_loop: None,
            sockperf: None,
            iperf3: None,
            sender_cpu,
            receiver_cpu,
            duration: opts.duration,
            dry_run,
        };
        let both = |peer: Peer| Ok(Found { rx: peer.find(&rx)?, tx: peer.find(&tx)? });
        for &peer in &opts.peers {
            let found: Result<(), String> = match peer {
                Peer::CLoop => peer
                    .find(&rx)
                    .and_then(|cc| {
                        c_loop(testbed, &cc, dry_run).map_err(|e| format!("c-loop: {e}"))
                    })
                    .map(|c| stage.c_loop = Some(c)),
                Peer::Sockperf => both(peer).map(|f| stage.sockperf = Some(f)),
                Peer::Iperf3 => both(peer).map(|f| stage.iperf3 = Some(f)),
            };
            if let Err(reason) = found {
                skipped.push(reason);
            }
        }
        Ok(stage)
    }

    /// The pairs to measure (none in a dry run); corelane first in each group, as the
    /// reference the peer's ratio is taken against.
    pub fn pairs(&self) -> Vec<Pair> {
        match self.dry_run {
            true => Vec::new(),
            false => self.planned_pairs(),
        }
    }

    fn planned_pairs(&self) -> Vec<Pair> {
        let pair = |rx, tx| Pair { rx, tx };
        if self.c_loop.is_none() && self.sockperf.is_none() && self.iperf3.is_none() {
            return Vec::new();
        }
        let mut pairs = vec![pair(Receiver::Corelane, Sender::CorelanePlain)];
        if self.c_loop.is_some() {
            pairs.push(pair(Receiver::CorelaneNoCoalesce, Sender::CorelanePlain));
            pairs.push(pair(Receiver::CLoop, Sender::CorelanePlain));
        }
        if self.sockperf.is_some() {
            pairs.push(pair(Receiver::Corelane, Sender::SockperfClient));
            pairs.push(pair(Receiver::SockperfServer, Sender::SockperfClient));
        }
        if self.iperf3.is_some() {
            pairs.push(pair(Receiver::Iperf3Server, Sender::Iperf3Client));
        }
        pairs
    }

    /// What the peer rows run on each host, as commands: the C loop's compilation, then per
    /// pair its receiver and its sender (what a dry run shows).
    pub fn steps(&self, testbed: &Testbed) -> Result<Vec<PeerStep>, LabError> {
        let (rx, tx) = (testbed.rx(), testbed.tx());
        let target = SocketAddr::new(testbed.rx_addrs()[0], udp_port(testbed)?);
        let mut steps = Vec::new();
        if let Some(c_loop) = &self.c_loop {
            let bin = &c_loop.bin;
            let cc = shell_words::join(cc_args(&c_loop.cc, bin, &source_of(bin)));
            steps.push(PeerStep {
                row: "c-loop (once, into the run's private directory there)".into(),
                host: rx.name(),
                command: cc,
            });
        }
        for pair in self.planned_pairs() {
            let row = pair.label();
            let receiver = self.receiver(pair.rx, target);
            let sender = self.sender(pair.tx, target);
            steps.push(PeerStep { row: row.clone(), host: rx.name(), command: receiver.shown() });
            steps.push(PeerStep { row, host: tx.name(), command: sender.shown() });
        }
        Ok(steps)
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

/// The C loop's source file beside its binary.
fn source_of(bin: &str) -> String {
    format!("{bin}.c")
}

/// `cc -O2 -o BIN SRC`, with `cc` as found on the host.
fn cc_args(cc: &str, bin: &str, src: &str) -> Vec<String> {
    strings(&[cc, "-O2", "-o", bin, src])
}

const C_LOOP_SOURCE: &str = include_str!("../../peers/recvmmsg_loop.c");

/// Compiles the C loop with `cc` (as found on the rx host) where it will run: on a remote rx
/// host into the run's private directory there, else into a private work directory here.
/// In a dry run only the path it would have.
fn c_loop(testbed: &Testbed, cc: &str, dry_run: bool) -> Result<CLoop, String> {
    let rx = testbed.rx();
    if let Some(dir) = testbed.rx_run_dir() {
        let bin = format!("{dir}/recvmmsg_loop");
        if !dry_run {
            rx.write_file(&source_of(&bin), C_LOOP_SOURCE).map_err(|e| e.to_string())?;
            let args = cc_args(cc, &bin, &source_of(&bin));
            let args: Vec<&str> = args[1..].iter().map(String::as_str).collect();
            rx.run(cc, &args).map_err(|e| format!("cc failed: {e}"))?;
        }
        return Ok(CLoop { bin, cc: cc.into(), _here: None });
    }
    if dry_run {
        return Err("a dry run shows the steps on a remote rx host only".into());
    }
    // Compiled and run as root: a private directory, never a predictable path.
    let dir = WorkDir::create("udp").map_err(|e| e.to_string())?;
    let bin = dir.path().join("recvmmsg_loop").display().to_string();
    build_here(cc, &bin)?;
    Ok(CLoop { bin, cc: cc.into(), _here: Some(dir) })
}

/// Compiles the C loop on this machine into `bin` (in a private directory).
fn build_here(cc: &str, bin: &str) -> Result<(), String> {
    let src = source_of(bin);
    corelane::fs::create_new(std::path::Path::new(&src))
        .and_then(|mut f| std::io::Write::write_all(&mut f, C_LOOP_SOURCE.as_bytes()))
        .map_err(|e| e.to_string())?;
    let args = cc_args(cc, bin, &src);
    let mut cc = std::process::Command::new(&args[0]);
    cc.args(&args[1..]);
    let out = corelane::child_output::run(&mut cc, None, &corelane::child_output::Limits::REPLY)
        .map_err(|e| format!("cannot run cc: {e}"))?;
    if !out.status.success() {
        let said = corelane::child_output::printable(&String::from_utf8_lossy(&out.stderr), 2000);
        return Err(format!("cc failed: {said}"));
    }
    Ok(())
}

/// How much longer a sender is told to send than the trial lasts (see [`Stage::sender`]).
const SENDER_MARGIN: Duration = Duration::from_secs(2);

impl Stage {
    /// One trial of `pair`: datagrams/s the receiver read and its CPU per datagram, both
    /// read from outside the receiver, on its host, over the same steady window. The peers
    /// run on the default configuration: RPS off (a remote rx NIC as found).
    pub fn measure(
        &self,
        testbed: &Testbed,
        pair: Pair,
        stop: &StopSignal,
    ) -> Result<Sample, LabError> {
        testbed.steer_receive_where_possible(&corelane::topology::CpuList::default())?;
        let target = SocketAddr::new(testbed.rx_addrs()[0], udp_port(testbed)?);
        let rx_host = testbed.rx();
        let mut receiver = self.receiver(pair.rx, target).spawn(&rx_host)?;
        match pair.rx {
            Receiver::Corelane | Receiver::CorelaneNoCoalesce | Receiver::CLoop => {
                wait_ready(&mut receiver, pair.rx.label())?
            }
            // Neither prints a ready line we can rely on; both bind within milliseconds.
            Receiver::SockperfServer | Receiver::Iperf3Server => {
                std::thread::sleep(Duration::from_millis(500))
            }
        }
        let sender = self.sender(pair.tx, target).spawn(&testbed.tx())?;
        let started = Instant::now();
        let sample = |pid: u32| -> Option<Reading> {
            // The receiver's own namespace, never the lab's: a process that is gone reads as None.
            let udp = rx_host.udp_counters_of(pid)?;
            let at = Instant::now();
            Some(Reading { at, datagrams: udp.in_datagrams, cpu: rx_host.cpu_time(pid)? })
        };
        // Measure from 1 s after the sender started to 0.5 s before it stops.
        wait_until(started, Duration::from_secs(1), stop)?;
        let first = sample(receiver.pid());
        wait_until(started, self.duration - Duration::from_millis(500), stop)?;
        let last = sample(receiver.pid());
        let (Some(first), Some(last)) = (first, last) else {
            return Err(exited_early(pair.rx.label(), receiver));
        };
        let mut sender = sender;
        sender.interrupt();
        let _ = sender.finish(Duration::from_secs(10));
        receiver.interrupt();
        drop(receiver);
        Ok(Sample::between(first, last))
    }

    /// The receiving side of a pair, run on the rx host.
    fn receiver(&self, rx: Receiver, target: SocketAddr) -> Launch {
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
                Launch::new("corelane receiver", &self.corelane.rx, args, None)
            }
            Receiver::CLoop => {
                let bin = self.c_loop.as_ref().map_or("", |c| &c.bin);
                Launch::new(rx.label(), bin, strings(&[&ip, &port, &life]), Some(cpu))
            }
            Receiver::SockperfServer => {
                let program = self.sockperf.as_ref().map_or("sockperf", |f| &f.rx);
                let args = strings(&["server", "-i", &ip, "-p", &port]);
                Launch::new("sockperf server", program, args, Some(cpu))
            }
            Receiver::Iperf3Server => {
                let program = self.iperf3.as_ref().map_or("iperf3", |f| &f.rx);
                let args = strings(&["-s", "-1", "-p", &port, "-A", &cpu.to_string()]);
                Launch::new("iperf3 server", program, args, None)
            }
        }
    }

    /// The sending side of a pair, run on the tx host: for [`SENDER_MARGIN`] longer than the
    /// trial, so that however late its start is seen here (over SSH, or on a loaded machine)
    /// it still sends through the whole window; it is ended when the window closes.
    fn sender(&self, tx: Sender, target: SocketAddr) -> Launch {
        let (ip, port) = (target.ip().to_string(), target.port().to_string());
        let secs = (self.duration + SENDER_MARGIN).as_secs().to_string();
        let cpu = self.sender_cpu;
        match tx {
            Sender::CorelanePlain => {
                let mut args = strings(&["udp", "send", &target.to_string(), "--json"]);
                args.extend(strings(&["--pin", &cpu.to_string(), "--duration", &secs]));
                Launch::new("corelane sender", &self.corelane.tx, args, None)
            }
            Sender::SockperfClient => {
                let program = self.sockperf.as_ref().map_or("sockperf", |f| &f.tx);
                let mut args = strings(&["throughput", "-i", &ip, "-p", &port, "-m", "32"]);
                args.extend(strings(&["-t", &secs, "--mps", "max"]));
                Launch::new("sockperf client", program, args, Some(cpu))
            }
            Sender::Iperf3Client => {
                let program = self.iperf3.as_ref().map_or("iperf3", |f| &f.tx);
                let mut args = strings(&["-c", &ip, "-p", &port, "-u", "-b", "0", "-l", "32"]);
                args.extend(strings(&["-t", &secs, "-A", &cpu.to_string()]));
                Launch::new("iperf3 client", program, args, None)
            }
        }
    }
}

/// The error for a receiver gone before the window ended, with what it said on stderr and
/// its last lines on stdout (where iperf3 and sockperf print their errors).
fn exited_early(name: &str, receiver: ChildProcess) -> LabError {
    let stderr = receiver.stderr_text();
    let stdout = receiver.output_after(Duration::from_secs(2));
    let last = stdout[stdout.len().saturating_sub(3)..].join(" | ");
    let said = corelane::child_output::printable(&format!("{stderr} {last}"), 600);
    LabError::ChildOutput { child: name.into(), problem: format!("exited early: {}", said.trim()) }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A hostile rx host whose InDatagrams or CPU time go backwards between the two readings
    /// gives a row of nothing, not a panic (the old subtraction of CPU times panicked).
    #[test]
    fn counters_that_run_backwards_read_as_nothing_done() {
        let at = Instant::now();
        let first = Reading { at, datagrams: 1_000, cpu: Duration::from_secs(5) };
        let later = at + Duration::from_secs(2);
        let last = Reading { at: later, datagrams: 500, cpu: Duration::from_secs(1) };
        let s = Sample::between(first, last);
        assert_eq!((s.pps, s.cpu_ns_per_datagram), (0.0, 0.0));
        let last = Reading { at: later, datagrams: 3_000, cpu: Duration::from_secs(1) };
        let s = Sample::between(first, last);
        assert_eq!((s.pps, s.cpu_ns_per_datagram), (1_000.0, 0.0));
        let last = Reading { at: later, datagrams: 3_000, cpu: Duration::from_secs(6) };
        assert_eq!(Sample::between(first, last).cpu_ns_per_datagram, 500_000.0);
        assert_eq!(Sample::between(last, first).pps, 0.0, "a reading from before the first");
    }

    /// A peer missing on another machine is skipped in one line naming that machine and the
    /// package to install there; missing here, as before.
    #[test]
    fn a_missing_peer_names_the_host_and_the_package() {
        assert_eq!(
            Peer::Iperf3.not_installed(Some("root@10.0.0.2")),
            "iperf3: `iperf3` is not installed on root@10.0.0.2 (apt-get install iperf3 there)"
        );
        assert_eq!(
            Peer::CLoop.not_installed(None),
            "c-loop: `cc` is not installed (apt-get install gcc)"
        );
    }
}
