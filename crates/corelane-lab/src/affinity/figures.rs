//! What `corelane report` draws of `lab affinity`: each workload's placements against NC
//! (the seed's comparison point), and the two-package cases of the cost model.

use super::AffinityLabReport;
use crate::report::figure::{Bar, Bars, Figure, Role};

pub(super) fn figures(r: &AffinityLabReport) -> Vec<Figure> {
    let mut out = Vec::new();
    for workload in ["udp", "tcp"] {
        let bars: Vec<Bar> = r
            .rows
            .iter()
            .filter(|row| row.workload == workload)
            .map(|row| {
                let role = if row.kind == "NC" { Role::Default } else { Role::Config };
                Bar::new(&row.kind, role, row.rate.median, &row.rate.each)
            })
            .collect();
        if bars.is_empty() {
            continue;
        }
        let unit = if workload == "udp" { "datagrams/s" } else { "requests/s" };
        out.push(Figure::Bars(Bars {
            id: format!("placement-{workload}"),
            title: format!("{workload}: throughput by process-core placement (gap against NC)"),
            unit: format!("{unit} (median over trials; whiskers: min–max)"),
            bars,
            ceiling: None,
        }));
    }
    if !r.model.is_empty() {
        out.push(Figure::Bars(Bars {
            id: "model".into(),
            title: "Two packages, from the cost model (not measured here)".into(),
            unit: "throughput relative to the partition".into(),
            bars: r
                .model
                .iter()
                .map(|m| {
                    let role = if m.case == "partition" { Role::Default } else { Role::Config };
                    Bar::new(&m.case, role, m.relative_throughput, &[])
                })
                .collect(),
            ceiling: None,
        }));
    }
    out
}
