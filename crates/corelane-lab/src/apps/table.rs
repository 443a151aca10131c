//! `lab apps`'s tables and CSV.

use comfy_table::Cell;

use super::model::ModelRow;
use super::rows::{AppRow, PingRow};
use super::AppsLabReport;
use crate::experiment::Report;
use crate::report;

/// The programs' table: one line per program, placement and lane.
const APP_COLUMNS: [report::Column<AppRow>; 10] = [
    ("program", |r| Cell::new(r.app)),
    ("place", |r| Cell::new(r.placement)),
    ("lane", |r| Cell::new(r.lane)),
    ("req/s", |r| report::right(format!("{:.0}", r.rps.median))),
    ("vs no lane", |r| report::right(report::pct(r.rps_change_pct))),
    ("p99 us", |r| report::right(r.p99_us.map_or("—".into(), |p| format!("{p:.0}")))),
    ("CPU us/req", |r| report::right(format!("{:.2}", r.cpu_us_per_request))),
    ("lane us/req", |r| report::right(format!("{:.2}", r.lane_us_per_request))),
    ("CPU change", |r| report::right(report::pct(r.cpu_change_pct))),
    ("checked", |r| Cell::new(if r.checked.is_empty() { "—" } else { "ok" })),
];

/// The MapReduce rows: one line per placement and lane.
const JOB_COLUMNS: [report::Column<AppRow>; 10] = [
    ("MapReduce (Spark)", |r| Cell::new(r.app)),
    ("place", |r| Cell::new(r.placement)),
    ("lane", |r| Cell::new(r.lane)),
    ("job s", |r| {
        report::right(r.job.as_ref().map_or("—".into(), |j| format!("{:.2}", j.job_secs.median)))
    }),
    ("job s vs no lane", |r| {
        report::right(report::pct(r.job.as_ref().and_then(|j| j.median_secs_change_pct)))
    }),
    ("shuffle MB", |r| {
        report::right(
            r.job.as_ref().map_or("—".into(), |j| format!("{:.1}", j.shuffle_write_bytes / 1e6)),
        )
    }),
    ("CPU us/record", |r| report::right(format!("{:.3}", r.cpu_us_per_request))),
    ("lane us/record", |r| report::right(format!("{:.3}", r.lane_us_per_request))),
    ("JVMs", |r| report::right(r.job.as_ref().map_or(0, |j| j.jvms).to_string())),
    ("checked", |r| Cell::new(if r.checked.is_empty() { "—" } else { "ok" })),
];

/// The side-effect check: one line per lane.
const PING_COLUMNS: [report::Column<PingRow>; 6] = [
    ("side-effect check", |p| Cell::new(format!("UDP ping-pong, lane {}", p.lane))),
    ("p50 us", |p| report::right(format!("{:.1}", p.p50_us.median))),
    ("p99 us", |p| report::right(format!("{:.1}", p.p99_us))),
    ("vs no lane", |p| report::right(report::pct(p.p50_change_pct))),
    ("CPU us/round trip", |p| report::right(format!("{:.2}", p.cpu_us_per_round_trip))),
    ("CPU change", |p| report::right(report::pct(p.cpu_change_pct))),
];

/// The model: one line per program and lane.
const MODEL_COLUMNS: [report::Column<ModelRow>; 7] = [
    ("program", |m| Cell::new(m.app)),
    ("lane", |m| Cell::new(m.lane)),
    ("program core req/s", |m| report::right(format!("{:.0}", m.app_core_rps))),
    ("syscall core req/s", |m| report::right(format!("{:.0}", m.syscall_core_rps))),
    ("predicted", |m| report::right(format!("{:.0}", m.predicted_rps))),
    ("one core, no lane", |m| report::right(format!("{:.0}", m.one_core_rps))),
    ("gain", |m| report::right(report::pct(Some(m.gain_pct)))),
];

impl Report for AppsLabReport {
    /// The placements, the programs' rows, the side-effect check and the model, as text.
    fn body(&self, out: &mut String) {
        out.push_str(&format!(
            "programs started under {}; {} connections, a {}-byte file; {}, medians\n",
            self.launcher, self.connections, self.file_bytes, self.header.schedule
        ));
        for p in &self.placements {
            out.push_str(&format!("- {p}\n"));
        }
        out.push('\n');
        let (jobs, served): (Vec<&AppRow>, Vec<&AppRow>) =
            self.rows.iter().partition(|r| r.job.is_some());
        if !served.is_empty() {
            out.push_str(&report::table_of(&APP_COLUMNS, served).to_string());
            out.push('\n');
        }
        if !jobs.is_empty() {
            out.push_str(&report::table_of(&JOB_COLUMNS, jobs).to_string());
            out.push_str("\n(\"job s vs no lane\": the median job time's change, positive when slower; records/s of job time count as req/s in the CSV and JSON)\n");
        }
        if !self.ping.is_empty() {
            out.push_str(&report::table_of(&PING_COLUMNS, &self.ping).to_string());
            out.push('\n');
        }
        if !self.model.is_empty() {
            out.push_str("\nMODEL, not a measurement — one core for the program, a spare core near the NIC for its syscall threads, the load generator elsewhere; this run's CPU per request, no cache effects:\n");
            out.push_str(&report::table_of(&MODEL_COLUMNS, &self.model).to_string());
            out.push('\n');
        }
    }

    fn figures(&self) -> Vec<crate::report::figure::Figure> {
        super::figures::figures(self)
    }

    /// One record per program row (a MapReduce row's rate is records/s of job time), then
    /// one per side-effect row.
    fn csv_table(&self) -> report::Csv {
        let header = "kind,app,placement,lane,median_rps,rps_change_pct,p99_us,cpu_us_per_request,program_us_per_request,lane_us_per_request,cpu_change_pct,lane_threads,delegated_calls,trials_rps,p50_us,p50_change_pct,job_secs,shuffle_write_bytes,job_secs_change_pct";
        let opt = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.2}"));
        let mut records: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|row| {
                vec![
                    "serve".into(),
                    row.app.to_string(),
                    row.placement.to_string(),
                    row.lane.to_string(),
                    format!("{:.1}", row.rps.median),
                    opt(row.rps_change_pct),
                    opt(row.p99_us),
                    format!("{:.3}", row.cpu_us_per_request),
                    format!("{:.3}", row.program_us_per_request),
                    format!("{:.3}", row.lane_us_per_request),
                    opt(row.cpu_change_pct),
                    row.lane_threads.to_string(),
                    row.delegated
                        .as_ref()
                        .map_or(String::new(), |d| d.values().sum::<u64>().to_string()),
                    row.rps.joined(1),
                    String::new(),
                    String::new(),
                    row.job.as_ref().map_or(String::new(), |j| format!("{:.3}", j.job_secs.median)),
                    row.job
                        .as_ref()
                        .map_or(String::new(), |j| format!("{:.0}", j.shuffle_write_bytes)),
                    opt(row.job.as_ref().and_then(|j| j.median_secs_change_pct)),
                ]
            })
            .collect();
        for p in &self.ping {
            records.push(vec![
                "ping-pong".into(),
                "udp-echo".into(),
                "NC".into(),
                p.lane.to_string(),
                String::new(),
                String::new(),
                format!("{:.2}", p.p99_us),
                format!("{:.3}", p.cpu_us_per_round_trip),
                format!("{:.3}", p.cpu_us_per_round_trip - p.lane_us_per_round_trip),
                format!("{:.3}", p.lane_us_per_round_trip),
                opt(p.cpu_change_pct),
                String::new(),
                p.delegated.as_ref().map_or(String::new(), |d| d.values().sum::<u64>().to_string()),
                String::new(),
                format!("{:.2}", p.p50_us.median),
                opt(p.p50_change_pct),
                String::new(),
                String::new(),
                String::new(),
            ]);
        }
        report::Csv::with_header(header, records)
    }

    fn outline(&self) -> report::Outline<'_> {
        self.header.outline("apps — core partitioning and syscall threads", &self.outcome)
    }
}
