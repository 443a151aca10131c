//! `corelane lab latency`: round-trip latency against offered load, the way people who tune
//! servers read it. UDP: corelane echo (default, receive coalescing on, busy polling, io_uring) and
//! `sockperf sr` as servers, corelane ping and sockperf as clients, crossed so that a client's
//! cost and a server's cost can be told apart; each pair in ping-pong and under load, swept
//! up to saturation. HTTP: corelane serve and nginx under `corelane load http --rate`. For
//! every pair, the knee: the offered load where p99 passes twice its value at the lowest load.
//!
//! All figures are whole round trips in µs (sockperf runs with `--full-rtt`; by default it
//! prints half). Under load, corelane's clients count from each message's scheduled time
//! (free of coordinated omission) and keep the uncorrected p99 beside it; sockperf's
//! under-load figure is from the actual send.

mod figures;
mod hosts;
mod plan;
mod point;
mod rows;
mod sides;
mod table;

use std::net::SocketAddr;
use std::time::Duration;

use corelane::lane::StopSignal;
use corelane::topology::CpuList;

pub use point::{HostPoint, Point};
pub use rows::{Knee, LatencyReport, LatencyRow};
pub use sides::{HttpServer, UdpClient, UdpServer};

use crate::experiment::{self, Experiment, Options, Prepare, Progress};
use crate::host::Host;
use crate::remote::RemoteSpec;
use crate::stage::servers::{self, Stage};
use crate::summary::{Header, Outcome};
use crate::testbed::Testbed;
use crate::workdir::WorkDir;
use crate::LabError;

/// `corelane lab latency` in the list of experiments.
pub const ENTRY: experiment::Entry = experiment::Entry::of::<LatencyArgs>(
    "latency",
    "000/001",
    "round trips under load (the UDP and web-serving studies)",
    "round-trip latency vs offered load: corelane echo/ping crossed with sockperf sr/pp/ul; HTTP under load http --rate vs nginx; knees",
    "the testbed and every server and client it started were removed",
);

/// `corelane lab latency`'s options.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_arg("vs", |a| a.help("Peers to measure beside corelane: sockperf (sr as a server, pp/ul as a client), nginx, or none (default: every one installed; `apt-get install sockperf nginx-light`)")))]
#[command(mut_arg("configs", |a| a.help("Only these corelane servers: echo, echo+coalesce-50us, echo+busy-poll-50us, echo+uring, corelane-serve, or none (peers only; sockperf's client still meets corelane echo, the other half of its 2x2)")))]
pub struct LatencyArgs {
    #[command(flatten)]
    pub run: experiment::TrialArgs,
    /// Connections of the HTTP load (split over the load hosts).
    #[arg(long, default_value_t = 16, value_parser = corelane::units::parse_count)]
    pub connections: usize,
    #[command(flatten)]
    pub select: experiment::SelectArgs,
}

/// The corelane servers `--configs` names: the echo rows, then corelane's HTTP server.
pub const CONFIG_IDS: [&str; 5] =
    ["echo", "echo+coalesce-50us", "echo+busy-poll-50us", "echo+uring", "corelane-serve"];

/// A peer `lab latency` measures beside corelane, if installed where it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// `sockperf sr` on the rx host, `sockperf pp`/`ul` on the load hosts.
    Sockperf,
    /// nginx on the rx host.
    Nginx,
}

impl Peer {
    pub const ALL: [Peer; 2] = [Peer::Sockperf, Peer::Nginx];

    pub fn id(self) -> &'static str {
        match self {
            Self::Sockperf => "sockperf",
            Self::Nginx => "nginx",
        }
    }
}

impl experiment::Trials for LatencyOptions {
    fn trials(&self) -> usize {
        self.trials
    }
}

impl Options for LatencyArgs {
    type Settings = LatencyOptions;
    type Lab<'s> = LatencyLab<'s>;
    type Report = LatencyReport;
    /// The settings these arguments describe.
    fn settings(self) -> Result<LatencyOptions, LabError> {
        let mut opts =
            if self.run.quick { LatencyOptions::quick() } else { LatencyOptions::full() };
        self.run.apply(&mut opts.trials, &mut opts.duration, Duration::from_secs(1))?;
        opts.connections = self.connections;
        (opts.peers, opts.only, opts.remote) =
            self.select.choose(&Peer::ALL.map(|p| (p.id(), p)), &CONFIG_IDS)?;
        Ok(opts)
    }
}

/// How to run the experiment.
#[derive(Debug, Clone)]
pub struct LatencyOptions {
    pub trials: usize,
    /// Measured time per point.
    pub duration: Duration,
    pub warmup: Duration,
    /// Offered loads, lowest first (the lowest is the "idle" reference of the knee).
    pub udp_rates: Vec<u64>,
    pub http_rates: Vec<u64>,
    pub connections: usize,
    /// Stop a sweep at the first point that is saturated (short of its rate or losing).
    pub stop_at_saturation: bool,
    pub peers: Vec<Peer>,
    /// Only these corelane servers (by id); all when `None`.
    pub only: Option<Vec<String>>,
    /// The sides on other machines over SSH; the namespace testbed when `None`.
    pub remote: Option<RemoteSpec>,
}

impl LatencyOptions {
    pub fn full() -> Self {
        Self {
            trials: 1,
            duration: Duration::from_secs(3),
            warmup: Duration::from_millis(500),
            udp_rates: vec![1000, 5000, 10_000, 20_000, 40_000, 80_000, 160_000, 320_000],
            http_rates: vec![1000, 5000, 10_000, 20_000, 40_000, 80_000],
            connections: 16,
            stop_at_saturation: true,
            peers: Peer::ALL.to_vec(),
            only: None,
            remote: None,
        }
    }

    /// For CI: two loads per pair, one second each (about 45 s in all).
    pub fn quick() -> Self {
        Self {
            duration: Duration::from_secs(1),
            warmup: Duration::from_millis(200),
            udp_rates: vec![1000, 20_000],
            http_rates: vec![500, 5000],
            stop_at_saturation: false,
            ..Self::full()
        }
    }
}

/// One server/client pairing, swept over the offered loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pair {
    Udp { server: UdpServer, client: UdpClient },
    Http { server: HttpServer },
}

impl Pair {
    pub fn label(&self) -> String {
        match self {
            Self::Udp { server, client } => format!("udp {} <- {}", server.id(), client.id()),
            Self::Http { server } => format!("http {} <- corelane-load", server.id()),
        }
    }
}

/// The prepared stage.
#[derive(Debug)]
pub struct LatencyLab<'a> {
    opts: &'a LatencyOptions,
    testbed: Testbed,
    server_cpu: usize,
    client_cpu: usize,
    udp_port: u16,
    http_port: u16,
    scratch: WorkDir,
    skipped: Vec<String>,
    /// A dry run's pairs, whose steps the report lists (nothing is measured).
    planned: Vec<Pair>,
}

/// Refuses, before anything runs, a load every point of which could not be split over `hosts`
/// load hosts (each host offers at least one message and holds at least one connection): else
/// the first HTTP point would end the run after every UDP pair was measured.
fn refuse_unsplittable(opts: &LatencyOptions, hosts: usize) -> Result<(), LabError> {
    let lowest = opts.udp_rates.iter().chain(&opts.http_rates).min().copied().unwrap_or(u64::MAX);
    if opts.connections < hosts || lowest < hosts as u64 {
        return Err(LabError::Options(format!(
            "{} connections and a lowest offered load of {lowest}/s cannot be split over {hosts} load hosts: give --connections {hosts} or more (each host needs a connection and a message a second)",
            opts.connections
        )));
    }
    Ok(())
}

impl<'a> Prepare<'a> for LatencyLab<'a> {
    type Settings = LatencyOptions;

    fn prepare(opts: &'a LatencyOptions, progress: Progress<'_>) -> Result<Self, LabError> {
        let mut testbed = Testbed::prepare(opts.remote.as_ref(), opts.duration, progress)?;
        refuse_unsplittable(opts, testbed.load_hosts().len())?;
        let client_cpu = testbed.tx().online_cpus()?.cpus()[0];
        let server_cpu = *testbed.rx().online_cpus()?.cpus().last().unwrap_or(&client_cpu);
        let udp_port = crate::stage::udp_port(&testbed)?;
        let http_port = crate::stage::tcp_port(&testbed)?;
        if opts.remote.as_ref().is_some_and(|r| r.dry_run) {
            // No row changes the rx NIC: every pair runs with it as found.
            testbed.preview(&[])?;
        } else {
            // The veth default: receive work where the sender's softirq runs it, for every
            // pair (a remote rx NIC as found).
            testbed.steer_receive_where_possible(&CpuList::new(Vec::new()))?;
        }
        let mut skipped = Vec::new();
        if client_cpu == server_cpu && testbed.tx() == testbed.rx() {
            skipped.push("one CPU only: client and server share it".into());
        }
        let scratch = WorkDir::create("latency")?;
        Ok(Self {
            opts,
            testbed,
            server_cpu,
            client_cpu,
            udp_port,
            http_port,
            scratch,
            skipped,
            planned: Vec::new(),
        })
    }
}

impl<'a> LatencyLab<'a> {
    fn target(&self) -> SocketAddr {
        SocketAddr::new(self.testbed.rx_addrs()[0], self.udp_port)
    }

    fn stage(&self) -> Stage<'_> {
        Stage {
            testbed: &self.testbed,
            server_cpu: self.server_cpu,
            client_cpu: self.client_cpu,
            port: self.http_port,
            connections: self.opts.connections,
            duration: self.opts.duration,
            scratch: self.scratch.path(),
        }
    }

    /// Where the UDP sides run, for `f`.
    fn at<T>(&self, f: impl FnOnce(&sides::Where<'_>) -> T) -> T {
        let (rx, load) = (self.testbed.rx(), self.testbed.load_hosts());
        f(&sides::Where {
            rx: &rx,
            load: &load,
            server_cpu: self.server_cpu,
            client_cpu: self.client_cpu,
            target: self.target(),
            duration: self.opts.duration,
            warmup: self.opts.warmup,
        })
    }

    /// Whether sockperf runs where each of its sides must: `sr` on the rx host, and the
    /// client on every load host; each host missing it goes to `skipped`, named.
    fn sockperf_found(&mut self) -> (bool, bool) {
        let mut on = |host: &Host| {
            let found = host.find_program("sockperf").is_some();
            let why = match host {
                Host::Remote(_) => format!(
                    "sockperf: `sockperf` is not installed on {} (apt-get install sockperf there)",
                    host.name()
                ),
                Host::Local | Host::Namespace(_) => {
                    "sockperf: not installed (apt-get install sockperf)".into()
                }
            };
            // Once per host (the namespace testbed's sides are one machine).
            if !found && !self.skipped.contains(&why) {
                self.skipped.push(why);
            }
            found
        };
        let server = on(&self.testbed.rx());
        // Every host asked, so that each missing one is named.
        let each: Vec<bool> = self.testbed.load_hosts().iter().map(|l| on(&l.host)).collect();
        (server, each.iter().all(|&found| found))
    }

    /// Whether nginx runs on the rx host (else why not, in `skipped`).
    fn nginx_found(&mut self) -> bool {
        let rx = self.testbed.rx();
        let found = rx.find_program("nginx").is_some();
        if !found {
            self.skipped.push(servers::Peer::Nginx.not_installed(&rx));
        }
        found
    }

    /// The pairs asked for whose programs run where they must.
    fn pairs(&mut self) -> Vec<Pair> {
        let only = self.opts.only.clone();
        let asked = |id: &str| only.as_ref().is_none_or(|o| o.iter().any(|c| c == id));
        let peer = |p: Peer| self.opts.peers.contains(&p);
        let (sockperf, nginx) = (peer(Peer::Sockperf), peer(Peer::Nginx));
        let (sr, client) = if sockperf { self.sockperf_found() } else { (false, false) };
        let nginx = nginx && self.nginx_found();
        let mut servers: Vec<UdpServer> =
            sides::ECHO_ROWS.iter().copied().filter(|s| asked(s.id())).collect();
        if sr {
            servers.push(UdpServer::Sockperf);
        }
        let mut pairs: Vec<Pair> =
            servers.iter().map(|&server| Pair::Udp { server, client: UdpClient::Ping }).collect();
        if client {
            // sockperf's client against both default servers: the client and server costs
            // separate in the 2x2 of (corelane, sockperf) x (client, server).
            pairs.push(Pair::Udp { server: sides::ECHO_ROWS[0], client: UdpClient::Sockperf });
            if sr {
                pairs.push(Pair::Udp { server: UdpServer::Sockperf, client: UdpClient::Sockperf });
            }
        }
        if asked(HttpServer::Corelane.id()) {
            pairs.push(Pair::Http { server: HttpServer::Corelane });
        }
        if nginx {
            pairs.push(Pair::Http { server: HttpServer::Nginx });
        }
        pairs
    }

    /// Sweeps `point` over `rates` (ping-pong first when `pingpong`), stopping at the first
    /// saturated point when asked.
    fn sweep(
        &self,
        pingpong: bool,
        rates: &[u64],
        stop: &StopSignal,
        mut point: impl FnMut(Option<u64>) -> Result<Point, LabError>,
    ) -> Result<Vec<Point>, LabError> {
        let mut points = Vec::new();
        let loads = pingpong.then_some(None).into_iter().chain(rates.iter().map(|&r| Some(r)));
        for rate in loads {
            if stop.is_stopped() {
                return Err(LabError::Interrupted);
            }
            let p = point(rate)?;
            let saturated = table::saturated(&p);
            points.push(p);
            if saturated && self.opts.stop_at_saturation {
                break;
            }
        }
        Ok(points)
    }
}

impl Experiment for LatencyLab<'_> {
    type Config = Pair;
    type Trial = Vec<Point>;
    type Report = LatencyReport;

    fn configurations(&mut self) -> Result<Vec<Pair>, LabError> {
        let pairs = self.pairs();
        if self.testbed.is_dry_run() {
            self.planned = pairs;
            return Ok(Vec::new());
        }
        Ok(pairs)
    }

    fn label(&self, pair: &Pair) -> String {
        pair.label()
    }

    fn trial(&mut self, pair: &Pair, _: usize, stop: &StopSignal) -> Result<Vec<Point>, LabError> {
        match *pair {
            Pair::Udp { server, client } => self.at(|at| {
                let _server = sides::start_udp(at, server, client)?;
                self.sweep(true, &self.opts.udp_rates, stop, |rate| {
                    sides::udp_point(at, server, client, rate)
                })
            }),
            Pair::Http { server } => {
                let stage = self.stage();
                let _server = sides::start_http(&stage, server)?;
                let warmup = self.opts.warmup;
                self.sweep(false, &self.opts.http_rates, stop, |rate| {
                    sides::http_point(&stage, rate.unwrap_or(1), warmup)
                })
            }
        }
    }

    fn describe(&self, points: &Vec<Point>) -> String {
        points
            .iter()
            .map(|p| {
                let load = p.rate.map_or("pp".to_string(), |r| format!("{r}/s"));
                format!("{load}: p50 {:.0} p99 {:.0} us", p.p50_us, p.p99_us)
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn report(
        self,
        measured: Vec<experiment::Measured<Pair, Vec<Point>>>,
    ) -> Result<LatencyReport, LabError> {
        let (rows, knees) = table::rows_and_knees(&measured);
        let findings = table::findings(&rows, &knees);
        let mut testbed = self.testbed.report(None);
        if testbed.is_dry_run() {
            testbed.peer_steps =
                self.at(|at| plan::steps(at, &self.stage(), &self.planned, self.opts))?;
        }
        Ok(LatencyReport {
            header: Header::of(testbed, self.opts.trials, self.opts.duration),
            server_cpu: self.server_cpu,
            client_cpu: self.client_cpu,
            measure: "round_trip".into(),
            rows,
            knees,
            outcome: Outcome { skipped: self.skipped, findings },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A load that cannot give every load host a connection and a message a second is refused
    /// before the first pair, not at the first HTTP point after every UDP pair ran.
    #[test]
    fn a_load_too_small_for_the_load_hosts_is_refused_before_any_pair() {
        let opts = LatencyOptions { connections: 2, ..LatencyOptions::quick() };
        assert!(refuse_unsplittable(&opts, 1).is_ok());
        assert!(refuse_unsplittable(&opts, 2).is_ok());
        let err = refuse_unsplittable(&opts, 3).unwrap_err().to_string();
        assert!(err.contains("--connections 3 or more"), "{err}");
        let low = LatencyOptions { udp_rates: vec![2, 1000], ..LatencyOptions::quick() };
        assert!(refuse_unsplittable(&low, 3).is_err(), "2 messages a second over 3 hosts");
    }
}
