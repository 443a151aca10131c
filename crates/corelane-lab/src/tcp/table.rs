//! `lab tcp`'s tables and CSV.

use comfy_table::Cell;

use super::{TcpLabReport, TcpRow};
use crate::experiment::Report;
use crate::report;

/// Seed 001's table: one line per server configuration and workload.
const COLUMNS: [report::Column<TcpRow>; 10] = [
    ("workload", |r| Cell::new(r.workload)),
    ("server", |r| Cell::new(r.server)),
    ("configuration", |r| Cell::new(&r.label)),
    ("req/s", |r| report::right(format!("{:.0}", r.rps.median))),
    ("gain", |r| report::right(report::pct(r.gain_pct))),
    ("p99 us", |r| report::right(format!("{:.0}", r.p99_us))),
    ("CPU us/req", |r| report::right(format!("{:.2}", r.cpu_us_per_request))),
    ("user us/req", |r| report::right(format!("{:.2}", r.user_us_per_request))),
    ("CPU change", |r| report::right(report::pct(r.cpu_gain_pct))),
    ("errors", |r| report::right(format!("{}", r.errors + r.non_2xx))),
];

impl Report for TcpLabReport {
    /// Seed 001's table per workload, the load generators, ITR and the findings, as text.
    fn body(&self, out: &mut String) {
        out.push_str(&format!(
            "server on CPU {} (1 lane / worker), client on CPU {}, {} connections, body {:?} ({} bytes); {}, medians\n\n",
            self.server_cpu, self.client_cpu, self.connections, self.body, self.body.len(), self.header.schedule
        ));
        out.push_str(&report::table_of(&COLUMNS, &self.rows).to_string());
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
            let several = l.hosts.len() > 1;
            out.push_str(&format!(
                "load generator {}{}: {:.0} req/s (median), p99 {:.0} us{}, {} errors\n",
                l.tool,
                if several { " on each load host" } else { "" },
                l.rps.median,
                l.p99_us,
                if several { " (the highest host's)" } else { "" },
                l.errors
            ));
            for h in &l.hosts {
                out.push_str(&format!("  {}\n", crate::stage::load::http_host_line(h)));
            }
        }
    }

    /// One CSV row per server configuration and workload.
    fn csv_table(&self) -> report::Csv {
        let header = "workload,server,config,median_rps,gain_pct,p99_us,cpu_us_per_request,user_us_per_request,cpu_gain_pct,errors,non_2xx,trials_rps,connections,bytes_per_idle_connection,cpu_ns_per_request,decided_by";
        let opt = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.2}"));
        let records = self
            .rows
            .iter()
            .map(|row| {
                vec![
                    row.workload.to_string(),
                    row.server.to_string(),
                    row.config.to_string(),
                    format!("{:.1}", row.rps.median),
                    opt(row.gain_pct),
                    format!("{:.1}", row.p99_us),
                    format!("{:.3}", row.cpu_us_per_request),
                    format!("{:.3}", row.user_us_per_request),
                    opt(row.cpu_gain_pct),
                    row.errors.to_string(),
                    row.non_2xx.to_string(),
                    row.rps.joined(1),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                ]
            })
            .chain(super::scale::csv_records(&self.scale_rows))
            .chain(super::files::csv_records(&self.file_rows))
            .collect();
        report::Csv::with_header(header, records)
    }

    fn figures(&self) -> Vec<crate::report::figure::Figure> {
        super::figures::figures(self)
    }

    fn outline(&self) -> report::Outline<'_> {
        self.header
            .outline("tcp — web serving with recycled buffers, fds and epoll events", &self.outcome)
    }
}
