//! What `corelane report` draws of `lab tcp`, per workload: requests/s and server CPU per
//! request by configuration beside nginx and lighttpd, and the latency percentiles the load
//! generator saw; then the load generators against the same server.

use super::{Loadgen, RowConfig, TcpLabReport, TcpRow, Workload};
use crate::report::figure::{Bar, Bars, Figure, Lines, Role, Series};
use crate::stage::servers::{ConfigId, Server};

pub(super) fn figures(r: &TcpLabReport) -> Vec<Figure> {
    let mut out = Vec::new();
    for workload in Workload::ALL {
        let rows: Vec<&TcpRow> = r.rows.iter().filter(|row| row.workload == workload).collect();
        if rows.is_empty() {
            continue;
        }
        let label = |row: &TcpRow| {
            if row.server == Server::Corelane {
                row.config.to_string()
            } else {
                row.server.to_string()
            }
        };
        let role = |row: &TcpRow| match (row.server, row.config) {
            (Server::Corelane, RowConfig::Corelane(ConfigId::Baseline)) => Role::Default,
            (Server::Corelane, _) => Role::Config,
            _ => Role::Peer,
        };
        let bars = |value: fn(&TcpRow) -> f64, trials: bool| {
            rows.iter()
                .map(|row| {
                    let t: &[f64] = if trials { &row.rps.each } else { &[] };
                    Bar::new(label(row), role(row), value(row), t)
                })
                .collect()
        };
        out.push(Figure::Bars(Bars {
            id: format!("rate-{workload}"),
            title: format!(
                "{workload}: requests/s by server configuration, beside nginx and lighttpd"
            ),
            unit: "requests/s (median over trials; whiskers: min–max)".into(),
            bars: bars(|row| row.rps.median, true),
            ceiling: None,
        }));
        out.push(Figure::Bars(Bars {
            id: format!("cpu-{workload}"),
            title: format!("{workload}: server CPU per request (exact, schedstat)"),
            unit: "µs per request".into(),
            bars: bars(|row| row.cpu_us_per_request, false),
            ceiling: None,
        }));
        let series = rows.iter().map(|row| Series {
            name: label(row),
            role: role(row),
            points: vec![
                (50.0, row.p50_us),
                (90.0, row.p90_us),
                (99.0, row.p99_us),
                (99.9, row.p999_us),
            ],
        });
        out.push(Figure::Lines(Lines::percentiles(
            format!("latency-{workload}"),
            format!("{workload}: latency percentiles seen by the load generator"),
            "latency (µs)",
            series.collect(),
        )));
    }
    if !r.load_generators.is_empty() {
        let bars = r.load_generators.iter().map(|l| {
            let role = if l.tool == Loadgen::Corelane { Role::Config } else { Role::Peer };
            Bar::new(l.tool.to_string(), role, l.rps.median, &l.rps.each)
        });
        out.push(Figure::Bars(Bars {
            id: "load-generators".into(),
            title: "Load generators against the same corelane server".into(),
            unit: "requests/s (median over trials; whiskers: min–max)".into(),
            bars: bars.collect(),
            ceiling: None,
        }));
    }
    out
}
