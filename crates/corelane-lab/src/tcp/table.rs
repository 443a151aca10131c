//! `lab tcp`'s tables and CSV.

use comfy_table::Cell;

use super::TcpLabReport;
use crate::experiment::Report;
use crate::report;

impl Report for TcpLabReport {
    const CSV_HEADER: &'static str = "workload,server,config,median_rps,gain_pct,p99_us,cpu_us_per_request,user_us_per_request,cpu_gain_pct,errors,non_2xx,trials_rps,connections,bytes_per_idle_connection,cpu_ns_per_request,decided_by";

    /// Seed 001's table per workload, the load generators, ITR and the findings, as text.
    fn body(&self, out: &mut String) {
        out.push_str(&format!(
            "server on CPU {} (1 lane / worker), client on CPU {}, {} connections, body {:?} ({} bytes); {} trial(s) of {:.0}s, medians\n\n",
            self.server_cpu, self.client_cpu, self.connections, self.body, self.body.len(), self.trials, self.duration_secs
        ));
        let mut table = report::table();
        table.set_header([
            "workload",
            "server",
            "configuration",
            "req/s",
            "gain",
            "p99 us",
            "CPU us/req",
            "user us/req",
            "CPU change",
            "errors",
        ]);
        for row in &self.rows {
            table.add_row(vec![
                Cell::new(&row.workload),
                Cell::new(&row.server),
                Cell::new(&row.label),
                report::right(format!("{:.0}", row.median_rps)),
                report::right(report::pct(row.gain_pct)),
                report::right(format!("{:.0}", row.p99_us)),
                report::right(format!("{:.2}", row.cpu_us_per_request)),
                report::right(format!("{:.2}", row.user_us_per_request)),
                report::right(report::pct(row.cpu_gain_pct)),
                report::right(format!("{}", row.errors + row.non_2xx)),
            ]);
        }
        out.push_str(&table.to_string());
        let per_host: Vec<_> = self.rows.iter().filter(|r| !r.hosts.is_empty()).collect();
        if !per_host.is_empty() {
            out.push_str("\nper load host (the row's figures are the totals):\n");
        }
        for row in per_host {
            for h in &row.hosts {
                let line = crate::stage::load::http_host_line(h);
                out.push_str(&format!(
                    "  {} {} {}: {line}\n",
                    row.workload, row.server, row.config
                ));
            }
        }
        if !self.scale_rows.is_empty() {
            out.push_str(&super::scale::table(&self.scale_rows));
        }
        if !self.file_rows.is_empty() {
            out.push_str(&super::files::table(&self.file_rows));
        }
        out.push_str(&format!("\ninterrupt moderation (ITR): {}\n", self.interrupt_moderation));
        for l in &self.load_generators {
            out.push_str(&format!(
                "load generator {}: {:.0} req/s (median)\n",
                l.tool, l.median_rps
            ));
        }
    }

    /// One CSV row per server configuration and workload.
    fn csv_records(&self) -> Vec<Vec<String>> {
        let opt = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.2}"));
        self.rows
            .iter()
            .map(|row| {
                vec![
                    row.workload.clone(),
                    row.server.clone(),
                    row.config.clone(),
                    format!("{:.1}", row.median_rps),
                    opt(row.gain_pct),
                    format!("{:.1}", row.p99_us),
                    format!("{:.3}", row.cpu_us_per_request),
                    format!("{:.3}", row.user_us_per_request),
                    opt(row.cpu_gain_pct),
                    row.errors.to_string(),
                    row.non_2xx.to_string(),
                    row.trials_rps.iter().map(|x| format!("{x:.1}")).collect::<Vec<_>>().join(";"),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                ]
            })
            .chain(super::scale::csv_records(&self.scale_rows))
            .chain(super::files::csv_records(&self.file_rows))
            .collect()
    }

    fn figures(&self) -> Vec<crate::report::figure::Figure> {
        super::figures::figures(self)
    }

    fn outline(&self) -> report::Outline<'_> {
        report::Outline::of("tcp — seed 001", &self.machine, &self.findings)
            .on(&self.testbed)
            .skipping(&self.skipped)
    }
}
