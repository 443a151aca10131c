//! Turning lab results into what people read: a table in the seed's shape, JSON, CSV.
//! Files are written to a temporary name beside the target and renamed over it when complete,
//! so an interrupted run never leaves a half-written report.

use std::path::Path;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};

use crate::affinity::AffinityLabReport;
use crate::copy::CopyLabReport;
use crate::sched::SchedLabReport;
use crate::tcp::TcpLabReport;
use crate::udp::UdpLabReport;
use crate::LabError;

fn mpps(pps: f64) -> String {
    format!("{:.3}M", pps / 1e6)
}

/// Appends a report's findings, one bullet each, under a heading.
fn push_findings(out: &mut String, findings: &[String]) {
    if !findings.is_empty() {
        out.push_str("\nfindings:\n");
        for f in findings {
            out.push_str(&format!("- {f}\n"));
        }
    }
}

fn right(text: String) -> Cell {
    Cell::new(text).set_alignment(CellAlignment::Right)
}

/// The Table 1 analog, the peers table, what was skipped and the findings, as text.
pub fn udp_text(r: &UdpLabReport) -> String {
    let mut out = String::new();
    out.push_str(&format!("corelane lab udp — seed 000, Table 1 on {}\n", r.machine));
    out.push_str(&format!("testbed: {}\n", r.network));
    if let Some(reason) = &r.fallback_reason {
        out.push_str(&format!("note: {reason}\n"));
    }
    out.push_str(&format!(
        "sender on CPU {}, receiver CPUs {}; {} trial(s) of {}s, medians of the steady seconds\n\n",
        r.sender_cpu, r.receiver_cpus, r.trials, r.duration_secs
    ));
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    let cpu_ids: Vec<usize> =
        r.rows.first().map(|row| row.cpu.iter().map(|c| c.cpu).collect()).unwrap_or_default();
    let mut header: Vec<String> = [
        "configuration",
        "offered",
        "sent",
        "received",
        "gap",
        "drops/s",
        "reordered",
        "rx ns/dgram",
    ]
    .map(String::from)
    .to_vec();
    header.extend(cpu_ids.iter().map(|c| format!("CPU{c} usr/sys/si %")));
    table.set_header(header);
    for row in &r.rows {
        let mut cells = vec![
            Cell::new(&row.config),
            right(mpps(row.offered_pps)),
            right(mpps(row.sent_pps)),
            right(mpps(row.median_pps)),
            right(row.gap_pct.map_or("—".to_string(), |g| format!("{g:+.1}%"))),
            right(format!("{:.0}", row.drops_per_sec)),
            right(format!("{:.3}%", row.reordered_pct)),
            right(format!("{:.0}", row.cpu_ns_per_datagram)),
        ];
        for id in &cpu_ids {
            let text = row
                .cpu
                .iter()
                .find(|c| c.cpu == *id)
                .map(|c| format!("{:.0}/{:.0}/{:.0}", c.user_pct, c.sys_pct, c.softirq_pct))
                .unwrap_or_default();
            cells.push(right(text));
        }
        table.add_row(cells);
    }
    out.push_str(&table.to_string());
    out.push('\n');
    for row in &r.rows {
        out.push_str(&format!("  {:<14} {}\n", row.config, row.label));
    }
    if !r.peers.is_empty() {
        let mut peers = Table::new();
        peers.load_preset(UTF8_FULL_CONDENSED);
        peers.set_header([
            "receiver",
            "driven by",
            "received",
            "rx ns/dgram",
            "corelane pps ×",
            "their CPU ×",
        ]);
        for p in &r.peers {
            let ratio = |x: Option<f64>| x.map_or("—".to_string(), |v| format!("{v:.2}"));
            peers.add_row(vec![
                Cell::new(&p.receiver),
                Cell::new(&p.sender),
                right(mpps(p.median_pps)),
                right(format!("{:.0}", p.cpu_ns_per_datagram)),
                right(ratio(p.corelane_pps_ratio)),
                right(ratio(p.corelane_cpu_ratio)),
            ]);
        }
        let steering = if r.fallback_reason.is_some() { "loopback" } else { "RPS off" };
        out.push_str(&format!(
            "\npeers on the same testbed ({steering}, receiver pinned to CPU {}):\n",
            r.receiver_cpus
        ));
        out.push_str(&peers.to_string());
        out.push('\n');
    }
    for s in &r.skipped {
        out.push_str(&format!("skipped: {s}\n"));
    }
    push_findings(&mut out, &r.findings);
    out
}

/// Seed 002's tables, the modern methods, the trees and the findings, as text.
pub fn copy_text(r: &CopyLabReport) -> String {
    let mut out = String::new();
    out.push_str(&format!("corelane lab copy — seed 002 on {}\n", r.machine));
    out.push_str(&format!("scratch: {}\nhuge pages: {}\n", r.scratch, r.huge_scratch));
    out.push_str(&format!(
        "file: {} MiB; {} trial(s) per row, medians; memcpy of the same bytes: {:.2} GB/s\n\n",
        r.size_bytes >> 20,
        r.trials,
        r.memcpy_gb_per_sec
    ));
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header([
        "section",
        "configuration",
        "ran",
        "seconds",
        "% of 1K",
        "GB/s",
        "of memcpy",
        "calls/GiB",
    ]);
    for row in &r.rows {
        table.add_row(vec![
            Cell::new(&row.section),
            Cell::new(&row.config),
            Cell::new(&row.ran),
            right(format!("{:.3}", row.median_secs)),
            right(row.pct_of_baseline.map_or(String::new(), |p| format!("{p:.1}%"))),
            right(format!("{:.2}", row.gb_per_sec)),
            right(format!("{:.0}%", row.fraction_of_memcpy * 100.0)),
            right(row.syscalls_per_gib.map_or(String::new(), |c| format!("{c:.0}"))),
        ]);
    }
    out.push_str(&table.to_string());
    out.push('\n');
    for row in r.rows.iter().filter(|row| row.note.is_some()) {
        out.push_str(&format!("note ({}): {}\n", row.config, row.note.as_deref().unwrap_or("")));
    }
    push_findings(&mut out, &r.findings);
    out
}

/// One CSV row per configuration.
pub fn copy_csv(r: &CopyLabReport) -> Result<Vec<u8>, LabError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let csv_err = |e: csv::Error| LabError::Testbed(format!("cannot format CSV: {e}"));
    w.write_record([
        "section",
        "config",
        "ran",
        "median_secs",
        "pct_of_baseline",
        "gb_per_sec",
        "fraction_of_memcpy",
        "syscalls_per_gib",
        "trials_secs",
    ])
    .map_err(csv_err)?;
    for row in &r.rows {
        w.write_record([
            row.section.clone(),
            row.config.clone(),
            row.ran.clone(),
            format!("{:.4}", row.median_secs),
            row.pct_of_baseline.map_or(String::new(), |p| format!("{p:.2}")),
            format!("{:.3}", row.gb_per_sec),
            format!("{:.3}", row.fraction_of_memcpy),
            row.syscalls_per_gib.map_or(String::new(), |c| format!("{c:.0}")),
            row.trials_secs.iter().map(|x| format!("{x:.4}")).collect::<Vec<_>>().join(";"),
        ])
        .map_err(csv_err)?;
    }
    w.into_inner().map_err(|e| LabError::Testbed(format!("cannot format CSV: {e}")))
}

/// Checks up front that a report can be written to `path` (its directory exists).
pub fn check_writable(path: &Path) -> Result<(), LabError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(LabError::Testbed(format!(
            "cannot write {}: directory {} does not exist (create it or choose another path)",
            path.display(),
            dir.display()
        )));
    }
    Ok(())
}

/// Writes `bytes` to `path` atomically (temporary file + rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), LabError> {
    check_writable(path)?;
    corelane::fs::write_atomic(path, bytes)
        .map_err(|e| LabError::io(format!("cannot write {}", path.display()), e))
}

/// One CSV row per configuration and per peer.
pub fn udp_csv(r: &UdpLabReport) -> Result<Vec<u8>, LabError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let csv_err = |e: csv::Error| LabError::Testbed(format!("cannot format CSV: {e}"));
    w.write_record([
        "kind",
        "config",
        "offered_pps",
        "sent_pps",
        "median_pps",
        "gap_pct",
        "drops",
        "reordered_pct",
        "cpu_ns_per_datagram",
        "trials_pps",
    ])
    .map_err(csv_err)?;
    let join = |v: &[f64]| v.iter().map(|x| format!("{x:.0}")).collect::<Vec<_>>().join(";");
    for row in &r.rows {
        w.write_record([
            "config".to_string(),
            row.config.clone(),
            format!("{:.0}", row.offered_pps),
            format!("{:.0}", row.sent_pps),
            format!("{:.0}", row.median_pps),
            row.gap_pct.map_or(String::new(), |g| format!("{g:.2}")),
            format!("{:.0}", row.drops_per_sec),
            format!("{:.4}", row.reordered_pct),
            format!("{:.1}", row.cpu_ns_per_datagram),
            join(&row.trials_pps),
        ])
        .map_err(csv_err)?;
    }
    for p in &r.peers {
        w.write_record([
            "peer".to_string(),
            format!("{} <- {}", p.receiver, p.sender),
            String::new(),
            String::new(),
            format!("{:.0}", p.median_pps),
            String::new(),
            String::new(),
            String::new(),
            format!("{:.1}", p.cpu_ns_per_datagram),
            join(&p.trials_pps),
        ])
        .map_err(csv_err)?;
    }
    w.into_inner().map_err(|e| LabError::Testbed(format!("cannot format CSV: {e}")))
}

fn pct(value: Option<f64>) -> String {
    value.map_or("—".to_string(), |g| format!("{g:+.1}%"))
}

/// Seed 001's table per workload, the load generators, ITR and the findings, as text.
pub fn tcp_text(r: &TcpLabReport) -> String {
    let mut out = String::new();
    out.push_str(&format!("corelane lab tcp — seed 001 on {}\n", r.machine));
    out.push_str(&format!("testbed: {}\n", r.network));
    if let Some(reason) = &r.fallback_reason {
        out.push_str(&format!("note: {reason}\n"));
    }
    out.push_str(&format!(
        "server on CPU {} (1 lane / worker), client on CPU {}, {} connections, body {:?} ({} bytes); {} trial(s) of {:.0}s, medians\n\n",
        r.server_cpu, r.client_cpu, r.connections, r.body, r.body.len(), r.trials, r.duration_secs
    ));
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
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
    for row in &r.rows {
        table.add_row(vec![
            Cell::new(&row.workload),
            Cell::new(&row.server),
            Cell::new(&row.label),
            right(format!("{:.0}", row.median_rps)),
            right(pct(row.gain_pct)),
            right(format!("{:.0}", row.p99_us)),
            right(format!("{:.2}", row.cpu_us_per_request)),
            right(format!("{:.2}", row.user_us_per_request)),
            right(pct(row.cpu_gain_pct)),
            right(format!("{}", row.errors + row.non_2xx)),
        ]);
    }
    out.push_str(&table.to_string());
    out.push_str(&format!("\ninterrupt moderation (ITR): {}\n", r.interrupt_moderation));
    for l in &r.load_generators {
        out.push_str(&format!("load generator {}: {:.0} req/s (median)\n", l.tool, l.median_rps));
    }
    for s in &r.skipped {
        out.push_str(&format!("skipped: {s}\n"));
    }
    push_findings(&mut out, &r.findings);
    out
}

/// One CSV row per server configuration and workload.
pub fn tcp_csv(r: &TcpLabReport) -> Result<Vec<u8>, LabError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let csv_err = |e: csv::Error| LabError::Testbed(format!("cannot format CSV: {e}"));
    w.write_record([
        "workload",
        "server",
        "config",
        "median_rps",
        "gain_pct",
        "p99_us",
        "cpu_us_per_request",
        "user_us_per_request",
        "cpu_gain_pct",
        "errors",
        "non_2xx",
        "trials_rps",
    ])
    .map_err(csv_err)?;
    let opt = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.2}"));
    for row in &r.rows {
        w.write_record([
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
        ])
        .map_err(csv_err)?;
    }
    w.into_inner().map_err(|e| LabError::Testbed(format!("cannot format CSV: {e}")))
}

/// Seed 003's placements as measured here, what cannot be measured, and the model, as text.
pub fn affinity_text(r: &AffinityLabReport) -> String {
    let mut out = String::new();
    out.push_str(&format!("corelane lab affinity — seed 003 on {}\n", r.machine));
    out.push_str(&format!("testbed: {}\n", r.network));
    if let Some(reason) = &r.fallback_reason {
        out.push_str(&format!("note: {reason}\n"));
    }
    out.push_str(&format!(
        "softirq (interrupt) CPU {}, load generator on CPU {}; {} package(s), {} NUMA node(s); {} trial(s) of {:.0}s, medians\n\n",
        r.irq_cpu, r.other_cpu, r.packages, r.numa_nodes, r.trials, r.duration_secs
    ));
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(["workload", "kind", "placement", "rate", "vs NC", "CPU per unit"]);
    for row in &r.rows {
        let (rate, cpu) = if row.workload == "udp" {
            (mpps(row.median), format!("{:.0} ns/datagram", row.cpu_ns_per_unit))
        } else {
            (
                format!("{:.0} req/s", row.median),
                format!("{:.2} us/request", row.cpu_ns_per_unit / 1000.0),
            )
        };
        table.add_row(vec![
            Cell::new(&row.workload),
            Cell::new(&row.kind),
            Cell::new(&row.label),
            right(rate),
            right(pct(row.gap_pct)),
            right(cpu),
        ]);
    }
    out.push_str(&table.to_string());
    out.push('\n');
    for n in &r.not_measurable {
        out.push_str(&format!("- {n}\n"));
    }
    let a = &r.model_assumptions;
    out.push_str(&format!(
        "\nMODEL, not a measurement — two packages, NIC on package 0: base {:.0} ns/request (measured here, NC), LLC line {:.0} ns, remote line {:.0} ns, DMA lines {}, socket lines {}, message lines {} x {} syscalls, pollution lines {}\n",
        a.base_ns, a.llc_ns, a.remote_ns, a.dma_lines, a.socket_lines, a.message_lines, a.syscalls, a.pollution_lines
    ));
    let mut model = Table::new();
    model.load_preset(UTF8_FULL_CONDENSED);
    model.set_header(["case", "placement", "ns/request", "relative rate"]);
    for m in &r.model {
        model.add_row(vec![
            Cell::new(&m.case),
            Cell::new(&m.label),
            right(format!("{:.0}", m.cost_ns)),
            right(format!("{:.3}", m.relative_throughput)),
        ]);
    }
    out.push_str(&model.to_string());
    out.push('\n');
    push_findings(&mut out, &r.findings);
    out
}

/// One CSV row per measured placement (the model is in the JSON).
pub fn affinity_csv(r: &AffinityLabReport) -> Result<Vec<u8>, LabError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let csv_err = |e: csv::Error| LabError::Testbed(format!("cannot format CSV: {e}"));
    w.write_record(["workload", "kind", "median", "gap_pct", "cpu_ns_per_unit", "trials"])
        .map_err(csv_err)?;
    for row in &r.rows {
        w.write_record([
            row.workload.clone(),
            row.kind.clone(),
            format!("{:.1}", row.median),
            row.gap_pct.map_or(String::new(), |g| format!("{g:.2}")),
            format!("{:.1}", row.cpu_ns_per_unit),
            row.trials.iter().map(|x| format!("{x:.1}")).collect::<Vec<_>>().join(";"),
        ])
        .map_err(csv_err)?;
    }
    w.into_inner().map_err(|e| LabError::Testbed(format!("cannot format CSV: {e}")))
}

/// A table per workload: every scheduler, simulated and threaded, with its ratios to DSW.
pub fn sched_text(r: &SchedLabReport) -> String {
    let mut out = String::new();
    out.push_str(&format!("corelane lab sched — seed 004 on {}\n", r.machine));
    out.push_str(&format!(
        "sim: deterministic, {} completions per run, mean cost {:.0} ns (0.5–1.5x visible at dispatch, ±10 % unseen), rings of 64, offered 1.2x capacity; threads: producer on CPU {:?}, one worker, no per-event work\n",
        r.sim_events, r.mean_cost_ns, r.thread_cpus.first()
    ));
    let mut workloads: Vec<&str> = Vec::new();
    for row in &r.rows {
        if !workloads.contains(&row.run.workload.as_str()) {
            workloads.push(&row.run.workload);
        }
    }
    let ratio = |v: Option<f64>| v.map_or("—".to_string(), |x| format!("{x:.2}x"));
    for workload in workloads {
        out.push_str(&format!("\nworkload {workload}\n"));
        let mut table = Table::new();
        table.load_preset(UTF8_FULL_CONDENSED);
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
        for row in r.rows.iter().filter(|row| row.run.workload == workload) {
            let x = &row.run;
            table.add_row(vec![
                Cell::new(&x.mode),
                right(x.workers.to_string()),
                Cell::new(&x.scheduler),
                right(format!("{:.2}", x.throughput_mevps)),
                right(format!("{:.4}", x.reorder.reorder_ratio)),
                right(format!("{:.4}", x.reorder.n_reordered_ratio)),
                right(format!("{:.3}", x.imbalance_cov)),
                right(format!("{:.3}", x.jain)),
                right(format!("{:.1}", x.p99_latency_us)),
                right(format!("{:.0}", x.migrations_per_sec)),
                right(ratio(row.vs_dsw_atomic_throughput)),
                right(ratio(row.vs_dsw_parallel_throughput)),
                right(ratio(row.vs_dsw_parallel_reorder)),
                right(x.scheduling_share.map_or(String::new(), |s| format!("{:.0}", s * 100.0))),
            ]);
        }
        out.push_str(&table.to_string());
        out.push('\n');
    }
    if let Some(d) = &r.dpdk {
        out.push_str(&format!(
            "dpdk-test-eventdev (DSW, perf_queue, 1 producer, 1 worker): median {:.2} M events/s over {} seconds\n  {}\n",
            d.median_mevps,
            d.samples.len(),
            d.command
        ));
    }
    for s in &r.skipped {
        out.push_str(&format!("skipped: {s}\n"));
    }
    push_findings(&mut out, &r.findings);
    out
}

/// One CSV row per run.
pub fn sched_csv(r: &SchedLabReport) -> Result<Vec<u8>, LabError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let csv_err = |e: csv::Error| LabError::Testbed(format!("cannot format CSV: {e}"));
    w.write_record([
        "scheduler",
        "workload",
        "workers",
        "mode",
        "throughput_mevps",
        "reorder_ratio",
        "n_reordered_ratio",
        "mean_extent",
        "imbalance_cov",
        "imbalance_max_over_mean",
        "jain",
        "p50_latency_us",
        "p99_latency_us",
        "p999_latency_us",
        "migrations_per_sec",
        "scheduling_share",
    ])
    .map_err(csv_err)?;
    for row in &r.rows {
        let x = &row.run;
        w.write_record([
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
        ])
        .map_err(csv_err)?;
    }
    w.into_inner().map_err(|e| LabError::Testbed(format!("cannot format CSV: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udp::ConfigRow;
    use corelane::stats::CpuSplit;

    fn report() -> UdpLabReport {
        let split =
            |cpu| CpuSplit { cpu, user_pct: 1.0, sys_pct: 2.0, softirq_pct: 3.0, idle_pct: 94.0 };
        UdpLabReport {
            network: "test".into(),
            fallback_reason: None,
            machine: "test".into(),
            sender_cpu: 0,
            receiver_cpus: "1".into(),
            trials: 1,
            duration_secs: 3,
            rows: vec![ConfigRow {
                config: "default".into(),
                label: "default".into(),
                offered_pps: 1e6,
                sent_pps: 1e6,
                trials_pps: vec![5e5],
                median_pps: 5e5,
                gap_pct: Some(0.0),
                drops_per_sec: 7.0,
                cpu_ns_per_datagram: 900.0,
                reordered_pct: 0.5,
                lane_pps: vec![5e5],
                cpu: vec![split(0), split(1)],
            }],
            peers: Vec::new(),
            skipped: Vec::new(),
            findings: Vec::new(),
            removed_stale_namespaces: Vec::new(),
        }
    }

    #[test]
    fn table_header_has_a_column_for_every_cell() {
        let text = udp_text(&report());
        let header = text.lines().find(|l| l.contains("configuration")).unwrap();
        let row = text.lines().find(|l| l.contains("default") && l.contains("0.500M")).unwrap();
        assert_eq!(header.matches('┆').count(), row.matches('┆').count(), "{text}");
        assert!(row.contains("0.500%") && row.contains("1/2/3"), "{row}");
    }

    #[test]
    fn csv_rows_carry_the_required_columns() {
        let csv = String::from_utf8(udp_csv(&report()).unwrap()).unwrap();
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let row: Vec<&str> = lines.next().unwrap().split(',').collect();
        assert_eq!(header.len(), row.len());
        let at = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
        assert_eq!((at("config"), at("median_pps"), at("drops")), ("default", "500000", "7"));
        assert_eq!((at("gap_pct"), at("cpu_ns_per_datagram")), ("0.00", "900.0"));
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap().keep();
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.json");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_missing_directory_is_named() {
        let err =
            check_writable(Path::new("/nonexistent-corelane/out.csv")).unwrap_err().to_string();
        assert!(err.contains("/nonexistent-corelane does not exist"), "{err}");
    }
}
