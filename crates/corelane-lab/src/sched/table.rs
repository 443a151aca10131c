//! `lab sched`'s tables and CSV.

use comfy_table::Cell;

use super::{SchedLabReport, SchedRow};
use crate::experiment::Report;
use crate::report;

/// A workload's table: one line per scheduler, mode and workers, with its ratios to DSW.
const COLUMNS: [report::Column<SchedRow>; 14] = [
    ("mode", |r| Cell::new(r.run.mode)),
    ("workers", |r| report::right(r.run.workers.to_string())),
    ("scheduler", |r| Cell::new(r.run.scheduler)),
    ("Mev/s", |r| report::right(format!("{:.2}", r.run.throughput_mevps))),
    ("reorder", |r| report::right(format!("{:.4}", r.run.reorder.reorder_ratio))),
    ("n-reord", |r| report::right(format!("{:.4}", r.run.reorder.n_reordered_ratio))),
    ("CoV", |r| report::right(format!("{:.3}", r.run.imbalance_cov))),
    ("Jain", |r| report::right(format!("{:.3}", r.run.jain))),
    ("p99 us", |r| report::right(format!("{:.1}", r.run.p99_latency_us))),
    ("migr/s", |r| report::right(format!("{:.0}", r.run.migrations_per_sec))),
    ("vs atomic", |r| report::right(ratio(r.vs_dsw_atomic_throughput))),
    ("vs par. tput", |r| report::right(ratio(r.vs_dsw_parallel_throughput))),
    ("vs par. reorder", |r| report::right(ratio(r.vs_dsw_parallel_reorder))),
    ("sched %", |r| {
        report::right(r.run.scheduling_share.map_or(String::new(), |s| format!("{:.0}", s * 100.0)))
    }),
];

/// A ratio to DSW's, to two places, `—` where there is none.
fn ratio(v: Option<f64>) -> String {
    v.map_or("—".to_string(), |x| format!("{x:.2}x"))
}

/// The CSV: one record per run.
const CSV_COLUMNS: [report::CsvColumn<SchedRow>; 16] = [
    ("scheduler", |r| r.run.scheduler.to_string()),
    ("workload", |r| r.run.workload.clone()),
    ("workers", |r| r.run.workers.to_string()),
    ("mode", |r| r.run.mode.to_string()),
    ("throughput_mevps", |r| format!("{:.4}", r.run.throughput_mevps)),
    ("reorder_ratio", |r| format!("{:.6}", r.run.reorder.reorder_ratio)),
    ("n_reordered_ratio", |r| format!("{:.6}", r.run.reorder.n_reordered_ratio)),
    ("mean_extent", |r| format!("{:.3}", r.run.reorder.mean_extent)),
    ("imbalance_cov", |r| format!("{:.4}", r.run.imbalance_cov)),
    ("imbalance_max_over_mean", |r| format!("{:.4}", r.run.imbalance_max_over_mean)),
    ("jain", |r| format!("{:.4}", r.run.jain)),
    ("p50_latency_us", |r| format!("{:.2}", r.run.p50_latency_us)),
    ("p99_latency_us", |r| format!("{:.2}", r.run.p99_latency_us)),
    ("p999_latency_us", |r| format!("{:.2}", r.run.p999_latency_us)),
    ("migrations_per_sec", |r| format!("{:.1}", r.run.migrations_per_sec)),
    ("scheduling_share", |r| r.run.scheduling_share.map_or(String::new(), |s| format!("{s:.4}"))),
];

impl Report for SchedLabReport {
    /// A table per workload: every scheduler, simulated and threaded, with its ratios to DSW.
    fn body(&self, out: &mut String) {
        out.push_str(&format!(
            "sim: deterministic, {} completions per run, mean cost {:.0} ns (0.5–1.5x visible at dispatch, ±10 % unseen), rings of 64, offered 1.2x capacity; threads: producer on CPU {:?}, one worker, no per-event work\n",
            self.sim_events, self.mean_cost_ns, self.thread_cpus.first()
        ));
        let mut workloads: Vec<&str> = Vec::new();
        for row in &self.rows {
            if !workloads.contains(&row.run.workload.as_str()) {
                workloads.push(&row.run.workload);
            }
        }
        for workload in workloads {
            out.push_str(&format!("\nworkload {workload}\n"));
            let rows = self.rows.iter().filter(|row| row.run.workload == workload);
            out.push_str(&report::table_of(&COLUMNS, rows).to_string());
            out.push('\n');
        }
        if let Some(d) = &self.dpdk {
            out.push_str(&format!(
                "dpdk-test-eventdev (DSW, perf_queue, 1 producer, 1 worker): median {:.2} M events/s over {} seconds\n  {}\n",
                d.median_mevps,
                d.samples.len(),
                d.command
            ));
        }
    }

    fn csv_table(&self) -> report::Csv {
        report::Csv::of(&CSV_COLUMNS, &self.rows)
    }

    fn figures(&self) -> Vec<crate::report::figure::Figure> {
        super::figures::figures(self)
    }

    fn outline(&self) -> report::Outline<'_> {
        report::Outline::of(
            "sched — flow scheduling without reordering (Diffuser vs DSW)",
            &self.machine,
            &self.outcome.findings,
        )
        .skipping(&self.outcome.skipped)
    }
}
