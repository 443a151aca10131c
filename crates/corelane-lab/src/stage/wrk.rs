//! The load generator check, `wrk` beside `corelane load` against one corelane server: on every load host, each with its part of the connections
//! and one thread (as `corelane load` runs one pinned thread on each), started together;
//! what each printed read back (requests/s, its latency distribution, its errors) and added
//! up into the row's totals, latency the highest host's.

use std::time::Duration;

use super::load::{self, HostClock, HttpHostFigures};
use super::servers::{
    run_corelane_load, start_server, wait_listening, Launch, Peer, ServerKind, Stage,
};
use crate::host::Host;
use crate::LabError;

/// One load generator's figures in one trial of the load generator check: the totals over
/// every load host (requests/s and errors added, latency the highest host's) and each
/// host's part (empty: one side without a clock of its own).
#[derive(Debug, Clone)]
pub struct LoadgenTrial {
    pub rps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub errors: u64,
    pub hosts: Vec<HttpHostFigures>,
}

/// The load generator check: `wrk` and `corelane load` against the same corelane server,
/// each from every load host with the connections split, in turns (`wrk_first` alternates
/// between trials, so neither always meets a fresh server); corelane load's figures, then
/// wrk's.
pub fn measure_load_generators(
    stage: &Stage<'_>,
    wrk_first: bool,
) -> Result<(LoadgenTrial, LoadgenTrial), LabError> {
    let server = start_server(stage, ServerKind::Corelane(super::servers::default_config()))?;
    let server = wait_listening(stage, server)?;
    let ours = |stage: &Stage<'_>| {
        run_corelane_load(stage, false).map(|(l, hosts)| LoadgenTrial {
            rps: l.requests_per_sec,
            p50_us: l.latency.p50_us,
            p99_us: l.latency.p99_us,
            errors: l.errors + l.non_2xx,
            hosts,
        })
    };
    let (ours, wrk) = if wrk_first {
        let wrk = run(stage)?;
        (ours(stage)?, wrk)
    } else {
        let ours = ours(stage)?;
        (ours, run(stage)?)
    };
    drop(server);
    Ok((ours, wrk))
}

/// wrk's threads on each load host.
pub const THREADS_PER_HOST: u64 = 1;

/// `wrk` as `host` runs it against the server with `connections` connections, pinned to
/// the client CPU, printing its latency distribution.
pub(crate) fn launch(stage: &Stage<'_>, host: &Host, connections: u64) -> Result<Launch, LabError> {
    let args = vec![
        format!("-t{THREADS_PER_HOST}"),
        format!("-c{connections}"),
        format!("-d{}s", stage.duration.as_secs().max(1)),
        "--latency".to_string(),
        stage.url(),
    ];
    let program = host
        .find_program(Peer::Wrk.program())
        .ok_or_else(|| LabError::Options(Peer::Wrk.not_installed(host)))?;
    Ok(Launch { name: "wrk", program, args, pin: Some(stage.client_cpu) })
}

/// Each of `hosts` load hosts' part of `total` connections (at least one each: wrk needs a
/// connection per thread).
pub(crate) fn connections(total: usize, hosts: usize) -> Result<Vec<u64>, LabError> {
    let parts = load::split(total as u64, hosts);
    if parts.iter().any(|&c| c < THREADS_PER_HOST) {
        return Err(LabError::Options(format!(
            "{total} connections cannot be split over {hosts} load hosts for wrk: give at least one connection per host"
        )));
    }
    Ok(parts)
}

/// wrk from every load host against the server, started together: the totals (requests/s
/// and errors added, latency the highest host's) and each host's part when the hosts have
/// clocks of their own.
pub fn run(stage: &Stage<'_>) -> Result<LoadgenTrial, LabError> {
    let load = stage.testbed.load_hosts();
    let parts = connections(stage.connections, load.len())?;
    let launches: Vec<Launch> = load
        .iter()
        .zip(&parts)
        .map(|(l, &n)| launch(stage, &l.host, n))
        .collect::<Result<_, _>>()?;
    let children = load::start_all(&load, "wrk", |i| Ok(launches[i].argv()))?;
    let mut each = Vec::new();
    for (child, l) in children.into_iter().zip(&load) {
        let lines = child.finish(stage.duration + Duration::from_secs(20))?;
        each.push(parse(&lines).ok_or_else(|| LabError::ChildOutput {
            child: match &l.host {
                Host::Remote(_) => format!("wrk on {}", l.host.name()),
                _ => "wrk".into(),
            },
            problem: format!(
                "printed no Requests/sec line: {:?}",
                lines.iter().take(20).collect::<Vec<_>>()
            ),
        })?);
    }
    let hosts = match load.iter().all(|l| l.clock.is_none()) {
        true => Vec::new(),
        false => load
            .iter()
            .zip(&each)
            .zip(&parts)
            .map(|((l, w), &connections)| HttpHostFigures {
                host: l.host.name(),
                connections,
                rps: w.rps,
                p50_us: w.p50_us,
                p99_us: w.p99_us,
                errors: w.errors,
                clock: HostClock::of(l.clock),
            })
            .collect(),
    };
    Ok(combined(&each, hosts))
}

/// What one wrk printed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WrkFigures {
    pub rps: f64,
    /// From `--latency`'s distribution, in microseconds (0 when it printed none).
    pub p50_us: f64,
    pub p99_us: f64,
    /// Socket errors (connect, read, write, timeout) and non-2xx/3xx answers.
    pub errors: u64,
}

/// Several hosts' wrk figures as one trial: requests/s and errors added, each latency
/// percentile the highest host's (an upper bound: the hosts' histograms are not merged).
pub fn combined(each: &[WrkFigures], hosts: Vec<HttpHostFigures>) -> LoadgenTrial {
    LoadgenTrial {
        rps: each.iter().map(|w| w.rps).sum(),
        p50_us: each.iter().map(|w| w.p50_us).fold(0.0, f64::max),
        p99_us: each.iter().map(|w| w.p99_us).fold(0.0, f64::max),
        errors: each.iter().map(|w| w.errors).fold(0, u64::saturating_add),
        hosts,
    }
}

/// Reads wrk's report: its `Requests/sec:` line (required), the 50% and 99% lines of its
/// latency distribution, its `Socket errors:` and `Non-2xx or 3xx responses:` lines. A
/// rate that is not a finite number ≥ 0 is no answer (wrk runs on a host the lab does not
/// control, and `f64::from_str` takes `NaN`, `inf` and `-1`).
pub fn parse(lines: &[String]) -> Option<WrkFigures> {
    let mut figures = WrkFigures { rps: f64::NAN, p50_us: 0.0, p99_us: 0.0, errors: 0 };
    for line in lines.iter().map(|l| l.trim()) {
        if let Some(v) = line.strip_prefix("Requests/sec:") {
            figures.rps = plain_number(v.trim())?;
        } else if let Some(v) = line.strip_prefix("50%") {
            figures.p50_us = time_us(v.trim())?;
        } else if let Some(v) = line.strip_prefix("99%") {
            figures.p99_us = time_us(v.trim())?;
        } else if let Some(v) = line.strip_prefix("Socket errors:") {
            // "connect 0, read 0, write 0, timeout 0"
            for part in v.split(',') {
                let count = part.split_whitespace().nth(1)?.parse::<u64>().ok()?;
                figures.errors = figures.errors.saturating_add(count);
            }
        } else if let Some(v) = line.strip_prefix("Non-2xx or 3xx responses:") {
            figures.errors = figures.errors.saturating_add(v.trim().parse::<u64>().ok()?);
        }
    }
    figures.rps.is_finite().then_some(figures)
}

/// A decimal number ≥ 0 written with digits and at most one point (no sign, exponent,
/// `NaN` or `inf`).
fn plain_number(text: &str) -> Option<f64> {
    let plain = !text.is_empty()
        && text.chars().all(|c| c.is_ascii_digit() || c == '.')
        && text.chars().filter(|&c| c == '.').count() <= 1;
    plain.then(|| text.parse::<f64>().ok()).flatten().filter(|v| v.is_finite())
}

/// One of wrk's times (`812.00us`, `1.23ms`, `2.00s`, `1.50m`, `1.00h`) in microseconds.
fn time_us(text: &str) -> Option<f64> {
    let unit_at = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(unit_at);
    let scale = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        "h" => 3600e6,
        _ => return None,
    };
    Some(plain_number(number)? * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(String::from).collect()
    }

    /// wrk 4.x's report with `--latency`, as it prints it.
    const REPORT: &str = "Running 2s test @ http://10.210.3.2:8080/
  1 threads and 25 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   812.34us  200.10us   5.20ms   90.00%
    Req/Sec    30.12k     1.20k   32.00k    70.00%
  Latency Distribution
     50%  790.00us
     75%    0.90ms
     90%    1.00ms
     99%    1.50ms
  60241 requests in 2.00s, 5.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:  30120.50
Transfer/sec:      2.50MB";

    #[test]
    fn wrks_report_is_read_whole() {
        let got = parse(&lines(REPORT)).unwrap();
        assert_eq!(got, WrkFigures { rps: 30120.5, p50_us: 790.0, p99_us: 1500.0, errors: 7 });
        // Without errors and distribution: the rate alone.
        let bare = parse(&lines("Requests/sec:   100.00")).unwrap();
        assert_eq!(bare, WrkFigures { rps: 100.0, p50_us: 0.0, p99_us: 0.0, errors: 0 });
    }

    /// What a hostile or broken wrk prints is no answer, never a figure: the old reading
    /// (`str::parse::<f64>` of whatever followed `Requests/sec:`) took `NaN`, `inf` and
    /// negative rates into the report.
    #[test]
    fn a_rate_that_is_no_plain_number_is_refused() {
        for bad in [
            "Requests/sec: NaN",
            "Requests/sec: inf",
            "Requests/sec: -5",
            "Requests/sec: 1e400",
            "Requests/sec: 1.2.3",
            "Requests/sec:",
            "Transfer/sec: 1MB",
        ] {
            assert_eq!(parse(&lines(bad)), None, "{bad}");
        }
        let bad_latency = format!("{REPORT}\n     99%   12.0parsecs");
        assert_eq!(parse(&lines(&bad_latency)), None);
        let bad_errors = REPORT.replace("read 2", "read many");
        assert_eq!(parse(&lines(&bad_errors)), None);
    }

    #[test]
    fn errors_add_up_without_overflow() {
        let text = format!(
            "Socket errors: connect {m}, read {m}, write 0, timeout 0\nNon-2xx or 3xx responses: {m}\nRequests/sec: 1",
            m = u64::MAX
        );
        assert_eq!(parse(&lines(&text)).unwrap().errors, u64::MAX);
    }

    #[test]
    fn the_connections_are_split_with_one_at_least_per_host() {
        assert_eq!(connections(50, 2).unwrap(), [25, 25]);
        assert_eq!(connections(51, 2).unwrap(), [26, 25]);
        assert_eq!(connections(3, 3).unwrap(), [1, 1, 1]);
        let err = connections(2, 3).unwrap_err().to_string();
        assert!(err.contains("2 connections cannot be split over 3 load hosts"), "{err}");
    }

    #[test]
    fn several_hosts_add_their_rates_and_take_the_highest_latency() {
        let a = WrkFigures { rps: 1000.0, p50_us: 100.0, p99_us: 900.0, errors: 1 };
        let b = WrkFigures { rps: 500.5, p50_us: 150.0, p99_us: 700.0, errors: u64::MAX };
        let total = combined(&[a, b], Vec::new());
        assert_eq!(total.rps, 1500.5);
        assert_eq!((total.p50_us, total.p99_us), (150.0, 900.0));
        assert_eq!(total.errors, u64::MAX);
    }

    proptest::proptest! {
        #[test]
        fn any_output_parses_without_panic_and_never_to_a_bad_rate(
            text in proptest::collection::vec("[ -~]{0,60}", 0..20),
            prefix in proptest::sample::select(vec!["Requests/sec:", "50%", "99%", "Socket errors:", "Non-2xx or 3xx responses:"]),
        ) {
            let mut lines: Vec<String> = text.clone();
            lines.extend(text.iter().map(|t| format!("{prefix}{t}")));
            if let Some(w) = parse(&lines) {
                proptest::prop_assert!(w.rps.is_finite() && w.rps >= 0.0);
                proptest::prop_assert!(w.p50_us.is_finite() && w.p99_us.is_finite());
            }
        }
    }
}
