//! The HTTP servers `lab tcp`, `affinity` and `latency` run — corelane in each configuration
//! of seed 001's table, nginx and lighttpd — and one measurement: start the server on its CPU
//! inside the receiving namespace, load it from the other namespace, read its CPU time, stop it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use corelane::tcp::load::{LoadInterval, LoadSummary};

use super::load::{self, HostClock, HttpHostFigures};
use crate::host::Host;
use crate::output;
use crate::process::{strings, ChildProcess};
use crate::testbed::Testbed;
use crate::LabError;

/// The body every server answers with (13 bytes, as in the figures).
pub const BODY: &str = "Hello, World!";

/// Which of corelane's configurations a row of seed 001's table is (by its `id` in rows,
/// tables and `--configs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConfigId {
    Baseline,
    FlowToCore,
    Buffers,
    Fd,
    Events,
    Recycling,
    All,
    Uring,
}

impl ConfigId {
    pub fn id(&self) -> &'static str {
        match self {
            Self::Baseline => "baseline",
            Self::FlowToCore => "flow-to-core",
            Self::Buffers => "buffers",
            Self::Fd => "fd",
            Self::Events => "events",
            Self::Recycling => "recycling",
            Self::All => "all",
            Self::Uring => "uring",
        }
    }
}

impl std::fmt::Display for ConfigId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

/// A corelane configuration: one row of seed 001's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub id: ConfigId,
    pub label: &'static str,
    /// `--recycle` value.
    pub recycle: &'static str,
    /// `--listen` value.
    pub listen: &'static str,
    /// `--backend` value.
    pub backend: &'static str,
    /// Flow-to-core: the server CPU does the receive processing of its flows (RPS on the
    /// receiving veth, standing in for RSS + IRQ affinity) and the listener is steered to it.
    pub flow_to_core: bool,
}

pub const CONFIGS: &[Config] = &[
    Config {
        id: ConfigId::Baseline,
        label: "baseline: no recycling, one shared accept path",
        recycle: "none",
        listen: "shared",
        flow_to_core: false,
        backend: "epoll",
    },
    Config {
        id: ConfigId::FlowToCore,
        label: "+ flow-to-core (RPS to the server CPU, CPU-steered listener)",
        recycle: "none",
        listen: "reuseport-cpu",
        flow_to_core: true,
        backend: "epoll",
    },
    Config {
        id: ConfigId::Buffers,
        label: "+ buffer recycling (sk_buff analog)",
        recycle: "buffers",
        listen: "shared",
        flow_to_core: false,
        backend: "epoll",
    },
    Config {
        id: ConfigId::Fd,
        label: "+ fd recycling (slab slots)",
        recycle: "fd",
        listen: "shared",
        flow_to_core: false,
        backend: "epoll",
    },
    Config {
        id: ConfigId::Events,
        label: "+ epoll_event recycling",
        recycle: "events",
        listen: "shared",
        flow_to_core: false,
        backend: "epoll",
    },
    Config {
        id: ConfigId::Recycling,
        label: "+ all three recycling methods (the default)",
        recycle: "all",
        listen: "reuseport",
        flow_to_core: false,
        backend: "epoll",
    },
    Config {
        id: ConfigId::All,
        label: "+ all: flow-to-core and all recycling",
        recycle: "all",
        listen: "reuseport-cpu",
        flow_to_core: true,
        backend: "epoll",
    },
    Config {
        id: ConfigId::Uring,
        label: "all recycling, io_uring backend",
        recycle: "all",
        listen: "reuseport",
        flow_to_core: false,
        backend: "uring",
    },
];

/// The configurations `--configs` names: seed 001's rows, then the scale and file rows.
pub const CONFIG_IDS: &[&str] = &[
    "baseline",
    "flow-to-core",
    "buffers",
    "fd",
    "events",
    "recycling",
    "all",
    "uring",
    "scale",
    "files",
];

/// The configuration every peer is compared with: all recycling, epoll (the default).
pub fn default_config() -> Config {
    CONFIGS.iter().find(|c| c.id == ConfigId::Recycling).copied().unwrap_or(CONFIGS[0])
}

/// Where a corelane server runs and how it submits, for the affinity lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerPin {
    /// The lane's CPU, or unpinned.
    pub cpu: Option<usize>,
    /// `--backend` value.
    pub backend: &'static str,
    /// An SQPOLL thread on this CPU (the syscall lane).
    pub sqpoll: Option<usize>,
}

/// What serves in one measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    Corelane(Config),
    /// corelane with all recycling, placed by the affinity lab.
    Placed(ServerPin),
    Nginx,
    Lighttpd,
}

/// Which program serves (by its `id` in rows and tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Server {
    Corelane,
    Nginx,
    Lighttpd,
}

impl Server {
    pub fn id(&self) -> &'static str {
        match self {
            Self::Corelane => "corelane",
            Self::Nginx => "nginx",
            Self::Lighttpd => "lighttpd",
        }
    }
}

impl std::fmt::Display for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

impl ServerKind {
    pub fn server(&self) -> Server {
        match self {
            Self::Corelane(_) | Self::Placed(_) => Server::Corelane,
            Self::Nginx => Server::Nginx,
            Self::Lighttpd => Server::Lighttpd,
        }
    }

    pub fn name(&self) -> &'static str {
        self.server().id()
    }

    pub fn config_id(&self) -> &'static str {
        match self {
            Self::Corelane(c) => c.id.id(),
            Self::Placed(_) => "placed",
            Self::Nginx => "nginx (1 worker, return 200)",
            Self::Lighttpd => "lighttpd (1 process, static file)",
        }
    }

    /// Peers share the testbed settings of corelane's `recycling` row (the veth default, no
    /// RPS), so that comparison differs only in the server.
    pub fn flow_to_core(&self) -> bool {
        match self {
            Self::Corelane(c) => c.flow_to_core,
            Self::Placed(_) | Self::Nginx | Self::Lighttpd => false,
        }
    }
}

/// A peer server the lab can run, if installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    Nginx,
    Lighttpd,
    Wrk,
}

impl Peer {
    pub const ALL: [Peer; 3] = [Peer::Nginx, Peer::Lighttpd, Peer::Wrk];

    pub fn program(&self) -> &'static str {
        match self {
            Self::Nginx => "nginx",
            Self::Lighttpd => "lighttpd",
            Self::Wrk => "wrk",
        }
    }

    /// The Debian package that installs it.
    pub fn package(&self) -> &'static str {
        match self {
            Self::Nginx => "nginx-light",
            Self::Lighttpd => "lighttpd",
            Self::Wrk => "wrk",
        }
    }

    /// Why the peer cannot run on `host`: one line naming the host when it is another
    /// machine, and how to install the program there.
    pub fn not_installed(&self, host: &Host) -> String {
        let (program, package) = (self.program(), self.package());
        match host {
            Host::Remote(_) => format!(
                "{program}: `{program}` is not installed on {} (apt-get install {package} there)",
                host.name()
            ),
            Host::Local | Host::Namespace(_) => {
                format!("{program}: not installed (apt-get install {package})")
            }
        }
    }
}

/// Where the servers listen and the clients run.
#[derive(Debug)]
pub struct Stage<'a> {
    pub testbed: &'a Testbed,
    pub server_cpu: usize,
    pub client_cpu: usize,
    pub port: u16,
    pub connections: usize,
    pub duration: Duration,
    /// Scratch for peer configurations and the static body.
    pub scratch: &'a Path,
}

impl Stage<'_> {
    pub fn url(&self) -> String {
        format!("http://{}:{}/", self.testbed.rx_addrs()[0], self.port)
    }
}

/// What one measurement found.
#[derive(Debug, Clone)]
pub struct Measured {
    pub rps: f64,
    /// The load generator's latency percentiles (HDR histogram), in microseconds.
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub cpu_us_per_request: f64,
    /// The user-space part of it: what a server's own code costs.
    pub user_us_per_request: f64,
    pub errors: u64,
    pub non_2xx: u64,
    /// Each remote load host's part (empty: the load came from one side without a clock of
    /// its own, the namespace testbed or this machine).
    pub hosts: Vec<super::load::HttpHostFigures>,
}

/// Runs one server under one load (`close`: a connection per request).
pub fn measure(stage: &Stage<'_>, kind: ServerKind, close: bool) -> Result<Measured, LabError> {
    let rx = stage.testbed.rx();
    let server = start_server(stage, kind)?;
    let mut server = wait_listening(stage, server)?;
    // The total is the exact runtime (schedstat) of the server and its workers; the user
    // part is tick-sampled (utime), so it is a labelled estimate of the split.
    let (user_before, _) = rx.tree_cpu_split(server.pid());
    let runtime_before = rx.tree_cpu_time(server.pid()).unwrap_or_default();
    let (load, hosts) = run_corelane_load(stage, close)?;
    let (user_after, _) = rx.tree_cpu_split(server.pid());
    let runtime_after = rx.tree_cpu_time(server.pid()).unwrap_or_default();
    if let Some(status) = server.wait_timeout(Duration::ZERO) {
        return Err(server.failed(status));
    }
    drop(server);
    let per_request = |cpu: Duration| {
        if load.responses == 0 {
            0.0
        } else {
            cpu.as_secs_f64() * 1e6 / load.responses as f64
        }
    };
    Ok(Measured {
        rps: load.requests_per_sec,
        p50_us: load.latency.p50_us,
        p90_us: load.latency.p90_us,
        p99_us: load.latency.p99_us,
        p999_us: load.latency.p999_us,
        cpu_us_per_request: per_request(runtime_after.saturating_sub(runtime_before)),
        user_us_per_request: per_request(user_after.saturating_sub(user_before)),
        errors: load.errors,
        non_2xx: load.non_2xx,
        hosts,
    })
}

pub(crate) fn start_server(stage: &Stage<'_>, kind: ServerKind) -> Result<ChildProcess, LabError> {
    let rx = stage.testbed.rx();
    match kind {
        ServerKind::Nginx => {
            write_conf(stage, "nginx.conf", &nginx_conf(&conf_dir(stage), stage.port))?
        }
        ServerKind::Lighttpd => {
            write_lighttpd_root(stage)?;
            write_conf(stage, "lighttpd.conf", &lighttpd_conf(&conf_dir(stage), stage.port))?
        }
        ServerKind::Corelane(_) | ServerKind::Placed(_) => {}
    }
    server_launch(stage, kind)?.spawn(&rx)
}

/// A program to start on one host: its name in errors, its command line there, and the CPU
/// taskset pins it to (for a program that cannot pin itself).
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    pub name: &'static str,
    pub program: String,
    pub args: Vec<String>,
    pub pin: Option<usize>,
}

impl Launch {
    pub fn new(name: &'static str, program: &str, args: Vec<String>, pin: Option<usize>) -> Self {
        Self { name, program: program.to_string(), args, pin }
    }

    pub fn spawn(&self, host: &Host) -> Result<ChildProcess, LabError> {
        let (program, args) = self.argv();
        host.spawn(self.name, &program, &args)
    }

    /// The program and arguments the host runs: `taskset -c CPU program args…` when pinned.
    pub fn argv(&self) -> (String, Vec<String>) {
        match self.pin {
            Some(cpu) => {
                let mut args = strings(&["-c", &cpu.to_string(), &self.program]);
                args.extend(self.args.iter().cloned());
                ("taskset".into(), args)
            }
            None => (self.program.clone(), self.args.clone()),
        }
    }

    /// The command line as the host runs it (under `corelane guard` on a remote host).
    pub fn shown(&self) -> String {
        let (program, args) = self.argv();
        shell_words::join(std::iter::once(program).chain(args))
    }
}

/// The server `kind` as the rx host runs it (a peer's configuration file named, not written).
pub(crate) fn server_launch(stage: &Stage<'_>, kind: ServerKind) -> Result<Launch, LabError> {
    let rx = stage.testbed.rx();
    let port = stage.port.to_string();
    let mut args = strings(&["serve", "http", "--port", &port, "--lanes", "1"]);
    let corelane =
        |args| Ok(Launch { name: "corelane serve", program: rx.corelane()?, args, pin: None });
    match kind {
        ServerKind::Corelane(config) => {
            args.extend(strings(&["--pin", &stage.server_cpu.to_string()]));
            args.extend(strings(&["--recycle", config.recycle, "--listen", config.listen]));
            args.extend(strings(&["--body", BODY, "--json"]));
            corelane(args)
        }
        ServerKind::Placed(place) => {
            if let Some(cpu) = place.cpu {
                args.extend(["--pin".into(), cpu.to_string()]);
            }
            args.extend(["--backend".into(), place.backend.into()]);
            if let Some(cpu) = place.sqpoll {
                args.extend(["--sqpoll".into(), cpu.to_string()]);
            }
            args.extend(strings(&["--body", BODY, "--json"]));
            corelane(args)
        }
        ServerKind::Nginx => Ok(Launch {
            name: "nginx",
            program: program(&rx, Peer::Nginx)?,
            args: vec!["-c".into(), format!("{}/nginx.conf", conf_dir(stage))],
            pin: Some(stage.server_cpu),
        }),
        ServerKind::Lighttpd => Ok(Launch {
            name: "lighttpd",
            program: program(&rx, Peer::Lighttpd)?,
            args: vec!["-D".into(), "-f".into(), format!("{}/lighttpd.conf", conf_dir(stage))],
            pin: Some(stage.server_cpu),
        }),
    }
}

/// Where the peer servers' configurations (and lighttpd's root) are written: on a remote rx
/// host its private run directory (`mktemp -d`, 0700, removed at the end and by its keeper
/// when the lab dies), else the lab's private scratch directory here.
pub(crate) fn conf_dir(stage: &Stage<'_>) -> String {
    stage.testbed.rx_run_dir().unwrap_or_else(|| stage.scratch.display().to_string())
}

/// Where `peer`'s program is on `host`, or an error saying how to install it there.
fn program(host: &Host, peer: Peer) -> Result<String, LabError> {
    host.find_program(peer.program()).ok_or_else(|| LabError::Options(peer.not_installed(host)))
}

/// A reading of the server (`what`, of its process tree `pid`) on `host`: one that could not
/// be taken is an error naming the host, never a 0 in a row.
pub fn reading<T>(host: &Host, what: &str, pid: u32, value: Option<T>) -> Result<T, LabError> {
    value.ok_or_else(|| LabError::Remote {
        host: host.name(),
        problem: format!("could not read the server's {what} (process {pid})"),
    })
}

/// Waits until the server's port accepts connections on its host (`ss` there).
pub(crate) fn wait_listening(
    stage: &Stage<'_>,
    mut server: ChildProcess,
) -> Result<ChildProcess, LabError> {
    let waited = Duration::from_secs(10);
    let end = Instant::now() + waited;
    let rx = stage.testbed.rx();
    while Instant::now() < end {
        if rx.tcp_listening(stage.port)? {
            return Ok(server);
        }
        if let Some(status) = server.wait_timeout(Duration::ZERO) {
            return Err(server.failed(status));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(server.timed_out("did not listen", waited))
}

/// `corelane load` against the server from every load host, the connections split over them
/// and started together; the summary of all (requests, responses and errors added up; each
/// latency percentile the highest of the hosts', an upper bound of the whole's) and each
/// host's part.
pub(crate) fn run_corelane_load(
    stage: &Stage<'_>,
    close: bool,
) -> Result<(LoadSummary, Vec<HttpHostFigures>), LabError> {
    run_load(stage, &LoadRun::of(stage, close))
}

/// One HTTP load: what is requested, with how many connections (over all load hosts), for
/// how long, and whether each request has its own connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LoadRun<'a> {
    /// The request target under the server's root, without the leading `/`.
    pub path: &'a str,
    pub connections: usize,
    pub duration: Duration,
    pub close: bool,
}

impl LoadRun<'_> {
    /// The stage's own load: its body, connections and duration.
    pub fn of(stage: &Stage<'_>, close: bool) -> Self {
        Self { path: "", connections: stage.connections, duration: stage.duration, close }
    }
}

/// The parts of `connections` each of `hosts` load hosts opens (the larger first), or an
/// error when there are too few to give every host one.
pub(crate) fn connection_shares(connections: usize, hosts: usize) -> Result<Vec<u64>, LabError> {
    let shares = load::split(connections as u64, hosts);
    if shares.contains(&0) {
        return Err(LabError::Options(format!(
            "{connections} connections cannot be split over {hosts} load hosts: give at least one connection per host"
        )));
    }
    Ok(shares)
}

/// [`run_corelane_load`] of any [`LoadRun`].
pub(crate) fn run_load(
    stage: &Stage<'_>,
    run: &LoadRun<'_>,
) -> Result<(LoadSummary, Vec<HttpHostFigures>), LabError> {
    const LOAD: &str = "corelane load";
    let load = stage.testbed.load_hosts();
    let connections = connection_shares(run.connections, load.len())?;
    let children = load::start_all(&load, LOAD, |i| {
        Ok((load[i].host.corelane()?, run_args(stage, run, connections[i])))
    })?;
    // Opening many connections takes time of its own on top of the load's.
    let grace = Duration::from_secs(20) + Duration::from_millis(run.connections as u64 / 10);
    let mut summaries = Vec::new();
    for child in children {
        let lines = child.finish(run.duration + grace)?;
        summaries.push(output::summary::<LoadInterval, LoadSummary>(LOAD, &lines)?);
    }
    let hosts = match load.iter().all(|l| l.clock.is_none()) {
        true => Vec::new(),
        false => load
            .iter()
            .zip(&summaries)
            .zip(&connections)
            .map(|((l, s), c)| HttpHostFigures {
                host: l.host.name(),
                connections: *c,
                rps: s.requests_per_sec,
                p50_us: s.latency.p50_us,
                p99_us: s.latency.p99_us,
                errors: s.errors + s.non_2xx,
                clock: HostClock::of(l.clock),
            })
            .collect(),
    };
    Ok((combined(summaries), hosts))
}

/// `corelane load http`'s arguments for one load host's `connections` (`close`: a
/// connection per request).
pub(crate) fn load_args(stage: &Stage<'_>, connections: u64, close: bool) -> Vec<String> {
    run_args(stage, &LoadRun::of(stage, close), connections)
}

/// `corelane load http`'s arguments for one load host's `connections` of `run`.
pub(crate) fn run_args(stage: &Stage<'_>, run: &LoadRun<'_>, connections: u64) -> Vec<String> {
    let url = format!("{}{}", stage.url(), run.path);
    let mut args = strings(&["load", "http", &url, "--json"]);
    args.extend(strings(&["--connections", &connections.to_string()]));
    args.extend(strings(&["--duration", &format!("{}ms", run.duration.as_millis())]));
    args.extend(strings(&["--pin", &stage.client_cpu.to_string()]));
    if run.close {
        args.push("--close".into());
    }
    args
}

/// Several load generators' summaries as one: counts and rates added, each latency figure
/// the highest (one summary is returned as it is).
fn combined(mut summaries: Vec<LoadSummary>) -> LoadSummary {
    let mut all = summaries.remove(0);
    for s in summaries {
        all.responses += s.responses;
        all.requests_per_sec += s.requests_per_sec;
        all.non_2xx += s.non_2xx;
        all.errors += s.errors;
        all.connects += s.connects;
        all.bytes_in += s.bytes_in;
        let (a, b) = (&mut all.latency, &s.latency);
        for (x, y) in [
            (&mut a.p50_us, b.p50_us),
            (&mut a.p90_us, b.p90_us),
            (&mut a.p99_us, b.p99_us),
            (&mut a.p999_us, b.p999_us),
            (&mut a.p9999_us, b.p9999_us),
            (&mut a.max_us, b.max_us),
        ] {
            *x = x.max(y);
        }
        all.latency.mean_us = all.latency.mean_us.max(s.latency.mean_us);
    }
    all
}

/// Writes a peer's configuration file `name` where its server runs (see [`conf_dir`]),
/// replacing the previous row's: every row that starts the peer writes it again. Here
/// atomically into the lab's private work directory (mkdtemp-style, 0700: no one else can
/// plant a name there); on a remote rx host into the run's private directory there, which
/// only root can enter, as the udp lab's C loop is written.
pub(crate) fn write_conf(stage: &Stage<'_>, name: &str, text: &str) -> Result<(), LabError> {
    match stage.testbed.rx_run_dir() {
        Some(dir) => stage.testbed.rx().write_file(&format!("{dir}/{name}"), text),
        None => write(stage.scratch.join(name), text).map(drop),
    }
}

/// lighttpd's document root with the body as `index.txt`, beside its configuration.
fn write_lighttpd_root(stage: &Stage<'_>) -> Result<(), LabError> {
    if let Some(dir) = stage.testbed.rx_run_dir() {
        let rx = stage.testbed.rx();
        rx.run("mkdir", &["-p", &format!("{dir}/www")])?;
        return rx.write_file(&format!("{dir}/www/index.txt"), BODY);
    }
    let www = stage.scratch.join("www");
    match std::fs::create_dir(&www) {
        // An earlier row's, in the same private work directory.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        other => other.map_err(|e| LabError::io("cannot create the lighttpd root", e))?,
    }
    write(www.join("index.txt"), BODY).map(drop)
}

fn write(path: PathBuf, text: &str) -> Result<PathBuf, LabError> {
    corelane::fs::write_atomic(&path, text.as_bytes())
        .map_err(|e| LabError::io(format!("cannot write {}", path.display()), e))?;
    Ok(path)
}

/// nginx with one worker answering `return 200` with the body, keep-alive unlimited; its
/// pid, logs and temporary directories in `d`.
fn nginx_conf(d: &str, port: u16) -> String {
    format!(
        "worker_processes 1;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/nginx-error.log;\n\
         events {{ worker_connections 16384; }}\n\
         http {{\n  access_log off;\n  keepalive_requests 1000000000;\n\
         client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n\
         uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         server {{ listen {port} reuseport; location / {{ default_type text/plain; return 200 \"{BODY}\"; }} }}\n}}\n"
    )
}

/// lighttpd (one process) serving the body as a static file from `d`/www, keep-alive
/// unlimited.
fn lighttpd_conf(d: &str, port: u16) -> String {
    format!(
        "server.document-root = \"{d}/www\"\nserver.port = {port}\nserver.errorlog = \"{d}/lighttpd-error.log\"\n\
         server.max-keep-alive-requests = 1000000000\nserver.max-connections = 8000\nserver.max-fds = 16000\n\
         index-file.names = ( \"index.txt\" )\nmimetype.assign = ( \".txt\" => \"text/plain\" )\n"
    )
}
