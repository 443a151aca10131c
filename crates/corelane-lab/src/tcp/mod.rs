//! `corelane lab tcp`: seed 001's table — a baseline server, then flow-to-core and each
//! recycling method alone, then all of them — for keep-alive and `Connection: close` loads,
//! with nginx and lighttpd measured on the same testbed in the same run, and `wrk` beside our
//! load generator.
//!
//! Why CPU per request is reported on every row: on two CPUs the client and the server share
//! the machine. With keep-alive both cores saturate (the client's largely with kernel work),
//! so requests/s shows what the server saves; with `Connection: close` the client saturates
//! first and every server lands near the same rate, so there the server's CPU time per
//! request (user+system of its processes / responses) is the figure that separates them, and
//! its user-space part is what a server's own code (and recycling) decides.

mod figures;
pub mod files;
mod peers;
pub mod scale;
pub mod served;
mod table;

use std::path::PathBuf;
use std::time::Duration;

use corelane::lane::StopSignal;
use corelane::topology::CpuList;
use serde::Serialize;

use crate::stage::servers::{self, Config, ConfigId, Measured, Server, ServerKind, Stage, CONFIGS};
pub use crate::stage::servers::{Peer, CONFIG_IDS};
use crate::stage::wrk::{self, LoadgenTrial};
use crate::summary::{change_pct, Header, Outcome, Rps, Trials};

use crate::experiment::{self, Experiment, Options, Prepare, Progress};
use crate::testbed::Testbed;
use crate::workdir::WorkDir;
use crate::{median_of, LabError};

/// `corelane lab tcp` in the list of experiments.
pub const ENTRY: experiment::Entry = experiment::Entry::of::<TcpArgs>(
    "tcp",
    "001",
    "web serving with recycled buffers, fds and epoll events",
    "HTTP serving: baseline, flow-to-core, buffer/fd/epoll_event recycling, all; keep-alive and close; vs nginx, lighttpd, wrk",
    "the testbed and every server and client it started were removed",
);

/// `corelane lab tcp`'s options.
#[derive(Debug, Clone, clap::Args)]
#[command(mut_arg("vs", |a| a.help("Peers to measure beside corelane: nginx, lighttpd, wrk, or none (default: every one installed; `apt-get install nginx-light lighttpd wrk`)")))]
#[command(mut_arg("configs", |a| a.help("Only these configurations: baseline, flow-to-core, buffers, fd, events, recycling, all, uring, scale (idle connections and 1k..max connections), files (4 KiB and 1 MiB files), or none (peers only)")))]
pub struct TcpArgs {
    #[command(flatten)]
    pub run: experiment::TrialArgs,
    /// Client connections, each with one request in flight.
    #[arg(long, default_value_t = 50, value_parser = corelane::units::parse_count)]
    pub connections: usize,
    #[command(flatten)]
    pub select: experiment::SelectArgs,
}

impl experiment::Trials for TcpLabOptions {
    fn trials(&self) -> usize {
        self.trials
    }
}

impl Options for TcpArgs {
    type Settings = TcpLabOptions;
    type Lab<'s> = TcpLab<'s>;
    type Report = TcpLabReport;
    /// The settings these arguments describe, with the corelane binary that serves and loads.
    fn settings(self) -> Result<TcpLabOptions, LabError> {
        let exe = crate::corelane_exe()?;
        let mut opts =
            if self.run.quick { TcpLabOptions::quick(exe) } else { TcpLabOptions::full(exe) };
        self.run.apply(&mut opts.trials, &mut opts.duration, Duration::from_secs(1))?;
        opts.connections = self.connections;
        (opts.peers, opts.only, opts.remote) =
            self.select.choose(&Peer::ALL.map(|p| (p.program(), p)), CONFIG_IDS)?;
        Ok(opts)
    }
}

/// How to run the experiment.
#[derive(Debug, Clone)]
pub struct TcpLabOptions {
    /// The corelane binary that serves and loads.
    pub exe: PathBuf,
    pub trials: usize,
    /// Load time per measurement.
    pub duration: Duration,
    pub connections: usize,
    pub peers: Vec<Peer>,
    /// Only these configurations (by id); all when `None`.
    pub only: Option<Vec<String>>,
    /// The sides on other machines over SSH; the namespace testbed when `None`.
    pub remote: Option<crate::remote::RemoteSpec>,
    /// The scale rows' connection counts, and whether the largest the machine allows follows.
    pub scale_counts: Vec<usize>,
    pub scale_largest: bool,
}

impl TcpLabOptions {
    pub fn full(exe: PathBuf) -> Self {
        Self {
            exe,
            trials: 3,
            duration: Duration::from_secs(5),
            connections: 50,
            peers: Peer::ALL.to_vec(),
            only: None,
            remote: None,
            scale_counts: scale::FULL.to_vec(),
            scale_largest: true,
        }
    }

    /// A short run for CI: one trial of two seconds per row.
    pub fn quick(exe: PathBuf) -> Self {
        Self {
            trials: 1,
            duration: Duration::from_secs(2),
            scale_counts: scale::QUICK.to_vec(),
            scale_largest: false,
            ..Self::full(exe)
        }
    }
}

/// One server configuration under one workload, over all trials.
#[derive(Debug, Clone, Serialize)]
pub struct TcpRow {
    pub workload: Workload,
    pub server: Server,
    pub config: RowConfig,
    pub label: String,
    /// Per trial and their median.
    #[serde(flatten)]
    pub rps: Trials<Rps>,
    /// Change in requests/s against corelane's baseline row of the same workload, in %.
    pub gain_pct: Option<f64>,
    /// Median over trials of each trial's p99 latency, in microseconds.
    pub p99_us: f64,
    /// The same for p50, p90 and p99.9 (the report's percentile curves).
    pub p50_us: f64,
    pub p90_us: f64,
    pub p999_us: f64,
    /// Server CPU time per request (exact runtime of all its processes' threads, from
    /// schedstat), in microseconds; median over trials.
    pub cpu_us_per_request: f64,
    /// The user-space part of `cpu_us_per_request`, tick-sampled (utime), so an estimate (the
    /// rest is the kernel's TCP work done in the server's system calls and the softirqs charged
    /// to them).
    pub user_us_per_request: f64,
    /// Change in CPU per request against the baseline row, in %.
    pub cpu_gain_pct: Option<f64>,
    /// Connection errors and timeouts the load generator saw, summed over trials.
    pub errors: u64,
    pub non_2xx: u64,
    /// Each load host's part when the load came from several (or remote) hosts: its
    /// connections, requests/s, latency and errors (medians over trials); the row's own
    /// figures are the totals (latency: the highest host's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<crate::stage::load::HttpHostFigures>,
}

/// A load generator against the same corelane server, from every load host (the
/// connections split over them, started together).
#[derive(Debug, Clone, Serialize)]
pub struct LoadgenRow {
    pub tool: Loadgen,
    /// Per trial (all hosts' requests/s added up) and their median.
    #[serde(flatten)]
    pub rps: Trials<Rps>,
    /// Median over trials of each trial's latency percentiles, in microseconds; with
    /// several load hosts each trial's is the highest host's (an upper bound: the hosts'
    /// histograms are not merged).
    pub p50_us: f64,
    pub p99_us: f64,
    /// Connection errors, timeouts and non-2xx answers, summed over trials and hosts.
    pub errors: u64,
    /// Each load host's part (connections, requests/s, latency, errors; medians over
    /// trials) when the load came from remote hosts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<crate::stage::load::HttpHostFigures>,
}

/// A load generator (by how rows and tables name it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Loadgen {
    #[serde(rename = "corelane load")]
    Corelane,
    #[serde(rename = "wrk -t1")]
    Wrk,
}

impl Loadgen {
    pub fn id(&self) -> &'static str {
        match self {
            Self::Corelane => "corelane load",
            Self::Wrk => "wrk -t1",
        }
    }
}

impl std::fmt::Display for Loadgen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

impl LoadgenRow {
    fn of(tool: Loadgen, trials: &[LoadgenTrial]) -> Self {
        let of = |f: fn(&LoadgenTrial) -> f64| median_of(trials.iter().map(f));
        Self {
            tool,
            rps: Trials::of(trials.iter().map(|t| t.rps)),
            p50_us: of(|t| t.p50_us),
            p99_us: of(|t| t.p99_us),
            errors: trials.iter().map(|t| t.errors).fold(0, u64::saturating_add),
            hosts: crate::stage::load::http_medians(
                &trials.iter().map(|t| t.hosts.as_slice()).collect::<Vec<_>>(),
            ),
        }
    }
}

/// Everything `corelane lab tcp` measured.
#[derive(Debug, Clone, Serialize)]
pub struct TcpLabReport {
    /// Where it ran and how it measured.
    #[serde(flatten)]
    pub header: Header,
    pub server_cpu: usize,
    pub client_cpu: usize,
    pub connections: usize,
    pub body: String,
    /// Seed 001's interrupt moderation (ITR) row: why it is or is not measured here.
    pub interrupt_moderation: String,
    pub rows: Vec<TcpRow>,
    /// Idle keep-alive connections and requests/s by connection count.
    pub scale_rows: Vec<scale::ScaleRow>,
    /// Static files: CPU per request and requests/s.
    pub file_rows: Vec<files::FileRow>,
    pub load_generators: Vec<LoadgenRow>,
    /// What could not run here, and what the figures say.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// How the load uses its connections (by its `id` in rows and tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// Every connection kept open, one request in flight on each.
    KeepAlive,
    /// `Connection: close`: a new connection per request.
    Close,
}

impl Workload {
    pub const ALL: [Workload; 2] = [Workload::KeepAlive, Workload::Close];

    pub fn id(&self) -> &'static str {
        match self {
            Self::KeepAlive => "keep-alive",
            Self::Close => "close",
        }
    }

    /// Whether every request closes its connection.
    pub fn close(&self) -> bool {
        *self == Self::Close
    }
}

impl std::fmt::Display for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// What a row of seed 001's table measured (its `config` in rows and tables): one of
/// corelane's configurations, corelane placed by the affinity lab, or a peer by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowConfig {
    Corelane(ConfigId),
    Placed,
    Peer(Server),
}

impl RowConfig {
    fn of(kind: ServerKind) -> Self {
        match kind {
            ServerKind::Corelane(c) => Self::Corelane(c.id),
            ServerKind::Placed(_) => Self::Placed,
            ServerKind::Nginx | ServerKind::Lighttpd => Self::Peer(kind.server()),
        }
    }

    pub fn id(&self) -> &'static str {
        match self {
            Self::Corelane(c) => c.id(),
            Self::Placed => "placed",
            Self::Peer(server) => server.id(),
        }
    }
}

impl From<ConfigId> for RowConfig {
    fn from(c: ConfigId) -> Self {
        Self::Corelane(c)
    }
}

impl From<Server> for RowConfig {
    fn from(s: Server) -> Self {
        Self::Peer(s)
    }
}

impl std::fmt::Display for RowConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

impl Serialize for RowConfig {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.id())
    }
}

/// One measurement: a server under one workload, or the two load generators.
#[derive(Debug, Clone, Copy)]
pub enum Case {
    Serve { workload: Workload, kind: ServerKind },
    LoadGenerators,
    Scale(scale::ScaleCase),
    File(files::FileCase),
}

/// What one trial of a [`Case`] measured.
#[derive(Debug, Clone)]
pub enum CaseTrial {
    Serve(Measured),
    Scale(scale::ScaleTrial),
    File(files::FileTrial),
    /// corelane load's and wrk's figures.
    LoadGenerators(LoadgenTrial, LoadgenTrial),
}

impl CaseTrial {
    fn serve(&self) -> Option<Measured> {
        if let Self::Serve(x) = self {
            Some(x.clone())
        } else {
            None
        }
    }

    fn scale(&self) -> Option<scale::ScaleTrial> {
        if let Self::Scale(x) = self {
            Some(x.clone())
        } else {
            None
        }
    }

    fn file(&self) -> Option<files::FileTrial> {
        if let Self::File(x) = self {
            Some(x.clone())
        } else {
            None
        }
    }
}

/// The prepared stage: testbed, CPUs, port, scratch for peer configurations.
#[derive(Debug)]
pub struct TcpLab<'a> {
    opts: &'a TcpLabOptions,
    /// What the file servers serve on the rx host, readable by the user they run as: made
    /// when the first scale or file row runs, removed before the testbed goes.
    served: Option<served::Served>,
    testbed: Testbed,
    server_cpu: usize,
    client_cpu: usize,
    port: u16,
    scratch: WorkDir,
    skipped: Vec<String>,
    /// The peers asked for that were found on the hosts that run them.
    peers: Vec<Peer>,
    /// What set the largest scale count.
    largest_decided_by: String,
}

impl<'a> Prepare<'a> for TcpLab<'a> {
    type Settings = TcpLabOptions;

    fn prepare(opts: &'a TcpLabOptions, progress: Progress<'_>) -> Result<Self, LabError> {
        let mut testbed = Testbed::prepare(opts.remote.as_ref(), opts.duration, progress)?;
        let client_cpu = testbed.tx().online_cpus()?.cpus()[0];
        let rx_online = testbed.rx().online_cpus()?;
        let server_cpu = *rx_online.cpus().last().unwrap_or(&client_cpu);
        let port = crate::stage::tcp_port(&testbed)?;
        let mut skipped = Vec::new();
        if client_cpu == server_cpu && testbed.tx() == testbed.rx() {
            skipped.push("one CPU only: client and server share it".into());
        }
        if opts.remote.as_ref().is_some_and(|r| r.dry_run) {
            let flow_to_core = CONFIGS.iter().filter(|c| c.flow_to_core).map(|c| c.id.id());
            let rows = flow_to_core.collect::<Vec<_>>().join(", ");
            testbed.preview(&[(format!("rows {rows}"), CpuList::new(vec![server_cpu]))])?;
        }
        let peers = peers::available(&testbed, &opts.peers, &mut skipped);
        let scratch = WorkDir::create("tcp")?;
        let served = None;
        let largest_decided_by = String::new();
        Ok(Self {
            opts,
            testbed,
            server_cpu,
            client_cpu,
            port,
            scratch,
            served,
            skipped,
            peers,
            largest_decided_by,
        })
    }
}

impl<'a> TcpLab<'a> {
    fn stage(&self) -> Stage<'_> {
        Stage {
            testbed: &self.testbed,
            server_cpu: self.server_cpu,
            client_cpu: self.client_cpu,
            port: self.port,
            connections: self.opts.connections,
            duration: self.opts.duration,
            scratch: self.scratch.path(),
        }
    }

    /// Whether `peer` was asked for and found on the host that runs it.
    fn peer_runs(&self, peer: Peer) -> bool {
        self.peers.contains(&peer)
    }
}

impl Experiment for TcpLab<'_> {
    type Config = Case;
    type Trial = CaseTrial;
    type Report = TcpLabReport;

    fn configurations(&mut self) -> Result<Vec<Case>, LabError> {
        if self.testbed.is_dry_run() {
            return Ok(Vec::new());
        }
        let mut kinds: Vec<ServerKind> = CONFIGS
            .iter()
            .filter(|c| self.asked(c.id.id()))
            .map(|c| ServerKind::Corelane(*c))
            .collect();
        let nginx = self.peer_runs(Peer::Nginx);
        if nginx {
            kinds.push(ServerKind::Nginx);
        }
        if self.peer_runs(Peer::Lighttpd) {
            kinds.push(ServerKind::Lighttpd);
        }
        let mut cases: Vec<Case> = Workload::ALL
            .into_iter()
            .flat_map(|workload| kinds.iter().map(move |&kind| Case::Serve { workload, kind }))
            .collect();
        if self.peer_runs(Peer::Wrk) {
            cases.push(Case::LoadGenerators);
        }
        cases.extend(self.scale_and_file_cases());
        Ok(cases)
    }

    fn label(&self, case: &Case) -> String {
        match case {
            Case::Serve { workload, kind } => {
                format!("{workload} {}", kind.config_id())
            }
            Case::LoadGenerators => "load generators".into(),
            Case::Scale(c) => {
                format!("scale {} {} {}", c.connections, c.server.server(), c.server.backend())
            }
            Case::File(c) => format!(
                "file {} {} {}",
                files::MEASURED[c.file].0,
                c.server.server(),
                c.server.backend()
            ),
        }
    }

    fn trial(&mut self, case: &Case, index: usize, _: &StopSignal) -> Result<CaseTrial, LabError> {
        match *case {
            Case::Serve { workload, kind } => {
                steer(&self.testbed, kind.flow_to_core(), self.server_cpu)?;
                servers::measure(&self.stage(), kind, workload.close()).map(CaseTrial::Serve)
            }
            Case::LoadGenerators => {
                steer(&self.testbed, false, self.server_cpu)?;
                let (ours, wrk) = wrk::measure_load_generators(&self.stage(), index % 2 == 1)?;
                Ok(CaseTrial::LoadGenerators(ours, wrk))
            }
            Case::Scale(c) => {
                steer(&self.testbed, false, self.server_cpu)?;
                let root = self.served_root()?;
                scale::measure(&self.stage(), &c, &root).map(CaseTrial::Scale)
            }
            Case::File(c) => {
                steer(&self.testbed, false, self.server_cpu)?;
                let root = self.served_root()?;
                files::measure(&self.stage(), c, &root).map(CaseTrial::File)
            }
        }
    }

    fn describe(&self, trial: &CaseTrial) -> String {
        match trial {
            CaseTrial::Serve(m) => format!(
                "{:.0} req/s, p99 {:.0} us, server CPU {:.2} us/request{}",
                m.rps,
                m.p99_us,
                m.cpu_us_per_request,
                if m.errors > 0 { format!(", {} errors", m.errors) } else { String::new() }
            ),
            CaseTrial::LoadGenerators(o, w) => {
                format!("corelane load {:.0} req/s, wrk {:.0} req/s", o.rps, w.rps)
            }
            CaseTrial::Scale(t) => scale::describe(t),
            CaseTrial::File(t) => files::describe(t),
        }
    }

    fn report(
        self,
        measured: Vec<experiment::Measured<Case, CaseTrial>>,
    ) -> Result<TcpLabReport, LabError> {
        let _ = self.testbed.steer_receive_where_possible(&CpuList::new(Vec::new()));
        let mut rows = Vec::new();
        let (mut scale_rows, mut file_rows) = (Vec::new(), Vec::new());
        let (mut ours, mut wrk) = (Vec::new(), Vec::new());
        for m in measured {
            match m.config {
                Case::Serve { workload, kind } => {
                    let ms: Vec<Measured> = m.trials.iter().filter_map(CaseTrial::serve).collect();
                    rows.push(summarize(workload, kind, &ms));
                }
                Case::LoadGenerators => {
                    for t in &m.trials {
                        if let CaseTrial::LoadGenerators(o, w) = t {
                            ours.push(o.clone());
                            wrk.push(w.clone());
                        }
                    }
                }
                Case::Scale(c) => {
                    let ts: Vec<_> = m.trials.iter().filter_map(CaseTrial::scale).collect();
                    scale_rows.push(scale::summarize(&c, &self.largest_decided_by, &ts));
                }
                Case::File(c) => {
                    let ts: Vec<_> = m.trials.iter().filter_map(CaseTrial::file).collect();
                    file_rows.push(files::summarize(c, &ts));
                }
            }
        }
        gains_against_baseline(&mut rows);
        let load_generators = if ours.is_empty() {
            Vec::new()
        } else {
            vec![LoadgenRow::of(Loadgen::Corelane, &ours), LoadgenRow::of(Loadgen::Wrk, &wrk)]
        };
        let interrupt_moderation = format!(
            "not applicable on {}: a veth or loopback device raises no interrupts and has no ethtool coalescing (ITR) to tune; on a NIC, `ethtool -C IFACE rx-usecs N` is the web-serving study's knob (interrupt moderation)",
            if self.testbed.is_namespaced() { "veth" } else { "loopback" }
        );
        let mut findings = findings(&rows, &load_generators);
        findings.extend(scale::findings(&scale_rows));
        findings.extend(files::findings(&file_rows));
        let mut testbed = self.testbed.report(None);
        if testbed.is_dry_run() {
            testbed.peer_steps = peers::steps(&self.stage(), &self.peers)?;
            testbed.peer_steps.extend(self.scale_and_file_steps()?);
        }
        Ok(TcpLabReport {
            header: Header::of(testbed, self.opts.trials, self.opts.duration),
            server_cpu: self.server_cpu,
            client_cpu: self.client_cpu,
            connections: self.opts.connections,
            body: servers::BODY.into(),
            interrupt_moderation,
            rows,
            scale_rows,
            file_rows,
            load_generators,
            outcome: Outcome { skipped: self.skipped, findings },
        })
    }
}

impl TcpLab<'_> {
    /// The file servers' root on the rx host, made (with its files) the first time.
    fn served_root(&mut self) -> Result<String, LabError> {
        match &mut self.served {
            Some(served) => served.check()?,
            None => self.served = Some(served::Served::create(&self.testbed.rx())?),
        }
        Ok(self.served.as_ref().map(|s| s.root().to_string()).unwrap_or_default())
    }

    /// Whether `--configs` asked for `id` (every row when it was not given).
    fn asked(&self, id: &str) -> bool {
        self.opts.only.as_ref().is_none_or(|o| o.iter().any(|c| c == id))
    }

    /// The file servers of the scale and file rows: corelane on each backend, and nginx if it
    /// runs.
    fn file_servers(&self) -> Vec<files::FileServer> {
        let mut servers = files::FileServer::COREL.to_vec();
        if self.peer_runs(Peer::Nginx) {
            servers.push(files::FileServer::Nginx);
        }
        servers
    }

    /// What the scale and file rows asked for would run on each host (a dry run's list; the
    /// largest count, measured without --quick, is left out: it is read from the hosts).
    fn scale_and_file_steps(&self) -> Result<Vec<crate::testbed::PeerStep>, LabError> {
        let servers = self.file_servers();
        let mut steps = Vec::new();
        if self.asked("scale") {
            steps.extend(scale::steps(&self.stage(), &servers, &self.opts.scale_counts)?);
        }
        if self.asked("files") {
            steps.extend(files::steps(&self.stage(), &servers)?);
        }
        Ok(steps)
    }

    /// The scale and file rows asked for (`--configs` scale, files; both by default): corelane
    /// on each backend, and nginx if it runs.
    fn scale_and_file_cases(&mut self) -> Vec<Case> {
        let (scale_asked, files_asked) = (self.asked("scale"), self.asked("files"));
        if !scale_asked && !files_asked {
            return Vec::new();
        }
        let servers = self.file_servers();
        let mut cases = Vec::new();
        if scale_asked {
            let mut counts: Vec<(usize, bool)> =
                self.opts.scale_counts.iter().map(|&n| (n, false)).collect();
            if self.opts.scale_largest {
                match scale::largest(&self.testbed) {
                    Ok((n, why)) => {
                        self.largest_decided_by = why;
                        counts.push((n, true));
                    }
                    Err(e) => self.skipped.push(format!("scale: the largest count: {e}")),
                }
            } else {
                self.skipped.push(
                    "scale: the largest connection count the machine allows is measured without --quick".into(),
                );
            }
            for (connections, largest) in counts {
                for &server in &servers {
                    cases.push(Case::Scale(scale::ScaleCase { server, connections, largest }));
                }
            }
        }
        if files_asked {
            for file in 0..files::MEASURED.len() {
                for &server in &servers {
                    cases.push(Case::File(files::FileCase { server, file }));
                }
            }
        }
        cases
    }
}

/// Each row's change in requests/s and CPU per request against corelane's baseline row of
/// the same workload.
fn gains_against_baseline(rows: &mut [TcpRow]) {
    for workload in Workload::ALL {
        let base =
            find(rows, workload, ConfigId::Baseline).map(|r| (r.rps.median, r.cpu_us_per_request));
        let Some((rps, cpu)) = base else { continue };
        for r in rows.iter_mut().filter(|r| r.workload == workload) {
            r.gain_pct = change_pct(r.rps.median, rps);
            r.cpu_gain_pct = change_pct(r.cpu_us_per_request, cpu);
        }
    }
}

/// Flow-to-core on: receive processing of the server's flows on the server's CPU (RPS);
/// off: on the client's CPU, inside its send (the veth default).
fn steer(testbed: &Testbed, flow_to_core: bool, server_cpu: usize) -> Result<(), LabError> {
    let cpus = if flow_to_core { vec![server_cpu] } else { Vec::new() };
    testbed.steer_receive_where_possible(&CpuList::new(cpus))
}

fn summarize(workload: Workload, kind: ServerKind, ms: &[Measured]) -> TcpRow {
    let of = |f: fn(&Measured) -> f64| median_of(ms.iter().map(f));
    let label = match kind {
        ServerKind::Corelane(Config { label, .. }) => label.to_string(),
        ServerKind::Placed(_) => "corelane, placed".into(),
        ServerKind::Nginx => "nginx, same CPU, body and load".into(),
        ServerKind::Lighttpd => "lighttpd, same CPU, body and load".into(),
    };
    TcpRow {
        workload,
        server: kind.server(),
        config: RowConfig::of(kind),
        label,
        rps: Trials::of(ms.iter().map(|m| m.rps)),
        gain_pct: None,
        p99_us: of(|m| m.p99_us),
        p50_us: of(|m| m.p50_us),
        p90_us: of(|m| m.p90_us),
        p999_us: of(|m| m.p999_us),
        cpu_us_per_request: of(|m| m.cpu_us_per_request),
        user_us_per_request: of(|m| m.user_us_per_request),
        cpu_gain_pct: None,
        errors: ms.iter().map(|m| m.errors).sum(),
        non_2xx: ms.iter().map(|m| m.non_2xx).sum(),
        hosts: crate::stage::load::http_medians(
            &ms.iter().map(|m| m.hosts.as_slice()).collect::<Vec<_>>(),
        ),
    }
}

fn find(rows: &[TcpRow], workload: Workload, config: impl Into<RowConfig>) -> Option<&TcpRow> {
    let config = config.into();
    rows.iter().find(|r| r.workload == workload && r.config == config)
}

/// Sentences derived from the figures.
fn findings(rows: &[TcpRow], loadgens: &[LoadgenRow]) -> Vec<String> {
    let mut out = Vec::new();
    for workload in Workload::ALL {
        let base = find(rows, workload, ConfigId::Baseline);
        if let (Some(all), Some(base)) = (find(rows, workload, ConfigId::All), base) {
            use ConfigId::{Buffers, Events, Fd, FlowToCore, Recycling, Uring};
            let shares: Vec<String> = [FlowToCore, Buffers, Fd, Events, Recycling, Uring]
                .into_iter()
                .filter_map(|id| find(rows, workload, id))
                .map(|r| {
                    format!(
                        "{} {:+.1}% req/s, {:+.1}% CPU/request",
                        r.config,
                        r.gain_pct.unwrap_or(0.0),
                        r.cpu_gain_pct.unwrap_or(0.0)
                    )
                })
                .collect();
            out.push(format!(
                "{workload}: all methods together {:+.1}% requests/s and {:+.1}% server CPU per request against the baseline ({:.0} vs {:.0} req/s, {:.2} vs {:.2} us); each alone: {}.",
                all.gain_pct.unwrap_or(0.0),
                all.cpu_gain_pct.unwrap_or(0.0),
                all.rps.median,
                base.rps.median,
                all.cpu_us_per_request,
                base.cpu_us_per_request,
                shares.join("; ")
            ));
        }
        if let (Some(rec), Some(base)) = (find(rows, workload, ConfigId::Recycling), base) {
            let kernel_share = 1.0 - base.user_us_per_request / base.cpu_us_per_request.max(1e-9);
            out.push(format!(
                "{workload}: recycling changed the server's own (user-space) CPU per request by {:+.1}% ({:.2} vs {:.2} us); the rest of a request's server CPU, {:.0}% of it in the baseline, is the kernel's TCP work, the same for every configuration. The trials of one row spread by up to {:.0}% in this run, so smaller requests/s differences between rows are noise.",
                (rec.user_us_per_request / base.user_us_per_request.max(1e-9) - 1.0) * 100.0,
                rec.user_us_per_request,
                base.user_us_per_request,
                kernel_share * 100.0,
                largest_spread_pct(rows, workload)
            ));
        }
        if let (Some(flow), Some(base)) = (find(rows, workload, ConfigId::FlowToCore), base) {
            if flow.rps.median < base.rps.median {
                out.push(format!(
                    "{workload}: flow-to-core cost {:.1}% here: with one server lane, steering the server's receive processing to its own CPU (RPS) takes work off the client's CPU — where the veth delivers it for free inside the client's send — and puts it on the server's; on a multi-queue NIC with one lane per core the same steering keeps each flow's packets and its lane on one core instead.",
                    -flow.gain_pct.unwrap_or(0.0)
                ));
            }
        }
        for (ours, what) in [(ConfigId::Recycling, "epoll"), (ConfigId::Uring, "io_uring")] {
            let Some(ours) = find(rows, workload, ours) else { continue };
            for peer in [Server::Nginx, Server::Lighttpd] {
                let Some(p) = find(rows, workload, peer) else { continue };
                out.push(format!(
                    "{workload} vs {peer} (same testbed, CPU, body and load): corelane on {what} answers {:.2}x its requests/s ({:.0} vs {:.0}) at {:.2}x its server CPU per request ({:.2} vs {:.2} us; user space alone {:.2}x: {:.2} vs {:.2} us), p99 {:.0} vs {:.0} us.",
                    ours.rps.median / p.rps.median.max(1.0),
                    ours.rps.median,
                    p.rps.median,
                    ours.cpu_us_per_request / p.cpu_us_per_request.max(1e-9),
                    ours.cpu_us_per_request,
                    p.cpu_us_per_request,
                    ours.user_us_per_request / p.user_us_per_request.max(1e-9),
                    ours.user_us_per_request,
                    p.user_us_per_request,
                    ours.p99_us,
                    p.p99_us
                ));
            }
        }
    }
    if let (Some(ours), Some(wrk)) = (
        loadgens.iter().find(|l| l.tool == Loadgen::Corelane),
        loadgens.iter().find(|l| l.tool == Loadgen::Wrk),
    ) {
        let ratio = ours.rps.median / wrk.rps.median.max(1.0);
        let verdict = if ratio >= 1.0 {
            "at least as fast as wrk, so the generator is not the limit it measures"
        } else {
            "slower than wrk here: the server rows above may be client-bound"
        };
        out.push(format!(
            "load generators against the same corelane server: corelane load {:.0} req/s, wrk {:.0} req/s ({ratio:.2}x): {verdict}.",
            ours.rps.median, wrk.rps.median
        ));
    }
    out
}

/// The largest spread of one row's trials in `workload` (max / min − 1, in %): this run's
/// own measure of its noise.
fn largest_spread_pct(rows: &[TcpRow], workload: Workload) -> f64 {
    rows.iter()
        .filter(|r| r.workload == workload)
        .filter_map(|r| {
            let min = r.rps.each.iter().copied().fold(f64::INFINITY, f64::min);
            let max = r.rps.each.iter().copied().fold(0.0, f64::max);
            (min > 0.0 && min.is_finite()).then(|| (max / min - 1.0) * 100.0)
        })
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::files::Backend;
    use super::scale::DecidedBy;
    use super::*;

    /// `value` as its JSON string, checked against how tables and CSV print it.
    fn written<T: Serialize + std::fmt::Display>(value: T) -> String {
        let json = serde_json::to_value(&value).unwrap();
        let text = json.as_str().expect("a string").to_string();
        assert_eq!(text, value.to_string(), "JSON and table differ");
        text
    }

    #[test]
    fn rows_write_their_workload_server_configuration_backend_tool_and_limit_as_strings() {
        let ids: Vec<String> = CONFIGS.iter().map(|c| written(c.id)).collect();
        assert_eq!(ids, CONFIG_IDS[..8]);
        for c in CONFIGS {
            assert_eq!(written(RowConfig::of(ServerKind::Corelane(*c))), c.id.id());
        }
        assert_eq!(written(RowConfig::of(ServerKind::Nginx)), "nginx");
        assert_eq!(written(RowConfig::of(ServerKind::Lighttpd)), "lighttpd");
        assert_eq!(Workload::ALL.map(written), ["keep-alive", "close"]);
        let servers = [Server::Corelane, Server::Nginx, Server::Lighttpd];
        assert_eq!(servers.map(written), ["corelane", "nginx", "lighttpd"]);
        let backends = [Backend::Epoll, Backend::Uring, Backend::Sendfile];
        assert_eq!(backends.map(written), ["epoll", "uring", "sendfile"]);
        assert_eq!([Loadgen::Corelane, Loadgen::Wrk].map(written), ["corelane load", "wrk -t1"]);
        assert_eq!(written(DecidedBy::Chosen), "chosen");
        let limit = "the server side: hard RLIMIT_NOFILE 1048576";
        assert_eq!(written(DecidedBy::Limit(limit.into())), limit);
    }
}
