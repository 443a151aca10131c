//! `lab tcp`'s scale rows: what an idle keep-alive connection costs a server (the RSS growth
//! of all its processes while N connections, each after one request, stay open, per
//! connection; then a new request must still be answered) and the requests/s it serves with
//! N connections loading it, for N = 1k, 10k and the largest count this machine allows —
//! corelane on each backend beside nginx.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use comfy_table::Cell;
use serde::Serialize;

use super::files::{self, FileServer};
use super::servers::Stage;
use crate::host::Host;
use crate::summary::{Rps, Trials};
use crate::{median_of, report, LabError};

/// The connection counts: 1k and 10k, then the largest this machine allows.
pub const FULL: [usize; 2] = [1_000, 10_000];
/// With `--quick`: small counts, so that CI stays fast (the largest is left out).
pub const QUICK: [usize; 2] = [100, 1_000];
/// The body the scale rows request (13 bytes, as the seed's rows).
const PATH: &str = "hello.txt";

/// One scale row's measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScaleCase {
    pub server: FileServer,
    pub connections: usize,
    /// The largest count the machine allows (else one of the fixed counts).
    pub largest: bool,
}

/// What one trial of a scale row measured.
#[derive(Debug, Clone, Copy)]
pub struct ScaleTrial {
    pub bytes_per_idle_connection: f64,
    /// A new request was answered while the idle connections stayed open.
    pub answered: bool,
    pub rps: f64,
    pub cpu_us_per_request: f64,
    pub errors: u64,
    /// The load got no answer at all (every connection failed): counted, not fatal, so the
    /// other rows still run.
    pub load_failed: bool,
}

/// One server at one connection count, over all trials.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleRow {
    pub server: String,
    /// `epoll`, `uring`, or `sendfile` (nginx).
    pub backend: String,
    pub connections: usize,
    /// `chosen`, or the limit that set the largest count (hard RLIMIT_NOFILE, local ports,
    /// memory).
    pub decided_by: String,
    /// RSS growth of all the server's processes per idle keep-alive connection, in bytes;
    /// median over trials.
    pub bytes_per_idle_connection: f64,
    /// Every trial answered a new request with the idle connections open.
    pub answered_after_idle: bool,
    /// Requests/s with `connections` connections loading the server, per trial and median.
    #[serde(flatten)]
    pub rps: Trials<Rps>,
    /// Server CPU per request under that load (exact, schedstat), in microseconds.
    pub cpu_us_per_request: f64,
    /// Connection errors and non-2xx answers under the load, summed over trials (a trial
    /// whose load got no answer at all counts every connection).
    pub errors: u64,
    /// Trials whose load got no answer at all.
    pub failed_loads: usize,
}

/// The largest connection count the machine allows one server and its client (each holds
/// one descriptor per connection): the hard RLIMIT_NOFILE (the soft one is raised to it
/// here, and the servers and clients inherit it), the client side's local port range, and
/// memory (64 KiB per connection for both ends' sockets under load). Returns the count and
/// which limit decided it.
pub fn largest(tx: &Host) -> (usize, String) {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    let hard = limit.maximum.unwrap_or(1 << 20);
    let _ = setrlimit(Resource::Nofile, Rlimit { current: Some(hard), maximum: limit.maximum });
    let by_files = (hard as usize).saturating_sub(512);
    let ports = tx.read_file("/proc/sys/net/ipv4/ip_local_port_range").ok().and_then(|text| {
        let mut it = text.split_whitespace().filter_map(|v| v.parse::<usize>().ok());
        it.next().zip(it.next()).map(|(lo, hi)| hi.saturating_sub(lo) + 1)
    });
    let by_ports = ports.unwrap_or(usize::MAX).saturating_sub(1_000);
    let available = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        let line = m.lines().find(|l| l.starts_with("MemAvailable:"))?;
        line.split_whitespace().nth(1)?.parse::<usize>().ok()
    });
    let by_memory = available.map_or(usize::MAX, |kib| kib / 64);
    let limits = [
        (by_files, format!("hard RLIMIT_NOFILE {hard}")),
        (by_ports, format!("{} local ports", ports.unwrap_or(0))),
        (by_memory, format!("memory ({} MiB available)", available.unwrap_or(0) / 1024)),
    ];
    let (n, why) = limits.into_iter().min_by_key(|(n, _)| *n).unwrap_or((0, String::new()));
    (n, why)
}

/// Opens `n` connections to `addr` from `host`'s network, each after one answered GET, and
/// returns them open (idle). The connecting thread joins the host's namespace itself.
fn hold_idle(host: &Host, addr: SocketAddr, n: usize) -> Result<Vec<TcpStream>, LabError> {
    let namespace = match host {
        Host::Local => None,
        Host::Namespace(name) => Some(format!("/run/netns/{name}")),
        Host::Remote(_) => {
            return Err(LabError::Options("idle connections are held from this machine".into()))
        }
    };
    let fail = |what: &str, e: std::io::Error| LabError::io(format!("idle connections: {what}"), e);
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                if let Some(path) = &namespace {
                    let ns = std::fs::File::open(path).map_err(|e| fail(path, e))?;
                    rustix::thread::move_into_link_name_space(
                        std::os::fd::AsFd::as_fd(&ns),
                        Some(rustix::thread::LinkNameSpaceType::Network),
                    )
                    .map_err(|e| fail("cannot enter the client namespace", e.into()))?;
                }
                let mut held = Vec::with_capacity(n);
                for _ in 0..n {
                    let mut s = TcpStream::connect(addr).map_err(|e| fail("connect", e))?;
                    s.set_read_timeout(Some(Duration::from_secs(10)))
                        .map_err(|e| fail("timeout", e))?;
                    // A reset when closed: no TIME_WAIT left on the client's ports.
                    rustix::net::sockopt::set_socket_linger(&s, Some(Duration::ZERO))
                        .map_err(|e| fail("linger", e.into()))?;
                    match get(&mut s) {
                        Ok(true) => held.push(s),
                        Ok(false) => {
                            return Err(LabError::Options(format!(
                                "idle connections: GET /{PATH} was not answered 200"
                            )))
                        }
                        Err(e) => return Err(fail("a request on an idle-to-be connection", e)),
                    }
                }
                Ok(held)
            })
            .join()
            .unwrap_or_else(|_| Err(LabError::Options("the idle-connection thread failed".into())))
    })
}

/// One GET of the scale rows' body on `s`: true if answered 200 with it whole.
fn get(s: &mut TcpStream) -> std::io::Result<bool> {
    write!(s, "GET /{PATH} HTTP/1.1\r\nHost: lab\r\n\r\n")?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let want = loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4 + files::FILES[0].1;
        }
        // A head longer than any server of the lab sends is an answer to refuse, not to keep.
        if got.len() > 64 * 1024 {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "head over 64 KiB"));
        }
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        got.extend_from_slice(&buf[..n]);
    };
    while got.len() < want {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        got.extend_from_slice(&buf[..n]);
    }
    Ok(got.starts_with(b"HTTP/1.1 200"))
}

/// VmRSS of process `pid` and all its descendants, in bytes.
fn tree_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let own = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0)
        * 1024;
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
    let children: u64 = tasks
        .map(|task| std::fs::read_to_string(task.path().join("children")).unwrap_or_default())
        .flat_map(|c| c.split_ascii_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<_>>())
        .map(tree_rss)
        .sum();
    own + children
}

/// One trial of a scale row: a fresh server; `connections` idle keep-alive connections and
/// the RSS they cost it; a new request; then the load with `connections` connections.
pub fn measure(stage: &Stage<'_>, case: &ScaleCase, root: &Path) -> Result<ScaleTrial, LabError> {
    let rx = stage.testbed.rx();
    let tx = stage.testbed.tx();
    let mut server = files::start(stage, case.server, root, case.connections)?;
    let addr = SocketAddr::new(stage.testbed.rx_addrs()[0], stage.port);
    let before = tree_rss(server.pid());
    let held = hold_idle(&tx, addr, case.connections)?;
    // The servers' sweeps and nginx's lazy allocations settle.
    std::thread::sleep(Duration::from_millis(500));
    let after = tree_rss(server.pid());
    let answered = hold_idle(&tx, addr, 1).is_ok();
    drop(held);
    // The server takes in the resets of the idle connections before the load.
    std::thread::sleep(Duration::from_millis(500));
    // Opening many connections takes time of its own: the load runs longer with more.
    let duration = stage.duration + Duration::from_millis(case.connections as u64 / 10);
    let cpu_before = rx.tree_cpu_time(server.pid()).unwrap_or_default();
    let load = files::load(stage, PATH, case.connections, duration);
    let cpu_after = rx.tree_cpu_time(server.pid()).unwrap_or_default();
    if let Some(status) = server.wait_timeout(Duration::ZERO) {
        return Err(server.failed(status));
    }
    let per_idle = after.saturating_sub(before) as f64 / case.connections as f64;
    // The load generator's one refusal a server can cause: no answer to any connection.
    let load = match load {
        Err(e) if !e.to_string().contains("no response from") => return Err(e),
        other => other,
    };
    let Ok(load) = load else {
        let failed = ScaleTrial {
            bytes_per_idle_connection: per_idle,
            answered,
            rps: 0.0,
            cpu_us_per_request: 0.0,
            errors: case.connections as u64,
            load_failed: true,
        };
        return Ok(failed);
    };
    let cpu = cpu_after.saturating_sub(cpu_before).as_secs_f64() * 1e6;
    Ok(ScaleTrial {
        bytes_per_idle_connection: per_idle,
        answered,
        rps: load.requests_per_sec,
        cpu_us_per_request: if load.responses == 0 { 0.0 } else { cpu / load.responses as f64 },
        errors: load.errors + load.non_2xx,
        load_failed: false,
    })
}

pub fn describe(t: &ScaleTrial) -> String {
    if t.load_failed {
        return format!(
            "{:.0} B per idle connection{}, then no answer to the load at all",
            t.bytes_per_idle_connection,
            if t.answered { "" } else { " (a new request was NOT answered)" },
        );
    }
    format!(
        "{:.0} B per idle connection{}, {:.0} req/s, server CPU {:.2} us/request",
        t.bytes_per_idle_connection,
        if t.answered { "" } else { " (a new request was NOT answered)" },
        t.rps,
        t.cpu_us_per_request
    )
}

/// `decided_by`: the limit that set the largest count (for the other counts: `chosen`).
pub fn summarize(case: &ScaleCase, decided_by: &str, trials: &[ScaleTrial]) -> ScaleRow {
    ScaleRow {
        server: case.server.name().into(),
        backend: case.server.backend().into(),
        connections: case.connections,
        decided_by: if case.largest { decided_by.into() } else { "chosen".into() },
        bytes_per_idle_connection: median_of(trials.iter().map(|t| t.bytes_per_idle_connection)),
        answered_after_idle: trials.iter().all(|t| t.answered),
        rps: Trials::of(trials.iter().map(|t| t.rps)),
        cpu_us_per_request: median_of(trials.iter().map(|t| t.cpu_us_per_request)),
        errors: trials.iter().map(|t| t.errors).sum(),
        failed_loads: trials.iter().filter(|t| t.load_failed).count(),
    }
}

/// Per connection count: each corelane backend's bytes per idle connection and requests/s
/// against nginx's.
pub fn findings(rows: &[ScaleRow]) -> Vec<String> {
    let mut counts: Vec<(usize, &str)> =
        rows.iter().map(|r| (r.connections, r.decided_by.as_str())).collect();
    counts.dedup();
    let mut out = Vec::new();
    for (n, decided_by) in counts {
        let at: Vec<&ScaleRow> = rows.iter().filter(|r| r.connections == n).collect();
        let parts: Vec<String> = at
            .iter()
            .map(|r| {
                let failed = if r.failed_loads > 0 {
                    format!(" (no answer to the load in {} trial(s))", r.failed_loads)
                } else {
                    String::new()
                };
                format!(
                    "{} {} {:.0} B/idle connection, {:.0} req/s{failed}",
                    r.server, r.backend, r.bytes_per_idle_connection, r.rps.median
                )
            })
            .collect();
        let why = if decided_by == "chosen" {
            String::new()
        } else {
            format!(" (the largest: {decided_by})")
        };
        let unanswered: Vec<&str> =
            at.iter().filter(|r| !r.answered_after_idle).map(|r| r.backend.as_str()).collect();
        let answered = if unanswered.is_empty() {
            "a new request was answered beside the idle ones on every server".to_string()
        } else {
            format!("a new request was NOT answered by: {}", unanswered.join(", "))
        };
        out.push(format!("{n} connections{why}: {}; {answered}.", parts.join("; ")));
    }
    out
}

pub fn table(rows: &[ScaleRow]) -> String {
    let mut table = report::table();
    table.set_header([
        "connections",
        "server",
        "backend",
        "B/idle conn",
        "req/s",
        "CPU us/req",
        "errors",
        "count decided by",
    ]);
    for row in rows {
        table.add_row(vec![
            report::right(row.connections.to_string()),
            Cell::new(&row.server),
            Cell::new(&row.backend),
            report::right(format!("{:.0}", row.bytes_per_idle_connection)),
            report::right(format!("{:.0}", row.rps.median)),
            report::right(format!("{:.2}", row.cpu_us_per_request)),
            report::right(row.errors.to_string()),
            Cell::new(&row.decided_by),
        ]);
    }
    format!("\nscale (idle keep-alive connections: RSS growth of all server processes; then the load with as many connections):\n{table}\n")
}

/// The rows in `lab tcp`'s CSV columns: workload `scale`, config the backend.
pub fn csv_records(rows: &[ScaleRow]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|row| {
            let mut record = vec![String::new(); 16];
            record[0] = "scale".into();
            record[1] = row.server.clone();
            record[2] = row.backend.clone();
            record[3] = format!("{:.1}", row.rps.median);
            record[6] = format!("{:.3}", row.cpu_us_per_request);
            record[9] = row.errors.to_string();
            record[11] = row.rps.joined(1);
            record[12] = row.connections.to_string();
            record[13] = format!("{:.0}", row.bytes_per_idle_connection);
            record[15] = row.decided_by.clone();
            record
        })
        .collect()
}
