//! `lab latency`'s rows (medians over trials per pair and load), knees, table, CSV and
//! findings.

use comfy_table::Cell;

use super::point::Point;
use super::rows::{Knee, LatencyReport, LatencyRow};
use super::sides::{UdpClient, UdpServer};
use super::Pair;
use crate::experiment::{Measured, Report};
use crate::{median_of, report};

/// A point past saturation: under 90 % of the offered load sent, or over 1 % lost.
pub fn saturated(p: &Point) -> bool {
    p.rate.is_some_and(|r| p.achieved < 0.9 * r as f64) || p.lost * 100 > p.sent.max(1)
}

fn names(pair: &Pair) -> (&'static str, &'static str, &'static str) {
    match pair {
        Pair::Udp { server, client } => ("udp", server.id(), client.id()),
        Pair::Http { server } => ("http", server.id(), "corelane-load"),
    }
}

/// Medians per offered load over the trials of one pair (loads of the first trial).
fn rows_of(pair: &Pair, trials: &[Vec<Point>]) -> Vec<LatencyRow> {
    let (protocol, server, client) = names(pair);
    let Some(first) = trials.first() else { return Vec::new() };
    first
        .iter()
        .map(|p| {
            let same: Vec<&Point> =
                trials.iter().filter_map(|t| t.iter().find(|q| q.rate == p.rate)).collect();
            LatencyRow {
                protocol: protocol.into(),
                server: server.into(),
                client: client.into(),
                load: p.rate.map_or("ping-pong".into(), |r| r.to_string()),
                point: median_point(p, &same),
            }
        })
        .collect()
}

/// Each figure's median over `same` (one point per trial at `first`'s load); lost and sent
/// summed; the uncorrected p99 where `first` has one.
fn median_point(first: &Point, same: &[&Point]) -> Point {
    let med = |f: fn(&Point) -> f64| median_of(same.iter().map(|q| f(q)));
    Point {
        rate: first.rate,
        achieved: med(|q| q.achieved),
        p50_us: med(|q| q.p50_us),
        p99_us: med(|q| q.p99_us),
        p999_us: med(|q| q.p999_us),
        max_us: med(|q| q.max_us),
        p99_uncorrected_us: first
            .p99_uncorrected_us
            .map(|_| med(|q| q.p99_uncorrected_us.unwrap_or(0.0))),
        lost: same.iter().map(|q| q.lost).sum(),
        sent: same.iter().map(|q| q.sent).sum(),
        hosts: super::hosts::medians(&same.iter().map(|q| q.hosts.as_slice()).collect::<Vec<_>>()),
    }
}

/// The knee of one pair's rows (under-load rows only, lowest load first).
fn knee(label: String, rows: &[LatencyRow]) -> Option<Knee> {
    let loaded: Vec<&LatencyRow> = rows.iter().filter(|r| r.point.rate.is_some()).collect();
    let idle = loaded.first()?;
    let limit = 2.0 * idle.point.p99_us;
    let knee_at = loaded.iter().position(|r| r.point.p99_us > limit);
    Some(Knee {
        pair: label,
        idle_rate: idle.point.rate.unwrap_or(0),
        idle_p99_us: idle.point.p99_us,
        knee_rate: knee_at.and_then(|i| loaded[i].point.rate),
        last_below: knee_at.and_then(|i| i.checked_sub(1)).and_then(|i| loaded[i].point.rate),
        highest_rate: loaded.last().and_then(|r| r.point.rate).unwrap_or(0),
    })
}

/// Every pair's rows (medians per offered load) and knees.
pub fn rows_and_knees(measured: &[Measured<Pair, Vec<Point>>]) -> (Vec<LatencyRow>, Vec<Knee>) {
    let mut rows = Vec::new();
    let mut knees = Vec::new();
    for m in measured {
        let pair_rows = rows_of(&m.config, &m.trials);
        knees.extend(knee(m.config.label(), &pair_rows));
        rows.extend(pair_rows);
    }
    (rows, knees)
}

fn find<'a>(
    rows: &'a [LatencyRow],
    server: &str,
    client: &str,
    load: &str,
) -> Option<&'a LatencyRow> {
    rows.iter().find(|r| r.server == server && r.client == client && r.load == load)
}

/// Ping-pong p50/p99 of a pair, as "p50/p99".
fn pp(r: &LatencyRow) -> String {
    format!("{:.1}/{:.1}", r.point.p50_us, r.point.p99_us)
}

pub fn findings(rows: &[LatencyRow], knees: &[Knee]) -> Vec<String> {
    let mut out = Vec::new();
    let (echo, sr) = (UdpServer::Echo { id: "echo", args: &[] }.id(), UdpServer::Sockperf.id());
    let (ping, sp) = (UdpClient::Ping.id(), UdpClient::Sockperf.id());
    let at = |s, c| find(rows, s, c, "ping-pong");
    if let (Some(ours), Some(theirs)) = (at(echo, ping), at(sr, sp)) {
        out.push(format!(
            "ping-pong round trip p50/p99 (us): corelane ping <-> corelane echo {} vs sockperf pp <-> sockperf sr {} ({:.2}x / {:.2}x).",
            pp(ours), pp(theirs), ours.point.p50_us / theirs.point.p50_us.max(1e-9), ours.point.p99_us / theirs.point.p99_us.max(1e-9)
        ));
    }
    if let (Some(a), Some(b)) = (at(sr, ping), at(sr, sp)) {
        out.push(format!(
            "client cost, both against sockperf sr: corelane ping {} vs sockperf pp {} (p50/p99 us).",
            pp(a),
            pp(b)
        ));
    }
    if let (Some(a), Some(b)) = (at(echo, sp), at(sr, sp)) {
        out.push(format!(
            "server cost, both under sockperf pp: corelane echo {} vs sockperf sr {} (p50/p99 us).",
            pp(a),
            pp(b)
        ));
    }
    let coalesce = UdpServer::Echo { id: "echo+coalesce-50us", args: &[] }.id();
    if let (Some(off), Some(on)) = (at(echo, ping), at(coalesce, ping)) {
        out.push(format!(
            "receive coalescing (50 us) in the echo: ping-pong p50/p99 {} us with it, {} without: a request/answer service pays it on every request, so it is off by default there.",
            pp(on), pp(off)
        ));
    }
    for k in knees {
        out.push(match (k.knee_rate, k.last_below) {
            (Some(r), Some(b)) => format!(
                "{}: knee between {b} and {r}/s (p99 {:.0} us idle at {}/s passes 2x).",
                k.pair, k.idle_p99_us, k.idle_rate
            ),
            (Some(r), None) => format!(
                "{}: p99 already past 2x its idle {:.0} us at {r}/s.",
                k.pair, k.idle_p99_us
            ),
            (None, _) => format!(
                "{}: no knee up to {}/s (p99 stayed under 2x its idle {:.0} us).",
                k.pair, k.highest_rate, k.idle_p99_us
            ),
        });
    }
    out
}

/// Seeds 000 and 001's table: one line per pair and offered load, round trips in µs.
const COLUMNS: [report::Column<LatencyRow>; 11] = [
    ("proto", |r| Cell::new(&r.protocol)),
    ("server", |r| Cell::new(&r.server)),
    ("client", |r| Cell::new(&r.client)),
    ("load/s", |r| report::right(r.load.clone())),
    ("achieved", |r| report::right(format!("{:.0}", r.point.achieved))),
    ("p50", |r| report::right(format!("{:.1}", r.point.p50_us))),
    ("p99", |r| report::right(format!("{:.1}", r.point.p99_us))),
    ("p99.9", |r| report::right(format!("{:.1}", r.point.p999_us))),
    ("max", |r| report::right(format!("{:.1}", r.point.max_us))),
    ("p99 uncorr.", |r| {
        report::right(r.point.p99_uncorrected_us.map_or("—".into(), |v| format!("{v:.1}")))
    }),
    ("lost", |r| report::right(r.point.lost.to_string())),
];

/// The CSV: one record per pair and offered load, round trips in µs.
const CSV_COLUMNS: [report::CsvColumn<LatencyRow>; 12] = [
    ("protocol", |r| r.protocol.clone()),
    ("server", |r| r.server.clone()),
    ("client", |r| r.client.clone()),
    ("load", |r| r.load.clone()),
    ("achieved", |r| format!("{:.1}", r.point.achieved)),
    ("p50_us", |r| format!("{:.3}", r.point.p50_us)),
    ("p99_us", |r| format!("{:.3}", r.point.p99_us)),
    ("p999_us", |r| format!("{:.3}", r.point.p999_us)),
    ("max_us", |r| format!("{:.3}", r.point.max_us)),
    ("p99_uncorrected_us", |r| {
        r.point.p99_uncorrected_us.map_or(String::new(), |v| format!("{v:.3}"))
    }),
    ("lost", |r| r.point.lost.to_string()),
    ("sent", |r| r.point.sent.to_string()),
];

impl Report for LatencyReport {
    fn figures(&self) -> Vec<crate::report::figure::Figure> {
        super::figures::figures(self)
    }

    fn body(&self, out: &mut String) {
        out.push_str(&format!(
            "server on CPU {}, client on CPU {}; {} per load, medians; round trips in us (sockperf with --full-rtt; it prints half by default)\n\n",
            self.server_cpu, self.client_cpu, self.header.schedule
        ));
        out.push_str(&format!("{}\n", report::table_of(&COLUMNS, &self.rows)));
        let per_host: Vec<_> = self.rows.iter().filter(|r| !r.point.hosts.is_empty()).collect();
        if !per_host.is_empty() {
            out.push_str("\nper load host (round trips from the ping-pong host; achieved and lost are the totals):\n");
        }
        for row in per_host {
            for h in &row.point.hosts {
                let line = super::hosts::line(h);
                out.push_str(&format!(
                    "  {} {} <- {} {}: {line}\n",
                    row.protocol, row.server, row.client, row.load
                ));
            }
        }
    }

    fn csv_table(&self) -> report::Csv {
        report::Csv::of(&CSV_COLUMNS, &self.rows)
    }

    fn outline(&self) -> report::Outline<'_> {
        self.header.outline(
            "latency — round trips under load (the UDP and web-serving studies)",
            &self.outcome,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(rate: Option<u64>, p99: f64) -> Point {
        Point {
            rate,
            achieved: rate.unwrap_or(1000) as f64,
            p50_us: p99 / 2.0,
            p99_us: p99,
            p999_us: p99,
            max_us: p99,
            p99_uncorrected_us: rate.map(|_| p99),
            lost: 0,
            sent: 1000,
            hosts: Vec::new(),
        }
    }

    #[test]
    fn the_knee_is_where_p99_passes_twice_its_idle_value() {
        let pair = Pair::Http { server: super::super::HttpServer::Corelane };
        let trial =
            vec![point(Some(1000), 50.0), point(Some(5000), 90.0), point(Some(10_000), 120.0)];
        let rows = rows_of(&pair, &[trial.clone(), trial]);
        let k = knee("x".into(), &rows).unwrap();
        assert_eq!((k.knee_rate, k.last_below, k.highest_rate), (Some(10_000), Some(5000), 10_000));
        let flat = rows_of(&pair, &[vec![point(Some(1000), 50.0), point(Some(2000), 60.0)]]);
        assert_eq!(knee("y".into(), &flat).unwrap().knee_rate, None);
    }

    /// The row carries its point flattened: the JSON keeps one flat object per row with
    /// every figure beside the pair's names.
    #[test]
    fn a_row_serializes_as_one_flat_object() {
        let pair = Pair::Udp { server: UdpServer::Sockperf, client: UdpClient::Ping };
        let rows = rows_of(&pair, &[vec![point(None, 20.0)], vec![point(None, 40.0)]]);
        let json = serde_json::to_value(&rows[0]).unwrap();
        let keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
        let mut expected: Vec<&str> = "protocol server client load rate achieved p50_us p99_us p999_us max_us p99_uncorrected_us lost sent".split(' ').collect();
        expected.sort();
        assert_eq!(keys, expected);
        assert_eq!(
            (json["load"].as_str(), json["p99_us"].as_f64()),
            (Some("ping-pong"), Some(30.0))
        );
        assert_eq!(json["sent"].as_u64(), Some(2000));
    }

    #[test]
    fn saturation_is_a_short_rate_or_loss() {
        let mut p = point(Some(1000), 10.0);
        assert!(!saturated(&p));
        p.achieved = 800.0;
        assert!(saturated(&p));
        let mut p = point(Some(1000), 10.0);
        p.lost = 20;
        assert!(saturated(&p));
        assert!(!saturated(&point(None, 10.0)));
    }
}
