//! What `corelane report` draws of `lab latency`, per protocol: p99 round trip against the
//! rate achieved (the knee shows where it turns up), and the percentiles of each pair at
//! ping-pong (one message in flight).

use super::rows::{LatencyReport, LatencyRow};
use crate::report::figure::{Figure, Lines, Role, Scale, Series};

/// corelane on both sides is corelane; a peer on both sides is the peer; crossed pairs are
/// drawn as corelane's (they measure one of its sides).
fn role(row: &LatencyRow) -> Role {
    match (row.server.starts_with("corelane"), row.client.starts_with("corelane")) {
        (false, false) => Role::Peer,
        _ => Role::Config,
    }
}

fn pair(row: &LatencyRow) -> String {
    format!("{} ← {}", row.server, row.client)
}

/// The series of `rows`, one per pair in first-seen order, each point from `point`.
fn series(rows: &[&LatencyRow], point: impl Fn(&LatencyRow) -> Vec<(f64, f64)>) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for row in rows {
        let name = pair(row);
        match out.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.extend(point(row)),
            None => out.push(Series { name, role: role(row), points: point(row) }),
        }
    }
    out.retain(|s| !s.points.is_empty());
    out
}

pub(super) fn figures(r: &LatencyReport) -> Vec<Figure> {
    let mut out = Vec::new();
    for protocol in ["udp", "http"] {
        let rows: Vec<&LatencyRow> = r.rows.iter().filter(|row| row.protocol == protocol).collect();
        let loaded: Vec<&LatencyRow> = rows
            .iter()
            .copied()
            .filter(|row| row.point.rate.is_some() && row.point.achieved > 0.0)
            .collect();
        let against_load = series(&loaded, |row| {
            (row.point.p99_us > 0.0)
                .then_some((row.point.achieved, row.point.p99_us))
                .into_iter()
                .collect()
        });
        if !against_load.is_empty() {
            out.push(Figure::Lines(Lines {
                id: format!("load-{protocol}"),
                title: format!("{protocol}: p99 round trip against the rate achieved"),
                x_label: "achieved rate (messages or requests/s)".into(),
                y_label: "p99 round trip (µs)".into(),
                x_scale: Scale::Log,
                y_scale: Scale::Log,
                series: against_load,
            }));
        }
        let idle: Vec<&LatencyRow> =
            rows.iter().copied().filter(|row| row.load == "ping-pong").collect();
        let percentiles = series(&idle, |row| {
            [(50.0, row.point.p50_us), (99.0, row.point.p99_us), (99.9, row.point.p999_us)]
                .into_iter()
                .filter(|(_, v)| *v > 0.0)
                .collect()
        });
        if !percentiles.is_empty() {
            out.push(Figure::Lines(Lines::percentiles(
                format!("pingpong-{protocol}"),
                format!("{protocol}: round-trip percentiles, one message in flight"),
                "round trip (µs)",
                percentiles,
            )));
        }
    }
    out
}
