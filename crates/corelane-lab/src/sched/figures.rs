//! What `corelane report` draws of `lab sched`: throughput against reordering per scheduler
//! (one chart per mode: simulated, real threads), the threaded runs' events/s, and latency
//! percentiles per workload.

use corelane::sched::{Kind, RunMode};

use super::SchedLabReport;
use crate::report::figure::{Bar, Bars, Figure, Lines, Point, Role, Scatter, Series};

pub(super) fn figures(r: &SchedLabReport) -> Vec<Figure> {
    let mut out = Vec::new();
    let mut modes: Vec<RunMode> = Vec::new();
    for row in &r.rows {
        if !modes.contains(&row.run.mode) {
            modes.push(row.run.mode);
        }
    }
    for mode in &modes {
        let points = r.rows.iter().filter(|row| row.run.mode == *mode).map(|row| Point {
            group: row.run.scheduler.to_string(),
            label: format!("{}, {} workers", row.run.workload, row.run.workers),
            x: row.run.reorder.reorder_ratio,
            y: row.run.throughput_mevps,
        });
        out.push(Figure::Scatter(Scatter {
            id: format!("tradeoff-{mode}"),
            title: format!("{mode}: events/s against reordering, every workload and worker count"),
            x_label: "reorder ratio (RFC 4737, at the egress)".into(),
            y_label: "M events/s".into(),
            points: points.collect(),
        }));
    }
    // The real machine's rows (the threaded mode), else the simulation's.
    let mode = modes.iter().find(|m| **m == RunMode::Threads).or(modes.first());
    let Some(mode) = mode else { return out };
    let rows: Vec<_> = r.rows.iter().filter(|row| row.run.mode == *mode).collect();
    let workers = rows.iter().map(|row| row.run.workers).max().unwrap_or(0);
    let rows: Vec<_> = rows.into_iter().filter(|row| row.run.workers == workers).collect();
    let role = |s: Kind| if s == Kind::Diffuser { Role::Config } else { Role::Peer };
    let bars = rows.iter().map(|row| {
        let label = format!("{} · {}", row.run.workload, row.run.scheduler);
        Bar::new(label, role(row.run.scheduler), row.run.throughput_mevps, &[])
    });
    out.push(Figure::Bars(Bars {
        id: format!("throughput-{mode}"),
        title: format!(
            "{mode}, {workers} workers: events/s by workload and scheduler (Diffuser is ours)"
        ),
        unit: "M events/s".into(),
        bars: bars.collect(),
        ceiling: None,
    }));
    let mut workloads: Vec<&str> = Vec::new();
    for row in &rows {
        if !workloads.contains(&row.run.workload.as_str()) {
            workloads.push(&row.run.workload);
        }
    }
    for workload in workloads {
        let series = rows.iter().filter(|row| row.run.workload == workload).map(|row| Series {
            name: row.run.scheduler.to_string(),
            role: role(row.run.scheduler),
            points: vec![
                (50.0, row.run.p50_latency_us),
                (99.0, row.run.p99_latency_us),
                (99.9, row.run.p999_latency_us),
            ],
        });
        out.push(Figure::Lines(Lines::percentiles(
            format!("latency-{mode}-{workload}"),
            format!("{workload}, {mode}, {workers} workers: event latency percentiles"),
            "latency (µs)",
            series.collect(),
        )));
    }
    out
}
