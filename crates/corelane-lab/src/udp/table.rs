//! `lab udp`'s tables and CSV.

use comfy_table::Cell;

use super::{ConfigRow, PeerRow, UdpLabReport};
use crate::experiment::Report;
use crate::report;
use corelane::xdp::rx::XskStats;

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
            "sender on CPU {}, receiver CPUs {}; {}, medians of the steady seconds\n\n",
            self.sender_cpu, self.receiver_cpus, self.header.schedule
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
            "sender+si ns",
            "xsk lost",
        ]
        .map(String::from)
        .to_vec();
        header.extend(cpu_ids.iter().map(|c| format!("CPU{c} usr/sys/si %")));
        table.set_header(header);
        for row in &self.rows {
            let mut cells = vec![
                Cell::new(&row.config),
                report::right(report::mpps(row.offered_pps)),
                report::right(report::mpps(row.received.sent_pps)),
                report::right(report::mpps(row.pps.median)),
                report::right(row.gap_pct.map_or("—".to_string(), |g| format!("{g:+.1}%"))),
                report::right(format!("{:.0}", row.received.drops_per_sec)),
                report::right(format!("{:.3}%", row.received.reordered_pct)),
                // AF_XDP rows: the lanes' runtime + the NAPI threads' runtime.
                report::right(match row.charged.napi {
                    Some(napi) => format!("{:.0}+{napi:.0}", row.received.cpu_ns_per_datagram),
                    None => format!("{:.0}", row.received.cpu_ns_per_datagram),
                }),
                // The sender with the receive softirq its sends ran, plus ksoftirqd.
                report::right(row.charged.sender.map_or("—".to_string(), |s| {
                    format!("{:.0}", s + row.charged.ksoftirqd.unwrap_or(0.0))
                })),
                report::right(xsk_lost(row)),
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
            let steering = if self.header.testbed.fallback_reason.is_some() {
                "loopback"
            } else if !self.header.testbed.hosts.is_empty() {
                "the rx NIC as found"
            } else {
                "RPS off"
            };
            // The peers' receiver takes the first of the receiver CPUs (see peers::Stage).
            let cpus = self.receiver_cpus.parse::<corelane::topology::CpuList>().ok();
            let cpu = cpus.and_then(|c| c.cpus().first().map(ToString::to_string));
            out.push_str(&format!(
                "\npeers on the same testbed ({steering}, receiver pinned to CPU {}):\n",
                cpu.unwrap_or_else(|| self.receiver_cpus.clone())
            ));
            out.push_str(&peers.to_string());
            out.push('\n');
        }
        out.push_str(&format!("CPU accounting: {}\n", self.cpu_accounting));
    }

    /// One CSV row per configuration and per peer (peers leave the charged parts and the
    /// AF_XDP counters blank).
    fn csv_table(&self) -> report::Csv {
        let header = "kind,config,offered_pps,sent_pps,median_pps,gap_pct,drops,reordered_pct,cpu_ns_per_datagram,trials_pps,napi_ns,ksoftirqd_ns,sender_ns,whole_path_ns,xsk_lost,xsk_rx_ring_full,xsk_rx_dropped,xsk_fill_ring_empty,xsk_rx_invalid_descs";
        let rows = self.rows.iter().map(|row| {
            vec![
                "config".to_string(),
                row.config.clone(),
                format!("{:.0}", row.offered_pps),
                format!("{:.0}", row.received.sent_pps),
                format!("{:.0}", row.pps.median),
                row.gap_pct.map_or(String::new(), |g| format!("{g:.2}")),
                format!("{:.0}", row.received.drops_per_sec),
                format!("{:.4}", row.received.reordered_pct),
                format!("{:.1}", row.received.cpu_ns_per_datagram),
                row.pps.joined(0),
            ]
            .into_iter()
            .chain(charged_columns(row))
            .collect::<Vec<_>>()
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
            .into_iter()
            .chain(std::iter::repeat_n(String::new(), CHARGED_COLUMNS))
            .collect::<Vec<_>>()
        });
        report::Csv::with_header(header, rows.chain(peers).collect())
    }

    fn figures(&self) -> Vec<crate::report::figure::Figure> {
        super::figures::figures(self)
    }

    fn outline(&self) -> report::Outline<'_> {
        self.header.outline("udp — UDP receive scaling (Table 1)", &self.outcome)
    }
}

/// The AF_XDP sockets' losses as the table shows them: a count, `unknown`, or — (no AF_XDP).
fn xsk_lost(row: &ConfigRow) -> String {
    match (row.xsk_lost, row.xsk_unknown) {
        (_, true) => "unknown".into(),
        (Some(n), false) => n.to_string(),
        (None, false) => "—".into(),
    }
}

/// The CSV columns after `trials_pps`.
const CHARGED_COLUMNS: usize = 9;

/// The charged parts and the AF_XDP counters of a row, blank where not measured; an unknown
/// loss is `unknown`, never 0.
fn charged_columns(row: &ConfigRow) -> [String; CHARGED_COLUMNS] {
    let ns = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.1}"));
    let count = |f: fn(&XskStats) -> u64| match (row.xsk, row.xsk_unknown) {
        (_, true) => "unknown".to_string(),
        (Some(k), false) => f(&k).to_string(),
        (None, false) => String::new(),
    };
    [
        ns(row.charged.napi),
        ns(row.charged.ksoftirqd),
        ns(row.charged.sender),
        ns(super::bypass::whole_ns(row)),
        count(XskStats::rx_lost),
        count(|k| k.rx_ring_full),
        count(|k| k.rx_dropped),
        count(|k| k.rx_fill_ring_empty_descs),
        count(|k| k.rx_invalid_descs),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use corelane::stats::CpuSplit;

    fn report() -> UdpLabReport {
        let split =
            |cpu| CpuSplit { cpu, user_pct: 1.0, sys_pct: 2.0, softirq_pct: 3.0, idle_pct: 94.0 };
        UdpLabReport {
            header: crate::summary::Header {
                testbed: crate::testbed::TestbedReport {
                    network: "test".into(),
                    ..Default::default()
                },
                machine: "test".into(),
                schedule: crate::summary::Schedule::of(1, std::time::Duration::from_secs(3)),
            },
            sender_cpu: 0,
            receiver_cpus: "1".into(),
            rows: vec![ConfigRow {
                hosts: Vec::new(),
                config: "default".into(),
                label: "default".into(),
                offered_pps: 1e6,
                pps: crate::summary::Trials::of([5e5]),
                gap_pct: Some(0.0),
                received: crate::stage::udp::Received {
                    sent_pps: 1e6,
                    drops_per_sec: 7.0,
                    cpu_ns_per_datagram: 900.0,
                    reordered_pct: 0.5,
                    lane_pps: vec![5e5],
                },
                cpu: vec![split(0), split(1)],
                charged: crate::stage::ChargedNs {
                    napi: None,
                    sender: Some(800.0),
                    ksoftirqd: Some(4.0),
                },
                xsk_lost: None,
                xsk: None,
                xsk_unknown: false,
                xdp_mode: None,
                nic: None,
            }],
            peers: Vec::new(),
            cpu_accounting: String::new(),
            outcome: crate::summary::Outcome { skipped: Vec::new(), findings: Vec::new() },
        }
    }

    /// The shared header keeps the keys `lab udp`'s JSON always had, at the top level.
    #[test]
    fn the_report_keeps_its_header_keys_at_the_top() {
        let json = serde_json::to_value(report()).unwrap();
        let keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
        for key in ["network", "machine", "trials", "duration_secs", "sender_cpu", "receiver_cpus"]
        {
            assert!(keys.contains(&key), "{key} missing: {keys:?}");
        }
        assert!(!keys.contains(&"header") && !keys.contains(&"schedule"), "{keys:?}");
        assert_eq!((&json["trials"], &json["duration_secs"]), (&1.into(), &3.0.into()));
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
        assert_eq!((at("sender_ns"), at("whole_path_ns"), at("xsk_lost")), ("800.0", "1704.0", ""));
    }

    /// An AF_XDP row's counters in the table and the CSV: counts when read, `unknown` (never 0)
    /// when a trial's could not be read.
    #[test]
    fn an_af_xdp_rows_socket_counters_show_and_an_unknown_loss_is_not_zero() {
        let mut r = report();
        let row = &mut r.rows[0];
        row.config = "af-xdp".into();
        row.charged.napi = Some(650.0);
        row.xsk = Some(XskStats { rx_ring_full: 5, rx_dropped: 2, ..XskStats::default() });
        row.xsk_lost = Some(7);
        let csv = |r: &UdpLabReport| {
            let csv = String::from_utf8(r.csv().unwrap()).unwrap();
            let header: Vec<String> =
                csv.lines().next().unwrap().split(',').map(String::from).collect();
            let row: Vec<String> =
                csv.lines().nth(1).unwrap().split(',').map(String::from).collect();
            move |name: &str| row[header.iter().position(|h| h == name).unwrap()].clone()
        };
        let at = csv(&r);
        assert_eq!(
            (at("xsk_lost"), at("xsk_rx_ring_full"), at("xsk_rx_dropped")),
            ("7".into(), "5".into(), "2".into())
        );
        assert_eq!(at("whole_path_ns"), "2354.0", "lanes + NAPI + ksoftirqd + sender");
        let line = r.text().lines().find(|l| l.contains("af-xdp")).unwrap().to_string();
        assert!(
            line.contains("900+650") && line.contains(" 804 ") && line.contains(" 7 "),
            "{line}"
        );
        let row = &mut r.rows[0];
        (row.xsk, row.xsk_lost, row.xsk_unknown) = (None, None, true);
        let at = csv(&r);
        assert_eq!((at("xsk_lost"), at("xsk_rx_ring_full")), ("unknown".into(), "unknown".into()));
        let line = r.text().lines().find(|l| l.contains("af-xdp")).unwrap().to_string();
        assert!(line.contains("unknown"), "{line}");
    }
}
