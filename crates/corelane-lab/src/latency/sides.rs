//! The servers and clients `lab latency` crosses — corelane echo (with its variants) and
//! `sockperf sr`, corelane ping and `sockperf pp`/`ul`; corelane serve and nginx under
//! `corelane load http --rate` — and one measured point: a client at one offered load.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use corelane::tcp::load::{LoadInterval, LoadSummary};
use corelane::udp::{PingInterval, PingSummary};
use serde::Serialize;

use crate::host::Host;
use crate::output;
use crate::process::ChildProcess;
use crate::stage::servers::{self, ServerKind, Stage, CONFIGS};
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

/// One offered load and what the client measured there. Round trips in µs.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Messages or requests per second offered; `None`: ping-pong (one in flight).
    pub rate: Option<u64>,
    pub achieved: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// From the actual send (corelane's clients under load; sockperf's only figure).
    pub p99_uncorrected_us: Option<f64>,
    pub lost: u64,
    pub sent: u64,
}

/// Where the sides run.
#[derive(Debug, Clone, Copy)]
pub struct Where<'a> {
    pub rx: &'a Host,
    pub tx: &'a Host,
    pub server_cpu: usize,
    pub client_cpu: usize,
    pub target: SocketAddr,
    pub duration: Duration,
    pub warmup: Duration,
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// Starts `server` for `client` and waits until it answers on its port (corelane echo
/// speaks sockperf's header to sockperf's client).
pub fn start_udp(
    at: &Where<'_>,
    server: UdpServer,
    client: UdpClient,
) -> Result<ChildProcess, LabError> {
    let cpu = at.server_cpu.to_string();
    match server {
        UdpServer::Echo { args, .. } => {
            let mut argv = strings(&["udp", "echo", &at.target.to_string(), "--json"]);
            argv.extend(strings(&["--pin", &cpu, "--rcvbuf", "4M"]));
            argv.extend(strings(args));
            if client == UdpClient::Sockperf {
                argv.extend(strings(&["--wire", "sockperf"]));
            }
            let mut child = at.rx.spawn("corelane echo", &at.rx.corelane()?, &argv)?;
            crate::stage::wait_ready(&mut child, "corelane echo")?;
            Ok(child)
        }
        UdpServer::Sockperf => {
            let (ip, port) = (at.target.ip().to_string(), at.target.port().to_string());
            let args = strings(&["sr", "-i", &ip, "-p", &port]);
            let child = at.rx.spawn_pinned("sockperf sr", at.server_cpu, "sockperf", &args)?;
            wait_udp_bound(at.rx, at.target.port(), child)
        }
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

/// One point of `client` against `server` at `at.target`: ping-pong when `rate` is `None`.
pub fn udp_point(
    at: &Where<'_>,
    server: UdpServer,
    client: UdpClient,
    rate: Option<u64>,
) -> Result<Point, LabError> {
    let budget = at.duration + at.warmup + Duration::from_secs(20);
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
            const PING: &str = "corelane ping";
            let lines = at.tx.spawn(PING, &at.tx.corelane()?, &argv)?.finish(budget)?;
            let s: PingSummary = output::summary::<PingInterval, PingSummary>(PING, &lines)?;
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
            })
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
            let child = at.tx.spawn_pinned("sockperf client", at.client_cpu, "sockperf", &args)?;
            let lines = child.finish(budget)?;
            parse_sockperf(&lines, rate)
        }
    }
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
    Ok(Point {
        rate,
        achieved: runtime.filter(|&t| t > 0.0).map_or(0.0, |t| sent as f64 / t),
        p50_us: p("50.000")?,
        p99_us: p("99.000")?,
        p999_us: p("99.900")?,
        max_us: after("<MAX> observation").ok_or_else(|| missing("max"))?,
        p99_uncorrected_us: None,
        lost: sent.saturating_sub(received.unwrap_or(sent)),
        sent,
    })
}

/// Starts an HTTP server (corelane's default configuration or nginx) on the server CPU.
pub fn start_http(stage: &Stage<'_>, server: HttpServer) -> Result<ChildProcess, LabError> {
    let kind = match server {
        HttpServer::Corelane => {
            let default = CONFIGS.iter().find(|c| c.id == "recycling").copied();
            ServerKind::Corelane(default.unwrap_or(CONFIGS[0]))
        }
        HttpServer::Nginx => ServerKind::Nginx,
    };
    let child = servers::start_server(stage, kind)?;
    servers::wait_listening(stage, child)
}

/// `corelane load http --rate` at `rate` against the stage's server.
pub fn http_point(stage: &Stage<'_>, rate: u64, warmup: Duration) -> Result<Point, LabError> {
    let mut argv = strings(&["load", "http", &stage.url(), "--json", "--rate", &rate.to_string()]);
    argv.extend(strings(&["--connections", &stage.connections.to_string()]));
    argv.extend(strings(&["--pin", &stage.client_cpu.to_string()]));
    let tx = stage.testbed.tx();
    // A short warm-up run first: connections open and the server's caches warm.
    let warm = |d: Duration| {
        let mut a = argv.clone();
        a.extend(strings(&["--duration", &format!("{}ms", d.as_millis())]));
        a
    };
    const LOAD: &str = "corelane load";
    if !warmup.is_zero() {
        tx.spawn(LOAD, &tx.corelane()?, &warm(warmup))?.finish(warmup + Duration::from_secs(20))?;
    }
    let child = tx.spawn(LOAD, &tx.corelane()?, &warm(stage.duration))?;
    let lines = child.finish(stage.duration + Duration::from_secs(20))?;
    let s: LoadSummary = output::summary::<LoadInterval, LoadSummary>(LOAD, &lines)?;
    Ok(Point {
        rate: Some(rate),
        achieved: s.requests_per_sec,
        p50_us: s.latency.p50_us,
        p99_us: s.latency.p99_us,
        p999_us: s.latency.p999_us,
        max_us: s.latency.max_us,
        p99_uncorrected_us: s.latency_uncorrected.map(|l| l.p99_us),
        lost: s.errors,
        sent: s.responses + s.errors,
    })
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
    }
}
