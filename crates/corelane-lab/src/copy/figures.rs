//! What `corelane report` draws of `lab copy`: every row's GB/s against the memcpy ceiling
//! of the same bytes, peers (cp, dd) in their own colour.

use super::CopyLabReport;
use crate::report::figure::{Bar, Bars, Figure, Mark, Role};

pub(super) fn figures(r: &CopyLabReport) -> Vec<Figure> {
    let bars = r.rows.iter().map(|row| {
        let peer = ["cp", "dd"].iter().any(|p| row.config.starts_with(p));
        let role = if peer { Role::Peer } else { Role::Config };
        // Each trial's GB/s from its time: the row's bytes are gb_per_sec × median_secs.
        let gb = row.gb_per_sec * row.secs.median;
        let trials: Vec<f64> = row.secs.each.iter().filter(|t| **t > 0.0).map(|t| gb / t).collect();
        Bar::new(format!("{} · {}", row.section, row.config), role, row.gb_per_sec, &trials)
    });
    vec![Figure::Bars(Bars {
        id: "throughput".into(),
        title: "GB/s of every method and tool, against memcpy of the same bytes".into(),
        unit: "GB/s (median over trials; whiskers: min–max)".into(),
        bars: bars.collect(),
        ceiling: Some(Mark { label: "memcpy".into(), value: r.memcpy_gb_per_sec }),
    })]
}
