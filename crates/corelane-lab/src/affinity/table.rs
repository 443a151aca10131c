//! `lab affinity`'s tables and CSV.

use comfy_table::Cell;

use super::model::ModelRow;
use super::{AffinityLabReport, AffinityRow};
use crate::experiment::Report;
use crate::report;

/// Seed 003's placements as measured here: one line per workload and placement, the rate
/// and CPU in the workload's unit (datagrams for udp, requests for tcp).
const COLUMNS: [report::Column<AffinityRow>; 6] = [
    ("workload", |r| Cell::new(&r.workload)),
    ("kind", |r| Cell::new(&r.kind)),
    ("placement", |r| Cell::new(&r.label)),
    ("rate", |r| {
        report::right(if r.workload == "udp" {
            report::mpps(r.rate.median)
        } else {
            format!("{:.0} req/s", r.rate.median)
        })
    }),
    ("vs NC", |r| report::right(report::pct(r.gap_pct))),
    ("CPU per unit", |r| {
        report::right(if r.workload == "udp" {
            format!("{:.0} ns/datagram", r.cpu_ns_per_unit)
        } else {
            format!("{:.2} us/request", r.cpu_ns_per_unit / 1000.0)
        })
    }),
];

/// The two-package model: one line per case and placement.
const MODEL_COLUMNS: [report::Column<ModelRow>; 4] = [
    ("case", |m| Cell::new(&m.case)),
    ("placement", |m| Cell::new(&m.label)),
    ("ns/request", |m| report::right(format!("{:.0}", m.cost_ns))),
    ("relative rate", |m| report::right(format!("{:.3}", m.relative_throughput))),
];

/// The CSV: one record per measured placement (the model is in the JSON).
const CSV_COLUMNS: [report::CsvColumn<AffinityRow>; 6] = [
    ("workload", |r| r.workload.clone()),
    ("kind", |r| r.kind.clone()),
    ("median", |r| format!("{:.1}", r.rate.median)),
    ("gap_pct", |r| r.gap_pct.map_or(String::new(), |g| format!("{g:.2}"))),
    ("cpu_ns_per_unit", |r| format!("{:.1}", r.cpu_ns_per_unit)),
    ("trials", |r| r.rate.joined(1)),
];

impl Report for AffinityLabReport {
    /// Seed 003's placements as measured here, what cannot be measured, and the model, as text.
    fn body(&self, out: &mut String) {
        out.push_str(&format!(
            "softirq (interrupt) CPU {}, other CPU {}, load generator on CPU {}; {} package(s), {} NUMA node(s); {}, medians\n\n",
            self.irq_cpu, self.other_cpu, self.load_cpu, self.packages, self.numa_nodes, self.header.schedule
        ));
        out.push_str(&report::table_of(&COLUMNS, &self.rows).to_string());
        out.push('\n');
        for n in &self.not_measurable {
            out.push_str(&format!("- {n}\n"));
        }
        let a = &self.model_assumptions;
        out.push_str(&format!(
            "\nMODEL, not a measurement — two packages, NIC on package 0: base {:.0} ns/request (measured here, NC), LLC line {:.0} ns, remote line {:.0} ns, DMA lines {}, socket lines {}, message lines {} x {} syscalls, pollution lines {}\n",
            a.base_ns, a.llc_ns, a.remote_ns, a.dma_lines, a.socket_lines, a.message_lines, a.syscalls, a.pollution_lines
        ));
        out.push_str(&report::table_of(&MODEL_COLUMNS, &self.model).to_string());
        out.push('\n');
    }

    fn csv_table(&self) -> report::Csv {
        report::Csv::of(&CSV_COLUMNS, &self.rows)
    }

    fn figures(&self) -> Vec<crate::report::figure::Figure> {
        super::figures::figures(self)
    }

    fn outline(&self) -> report::Outline<'_> {
        report::Outline::of("affinity — core partitioning", &self.header.machine, &self.findings)
            .on(&self.header.testbed)
    }
}
