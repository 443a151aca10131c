//! `lab tcp`'s scale rows: what an idle keep-alive connection costs a server (the RSS growth
//! of all its processes while N connections, each after one request, stay open, per
//! connection; then a new request must still be answered) and the requests/s it serves with
//! N connections loading it, for N = 1k, 10k and the largest count this machine allows —
//! corelane on each backend beside nginx.

use std::time::Duration;

use comfy_table::Cell;
use corelane::tcp::load::{LoadInterval, LoadSummary};
use serde::Serialize;

use super::files::{self, Backend, FileServer};
use super::servers::{self, Server, Stage};
use crate::host::Host;
use crate::process::ChildProcess;
use crate::stage::load::HttpHostFigures;
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
#[derive(Debug, Clone)]
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
    /// Each load host's part of the load (empty: one side without a clock of its own).
    pub hosts: Vec<HttpHostFigures>,
}

/// One server at one connection count, over all trials.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleRow {
    pub server: Server,
    pub backend: Backend,
    pub connections: usize,
    pub decided_by: DecidedBy,
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
    /// Each load host's part when the idle connections and the load came from remote hosts:
    /// its connections (held idle, then loading), requests/s, latency and errors (medians
    /// over trials).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HttpHostFigures>,
}

/// One host's limits on the connections it can hold: its hard RLIMIT_NOFILE (the soft one
/// is raised to it by the programs that hold them), its local port range (a client's), and
/// its available memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostLimits {
    pub host: String,
    pub hard_nofile: u64,
    /// Ports in `ip_local_port_range` (`None`: unreadable).
    pub ports: Option<u64>,
    /// MemAvailable, in KiB (`None`: unreadable).
    pub mem_kib: Option<u64>,
}

/// Memory one end of a loaded connection takes (its socket and buffers), in KiB.
const KIB_PER_END: u64 = 32;
/// The most descriptors one process is counted on (Linux's default nr_open, what
/// `--hold-idle` takes at most): a larger or `unlimited` hard limit counts as this.
const NOFILE_MOST: u64 = 1 << 20;

impl HostLimits {
    /// Reads `host`'s limits there (`ulimit -Hn`, /proc); a descriptor limit that cannot be
    /// read is an error naming the host (the port range and memory, unreadable, limit nothing).
    pub fn read(host: &Host) -> Result<Self, LabError> {
        let hard = host.run("sh", &["-c", "ulimit -Hn"])?;
        let hard_nofile = match hard.trim() {
            "unlimited" => NOFILE_MOST,
            text => {
                text.parse::<u64>().map(|n| n.min(NOFILE_MOST)).map_err(|_| LabError::Remote {
                    host: host.name(),
                    problem: format!(
                        "`ulimit -Hn` printed {:?}, not a number",
                        corelane::child_output::printable(text, 80)
                    ),
                })?
            }
        };
        let ports = host.read_file("/proc/sys/net/ipv4/ip_local_port_range").ok().and_then(|t| {
            let mut it = t.split_whitespace().filter_map(|v| v.parse::<u64>().ok());
            it.next().zip(it.next()).map(|(lo, hi)| hi.saturating_sub(lo) + 1)
        });
        let mem_kib = host.read_file("/proc/meminfo").ok().and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemAvailable:"))?.to_string();
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        });
        Ok(Self { host: host.name(), hard_nofile, ports, mem_kib })
    }

    /// The connections this host can hold as one side, and the limit that decides it:
    /// descriptors (512 kept for everything else), a client's ports (1,000 kept), memory
    /// (`ends` ends of each connection on this host: two when both sides share it).
    fn most(&self, client: bool, ends: u64) -> (u64, String) {
        let mut limits = vec![(
            self.hard_nofile.min(NOFILE_MOST).saturating_sub(512),
            format!("hard RLIMIT_NOFILE {} on {}", self.hard_nofile, self.host),
        )];
        if let (true, Some(ports)) = (client, self.ports) {
            limits.push((
                ports.saturating_sub(1_000),
                format!("{ports} local ports on {}", self.host),
            ));
        }
        if let Some(kib) = self.mem_kib {
            let by_memory = kib / (KIB_PER_END * ends.max(1));
            limits.push((
                by_memory,
                format!("memory on {} ({} MiB available)", self.host, kib / 1024),
            ));
        }
        limits.into_iter().min_by_key(|(n, _)| *n).unwrap_or((0, String::new()))
    }
}

/// The largest connection count the run allows and the limit that decides it: the server
/// side's (the rx host's descriptors and memory) against the client side's, which is the
/// load hosts' together — the connections are split evenly, so it is their number times the
/// fewest any one of them can open. `shared`: the load hosts and the server are one machine
/// (the namespace testbed, loopback), so its memory holds both ends.
pub fn largest_of(server: &HostLimits, clients: &[HostLimits], shared: bool) -> (usize, String) {
    let ends = if shared { 2 } else { 1 };
    let (served, server_why) = server.most(false, ends);
    let fewest = clients.iter().map(|c| c.most(true, ends)).min_by_key(|(n, _)| *n);
    let Some((each, client_why)) = fewest else { return (served as usize, server_why) };
    let hosts = clients.len() as u64;
    let (opened, client_why) = match hosts {
        1 => (each, format!("the client side: {client_why}")),
        n => (
            each.saturating_mul(n),
            format!("the client side: {n} load hosts × {each}, {client_why}"),
        ),
    };
    if served <= opened {
        (usize::try_from(served).unwrap_or(usize::MAX), format!("the server side: {server_why}"))
    } else {
        (usize::try_from(opened).unwrap_or(usize::MAX), client_why)
    }
}

/// [`largest_of`] for the run's rx host and load hosts, each asked over its own connection.
pub fn largest(testbed: &crate::testbed::Testbed) -> Result<(usize, String), LabError> {
    let rx = testbed.rx();
    let load = testbed.load_hosts();
    let shared =
        !matches!(rx, Host::Remote(_)) && load.iter().all(|l| !matches!(l.host, Host::Remote(_)));
    let clients: Vec<HostLimits> =
        load.iter().map(|l| HostLimits::read(&l.host)).collect::<Result<_, _>>()?;
    Ok(largest_of(&HostLimits::read(&rx)?, &clients, shared))
}

/// The name errors give the idle connections' holders.
const HOLD: &str = "corelane load --hold-idle";

/// `corelane load http --hold-idle`'s arguments for one load host's `connections`.
fn hold_args(stage: &Stage<'_>, connections: u64) -> Vec<String> {
    let url = format!("{}{PATH}", stage.url());
    let mut args = crate::process::strings(&["load", "http", &url, "--hold-idle", "--json"]);
    args.extend(["--connections".into(), connections.to_string()]);
    args.extend(crate::process::strings(&["--duration", "10m", "--timeout", "10s"]));
    args
}

/// Opens `connections` idle keep-alive connections, split over every load host, each after
/// one answered GET, and waits until every host says it holds its share: a host that holds
/// fewer, or had one unanswered, is an error naming it. The connections close when the
/// holders returned are dropped.
fn hold_idle(stage: &Stage<'_>, connections: usize) -> Result<Vec<ChildProcess>, LabError> {
    let load = stage.testbed.load_hosts();
    let shares = super::servers::connection_shares(connections, load.len())?;
    let mut holders = crate::stage::load::start_all(&load, HOLD, |i| {
        Ok((load[i].host.corelane()?, hold_args(stage, shares[i])))
    })?;
    for ((holder, l), &share) in holders.iter_mut().zip(&load).zip(&shares) {
        // Opening takes about a millisecond a connection on a slow host.
        let waited = Duration::from_secs(30) + Duration::from_millis(share);
        let (held, answered) = wait_held(holder, waited)?;
        if held != share || answered != share {
            return Err(LabError::Remote {
                host: l.host.name(),
                problem: format!(
                    "{HOLD} holds {held} of its {share} idle connections, {answered} of them answered 200: the server refused or dropped the rest"
                ),
            });
        }
    }
    Ok(holders)
}

/// The holder's ready line: how many it holds and how many were answered.
fn wait_held(holder: &mut ChildProcess, waited: Duration) -> Result<(u64, u64), LabError> {
    let end = std::time::Instant::now() + waited;
    while std::time::Instant::now() < end {
        match holder.next_line(Duration::from_millis(100)) {
            Some(line) => {
                let bad = |source| LabError::ChildJson {
                    child: HOLD.into(),
                    line: corelane::child_output::printable(&line, 300),
                    source,
                };
                let ready: HoldReady = serde_json::from_str(&line).map_err(bad)?;
                return Ok((ready.held, ready.answered));
            }
            None => {
                if let Some(status) = holder.wait_timeout(Duration::ZERO) {
                    return Err(holder.failed(status));
                }
            }
        }
    }
    Err(holder.timed_out("did not hold its idle connections", waited))
}

/// `load http --hold-idle --json`'s one line.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct HoldReady {
    #[serde(rename = "type")]
    _kind: ReadyTag,
    held: u64,
    answered: u64,
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum ReadyTag {
    Ready,
}

/// Whether a new request is answered (200, whole) from the first load host while the idle
/// connections are held: its summary says so or not; the load host failing to run it is an
/// error naming that host, not "not answered".
fn answered_beside(stage: &Stage<'_>) -> Result<bool, LabError> {
    let first = stage.testbed.load_hosts().remove(0).host;
    let url = format!("{}{PATH}", stage.url());
    let args = crate::process::strings(&[
        "load",
        "http",
        &url,
        "--json",
        "--connections",
        "1",
        "--requests",
        "1",
        "--duration",
        "10s",
        "--timeout",
        "5s",
    ]);
    const LOAD: &str = "corelane load";
    let lines = match first.spawn(LOAD, &first.corelane()?, &args)?.finish(Duration::from_secs(20))
    {
        Ok(lines) => lines,
        // The load generator's refusal when its one request got no answer.
        Err(e) if e.to_string().contains("no response from") => return Ok(false),
        Err(e) => return Err(e),
    };
    let s = crate::output::summary::<LoadInterval, LoadSummary>(LOAD, &lines)?;
    Ok(s.responses == 1 && s.non_2xx == 0 && s.errors == 0)
}

/// What the scale rows run on each host (what a dry run shows), per connection count: the
/// server started on the rx host (after the served root is made there), the idle
/// connections held from every load host (each its share), one new request from the first,
/// then the load from every load host.
pub fn steps(
    stage: &Stage<'_>,
    servers: &[FileServer],
    counts: &[usize],
) -> Result<Vec<crate::testbed::PeerStep>, LabError> {
    let rx = stage.testbed.rx();
    let load = stage.testbed.load_hosts();
    let mut out = Vec::new();
    for &n in counts {
        let shares = super::servers::connection_shares(n, load.len())?;
        let row = format!("scale: {n} connections, for each server");
        let mut step = |host: &Host, command: String| {
            out.push(crate::testbed::PeerStep { row: row.clone(), host: host.name(), command })
        };
        step(&rx, super::served::shown(&rx));
        for &server in servers {
            let (program, args) = files::launch(stage, server, "SERVED", n)?;
            step(&rx, files::shown(program, args));
        }
        for (l, &share) in load.iter().zip(&shares) {
            step(&l.host, files::shown(l.host.corelane()?, hold_args(stage, share)));
        }
        step(
            &load[0].host,
            format!(
                "{} load http {}{PATH} --json --connections 1 --requests 1",
                load[0].host.corelane()?,
                stage.url()
            ),
        );
        let duration = stage.duration + Duration::from_millis(n as u64 / 10);
        let run = super::servers::LoadRun { path: PATH, connections: n, duration, close: false };
        for (l, &share) in load.iter().zip(&shares) {
            step(
                &l.host,
                files::shown(l.host.corelane()?, super::servers::run_args(stage, &run, share)),
            );
        }
    }
    Ok(out)
}

/// One trial of a scale row: a fresh server; `connections` idle keep-alive connections held
/// from the load hosts and the RSS they cost it (read on the rx host); a new request from a
/// load host; then the load with `connections` connections split over the load hosts.
pub fn measure(stage: &Stage<'_>, case: &ScaleCase, root: &str) -> Result<ScaleTrial, LabError> {
    let rx = stage.testbed.rx();
    let mut server = files::start(stage, case.server, root, case.connections)?;
    let before = servers::reading(&rx, "RSS", server.pid(), rx.tree_rss(server.pid()))?;
    let held = hold_idle(stage, case.connections)?;
    // The servers' sweeps and nginx's lazy allocations settle.
    std::thread::sleep(Duration::from_millis(500));
    let after = servers::reading(&rx, "RSS", server.pid(), rx.tree_rss(server.pid()))?;
    let answered = answered_beside(stage)?;
    drop(held);
    // The server takes in the resets of the idle connections before the load.
    std::thread::sleep(Duration::from_millis(500));
    // Opening many connections takes time of its own: the load runs longer with more.
    let duration = stage.duration + Duration::from_millis(case.connections as u64 / 10);
    let cpu_before =
        servers::reading(&rx, "CPU time", server.pid(), rx.tree_cpu_time(server.pid()))?;
    let load = files::load(stage, PATH, case.connections, duration);
    let cpu_after =
        servers::reading(&rx, "CPU time", server.pid(), rx.tree_cpu_time(server.pid()))?;
    if let Some(status) = server.wait_timeout(Duration::ZERO) {
        return Err(server.failed(status));
    }
    let per_idle = after.saturating_sub(before) as f64 / case.connections as f64;
    // The load generator's one refusal a server can cause: no answer to any connection.
    let load = match load {
        Err(e) if !e.to_string().contains("no response from") => return Err(e),
        other => other,
    };
    let Ok((load, hosts)) = load else {
        let failed = ScaleTrial {
            bytes_per_idle_connection: per_idle,
            answered,
            rps: 0.0,
            cpu_us_per_request: 0.0,
            errors: case.connections as u64,
            load_failed: true,
            hosts: Vec::new(),
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
        hosts,
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

/// What set a scale row's connection count (its `decided_by` in rows and tables).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecidedBy {
    /// One of the fixed counts (`chosen`).
    Chosen,
    /// The largest count the machine allows, and the limit that set it (hard
    /// RLIMIT_NOFILE, local ports, memory).
    Limit(String),
}

impl DecidedBy {
    pub fn id(&self) -> &str {
        match self {
            Self::Chosen => "chosen",
            Self::Limit(why) => why,
        }
    }
}

impl std::fmt::Display for DecidedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

impl Serialize for DecidedBy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.id())
    }
}

/// `decided_by`: the limit that set the largest count (for the other counts: `chosen`).
pub fn summarize(case: &ScaleCase, decided_by: &str, trials: &[ScaleTrial]) -> ScaleRow {
    ScaleRow {
        server: case.server.server(),
        backend: case.server.backend(),
        connections: case.connections,
        decided_by: if case.largest {
            DecidedBy::Limit(decided_by.into())
        } else {
            DecidedBy::Chosen
        },
        bytes_per_idle_connection: median_of(trials.iter().map(|t| t.bytes_per_idle_connection)),
        answered_after_idle: trials.iter().all(|t| t.answered),
        rps: Trials::of(trials.iter().map(|t| t.rps)),
        cpu_us_per_request: median_of(trials.iter().map(|t| t.cpu_us_per_request)),
        errors: trials.iter().map(|t| t.errors).sum(),
        failed_loads: trials.iter().filter(|t| t.load_failed).count(),
        hosts: crate::stage::load::http_medians(
            &trials.iter().map(|t| t.hosts.as_slice()).collect::<Vec<_>>(),
        ),
    }
}

/// Per connection count: each corelane backend's bytes per idle connection and requests/s
/// against nginx's.
pub fn findings(rows: &[ScaleRow]) -> Vec<String> {
    let mut counts: Vec<(usize, &DecidedBy)> =
        rows.iter().map(|r| (r.connections, &r.decided_by)).collect();
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
        let why = match decided_by {
            DecidedBy::Chosen => String::new(),
            DecidedBy::Limit(limit) => format!(" (the largest: {limit})"),
        };
        let unanswered: Vec<&str> =
            at.iter().filter(|r| !r.answered_after_idle).map(|r| r.backend.id()).collect();
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
            Cell::new(row.server),
            Cell::new(row.backend),
            report::right(format!("{:.0}", row.bytes_per_idle_connection)),
            report::right(format!("{:.0}", row.rps.median)),
            report::right(format!("{:.2}", row.cpu_us_per_request)),
            report::right(row.errors.to_string()),
            Cell::new(&row.decided_by),
        ]);
    }
    let mut out = format!("\nscale (idle keep-alive connections: RSS growth of all server processes; then the load with as many connections):\n{table}\n");
    for row in rows.iter().filter(|r| !r.hosts.is_empty()) {
        for h in &row.hosts {
            let line = crate::stage::load::http_host_line(h);
            out.push_str(&format!(
                "  {} {} {}: {line}\n",
                row.connections, row.server, row.backend
            ));
        }
    }
    out
}

/// The rows in `lab tcp`'s CSV columns: workload `scale`, config the backend.
pub fn csv_records(rows: &[ScaleRow]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|row| {
            let mut record = vec![String::new(); 16];
            record[0] = "scale".into();
            record[1] = row.server.to_string();
            record[2] = row.backend.to_string();
            record[3] = format!("{:.1}", row.rps.median);
            record[6] = format!("{:.3}", row.cpu_us_per_request);
            record[9] = row.errors.to_string();
            record[11] = row.rps.joined(1);
            record[12] = row.connections.to_string();
            record[13] = format!("{:.0}", row.bytes_per_idle_connection);
            record[15] = row.decided_by.to_string();
            record
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, nofile: u64, ports: u64, mem_mib: u64) -> HostLimits {
        HostLimits {
            host: name.into(),
            hard_nofile: nofile,
            ports: Some(ports),
            mem_kib: Some(mem_mib * 1024),
        }
    }

    /// The client side is every load host's part together (the split is even, so the
    /// fewest any host can open, times the hosts); the server side is the rx host's own; the
    /// smaller wins and says which side and which host decided it.
    #[test]
    fn the_largest_count_is_the_smaller_side_and_names_what_decided_it() {
        let server = host("rx", 1_048_576, 28_232, 64 * 1024);
        let gen1 = host("gen1", 1_048_576, 28_232, 64 * 1024);
        let gen2 = host("gen2", 1_048_576, 20_000, 64 * 1024);
        // One load host: its local ports decide.
        let (n, why) = largest_of(&server, std::slice::from_ref(&gen1), false);
        assert_eq!(n, 27_232);
        assert!(why.contains("client side") && why.contains("28232 local ports on gen1"), "{why}");
        // Two: twice the fewer ports of the two, gen2's.
        let (n, why) = largest_of(&server, &[gen1.clone(), gen2.clone()], false);
        assert_eq!(n, 2 * 19_000);
        assert!(why.contains("2 load hosts × 19000") && why.contains("on gen2"), "{why}");
        // A server with few descriptors decides over any number of load hosts.
        let small = host("rx", 10_512, 28_232, 64 * 1024);
        let (n, why) = largest_of(&small, &[gen1.clone(), gen2], false);
        assert_eq!(n, 10_000);
        assert!(why.contains("server side") && why.contains("RLIMIT_NOFILE 10512 on rx"), "{why}");
        // One machine for both sides: its memory holds both ends of every connection.
        let tight = host("this machine", 1_048_576, 60_000, 1024);
        let (n, why) = largest_of(&tight, std::slice::from_ref(&tight), true);
        assert_eq!(n, 1024 * 1024 / 64);
        assert!(why.contains("memory on this machine"), "{why}");
        // Unreadable ports and memory are no limit; a huge descriptor limit counts as 2^20,
        // so the server side caps the count and nothing after it overflows.
        let open =
            HostLimits { host: "x".into(), hard_nofile: u64::MAX, ports: None, mem_kib: None };
        let many = vec![open.clone(); 40];
        let (n, why) = largest_of(&open, &many, false);
        assert_eq!(n as u64, NOFILE_MOST - 512);
        assert!(why.contains("the server side"), "{why}");
    }

    /// A host's limits are read as the programs holding connections there see them: the
    /// hard RLIMIT_NOFILE of a shell there, its port range and available memory.
    #[test]
    fn this_machines_limits_are_read_as_its_programs_see_them() {
        let limits = HostLimits::read(&Host::Local).unwrap();
        let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum;
        assert_eq!(limits.hard_nofile, hard.unwrap_or(NOFILE_MOST).min(NOFILE_MOST));
        assert!(limits.ports.is_some_and(|p| p > 0) && limits.mem_kib.is_some_and(|m| m > 0));
        assert_eq!(limits.host, "this machine");
    }

    /// The holder's ready line is read exactly: another line is an error, never a count.
    #[test]
    fn a_holders_line_is_its_ready_line_or_an_error() {
        let ok: HoldReady =
            serde_json::from_str(r#"{"type":"ready","held":5,"answered":4}"#).unwrap();
        assert_eq!((ok.held, ok.answered), (5, 4));
        for bad in [
            r#"{"type":"interval","held":5,"answered":5}"#,
            r#"{"type":"ready","held":-1,"answered":0}"#,
            r#"{"type":"ready","held":5}"#,
            r#"{"type":"ready","held":5,"answered":5,"more":1}"#,
            "ready",
        ] {
            assert!(serde_json::from_str::<HoldReady>(bad).is_err(), "{bad}");
        }
    }
}
