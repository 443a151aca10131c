//! The servers `lab tcp` measures — corelane in each configuration of seed 001's table, nginx
//! and lighttpd — and one measurement: start the server on its CPU inside the receiving
//! namespace, load it from the other namespace, read its CPU time, stop it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::process::{cpu_split_of, on_path, ChildProcess};
use crate::testbed::Testbed;
use crate::LabError;

/// The body every server answers with (13 bytes, as in the figures).
pub const BODY: &str = "Hello, World!";

/// A corelane configuration: one row of seed 001's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub id: &'static str,
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
        id: "baseline",
        label: "baseline: no recycling, one shared accept path",
        recycle: "none",
        listen: "shared",
        flow_to_core: false,
        backend: "epoll",
    },
    Config {
        id: "flow-to-core",
        label: "+ flow-to-core (RPS to the server CPU, CPU-steered listener)",
        recycle: "none",
        listen: "reuseport-cpu",
        flow_to_core: true,
        backend: "epoll",
    },
    Config {
        id: "buffers",
        label: "+ buffer recycling (sk_buff analog)",
        recycle: "buffers",
        listen: "shared",
        flow_to_core: false,
        backend: "epoll",
    },
    Config {
        id: "fd",
        label: "+ fd recycling (slab slots)",
        recycle: "fd",
        listen: "shared",
        flow_to_core: false,
        backend: "epoll",
    },
    Config {
        id: "events",
        label: "+ epoll_event recycling",
        recycle: "events",
        listen: "shared",
        flow_to_core: false,
        backend: "epoll",
    },
    Config {
        id: "recycling",
        label: "+ all three recycling methods (the default)",
        recycle: "all",
        listen: "reuseport",
        flow_to_core: false,
        backend: "epoll",
    },
    Config {
        id: "all",
        label: "+ all: flow-to-core and all recycling",
        recycle: "all",
        listen: "reuseport-cpu",
        flow_to_core: true,
        backend: "epoll",
    },
    Config {
        id: "uring",
        label: "all recycling, io_uring backend",
        recycle: "all",
        listen: "reuseport",
        flow_to_core: false,
        backend: "uring",
    },
];

pub const CONFIG_IDS: &[&str] =
    &["baseline", "flow-to-core", "buffers", "fd", "events", "recycling", "all", "uring"];

/// Where a corelane server runs and how it submits, for the affinity lab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
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
    Placed(Placement),
    Nginx,
    Lighttpd,
}

impl ServerKind {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Corelane(_) | Self::Placed(_) => "corelane",
            Self::Nginx => "nginx",
            Self::Lighttpd => "lighttpd",
        }
    }

    pub fn config_id(&self) -> &'static str {
        match self {
            Self::Corelane(c) => c.id,
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

    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "nginx" => Some(Self::Nginx),
            "lighttpd" => Some(Self::Lighttpd),
            "wrk" => Some(Self::Wrk),
            _ => None,
        }
    }

    pub fn program(&self) -> &'static str {
        match self {
            Self::Nginx => "nginx",
            Self::Lighttpd => "lighttpd",
            Self::Wrk => "wrk",
        }
    }

    /// Whether it is installed; nginx and lighttpd live in /usr/sbin, off a user's PATH.
    pub fn installed(&self) -> bool {
        let p = self.program();
        on_path(p) || Path::new("/usr/sbin").join(p).is_file()
    }

    pub fn path(&self) -> String {
        let p = self.program();
        let sbin = Path::new("/usr/sbin").join(p);
        if !on_path(p) && sbin.is_file() {
            return sbin.display().to_string();
        }
        p.to_string()
    }
}

/// Where the servers listen and the clients run.
#[derive(Debug)]
pub struct Stage<'a> {
    pub testbed: &'a Testbed,
    pub exe: &'a Path,
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
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    pub rps: f64,
    pub p99_us: f64,
    pub cpu_us_per_request: f64,
    /// The user-space part of it: what a server's own code costs.
    pub user_us_per_request: f64,
    pub errors: u64,
    pub non_2xx: u64,
}

/// Runs one server under one load (`close`: a connection per request).
pub fn measure(stage: &Stage<'_>, kind: ServerKind, close: bool) -> Result<Measured, LabError> {
    let mut server = start_server(stage, kind)?;
    wait_listening(stage, &mut server, kind.name())?;
    // The total is the exact runtime (schedstat) of the server and its workers; the user
    // part is tick-sampled (utime), so it is a labelled estimate of the split.
    let (user_before, _) = tree_cpu_split(server.pid());
    let runtime_before = corelane::stats::tree_runtime_of(server.pid()).unwrap_or_default();
    let load = run_corelane_load(stage, close)?;
    let (user_after, _) = tree_cpu_split(server.pid());
    let runtime_after = corelane::stats::tree_runtime_of(server.pid()).unwrap_or_default();
    drop(server);
    let responses = load["responses"].as_u64().unwrap_or(0);
    let per_request = |cpu: Duration| {
        if responses == 0 {
            0.0
        } else {
            cpu.as_secs_f64() * 1e6 / responses as f64
        }
    };
    let user = user_after.saturating_sub(user_before);
    let total = runtime_after.saturating_sub(runtime_before);
    Ok(Measured {
        rps: load["requests_per_sec"].as_f64().unwrap_or(0.0),
        p99_us: load["latency"]["p99_us"].as_f64().unwrap_or(0.0),
        cpu_us_per_request: per_request(total),
        user_us_per_request: per_request(user),
        errors: load["errors"].as_u64().unwrap_or(0),
        non_2xx: load["non_2xx"].as_u64().unwrap_or(0),
    })
}

/// The load generator check: `wrk` and `corelane load` against the same corelane server,
/// in turns (`wrk_first` alternates between trials, so neither always meets a fresh server).
pub fn measure_load_generators(stage: &Stage<'_>, wrk_first: bool) -> Result<(f64, f64), LabError> {
    let default = CONFIGS.iter().find(|c| c.id == "recycling").copied().unwrap_or(CONFIGS[0]);
    let all = ServerKind::Corelane(default);
    let mut server = start_server(stage, all)?;
    wait_listening(stage, &mut server, "corelane")?;
    let ours_rps = |stage: &Stage<'_>| -> Result<f64, LabError> {
        Ok(run_corelane_load(stage, false)?["requests_per_sec"].as_f64().unwrap_or(0.0))
    };
    let (ours, wrk) = if wrk_first {
        let wrk = run_wrk(stage)?;
        (ours_rps(stage)?, wrk)
    } else {
        let ours = ours_rps(stage)?;
        (ours, run_wrk(stage)?)
    };
    drop(server);
    Ok((ours, wrk))
}

fn pinned(cpu: usize, program: &str, args: &[String]) -> (String, Vec<String>) {
    let mut argv = vec!["-c".to_string(), cpu.to_string(), program.to_string()];
    argv.extend_from_slice(args);
    ("taskset".to_string(), argv)
}

fn start_server(stage: &Stage<'_>, kind: ServerKind) -> Result<ChildProcess, LabError> {
    let ns = stage.testbed.rx_ns();
    let port = stage.port.to_string();
    let cpu = stage.server_cpu;
    match kind {
        ServerKind::Corelane(config) => {
            let args: Vec<String> = [
                "serve",
                "http",
                "--port",
                &port,
                "--lanes",
                "1",
                "--pin",
                &cpu.to_string(),
                "--recycle",
                config.recycle,
                "--listen",
                config.listen,
                "--body",
                BODY,
                "--json",
            ]
            .map(String::from)
            .to_vec();
            ChildProcess::spawn("corelane serve", ns, &stage.exe.display().to_string(), &args)
        }
        ServerKind::Placed(place) => {
            let mut args: Vec<String> =
                ["serve", "http", "--port", &port, "--lanes", "1"].map(String::from).to_vec();
            if let Some(cpu) = place.cpu {
                args.extend(["--pin".into(), cpu.to_string()]);
            }
            args.extend(["--backend".into(), place.backend.into()]);
            if let Some(cpu) = place.sqpoll {
                args.extend(["--sqpoll".into(), cpu.to_string()]);
            }
            args.extend(["--body".into(), BODY.into(), "--json".into()]);
            ChildProcess::spawn("corelane serve", ns, &stage.exe.display().to_string(), &args)
        }
        ServerKind::Nginx => {
            let conf = nginx_conf(stage.scratch, stage.port)?;
            let (program, args) =
                pinned(cpu, &Peer::Nginx.path(), &["-c".into(), conf.display().to_string()]);
            ChildProcess::spawn("nginx", ns, &program, &args)
        }
        ServerKind::Lighttpd => {
            let conf = lighttpd_conf(stage.scratch, stage.port)?;
            let args = ["-D".to_string(), "-f".into(), conf.display().to_string()];
            let (program, args) = pinned(cpu, &Peer::Lighttpd.path(), &args);
            ChildProcess::spawn("lighttpd", ns, &program, &args)
        }
    }
}

/// Waits until the server's port accepts connections inside its namespace (`ss` there).
fn wait_listening(
    stage: &Stage<'_>,
    server: &mut ChildProcess,
    name: &str,
) -> Result<(), LabError> {
    let filter = format!("sport = :{}", stage.port);
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        let mut cmd = match stage.testbed.rx_ns() {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, "ss"]);
                c
            }
            None => Command::new("ss"),
        };
        let out = cmd
            .args(["-Hltn", &filter])
            .output()
            .map_err(|e| LabError::io("cannot run ss (iproute2)", e))?;
        if !String::from_utf8_lossy(&out.stdout).trim().is_empty() {
            return Ok(());
        }
        if let Some(status) = server.wait_timeout(Duration::ZERO) {
            return Err(LabError::Child(format!(
                "{name} exited ({status}): {}",
                server.stderr_text()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(LabError::Child(format!("{name} did not listen on port {} within 10s", stage.port)))
}

fn run_corelane_load(stage: &Stage<'_>, close: bool) -> Result<Value, LabError> {
    let mut args: Vec<String> = [
        "load",
        "http",
        &stage.url(),
        "--connections",
        &stage.connections.to_string(),
        "--duration",
        &format!("{}ms", stage.duration.as_millis()),
        "--pin",
        &stage.client_cpu.to_string(),
        "--json",
    ]
    .map(String::from)
    .to_vec();
    if close {
        args.push("--close".into());
    }
    let child = ChildProcess::spawn(
        "corelane load",
        stage.testbed.tx_ns(),
        &stage.exe.display().to_string(),
        &args,
    )?;
    let lines = child.finish(stage.duration + Duration::from_secs(20))?;
    let summary = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .ok_or_else(|| LabError::Child("corelane load printed no summary".into()))?;
    Ok(summary["summary"].clone())
}

fn run_wrk(stage: &Stage<'_>) -> Result<f64, LabError> {
    let args = [
        "-t1".to_string(),
        format!("-c{}", stage.connections),
        format!("-d{}s", stage.duration.as_secs().max(1)),
        stage.url(),
    ];
    let (program, args) = pinned(stage.client_cpu, &Peer::Wrk.path(), &args);
    let child = ChildProcess::spawn("wrk", stage.testbed.tx_ns(), &program, &args)?;
    let lines = child.finish(stage.duration + Duration::from_secs(20))?;
    lines
        .iter()
        .find_map(|l| l.strip_prefix("Requests/sec:").and_then(|v| v.trim().parse().ok()))
        .ok_or_else(|| LabError::Child(format!("wrk printed no Requests/sec line: {lines:?}")))
}

fn write(path: PathBuf, text: &str) -> Result<PathBuf, LabError> {
    std::fs::write(&path, text)
        .map_err(|e| LabError::io(format!("cannot write {}", path.display()), e))?;
    Ok(path)
}

/// nginx with one worker answering `return 200` with the body, keep-alive unlimited.
fn nginx_conf(dir: &Path, port: u16) -> Result<PathBuf, LabError> {
    let d = dir.display();
    write(
        dir.join("nginx.conf"),
        &format!(
            "worker_processes 1;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/nginx-error.log;\n\
             events {{ worker_connections 16384; }}\n\
             http {{\n  access_log off;\n  keepalive_requests 1000000000;\n\
             client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n\
             uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
             server {{ listen {port} reuseport; location / {{ default_type text/plain; return 200 \"{BODY}\"; }} }}\n}}\n"
        ),
    )
}

/// lighttpd (one process) serving the body as a static file, keep-alive unlimited.
fn lighttpd_conf(dir: &Path, port: u16) -> Result<PathBuf, LabError> {
    let www = dir.join("www");
    std::fs::create_dir_all(&www)
        .map_err(|e| LabError::io("cannot create the lighttpd root", e))?;
    write(www.join("index.txt"), BODY)?;
    let d = dir.display();
    write(
        dir.join("lighttpd.conf"),
        &format!(
            "server.document-root = \"{d}/www\"\nserver.port = {port}\nserver.errorlog = \"{d}/lighttpd-error.log\"\n\
             server.max-keep-alive-requests = 1000000000\nserver.max-connections = 8000\nserver.max-fds = 16000\n\
             index-file.names = ( \"index.txt\" )\nmimetype.assign = ( \".txt\" => \"text/plain\" )\n"
        ),
    )
}

/// User and system CPU time of a process and all its descendants (nginx's workers are the
/// master's children), tick-sampled: the split, not the total (see `tree_runtime_of`).
pub fn tree_cpu_split(pid: u32) -> (Duration, Duration) {
    let (mut user, mut system) = cpu_split_of(pid).unwrap_or_default();
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
    for task in tasks {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for child in children.split_ascii_whitespace().filter_map(|c| c.parse().ok()) {
            let (u, s) = tree_cpu_split(child);
            user += u;
            system += s;
        }
    }
    (user, system)
}
