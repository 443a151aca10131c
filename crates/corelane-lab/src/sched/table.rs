//! `lab sched`'s tables and CSV.

use comfy_table::Cell;

use super::SchedLabReport;
use crate::experiment::Report;
use crate::report;

impl Report for SchedLabReport {
    const CSV_HEADER: &'static str = "scheduler,workload,workers,mode,throughput_mevps,reorder_ratio,n_reordered_ratio,mean_extent,imbalance_cov,imbalance_max_over_mean,jain,p50_latency_us,p99_latency_us,p999_latency_us,migrations_per_sec,scheduling_share";

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
        let ratio = |v: Option<f64>| v.map_or("—".to_string(), |x| format!("{x:.2}x"));
        for workload in workloads {
            out.push_str(&format!("\nworkload {workload}\n"));
            let mut table = report::table();
            table.set_header([
                "mode",
                "workers",
                "scheduler",
                "Mev/s",
                "reorder",
                "n-reord",
                "CoV",
                "Jain",
                "p99 us",
                "migr/s",
                "vs atomic",
                "vs par. tput",
                "vs par. reorder",
                "sched %",
            ]);
            for row in self.rows.iter().filter(|row| row.run.workload == workload) {
                let x = &row.run;
                table.add_row(vec![
                    Cell::new(&x.mode),
                    report::right(x.workers.to_string()),
                    Cell::new(&x.scheduler),
                    report::right(format!("{:.2}", x.throughput_mevps)),
                    report::right(format!("{:.4}", x.reorder.reorder_ratio)),
                    report::right(format!("{:.4}", x.reorder.n_reordered_ratio)),
                    report::right(format!("{:.3}", x.imbalance_cov)),
                    report::right(format!("{:.3}", x.jain)),
                    report::right(format!("{:.1}", x.p99_latency_us)),
                    report::right(format!("{:.0}", x.migrations_per_sec)),
                    report::right(ratio(row.vs_dsw_atomic_throughput)),
                    report::right(ratio(row.vs_dsw_parallel_throughput)),
                    report::right(ratio(row.vs_dsw_parallel_reorder)),
                    report::right(
                        x.scheduling_share.map_or(String::new(), |s| format!("{:.0}", s * 100.0)),
                    ),
                ]);
            }
            out.push_str(&table.to_string());
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

    /// One CSV row per run.
    fn csv_records(&self) -> Vec<Vec<String>> {
        self.rows
            .iter()
            .map(|row| {
                let x = &row.run;
                vec![
                    x.scheduler.clone(),
                    x.workload.clone(),
                    x.workers.to_string(),
                    x.mode.clone(),
                    format!("{:.4}", x.throughput_mevps),
                    format!("{:.6}", x.reorder.reorder_ratio),
                    format!("{:.6}", x.reorder.n_reordered_ratio),
                    format!("{:.3}", x.reorder.mean_extent),
                    format!("{:.4}", x.imbalance_cov),
                    format!("{:.4}", x.imbalance_max_over_mean),
                    format!("{:.4}", x.jain),
                    format!("{:.2}", x.p50_latency_us),
                    format!("{:.2}", x.p99_latency_us),
                    format!("{:.2}", x.p999_latency_us),
                    format!("{:.1}", x.migrations_per_sec),
                    x.scheduling_share.map_or(String::new(), |s| format!("{s:.4}")),
                ]
            })
            .collect()
    }

    fn figures(&self) -> Vec<crate::report::figure::Figure> {
        super::figures::figures(self)
    }

    fn outline(&self) -> report::Outline<'_> {
        report::Outline::of("sched — seed 004", &self.machine, &self.outcome.findings)
            .skipping(&self.outcome.skipped)
    }
}
