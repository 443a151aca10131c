//! `lab tcp`'s file rows: a 4 KiB and a 1 MiB static file served by corelane on each backend
//! and by nginx with sendfile, under the same load, with the server's CPU per request exact
//! (schedstat of every thread of its processes, io_uring's kernel workers included).
//! Also the servers the scale rows start: the same root, the same peers.

use std::time::Duration;

use comfy_table::Cell;
use corelane::tcp::load::LoadSummary;
use serde::Serialize;

use super::served::FILES;
use super::servers::{self, wait_listening, LoadRun, Server, Stage};
use crate::process::{strings, ChildProcess};
use crate::stage::load::HttpHostFigures;
use crate::summary::{Rps, Trials};
use crate::testbed::PeerStep;
use crate::{median_of, report, LabError};

/// A server of files: corelane on one backend, or nginx.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileServer {
    /// Its `--backend`: [`Backend::Epoll`] or [`Backend::Uring`] ([`FileServer::COREL`]).
    Corelane(Backend),
    Nginx,
}

/// How a file server answers (by its `id` in rows and tables): corelane's `--backend`, or
/// nginx's sendfile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Epoll,
    Uring,
    Sendfile,
}

impl Backend {
    pub fn id(&self) -> &'static str {
        match self {
            Self::Epoll => "epoll",
            Self::Uring => "uring",
            Self::Sendfile => "sendfile",
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

impl FileServer {
    pub const COREL: [FileServer; 2] =
        [FileServer::Corelane(Backend::Epoll), FileServer::Corelane(Backend::Uring)];

    pub fn server(&self) -> Server {
        match self {
            Self::Corelane(_) => Server::Corelane,
            Self::Nginx => Server::Nginx,
        }
    }

    /// `epoll`, `uring`, or how nginx sends files.
    pub fn backend(&self) -> Backend {
        match self {
            Self::Corelane(backend) => *backend,
            Self::Nginx => Backend::Sendfile,
        }
    }
}

/// The file rows' sizes, by name.
pub const MEASURED: [(&str, &str); 2] = [("4 KiB", "small.bin"), ("1 MiB", "large.bin")];

/// One file row's measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileCase {
    pub server: FileServer,
    /// Index into [`MEASURED`].
    pub file: usize,
}

/// What one trial of a file row measured.
#[derive(Debug, Clone)]
pub struct FileTrial {
    pub rps: f64,
    pub cpu_ns_per_request: f64,
    pub errors: u64,
    pub non_2xx: u64,
    /// Each load host's part (empty: the load came from one side without a clock of its own).
    pub hosts: Vec<HttpHostFigures>,
}

/// One server and file, over all trials.
#[derive(Debug, Clone, Serialize)]
pub struct FileRow {
    /// `4 KiB` or `1 MiB`.
    pub file: String,
    pub bytes: usize,
    pub server: Server,
    pub backend: Backend,
    /// Per trial and their median.
    #[serde(flatten)]
    pub rps: Trials<Rps>,
    /// Server CPU time per request, exact (schedstat of every server thread), in ns; median
    /// over trials.
    pub cpu_ns_per_request: f64,
    pub trials_cpu_ns: Vec<f64>,
    pub errors: u64,
    pub non_2xx: u64,
    /// Each load host's part when the load came from remote hosts (connections, requests/s,
    /// latency, errors; medians over trials).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HttpHostFigures>,
}

/// Starts `server` on the stage's server CPU serving `root` (a path on the rx host), for up
/// to `connections` at once, and waits until it listens.
pub fn start(
    stage: &Stage<'_>,
    server: FileServer,
    root: &str,
    connections: usize,
) -> Result<ChildProcess, LabError> {
    let (program, args) = launch(stage, server, root, connections)?;
    if server == FileServer::Nginx {
        let text = nginx_conf(&servers::conf_dir(stage), stage.port, root, connections);
        servers::write_conf(stage, NGINX_CONF, &text)?;
    }
    let rx = stage.testbed.rx();
    let name = if server == FileServer::Nginx { "nginx" } else { "corelane serve" };
    wait_listening(stage, rx.spawn(name, &program, &args)?)
}

/// nginx's configuration for the file rows, beside the serve rows' one.
const NGINX_CONF: &str = "nginx-files.conf";

/// The program and arguments that start `server` on the rx host (nginx's configuration
/// named, not written).
pub fn launch(
    stage: &Stage<'_>,
    server: FileServer,
    root: &str,
    connections: usize,
) -> Result<(String, Vec<String>), LabError> {
    let rx = stage.testbed.rx();
    let cpu = stage.server_cpu.to_string();
    match server {
        FileServer::Corelane(backend) => {
            let mut args = strings(&["serve", "http", "--port", &stage.port.to_string()]);
            args.extend(strings(&["--lanes", "1", "--pin", &cpu, "--backend", backend.id()]));
            args.extend(strings(&["--root", root]));
            args.extend(strings(&["--max-connections", &(connections + 64).to_string()]));
            args.extend(strings(&["--idle-timeout", "600s", "--json"]));
            Ok((rx.corelane()?, args))
        }
        FileServer::Nginx => {
            let nginx = rx
                .find_program("nginx")
                .ok_or_else(|| LabError::Options(servers::Peer::Nginx.not_installed(&rx)))?;
            let conf = format!("{}/{NGINX_CONF}", servers::conf_dir(stage));
            Ok(("taskset".into(), strings(&["-c", &cpu, &nginx, "-c", &conf])))
        }
    }
}

/// nginx, one worker, serving `root` with sendfile, keep-alive unlimited; its pid, logs and
/// temporary directories in `d` (the private directory its configuration is in).
fn nginx_conf(d: &str, port: u16, root: &str, connections: usize) -> String {
    format!(
        "worker_processes 1;\ndaemon off;\npid {d}/nginx-files.pid;\nerror_log {d}/nginx-files-error.log;\n\
         worker_rlimit_nofile {files};\nevents {{ worker_connections {conns}; }}\n\
         http {{\n  access_log off;\n  sendfile on;\n  keepalive_requests 1000000000;\n  keepalive_timeout 600s;\n\
         client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n\
         uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         server {{ listen {port} reuseport backlog=4096; root {root}; }}\n}}\n",
        files = 2 * connections + 256,
        conns = connections + 64,
    )
}

/// `corelane load http` of `path` with `connections` connections split over every load
/// host, started together, for `duration`: the summary of all and each host's part.
pub fn load(
    stage: &Stage<'_>,
    path: &str,
    connections: usize,
    duration: Duration,
) -> Result<(LoadSummary, Vec<HttpHostFigures>), LabError> {
    servers::run_load(stage, &LoadRun { path, connections, duration, close: false })
}

/// What the file rows run on each host (what a dry run shows): the served root made on the
/// rx host, then per server its start there (nginx's configuration written first) and each
/// file's load from every load host, each its part of the connections.
pub fn steps(stage: &Stage<'_>, servers: &[FileServer]) -> Result<Vec<PeerStep>, LabError> {
    let rx = stage.testbed.rx();
    let load = stage.testbed.load_hosts();
    let shares = servers::connection_shares(stage.connections, load.len())?;
    let root = match rx {
        crate::host::Host::Remote(_) => "/tmp/corelane-served.XXXXXXXX".to_string(),
        _ => "SERVED".to_string(),
    };
    let mut out = Vec::new();
    for &server in servers {
        let row = format!("files: {} {}, 4 KiB then 1 MiB", server.server(), server.backend());
        let mut step = |host: &crate::host::Host, command: String| {
            out.push(PeerStep { row: row.clone(), host: host.name(), command })
        };
        step(&rx, super::served::shown(&rx));
        if server == FileServer::Nginx {
            step(&rx, format!("write {}/{NGINX_CONF}", servers::conf_dir(stage)));
        }
        let (program, args) = launch(stage, server, &root, stage.connections)?;
        step(&rx, shown(program, args));
        for (_, name) in MEASURED {
            let run = LoadRun {
                path: name,
                connections: stage.connections,
                duration: stage.duration,
                close: false,
            };
            for (l, &n) in load.iter().zip(&shares) {
                step(&l.host, shown(l.host.corelane()?, servers::run_args(stage, &run, n)));
            }
        }
    }
    Ok(out)
}

/// A command line as a dry run shows it.
pub fn shown(program: String, args: Vec<String>) -> String {
    shell_words::join(std::iter::once(program).chain(args))
}

/// One trial of a file row: a fresh server, the load, the server's CPU over it.
pub fn measure(stage: &Stage<'_>, case: FileCase, root: &str) -> Result<FileTrial, LabError> {
    let rx = stage.testbed.rx();
    let mut server = start(stage, case.server, root, stage.connections)?;
    let before = servers::reading(&rx, "CPU time", server.pid(), rx.tree_cpu_time(server.pid()))?;
    let (load, hosts) = load(stage, MEASURED[case.file].1, stage.connections, stage.duration)?;
    // Read while the server runs: its io_uring workers' times are theirs only while alive.
    let after = servers::reading(&rx, "CPU time", server.pid(), rx.tree_cpu_time(server.pid()))?;
    if let Some(status) = server.wait_timeout(Duration::ZERO) {
        return Err(server.failed(status));
    }
    let cpu = after.saturating_sub(before).as_nanos() as f64;
    Ok(FileTrial {
        rps: load.requests_per_sec,
        cpu_ns_per_request: if load.responses == 0 { 0.0 } else { cpu / load.responses as f64 },
        errors: load.errors,
        non_2xx: load.non_2xx,
        hosts,
    })
}

pub fn describe(t: &FileTrial) -> String {
    format!("{:.0} req/s, server CPU {:.0} ns/request", t.rps, t.cpu_ns_per_request)
}

pub fn summarize(case: FileCase, trials: &[FileTrial]) -> FileRow {
    let (file, name) = MEASURED[case.file];
    FileRow {
        file: file.into(),
        bytes: FILES.iter().find(|(n, _)| *n == name).map_or(0, |(_, size)| *size),
        server: case.server.server(),
        backend: case.server.backend(),
        rps: Trials::of(trials.iter().map(|t| t.rps)),
        cpu_ns_per_request: median_of(trials.iter().map(|t| t.cpu_ns_per_request)),
        trials_cpu_ns: trials.iter().map(|t| t.cpu_ns_per_request).collect(),
        errors: trials.iter().map(|t| t.errors).sum(),
        non_2xx: trials.iter().map(|t| t.non_2xx).sum(),
        hosts: crate::stage::load::http_medians(
            &trials.iter().map(|t| t.hosts.as_slice()).collect::<Vec<_>>(),
        ),
    }
}

/// Per file size: io_uring's CPU per request against epoll's and nginx's.
pub fn findings(rows: &[FileRow]) -> Vec<String> {
    let mut out = Vec::new();
    for (file, _) in MEASURED {
        let find = |backend| rows.iter().find(|r| r.file == file && r.backend == backend);
        let Some(uring) = find(Backend::Uring) else { continue };
        let others: Vec<String> = [Backend::Epoll, Backend::Sendfile]
            .into_iter()
            .filter_map(find)
            .map(|o| {
                let who =
                    if o.server == Server::Nginx { "nginx (sendfile)" } else { "epoll (sendfile)" };
                format!(
                    "{:.2}x {who}'s {:.0} ns",
                    uring.cpu_ns_per_request / o.cpu_ns_per_request.max(1.0),
                    o.cpu_ns_per_request
                )
            })
            .collect();
        if others.is_empty() {
            continue;
        }
        out.push(format!(
            "{file} file: corelane on io_uring spends {:.0} ns of server CPU per request, {} ({:.0} req/s).",
            uring.cpu_ns_per_request,
            others.join(", "),
            uring.rps.median
        ));
    }
    out
}

pub fn table(rows: &[FileRow]) -> String {
    let mut table = report::table();
    table.set_header(["file", "server", "backend", "req/s", "CPU ns/req", "errors"]);
    for row in rows {
        table.add_row(vec![
            Cell::new(&row.file),
            Cell::new(row.server),
            Cell::new(row.backend),
            report::right(format!("{:.0}", row.rps.median)),
            report::right(format!("{:.0}", row.cpu_ns_per_request)),
            report::right(format!("{}", row.errors + row.non_2xx)),
        ]);
    }
    let mut out = format!("\nstatic files (server CPU per request exact, schedstat):\n{table}\n");
    for row in rows.iter().filter(|r| !r.hosts.is_empty()) {
        for h in &row.hosts {
            let line = crate::stage::load::http_host_line(h);
            out.push_str(&format!("  {} {} {}: {line}\n", row.file, row.server, row.backend));
        }
    }
    out
}

/// The rows in `lab tcp`'s CSV columns: workload `file 4 KiB` / `file 1 MiB`, config the
/// backend.
pub fn csv_records(rows: &[FileRow]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|row| {
            let mut record = vec![String::new(); 16];
            record[0] = format!("file {}", row.file);
            record[1] = row.server.to_string();
            record[2] = row.backend.to_string();
            record[3] = format!("{:.1}", row.rps.median);
            record[6] = format!("{:.3}", row.cpu_ns_per_request / 1000.0);
            record[9] = row.errors.to_string();
            record[10] = row.non_2xx.to_string();
            record[11] = row.rps.joined(1);
            record[14] = format!("{:.0}", row.cpu_ns_per_request);
            record
        })
        .collect()
}
