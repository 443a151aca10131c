//! What `corelane report` draws of `lab udp`: datagrams/s and receiver CPU per datagram by
//! configuration beside the peers, and each configuration's per-CPU time split.

use super::UdpLabReport;
use crate::report::figure::{Bar, Bars, Figure, Role, Stacked, StackedBar};

pub(super) fn figures(r: &UdpLabReport) -> Vec<Figure> {
    let role = |config: &str| if config == "default" { Role::Default } else { Role::Config };
    // A peer pairing by its receiver and its sender's program (the sender's options are in
    // the table).
    let peer = |receiver: &str, sender: &str| {
        format!("{receiver} ← {}", sender.split(" (").next().unwrap_or(sender))
    };
    let rate = r
        .rows
        .iter()
        .map(|row| Bar::new(&row.config, role(&row.config), row.pps.median, &row.pps.each))
        .chain(r.peers.iter().map(|p| {
            Bar::new(peer(&p.receiver, &p.sender), Role::Peer, p.pps.median, &p.pps.each)
        }));
    let cpu = r
        .rows
        .iter()
        .map(|row| Bar::new(&row.config, role(&row.config), row.received.cpu_ns_per_datagram, &[]))
        .chain(r.peers.iter().map(|p| {
            Bar::new(peer(&p.receiver, &p.sender), Role::Peer, p.cpu_ns_per_datagram, &[])
        }));
    let split = r.rows.iter().flat_map(|row| {
        row.cpu.iter().map(move |c| StackedBar {
            label: format!("{} · CPU {}", row.config, c.cpu),
            values: vec![c.user_pct, c.sys_pct, c.softirq_pct, c.idle_pct],
        })
    });
    vec![
        Figure::Bars(Bars {
            id: "rate".into(),
            title: "Datagrams/s received, by configuration, beside the peers".into(),
            unit: "datagrams/s (median over trials; whiskers: min–max)".into(),
            bars: rate.collect(),
            ceiling: None,
        }),
        Figure::Bars(Bars {
            id: "cpu".into(),
            title: "Receiver CPU per datagram (exact, schedstat)".into(),
            unit: "ns per datagram".into(),
            bars: cpu.collect(),
            ceiling: None,
        }),
        Figure::Stacked(Stacked {
            id: "cpu-split".into(),
            title: "Where each CPU's time went, by configuration (/proc/stat)".into(),
            unit: "% of the CPU".into(),
            parts: ["user", "system", "softirq", "idle"].map(String::from).to_vec(),
            bars: split.collect(),
        }),
    ]
}
