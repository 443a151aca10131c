//! `lab apps`'s rows, built from its trials: medians, each lane row against the same
//! program and placement without a lane, what `corelane run` delegated.

use std::collections::BTreeMap;

use serde::Serialize;

use super::model::{self, ModelRow};
use super::placement::{CoreKind, Cpus, Lane};
use super::programs::App;
use super::rows::{AppRow, JobRow, PingRow};
use super::trial::{PingTrial, RunSummary, ServeTrial};
use super::{AppsLabOptions, Case, CaseTrial};
use crate::experiment::Measured;
use crate::median_of;
use crate::summary::{change_pct, Header, Outcome, Trials};
use crate::testbed::TestbedReport;

/// Everything `corelane lab apps` measured.
#[derive(Debug, Clone, Serialize)]
pub struct AppsLabReport {
    /// Where it ran and how it measured.
    #[serde(flatten)]
    pub header: Header,
    pub softirq_cpu: usize,
    pub other_cpu: usize,
    /// `corelane run` or `taskset` (a build without `corelane run`: no lane rows).
    pub launcher: String,
    /// What each placement means on this machine.
    pub placements: Vec<String>,
    pub connections: usize,
    pub file_bytes: usize,
    pub rows: Vec<AppRow>,
    pub ping: Vec<PingRow>,
    /// A machine with a spare core near the NIC, from the per-request CPU measured here.
    pub model: Vec<ModelRow>,
    /// What could not run here, and what the figures say.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// What the report is built from.
pub(super) struct Inputs<'a> {
    pub testbed: TestbedReport,
    pub cpus: Cpus,
    pub launcher: String,
    pub placements: Vec<String>,
    pub opts: &'a AppsLabOptions,
    pub skipped: Vec<String>,
    pub measured: Vec<Measured<Case, CaseTrial>>,
}

pub(super) fn build(i: Inputs<'_>) -> AppsLabReport {
    let cpus = &i.cpus;
    let mut rows = Vec::new();
    let mut ping = Vec::new();
    for m in &i.measured {
        match m.config {
            Case::Serve { app, placement, lane } => {
                let t: Vec<&ServeTrial> = m.trials.iter().filter_map(serve_of).collect();
                rows.push(app_row(&t, app, placement, lane, cpus));
            }
            Case::Ping { lane } => {
                let t: Vec<&PingTrial> = m.trials.iter().filter_map(ping_of).collect();
                ping.push(ping_row(&t, lane));
            }
        }
    }
    changes_against_no_lane(&mut rows, &mut ping);
    let model = model::spare_core(&rows);
    let findings = model::findings(&rows, &ping, &model, cpus);
    AppsLabReport {
        header: Header::of(i.testbed, i.opts.trials, i.opts.duration),
        softirq_cpu: cpus.softirq,
        other_cpu: cpus.other,
        launcher: i.launcher,
        placements: i.placements,
        connections: i.opts.connections,
        file_bytes: i.opts.file_size,
        rows,
        ping,
        model,
        outcome: Outcome { skipped: i.skipped, findings },
    }
}

fn serve_of(t: &CaseTrial) -> Option<&ServeTrial> {
    if let CaseTrial::Serve(s) = t {
        Some(s)
    } else {
        None
    }
}

fn ping_of(t: &CaseTrial) -> Option<&PingTrial> {
    if let CaseTrial::Ping(p) = t {
        Some(p)
    } else {
        None
    }
}

/// The calls delegated, summed over the trials' run summaries; `None` without any.
fn delegated<'a>(runs: impl Iterator<Item = &'a RunSummary>) -> Option<BTreeMap<String, u64>> {
    let mut sum: Option<BTreeMap<String, u64>> = None;
    for run in runs {
        let total = sum.get_or_insert_with(BTreeMap::new);
        for (kind, n) in &run.delegated {
            *total.entry(kind.clone()).or_default() += n;
        }
    }
    sum
}

/// The lane the runs reported and their notes, each distinct note once.
fn lane_ran<'a>(
    runs: impl Iterator<Item = &'a RunSummary> + Clone,
) -> (Option<String>, Vec<String>) {
    let ran = runs.clone().map(|r| r.syscall_lane.clone()).last();
    let mut notes: Vec<String> = runs.filter_map(|r| r.lane_note.clone()).collect();
    notes.dedup();
    (ran, notes)
}

fn app_row(t: &[&ServeTrial], app: App, placement: CoreKind, lane: Lane, cpus: &Cpus) -> AppRow {
    let runs = t.iter().filter_map(|x| x.run.as_ref());
    let (lane_ran, lane_notes) = lane_ran(runs.clone());
    let p99s: Vec<f64> = t.iter().filter_map(|x| x.p99_us).collect();
    let mut checked: Vec<String> = t.iter().map(|x| x.checked.clone()).collect();
    checked.sort();
    checked.dedup();
    AppRow {
        app,
        placement,
        lane,
        lane_ran,
        lane_notes,
        app_cpus: placement.app_cpus(cpus).to_string(),
        syscall_cpus: (lane != Lane::None).then(|| placement.syscall_cpus(cpus).to_string()),
        load_cpu: placement.load_cpu(cpus),
        load_generator: app.load_generator().into(),
        rps: Trials::of(t.iter().map(|x| x.rps)),
        p99_us: (!p99s.is_empty()).then(|| median_of(p99s)),
        cpu_us_per_request: median_of(
            t.iter().map(|x| x.program_us_per_request + x.lane_us_per_request),
        ),
        program_us_per_request: median_of(t.iter().map(|x| x.program_us_per_request)),
        lane_us_per_request: median_of(t.iter().map(|x| x.lane_us_per_request)),
        rps_change_pct: None,
        cpu_change_pct: None,
        lane_threads: t.iter().map(|x| x.lane_threads).max().unwrap_or(0),
        checked,
        delegated: delegated(runs.clone()),
        in_place_calls: runs.map(|r| r.in_place).sum(),
        job: job_row(t),
    }
}

/// The MapReduce figures of `t`, if its trials are a job's.
fn job_row(t: &[&ServeTrial]) -> Option<JobRow> {
    let jobs: Vec<&super::trial::JobTrial> = t.iter().filter_map(|x| x.job.as_ref()).collect();
    if jobs.is_empty() {
        return None;
    }
    Some(JobRow {
        records: t.iter().map(|x| x.requests).max().unwrap_or(0),
        job_secs: Trials::of(jobs.iter().map(|j| j.job_secs)),
        median_secs_change_pct: None,
        shuffle_write_bytes: median_of(jobs.iter().map(|j| j.shuffle_write_bytes as f64)),
        shuffle_read_bytes: median_of(jobs.iter().map(|j| j.shuffle_read_bytes as f64)),
        jvms: jobs.iter().map(|j| j.jvms).max().unwrap_or(0),
    })
}

fn ping_row(t: &[&PingTrial], lane: Lane) -> PingRow {
    let runs = t.iter().filter_map(|x| x.run.as_ref());
    PingRow {
        lane,
        lane_ran: lane_ran(runs.clone()).0,
        p50_us: Trials::of(t.iter().map(|x| x.p50_us)),
        p99_us: median_of(t.iter().map(|x| x.p99_us)),
        cpu_us_per_round_trip: median_of(
            t.iter().map(|x| x.program_us_per_round_trip + x.lane_us_per_round_trip),
        ),
        lane_us_per_round_trip: median_of(t.iter().map(|x| x.lane_us_per_round_trip)),
        p50_change_pct: None,
        cpu_change_pct: None,
        round_trips: t.iter().map(|x| x.round_trips).sum(),
        delegated: delegated(runs),
    }
}

/// Each lane row against its program and placement without a lane.
fn changes_against_no_lane(rows: &mut [AppRow], ping: &mut [PingRow]) {
    let secs = |r: &AppRow| r.job.as_ref().map(|j| j.job_secs.median);
    let bases: Vec<(App, CoreKind, f64, f64, Option<f64>)> = rows
        .iter()
        .filter(|r| r.lane == Lane::None)
        .map(|r| (r.app, r.placement, r.rps.median, r.cpu_us_per_request, secs(r)))
        .collect();
    for r in rows.iter_mut().filter(|r| r.lane != Lane::None) {
        if let Some(b) = bases.iter().find(|b| b.0 == r.app && b.1 == r.placement) {
            r.rps_change_pct = change_pct(r.rps.median, b.2);
            r.cpu_change_pct = change_pct(r.cpu_us_per_request, b.3);
            if let (Some(job), Some(base)) = (r.job.as_mut(), b.4) {
                job.median_secs_change_pct = change_pct(job.job_secs.median, base);
            }
        }
    }
    let base = ping
        .iter()
        .find(|p| p.lane == Lane::None)
        .map(|p| (p.p50_us.median, p.cpu_us_per_round_trip));
    if let Some((p50, cpu)) = base {
        for p in ping.iter_mut().filter(|p| p.lane != Lane::None) {
            p.p50_change_pct = change_pct(p.p50_us.median, p50);
            p.cpu_change_pct = change_pct(p.cpu_us_per_round_trip, cpu);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::Trials;

    /// A MapReduce row over trials of `secs` for `records` records.
    fn job(lane: Lane, records: f64, secs: [f64; 2]) -> AppRow {
        AppRow {
            app: App::Mapreduce,
            placement: CoreKind::Nc,
            lane,
            lane_ran: Some(lane.id().into()),
            lane_notes: Vec::new(),
            app_cpus: "0".into(),
            syscall_cpus: None,
            load_cpu: 0,
            load_generator: String::new(),
            rps: Trials::of(secs.map(|s| records / s)),
            p99_us: None,
            cpu_us_per_request: 1.0,
            program_us_per_request: 1.0,
            lane_us_per_request: 0.0,
            rps_change_pct: None,
            cpu_change_pct: None,
            lane_threads: 0,
            checked: Vec::new(),
            delegated: None,
            in_place_calls: 0,
            job: Some(JobRow {
                records: records as u64,
                job_secs: Trials::of(secs),
                median_secs_change_pct: None,
                shuffle_write_bytes: 0.0,
                shuffle_read_bytes: 0.0,
                jvms: 5,
            }),
        }
    }

    /// A lane row's job is compared by its median time, as the findings say, even where the
    /// median of the trials' rates (two trials: the mean of the two) points the other way.
    #[test]
    fn a_jobs_change_is_its_median_times() {
        let mut rows =
            [job(Lane::None, 1.2e7, [8.0, 16.0]), job(Lane::Threads, 1.2e7, [11.0, 11.0])];
        changes_against_no_lane(&mut rows, &mut []);
        let change = rows[1].job.as_ref().unwrap().median_secs_change_pct.unwrap();
        assert!((change - (11.0 / 12.0 - 1.0) * 100.0).abs() < 1e-9, "{change}");
        assert!(rows[1].rps_change_pct.unwrap() < 0.0, "the rates' medians say slower");
        assert_eq!(rows[0].job.as_ref().unwrap().median_secs_change_pct, None);
    }
}
