//! `lab affinity`'s tables and CSV.

use comfy_table::Cell;

use super::AffinityLabReport;
use crate::experiment::Report;
use crate::report;

impl Report for AffinityLabReport {
    const CSV_HEADER: &'static str = "workload,kind,median,gap_pct,cpu_ns_per_unit,trials";

    /// Seed 003's placements as measured here, what cannot be measured, and the model, as text.
    fn body(&self, out: &mut String) {
        out.push_str(&format!(
            "softirq (interrupt) CPU {}, other CPU {}, load generator on CPU {}; {} package(s), {} NUMA node(s); {} trial(s) of {:.0}s, medians\n\n",
            self.irq_cpu, self.other_cpu, self.load_cpu, self.packages, self.numa_nodes, self.trials, self.duration_secs
        ));
        let mut table = report::table();
        table.set_header(["workload", "kind", "placement", "rate", "vs NC", "CPU per unit"]);
        for row in &self.rows {
            let (rate, cpu) = if row.workload == "udp" {
                (report::mpps(row.rate.median), format!("{:.0} ns/datagram", row.cpu_ns_per_unit))
            } else {
                (
                    format!("{:.0} req/s", row.rate.median),
                    format!("{:.2} us/request", row.cpu_ns_per_unit / 1000.0),
                )
            };
            table.add_row(vec![
                Cell::new(&row.workload),
                Cell::new(&row.kind),
                Cell::new(&row.label),
                report::right(rate),
                report::right(report::pct(row.gap_pct)),
                report::right(cpu),
            ]);
        }
        out.push_str(&table.to_string());
        out.push('\n');
        for n in &self.not_measurable {
            out.push_str(&format!("- {n}\n"));
        }
        let a = &self.model_assumptions;
        out.push_str(&format!(
            "\nMODEL, not a measurement — two packages, NIC on package 0: base {:.0} ns/request (measured here, NC), LLC line {:.0} ns, remote line {:.0} ns, DMA lines {}, socket lines {}, message lines {} x {} syscalls, pollution lines {}\n",
            a.base_ns, a.llc_ns, a.remote_ns, a.dma_lines, a.socket_lines, a.message_lines, a.syscalls, a.pollution_lines
        ));
        let mut model = report::table();
        model.set_header(["case", "placement", "ns/request", "relative rate"]);
        for m in &self.model {
            model.add_row(vec![
                Cell::new(&m.case),
                Cell::new(&m.label),
                report::right(format!("{:.0}", m.cost_ns)),
                report::right(format!("{:.3}", m.relative_throughput)),
            ]);
        }
        out.push_str(&model.to_string());
        out.push('\n');
    }

    /// One CSV row per measured placement (the model is in the JSON).
    fn csv_records(&self) -> Vec<Vec<String>> {
        self.rows
            .iter()
            .map(|row| {
                vec![
                    row.workload.clone(),
                    row.kind.clone(),
                    format!("{:.1}", row.rate.median),
                    row.gap_pct.map_or(String::new(), |g| format!("{g:.2}")),
                    format!("{:.1}", row.cpu_ns_per_unit),
                    row.rate.each.iter().map(|x| format!("{x:.1}")).collect::<Vec<_>>().join(";"),
                ]
            })
            .collect()
    }

    fn figures(&self) -> Vec<crate::report::figure::Figure> {
        super::figures::figures(self)
    }

    fn outline(&self) -> report::Outline<'_> {
        report::Outline::of("affinity — seed 003", &self.machine, &self.findings).on(&self.testbed)
    }
}
