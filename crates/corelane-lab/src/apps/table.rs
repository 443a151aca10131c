//! `lab apps`'s tables and CSV.

use comfy_table::Cell;

use super::AppsLabReport;
use crate::experiment::Report;
use crate::report;

impl Report for AppsLabReport {
    const CSV_HEADER: &'static str = "kind,app,placement,lane,median_rps,rps_change_pct,p99_us,cpu_us_per_request,program_us_per_request,lane_us_per_request,cpu_change_pct,lane_threads,delegated_calls,trials_rps,p50_us,p50_change_pct";

    /// The placements, the programs' rows, the side-effect check and the model, as text.
    fn body(&self, out: &mut String) {
        out.push_str(&format!(
            "programs started under {}; {} connections, a {}-byte file; {} trial(s) of {:.0}s, medians\n",
            self.launcher, self.connections, self.file_bytes, self.trials, self.duration_secs
        ));
        for p in &self.placements {
            out.push_str(&format!("- {p}\n"));
        }
        out.push('\n');
        let mut table = report::table();
        table.set_header([
            "program",
            "place",
            "lane",
            "req/s",
            "vs no lane",
            "p99 us",
            "CPU us/req",
            "lane us/req",
            "CPU change",
            "checked",
        ]);
        for row in &self.rows {
            table.add_row(vec![
                Cell::new(&row.app),
                Cell::new(&row.placement),
                Cell::new(&row.lane),
                report::right(format!("{:.0}", row.rps.median)),
                report::right(report::pct(row.rps_change_pct)),
                report::right(row.p99_us.map_or("—".into(), |p| format!("{p:.0}"))),
                report::right(format!("{:.2}", row.cpu_us_per_request)),
                report::right(format!("{:.2}", row.lane_us_per_request)),
                report::right(report::pct(row.cpu_change_pct)),
                Cell::new(if row.checked.is_empty() { "—" } else { "ok" }),
            ]);
        }
        out.push_str(&table.to_string());
        out.push('\n');
        if !self.ping.is_empty() {
            let mut ping = report::table();
            ping.set_header([
                "side-effect check",
                "p50 us",
                "p99 us",
                "vs no lane",
                "CPU us/round trip",
                "CPU change",
            ]);
            for p in &self.ping {
                ping.add_row(vec![
                    Cell::new(format!("UDP ping-pong, lane {}", p.lane)),
                    report::right(format!("{:.1}", p.p50_us.median)),
                    report::right(format!("{:.1}", p.p99_us)),
                    report::right(report::pct(p.p50_change_pct)),
                    report::right(format!("{:.2}", p.cpu_us_per_round_trip)),
                    report::right(report::pct(p.cpu_change_pct)),
                ]);
            }
            out.push_str(&ping.to_string());
            out.push('\n');
        }
        if !self.model.is_empty() {
            out.push_str("\nMODEL, not a measurement — one core for the program, a spare core near the NIC for its syscall threads, the load generator elsewhere; this run's CPU per request, no cache effects:\n");
            let mut model = report::table();
            model.set_header([
                "program",
                "lane",
                "program core req/s",
                "syscall core req/s",
                "predicted",
                "one core, no lane",
                "gain",
            ]);
            for m in &self.model {
                model.add_row(vec![
                    Cell::new(&m.app),
                    Cell::new(&m.lane),
                    report::right(format!("{:.0}", m.app_core_rps)),
                    report::right(format!("{:.0}", m.syscall_core_rps)),
                    report::right(format!("{:.0}", m.predicted_rps)),
                    report::right(format!("{:.0}", m.one_core_rps)),
                    report::right(report::pct(Some(m.gain_pct))),
                ]);
            }
            out.push_str(&model.to_string());
            out.push('\n');
        }
    }

    fn figures(&self) -> Vec<crate::report::figure::Figure> {
        super::figures::figures(self)
    }

    /// One record per program row, then one per side-effect row.
    fn csv_records(&self) -> Vec<Vec<String>> {
        let opt = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.2}"));
        let mut records: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|row| {
                vec![
                    "serve".into(),
                    row.app.clone(),
                    row.placement.clone(),
                    row.lane.clone(),
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
                    row.rps.each.iter().map(|x| format!("{x:.1}")).collect::<Vec<_>>().join(";"),
                    String::new(),
                    String::new(),
                ]
            })
            .collect();
        for p in &self.ping {
            records.push(vec![
                "ping-pong".into(),
                "udp-echo".into(),
                "NC".into(),
                p.lane.clone(),
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
            ]);
        }
        records
    }

    fn outline(&self) -> report::Outline<'_> {
        report::Outline::of("apps — seed 003", &self.machine, &self.outcome.findings)
            .on(&self.testbed)
            .skipping(&self.outcome.skipped)
    }
}
