//! What `corelane report` draws of `lab apps`, per program: requests/s by placement and
//! lane, and the server's CPU per request split into the program's threads and the lane's;
//! then the side-effect check's round trips.

use super::placement::Lane;
use super::rows::AppRow;
use super::AppsLabReport;
use crate::report::figure::{Bar, Bars, Figure, Role, Stacked, StackedBar};

fn label(row: &AppRow) -> String {
    format!("{} {}", row.placement, row.lane)
}

/// No lane is the default every lane is read against.
fn role(lane: Lane) -> Role {
    if lane == Lane::None {
        Role::Default
    } else {
        Role::Config
    }
}

pub(super) fn figures(r: &AppsLabReport) -> Vec<Figure> {
    let mut out = Vec::new();
    let mut apps: Vec<_> = r.rows.iter().map(|row| row.app).collect();
    apps.dedup();
    for app in apps {
        let rows: Vec<&AppRow> = r.rows.iter().filter(|row| row.app == app).collect();
        let job = rows.iter().any(|row| row.job.is_some());
        // A job's figure is its time; a server's, its rate.
        let (id, title, unit, bars): (String, String, &str, Vec<Bar>) = if job {
            let bars = rows.iter().filter_map(|row| {
                let j = row.job.as_ref()?;
                Some(Bar::new(label(row), role(row.lane), j.job_secs.median, &j.job_secs.each))
            });
            (
                format!("job-{app}"),
                format!("{app}: job time by placement and syscall lane (Spark, shuffle over TCP)"),
                "seconds (median over trials; whiskers: min–max)",
                bars.collect(),
            )
        } else {
            let bars = rows
                .iter()
                .map(|row| Bar::new(label(row), role(row.lane), row.rps.median, &row.rps.each));
            (
                format!("rate-{app}"),
                format!("{app}: requests/s by placement and syscall lane"),
                "requests/s (median over trials; whiskers: min–max)",
                bars.collect(),
            )
        };
        out.push(Figure::Bars(Bars { id, title, unit: unit.into(), bars, ceiling: None }));
        let (what, per) = if job { ("cluster", "record") } else { ("server", "request") };
        let parts = rows.iter().map(|row| StackedBar {
            label: label(row),
            values: vec![row.program_us_per_request, row.lane_us_per_request],
        });
        out.push(Figure::Stacked(Stacked {
            id: format!("cpu-{app}"),
            title: format!("{app}: {what} CPU per {per} (exact, schedstat), program and lane"),
            unit: format!("µs per {per}"),
            parts: vec!["program's threads".into(), "syscall lane's threads".into()],
            bars: parts.collect(),
        }));
    }
    if !r.ping.is_empty() {
        let bars = r.ping.iter().map(|p| {
            Bar::new(format!("lane {}", p.lane), role(p.lane), p.p50_us.median, &p.p50_us.each)
        });
        out.push(Figure::Bars(Bars {
            id: "ping-pong".into(),
            title: "Side-effect check: UDP ping-pong round trip through the lane and without"
                .into(),
            unit: "µs round trip, p50 (median over trials; whiskers: min–max)".into(),
            bars: bars.collect(),
            ceiling: None,
        }));
    }
    out
}
