//! The servers and clients `lab latency` crosses — corelane echo (with its variants) and
//! `sockperf sr`, corelane ping and `sockperf pp`/`ul`; corelane serve and nginx under
//! `corelane load http --rate` — and one measured point: a client at one offered load.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use corelane::tcp::load::{LoadInterval, LoadSummary};
use corelane::udp::{PingInterval, PingSummary};

use super::hosts;
use super::point::Point;
use crate::host::Host;
use crate::output;
use crate::process::{strings, ChildProcess};
use crate::stage::load;
use crate::stage::servers::{self, Launch, ServerKind, Stage};
use crate::testbed::LoadHost;
use crate::LabError;

/// A UDP echo server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UdpServer {
    /// corelane echo with these extra arguments (`id` names the row).
    Echo {
        id: &'static str,
        args: &'static [&'static str],
    },
    Sockperf,
}

/// corelane echo's rows: the default, receive coalescing on, busy polling, io_uring.
pub const ECHO_ROWS: [UdpServer; 4] = [
    UdpServer::Echo { id: "echo", args: &[] },
    UdpServer::Echo { id: "echo+coalesce-50us", args: &["--coalesce", "50us"] },
    UdpServer::Echo { id: "echo+busy-poll-50us", args: &["--busy-poll", "50"] },
    UdpServer::Echo { id: "echo+uring", args: &["--backend", "uring"] },
];

impl UdpServer {
    pub fn id(&self) -> &'static str {
        match self {
            Self::Echo { id, .. } => id,
            Self::Sockperf => "sockperf-sr",
        }
    }
}

/// A UDP latency client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UdpClient {
    Ping,
    Sockperf,
}

impl UdpClient {
    pub fn id(&self) -> &'static str {
        match self {
            Self::Ping => "corelane-ping",
            Self::Sockperf => "sockperf",
        }
    }
}

/// An HTTP server under `load http --rate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpServer {
    Corelane,
    Nginx,
}

impl HttpServer {
    pub fn id(&self) -> &'static str {
        match self {
            Self::Corelane => "corelane-serve",
            Self::Nginx => "nginx",
        }
    }
}

/// Where the sides run: the servers on `rx`, the ping-pong client on the first load host,
/// the under-load clients on every load host, each its share of the offered load.
#[derive(Debug, Clone, Copy)]
pub struct Where<'a> {
    pub rx: &'a Host,
    pub load: &'a [LoadHost],
    pub server_cpu: usize,
    pub client_cpu: usize,
    pub target: SocketAddr,
    pub duration: Duration,
    pub warmup: Duration,
}

/// `server` for `client` as the rx host runs it (corelane echo speaks sockperf's header to
/// sockperf's client).
pub fn udp_server_launch(
    at: &Where<'_>,
    server: UdpServer,
    client: UdpClient,
) -> Result<Launch, LabError> {
    match server {
        UdpServer::Echo { args, .. } => {
            let mut argv = strings(&["udp", "echo", &at.target.to_string(), "--json"]);
            argv.extend(strings(&["--pin", &at.server_cpu.to_string(), "--rcvbuf", "4M"]));
            argv.extend(strings(args));
            if client == UdpClient::Sockperf {
                argv.extend(strings(&["--wire", "sockperf"]));
            }
            Ok(Launch { name: "corelane echo", program: at.rx.corelane()?, args: argv, pin: None })
        }
        UdpServer::Sockperf => {
            let (ip, port) = (at.target.ip().to_string(), at.target.port().to_string());
            let args = strings(&["sr", "-i", &ip, "-p", &port]);
            let program = "sockperf".into();
            Ok(Launch { name: "sockperf sr", program, args, pin: Some(at.server_cpu) })
        }
    }
}

/// Starts `server` for `client` on the rx host and waits until it answers on its port.
pub fn start_udp(
    at: &Where<'_>,
    server: UdpServer,
    client: UdpClient,
) -> Result<ChildProcess, LabError> {
    let launch = udp_server_launch(at, server, client)?;
    let mut child = launch.spawn(at.rx)?;
    match server {
        UdpServer::Echo { .. } => {
            crate::stage::wait_ready(&mut child, launch.name)?;
            Ok(child)
        }
        UdpServer::Sockperf => wait_udp_bound(at.rx, at.target.port(), child),
    }
}

/// Waits until a UDP socket is bound to `port` on `host` (`ss` there).
fn wait_udp_bound(
    host: &Host,
    port: u16,
    mut child: ChildProcess,
) -> Result<ChildProcess, LabError> {
    let waited = Duration::from_secs(10);
    let end = Instant::now() + waited;
    while Instant::now() < end {
        if host.udp_bound(port).unwrap_or(false) {
            return Ok(child);
        }
        if let Some(status) = child.wait_timeout(Duration::ZERO) {
            return Err(child.failed(status));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(child.timed_out("did not bind its port", waited))
}

/// `client` against `server` as one load host runs it: ping-pong when `rate` is `None`,
/// else open-loop at `rate` (that host's share).
pub fn udp_client_launch(
    at: &Where<'_>,
    host: &Host,
    server: UdpServer,
    client: UdpClient,
    rate: Option<u64>,
) -> Result<Launch, LabError> {
    match client {
        UdpClient::Ping => {
            let mut argv = strings(&["udp", "ping", &at.target.to_string(), "--json"]);
            argv.extend(strings(&["--pin", &at.client_cpu.to_string(), "--size", "64"]));
            argv.extend(strings(&["-d", &format!("{}ms", at.duration.as_millis())]));
            argv.extend(strings(&["--warmup", &format!("{}ms", at.warmup.as_millis())]));
            if let Some(r) = rate {
                argv.extend(strings(&["--mode", "under-load", "--rate", &r.to_string()]));
            }
            if server == UdpServer::Sockperf {
                argv.extend(strings(&["--wire", "sockperf"]));
            }
            Ok(Launch { name: PING, program: host.corelane()?, args: argv, pin: None })
        }
        UdpClient::Sockperf => {
            let (ip, port) = (at.target.ip().to_string(), at.target.port().to_string());
            let secs = at.duration.as_secs().max(1).to_string();
            let mut args = strings(&["-i", &ip, "-p", &port, "-m", "64", "-t", &secs]);
            args.extend(strings(&["--full-rtt"]));
            match rate {
                None => args.insert(0, "pp".into()),
                Some(r) => {
                    args.insert(0, "ul".into());
                    args.extend(strings(&["--mps", &r.to_string(), "--reply-every", "1"]));
                }
            }
            let program = "sockperf".into();
            Ok(Launch { name: SOCKPERF, program, args, pin: Some(at.client_cpu) })
        }
    }
}

const PING: &str = "corelane ping";
const SOCKPERF: &str = "sockperf client";

/// One point of `client` against `server` at `at.target`: ping-pong from the first load
/// host when `rate` is `None`, else `rate` split over the load hosts, started together.
pub fn udp_point(
    at: &Where<'_>,
    server: UdpServer,
    client: UdpClient,
    rate: Option<u64>,
) -> Result<Point, LabError> {
    let budget = at.duration + at.warmup + Duration::from_secs(20);
    let shares = hosts::shares(rate, at.load)?;
    let name = match client {
        UdpClient::Ping => PING,
        UdpClient::Sockperf => SOCKPERF,
    };
    let children = load::start_all(&at.load[..shares.len()], name, |i| {
        Ok(udp_client_launch(at, &at.load[i].host, server, client, shares[i])?.argv())
    })?;
    let mut points = Vec::new();
    for (child, share) in children.into_iter().zip(&shares) {
        let lines = child.finish(budget)?;
        points.push(match client {
            UdpClient::Ping => ping_point(&lines, *share)?,
            UdpClient::Sockperf => parse_sockperf(&lines, *share)?,
        });
    }
    Ok(hosts::combine(rate, at.load, points))
}

/// The figures of one `corelane udp ping --json` run.
fn ping_point(lines: &[String], rate: Option<u64>) -> Result<Point, LabError> {
    let s: PingSummary = output::summary::<PingInterval, PingSummary>(PING, lines)?;
    Ok(Point {
        rate,
        achieved: s.achieved_rate,
        p50_us: s.latency.p50,
        p99_us: s.latency.p99,
        p999_us: s.latency.p99_9,
        max_us: s.latency.max,
        p99_uncorrected_us: rate.map(|_| s.uncorrected.p99),
        lost: s.lost,
        sent: s.sent,
        hosts: Vec::new(),
    })
}

/// The figures of a `sockperf pp|ul --full-rtt` run (round trips, µs).
pub fn parse_sockperf(lines: &[String], rate: Option<u64>) -> Result<Point, LabError> {
    let after = |key: &str| -> Option<f64> {
        lines.iter().rev().find_map(|l| {
            let at = l.find(key)?;
            let rest = l[at + key.len()..].trim_start_matches([' ', '=']);
            rest.split_whitespace().next()?.trim_end_matches(';').parse().ok()
        })
    };
    let missing = |what: &str| LabError::ChildOutput {
        child: "sockperf client".into(),
        problem: format!(
            "printed no {what}: {:?}",
            lines.iter().rev().take(12).collect::<Vec<_>>()
        ),
    };
    let p = |q: &str| after(&format!("percentile {q}")).ok_or_else(|| missing(q));
    let runtime = lines
        .iter()
        .find(|l| l.contains("[Valid Duration]"))
        .and_then(|l| l.split("RunTime=").nth(1)?.split_whitespace().next()?.parse::<f64>().ok());
    let sent = lines.iter().find(|l| l.contains("[Valid Duration]")).and_then(|l| {
        l.split("SentMessages=").nth(1)?.split(';').next()?.trim().parse::<u64>().ok()
    });
    let received = lines.iter().find(|l| l.contains("[Valid Duration]")).and_then(|l| {
        l.split("ReceivedMessages=").nth(1)?.split_whitespace().next()?.parse::<u64>().ok()
    });
    let sent = sent.ok_or_else(|| missing("message counts"))?;
    let received = received.ok_or_else(|| missing("received message count"))?;
    let runtime = runtime.filter(|&t| t > 0.0).ok_or_else(|| missing("run time"))?;
    Ok(Point {
        rate,
        achieved: sent as f64 / runtime,
        p50_us: p("50.000")?,
        p99_us: p("99.000")?,
        p999_us: p("99.900")?,
        max_us: after("<MAX> observation").ok_or_else(|| missing("max"))?,
        p99_uncorrected_us: None,
        lost: sent.saturating_sub(received),
        sent,
        hosts: Vec::new(),
    })
}

/// Starts an HTTP server (corelane's default configuration or nginx) on the server CPU.
pub fn start_http(stage: &Stage<'_>, server: HttpServer) -> Result<ChildProcess, LabError> {
    let child = servers::start_server(stage, http_kind(server))?;
    servers::wait_listening(stage, child)
}

/// The server kind `server` runs as.
pub fn http_kind(server: HttpServer) -> ServerKind {
    match server {
        HttpServer::Corelane => ServerKind::Corelane(servers::default_config()),
        HttpServer::Nginx => ServerKind::Nginx,
    }
}

/// `corelane load http --rate` as one load host runs it: its share of the rate and of the
/// connections, for `duration`.
pub fn http_load_args(
    stage: &Stage<'_>,
    rate: u64,
    connections: u64,
    duration: Duration,
) -> Vec<String> {
    let mut argv = strings(&["load", "http", &stage.url(), "--json", "--rate", &rate.to_string()]);
    argv.extend(strings(&["--connections", &connections.to_string()]));
    argv.extend(strings(&["--pin", &stage.client_cpu.to_string()]));
    argv.extend(strings(&["--duration", &format!("{}ms", duration.as_millis())]));
    argv
}

/// `corelane load http --rate` at `rate` against the stage's server, the rate and the
/// connections split over the load hosts and started together; the first host's latency
/// is the point's.
pub fn http_point(stage: &Stage<'_>, rate: u64, warmup: Duration) -> Result<Point, LabError> {
    const LOAD: &str = "corelane load";
    let load = stage.testbed.load_hosts();
    let rates = hosts::shares(Some(rate), &load)?;
    let connections = crate::stage::load::split(stage.connections as u64, load.len());
    if connections.contains(&0) {
        return Err(LabError::Options(format!(
            "{} connections cannot be split over {} load hosts: give --connections {} or more",
            stage.connections,
            load.len(),
            load.len()
        )));
    }
    let run = |d: Duration| {
        load::start_all(&load, LOAD, |i| {
            let share = rates[i].unwrap_or(rate);
            Ok((load[i].host.corelane()?, http_load_args(stage, share, connections[i], d)))
        })
    };
    // A short warm-up run first: connections open and the server's caches warm.
    if !warmup.is_zero() {
        for child in run(warmup)? {
            child.finish(warmup + Duration::from_secs(20))?;
        }
    }
    let mut points = Vec::new();
    for (child, share) in run(stage.duration)?.into_iter().zip(&rates) {
        let lines = child.finish(stage.duration + Duration::from_secs(20))?;
        let s: LoadSummary = output::summary::<LoadInterval, LoadSummary>(LOAD, &lines)?;
        points.push(Point {
            rate: *share,
            achieved: s.requests_per_sec,
            p50_us: s.latency.p50_us,
            p99_us: s.latency.p99_us,
            p999_us: s.latency.p999_us,
            max_us: s.latency.max_us,
            p99_uncorrected_us: s.latency_uncorrected.map(|l| l.p99_us),
            lost: s.errors,
            sent: s.responses + s.errors,
            hosts: Vec::new(),
        });
    }
    Ok(hosts::combine(Some(rate), &load, points))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockperf_output_is_read_as_round_trips() {
        let text =
            "sockperf: [Valid Duration] RunTime=0.550 sec; SentMessages=7193; ReceivedMessages=7190
sockperf: ---> <MAX> observation = 2820.487
sockperf: ---> percentile 99.999 = 2820.487
sockperf: ---> percentile 99.900 =  577.373
sockperf: ---> percentile 99.000 =  139.894
sockperf: ---> percentile 50.000 =   73.863";
        let lines: Vec<String> = text.lines().map(String::from).collect();
        let p = parse_sockperf(&lines, Some(1000)).unwrap();
        assert_eq!((p.p50_us, p.p99_us, p.p999_us, p.max_us), (73.863, 139.894, 577.373, 2820.487));
        assert_eq!((p.sent, p.lost), (7193, 3));
        assert!((p.achieved - 7193.0 / 0.55).abs() < 1.0);
        let err = parse_sockperf(&lines[..1], None).unwrap_err();
        assert!(err.to_string().contains("printed no 50.000"), "{err}");
        // A count or the run time missing is an error, never 0 lost or 0/s (the output may
        // come from another host's sockperf).
        for (cut, what) in
            [("; ReceivedMessages=7190", "received message count"), ("RunTime=0.550", "run time")]
        {
            let mut partial = lines.clone();
            partial[0] = partial[0].replace(cut, "");
            let err = parse_sockperf(&partial, None).unwrap_err().to_string();
            assert!(err.contains(what), "{err}");
        }
    }
}
