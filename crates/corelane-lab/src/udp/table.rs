//! `lab udp`'s tables and CSV.

use comfy_table::Cell;

use super::{PeerRow, UdpLabReport};
use crate::experiment::Report;
use crate::report;

/// The peers' table: one line per peer receiver and its sender.
const PEER_COLUMNS: [report::Column<PeerRow>; 6] = [
    ("receiver", |p| Cell::new(&p.receiver)),
    ("driven by", |p| Cell::new(&p.sender)),
    ("received", |p| report::right(report::mpps(p.pps.median))),
    ("rx ns/dgram", |p| report::right(format!("{:.0}", p.cpu_ns_per_datagram))),
    ("corelane pps ×", |p| report::right(ratio(p.corelane_pps_ratio))),
    ("their CPU ×", |p| report::right(ratio(p.corelane_cpu_ratio))),
];

/// A ratio to two places, `—` where there is none.
fn ratio(x: Option<f64>) -> String {
    x.map_or("—".to_string(), |v| format!("{v:.2}"))
}

impl Report for UdpLabReport {
    /// The Table 1 analog, the peers table, what was skipped and the findings, as text.
    fn body(&self, out: &mut String) {
        out.push_str(&format!(
            "sender on CPU {}, receiver CPUs {}; {} trial(s) of {}s, medians of the steady seconds\n\n",
            self.sender_cpu, self.receiver_cpus, self.trials, self.duration_secs
        ));
        let mut table = report::table();
        let cpu_ids: Vec<usize> = self
            .rows
            .first()
            .map(|row| row.cpu.iter().map(|c| c.cpu).collect())
            .unwrap_or_default();
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
        for row in &self.rows {
            let mut cells = vec![
                Cell::new(&row.config),
                report::right(report::mpps(row.offered_pps)),
                report::right(report::mpps(row.sent_pps)),
                report::right(report::mpps(row.pps.median)),
                report::right(row.gap_pct.map_or("—".to_string(), |g| format!("{g:+.1}%"))),
                report::right(format!("{:.0}", row.drops_per_sec)),
                report::right(format!("{:.3}%", row.reordered_pct)),
                // AF_XDP rows: the lanes' runtime + the NAPI threads' runtime.
                report::right(match row.napi_ns_per_datagram {
                    Some(napi) => format!("{:.0}+{napi:.0}", row.cpu_ns_per_datagram),
                    None => format!("{:.0}", row.cpu_ns_per_datagram),
                }),
            ];
            for id in &cpu_ids {
                let text = row
                    .cpu
                    .iter()
                    .find(|c| c.cpu == *id)
                    .map(|c| format!("{:.0}/{:.0}/{:.0}", c.user_pct, c.sys_pct, c.softirq_pct))
                    .unwrap_or_default();
                cells.push(report::right(text));
            }
            table.add_row(cells);
        }
        out.push_str(&table.to_string());
        out.push('\n');
        for row in &self.rows {
            out.push_str(&format!("  {:<14} {}\n", row.config, row.label));
        }
        let per_host: Vec<_> = self.rows.iter().filter(|r| !r.hosts.is_empty()).collect();
        if !per_host.is_empty() {
            out.push_str("\nper load host (the row's received figure is the total):\n");
        }
        for row in per_host {
            for h in &row.hosts {
                out.push_str(&format!(
                    "  {:<14} {}\n",
                    row.config,
                    crate::stage::load::host_line(h)
                ));
            }
        }
        if !self.peers.is_empty() {
            let peers = report::table_of(&PEER_COLUMNS, &self.peers);
            let steering =
                if self.testbed.fallback_reason.is_some() { "loopback" } else { "RPS off" };
            out.push_str(&format!(
                "\npeers on the same testbed ({steering}, receiver pinned to CPU {}):\n",
                self.receiver_cpus
            ));
            out.push_str(&peers.to_string());
            out.push('\n');
        }
        out.push_str(&format!("CPU accounting: {}\n", self.cpu_accounting));
    }

    /// One CSV row per configuration and per peer.
    fn csv_table(&self) -> report::Csv {
        let header = "kind,config,offered_pps,sent_pps,median_pps,gap_pct,drops,reordered_pct,cpu_ns_per_datagram,trials_pps";
        let rows = self.rows.iter().map(|row| {
            vec![
                "config".to_string(),
                row.config.clone(),
                format!("{:.0}", row.offered_pps),
                format!("{:.0}", row.sent_pps),
                format!("{:.0}", row.pps.median),
                row.gap_pct.map_or(String::new(), |g| format!("{g:.2}")),
                format!("{:.0}", row.drops_per_sec),
                format!("{:.4}", row.reordered_pct),
                format!("{:.1}", row.cpu_ns_per_datagram),
                row.pps.joined(0),
            ]
        });
        let peers = self.peers.iter().map(|p| {
            let blank = String::new;
            vec![
                "peer".to_string(),
                format!("{} <- {}", p.receiver, p.sender),
                blank(),
                blank(),
                format!("{:.0}", p.pps.median),
                blank(),
                blank(),
                blank(),
                format!("{:.1}", p.cpu_ns_per_datagram),
                p.pps.joined(0),
            ]
        });
        report::Csv::with_header(header, rows.chain(peers).collect())
    }

    fn figures(&self) -> Vec<crate::report::figure::Figure> {
        super::figures::figures(self)
    }

    fn outline(&self) -> report::Outline<'_> {
        report::Outline::of("udp — seed 000, Table 1", &self.machine, &self.findings)
            .on(&self.testbed)
            .skipping(&self.skipped)
    }
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
            testbed: crate::testbed::TestbedReport { network: "test".into(), ..Default::default() },
            machine: "test".into(),
            sender_cpu: 0,
            receiver_cpus: "1".into(),
            trials: 1,
            duration_secs: 3,
            rows: vec![ConfigRow {
                hosts: Vec::new(),
                config: "default".into(),
                label: "default".into(),
                offered_pps: 1e6,
                sent_pps: 1e6,
                pps: crate::summary::Trials::of([5e5]),
                gap_pct: Some(0.0),
                drops_per_sec: 7.0,
                cpu_ns_per_datagram: 900.0,
                reordered_pct: 0.5,
                lane_pps: vec![5e5],
                cpu: vec![split(0), split(1)],
                napi_ns_per_datagram: None,
                xsk_lost: None,
                nic: None,
            }],
            peers: Vec::new(),
            skipped: Vec::new(),
            cpu_accounting: String::new(),
            findings: Vec::new(),
        }
    }

    #[test]
    fn table_header_has_a_column_for_every_cell() {
        let text = report().text();
        let header = text.lines().find(|l| l.contains("configuration")).unwrap();
        let row = text.lines().find(|l| l.contains("default") && l.contains("0.500M")).unwrap();
        assert_eq!(header.matches('┆').count(), row.matches('┆').count(), "{text}");
        assert!(row.contains("0.500%") && row.contains("1/2/3"), "{row}");
    }

    #[test]
    fn csv_rows_carry_the_required_columns() {
        let csv = String::from_utf8(report().csv().unwrap()).unwrap();
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let row: Vec<&str> = lines.next().unwrap().split(',').collect();
        assert_eq!(header.len(), row.len());
        let at = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
        assert_eq!((at("config"), at("median_pps"), at("drops")), ("default", "500000", "7"));
        assert_eq!((at("gap_pct"), at("cpu_ns_per_datagram")), ("0.00", "900.0"));
    }
}
