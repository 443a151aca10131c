//! Findings of the kernel-bypass rows: AF_XDP against the recvmmsg lane at the same offered
//! rate, counting everything each path ran (against a goal of at most 0.9x), against the
//! XDP_DROP floor at that rate in the same run, busy polling against threaded NAPI, the
//! XDP_DROP ceiling, and what a veth testbed can and cannot show.

use super::ConfigRow;

fn row<'a>(rows: &'a [ConfigRow], id: &str) -> Option<&'a ConfigRow> {
    rows.iter().find(|r| r.config == id)
}

/// The receiving side's cost per datagram: the receiver's threads plus, on XDP rows, the NAPI
/// threads that ran XDP for it.
pub fn total_ns(r: &ConfigRow) -> f64 {
    r.received.cpu_ns_per_datagram + r.charged.napi.unwrap_or(0.0)
}

/// Everything the row's path ran per datagram (receiver, NAPI threads, ksoftirqd, sender),
/// when the sender was measured: with RPS off the recvmmsg path's kernel receive work runs
/// as softirq in the sender's sends, so only this sum compares the paths fairly.
pub fn whole_ns(r: &ConfigRow) -> Option<f64> {
    Some(total_ns(r) + r.charged.ksoftirqd.unwrap_or(0.0) + r.charged.sender?)
}

/// "lanes 55 + NAPI threads 650 + ksoftirqd 3 + sender 530 = 1238": the parts measured, or
/// with `whole` false the receiving side's alone.
pub fn parts_of(r: &ConfigRow, whole: bool) -> String {
    let mut text = format!("lanes {:.0}", r.received.cpu_ns_per_datagram);
    let mut named = vec![("NAPI threads", r.charged.napi)];
    if whole {
        named.extend([("ksoftirqd", r.charged.ksoftirqd), ("sender", r.charged.sender)]);
    }
    for (name, ns) in named {
        if let Some(ns) = ns {
            text.push_str(&format!(" + {name} {ns:.0}"));
        }
    }
    let sum = if whole { whole_ns(r) } else { None };
    format!("{text} = {:.0}", sum.unwrap_or_else(|| total_ns(r)))
}

/// What the AF_XDP sockets' counters say of a row.
fn socket_losses(r: &ConfigRow) -> String {
    match (r.xsk, r.xsk_unknown) {
        (_, true) => "the AF_XDP sockets' losses are unknown (XDP_STATISTICS unreadable in a trial)".into(),
        (Some(k), _) if k.rx_lost() == 0 => "the AF_XDP sockets lost no frame in any trial (XDP_STATISTICS)".into(),
        (Some(k), _) => format!(
            "the AF_XDP sockets lost {} frames over the trials (XDP_STATISTICS: RX ring full {}, no fill frame {})",
            k.rx_lost(),
            k.rx_ring_full,
            k.rx_dropped
        ),
        (None, false) => "no AF_XDP socket counters".into(),
    }
}

/// What AF_XDP's distance above the floor says; below it, the trials' spread (a delivery
/// cannot cost less than none).
fn above_the_floor(ns: f64) -> String {
    match ns >= 0.0 {
        true => format!("AF_XDP sits {ns:.0} ns above it: the redirect, the copy into the UMEM that veth's copy mode needs, the lanes' wake-ups and per-frame work."),
        false => format!("AF_XDP measured {:.0} ns below it, which only the spread between trials can do (delivering costs more than dropping): rerun with more trials.", -ns),
    }
}

/// How `r` compares with `base` (the recvmmsg lane): everything each ran when both senders
/// were measured, else the receiving sides alone.
struct Against {
    r: f64,
    base: f64,
    whole: bool,
}

impl Against {
    fn of(r: &ConfigRow, base: &ConfigRow) -> Self {
        match (whole_ns(r), whole_ns(base)) {
            (Some(a), Some(b)) => Self { r: a, base: b, whole: true },
            _ => Self { r: total_ns(r), base: total_ns(base), whole: false },
        }
    }

    fn counted(&self) -> &'static str {
        match self.whole {
            true => "everything each path ran",
            false => "the receiving sides only (a sender's CPU was not measured)",
        }
    }
}

pub fn findings(rows: &[ConfigRow]) -> Vec<String> {
    let mut out = Vec::new();
    let base = row(rows, "recvmmsg");
    if let (Some(base), Some(xdp)) = (base, row(rows, "af-xdp")) {
        let cmp = Against::of(xdp, base);
        let ratio = cmp.r / cmp.base.max(1.0);
        out.push(format!(
            "AF_XDP vs recvmmsg from the same sender at {:.3} Mpps offered, {}: AF_XDP {} ns per datagram against the recvmmsg lane's {} = {ratio:.2}x ({} per datagram than the recvmmsg floor); receiving sides alone {:.2}x; received {:.4} vs {:.4} Mpps ({:+.1}%); {}.",
            base.offered_pps / 1e6,
            cmp.counted(),
            parts_of(xdp, cmp.whole),
            parts_of(base, cmp.whole),
            if ratio < 1.0 { "cheaper" } else { "no cheaper" },
            total_ns(xdp) / total_ns(base).max(1.0),
            xdp.pps.median / 1e6,
            base.pps.median / 1e6,
            100.0 * (xdp.pps.median / base.pps.median.max(1.0) - 1.0),
            socket_losses(xdp),
        ));
    }
    if let (Some(base), Some(xdp), Some(floor)) =
        (base, row(rows, "af-xdp"), row(rows, "xdp-floor"))
    {
        let (f, a) = (Against::of(floor, base), Against::of(xdp, base));
        let whole = f.whole && a.whole;
        let (f, a, b) = match whole {
            true => (f.r, a.r, f.base),
            false => (total_ns(floor), total_ns(xdp), total_ns(base)),
        };
        out.push(format!(
            "The floor, measured in the same run ({}): XDP_DROP of the same frames at the same rate costs {} ns per datagram, {:.2}x the recvmmsg lane's, delivering nothing. {} On veth no XDP consumer gets below the floor, because veth copies every sender skb with less than 256 bytes of headroom into a page-pool buffer before any program runs; a NIC's driver runs XDP on its own DMA buffers.",
            Against { r: f, base: b, whole }.counted(),
            parts_of(floor, whole),
            f / b.max(1.0),
            above_the_floor(a - f),
        ));
    }
    if let (Some(xdp), Some(bp)) = (row(rows, "af-xdp"), row(rows, "af-xdp-bp")) {
        let cmp = Against::of(bp, xdp);
        out.push(format!(
            "Busy polling against threaded NAPI at the same rate, {}: {} ns per datagram against {} = {:.2}x; received {:.4} Mpps; {}.",
            cmp.counted(),
            parts_of(bp, cmp.whole),
            parts_of(xdp, cmp.whole),
            cmp.r / cmp.base.max(1.0),
            bp.pps.median / 1e6,
            socket_losses(bp),
        ));
    }
    if let (Some(max), Some(ceiling)) = (row(rows, "af-xdp-max"), row(rows, "xdp-drop")) {
        out.push(format!(
            "XDP_DROP ceiling on the same veth: {:.3} Mpps dropped in the driver ({:.0} ns per frame in the NAPI threads); AF_XDP lanes at the same offered load received {:.3} Mpps, {:.0}% of the ceiling.",
            ceiling.pps.median / 1e6,
            ceiling.charged.napi.unwrap_or(0.0),
            max.pps.median / 1e6,
            100.0 * max.pps.median / ceiling.pps.median.max(1.0)
        ));
    }
    if let Some(tx) = row(rows, "af-xdp-tx") {
        out.push(format!(
            "AF_XDP sender: sent {:.3} Mpps of {:.3} offered through its TX ring; the recvmmsg lane received {:.3} Mpps at {:.0} ns per datagram{}.",
            tx.received.sent_pps / 1e6,
            tx.offered_pps / 1e6,
            tx.pps.median / 1e6,
            tx.received.cpu_ns_per_datagram,
            tx.charged.sender
                .map_or(String::new(), |s| format!(", the sender (with the receive softirq its sends ran) {s:.0}"))
        ));
    }
    // A remote rx NIC's rows carry its counters; the veth's limits are the namespace testbed's.
    let on_veth = rows.iter().all(|r| r.nic.is_none());
    if on_veth && rows.iter().any(|r| r.charged.napi.is_some()) {
        out.push(VETH_LIMITS.into());
    }
    let uncharged: Vec<&str> = rows
        .iter()
        .filter(|r| r.xdp_mode.is_some() && r.charged.napi.is_none())
        .map(|r| r.config.as_str())
        .collect();
    if !uncharged.is_empty() {
        out.push(format!(
            "{}: the rx host runs its NIC's NAPI as softirq (no napi/* threads there, and the lab changes no NAPI setting on a host), so the driver's XDP work is charged to no thread: the CPU per datagram above is the lanes' alone, and the driver's part shows only in the per-CPU softirq split.",
            uncharged.join(", ")
        ));
    }
    out
}

/// What veth can and cannot show about AF_XDP.
pub const VETH_LIMITS: &str = "On veth, AF_XDP runs in copy mode only (veth has no XSK buffer pool, so every frame is copied into the UMEM); attaching XDP turns off software GSO toward the veth, so the sender segments every GSO message itself; and there is no NIC, DMA or interrupt to save. What veth can show is CPU per datagram: the UDP stack, socket queue and recvmmsg copy replaced by one copy and a ring. Zero-copy and line-rate figures need a NIC whose driver has AF_XDP zero-copy (ice, i40e, mlx5), with `corelane udp recv --backend xdp` run on that host.";

#[cfg(test)]
mod tests {
    use super::*;
    use corelane::xdp::rx::XskStats;

    fn row(config: &str, lanes: f64, napi: Option<f64>, sender: f64) -> ConfigRow {
        ConfigRow {
            hosts: Vec::new(),
            config: config.into(),
            label: String::new(),
            offered_pps: 150_000.0,
            pps: crate::summary::Trials::of([150_000.0]),
            gap_pct: None,
            received: crate::stage::udp::Received {
                sent_pps: 150_000.0,
                drops_per_sec: 0.0,
                cpu_ns_per_datagram: lanes,
                reordered_pct: 0.0,
                lane_pps: Vec::new(),
            },
            charged: crate::stage::ChargedNs { napi, sender: Some(sender), ksoftirqd: Some(10.0) },
            xsk_lost: napi.map(|_| 0),
            xsk: napi.map(|_| XskStats::default()),
            xsk_unknown: false,
            xdp_mode: None,
            cpu: Vec::new(),
            nic: None,
        }
    }

    /// The recvmmsg lane's receive softirq runs in the sender's sends: counting the receiving
    /// sides alone would call AF_XDP dearer (710 vs 650) when, everything counted, it is
    /// cheaper (1,250 vs 1,560).
    #[test]
    fn the_paths_compare_by_everything_they_ran_beside_the_floor_of_the_same_run() {
        let rows = [
            row("recvmmsg", 650.0, None, 900.0),
            row("af-xdp", 60.0, Some(650.0), 530.0),
            row("xdp-floor", 30.0, Some(500.0), 520.0),
        ];
        let found = findings(&rows);
        assert!(found[0].contains("= 1250 ns per datagram against the recvmmsg lane's lanes 650 + ksoftirqd 10 + sender 900 = 1560 = 0.80x (cheaper per datagram than the recvmmsg floor)"), "{}", found[0]);
        assert!(found[0].contains("receiving sides alone 1.09x"), "{}", found[0]);
        assert!(found[1].contains("costs lanes 30 + NAPI threads 500 + ksoftirqd 10 + sender 520 = 1060 ns per datagram, 0.68x"), "{}", found[1]);
        assert!(found[1].contains("AF_XDP sits 190 ns above it"), "{}", found[1]);
        let noisy = [rows[0].clone(), rows[1].clone(), row("xdp-floor", 30.0, Some(800.0), 520.0)];
        let found = findings(&noisy);
        assert!(
            found[1].contains("AF_XDP measured 110 ns below it, which only the spread"),
            "{}",
            found[1]
        );
    }

    /// A trial whose sender's CPU was not read leaves the row without it: the comparison then
    /// says it counts the receiving sides only, and shows only their parts.
    #[test]
    fn without_a_senders_figure_the_comparison_counts_the_receiving_sides_and_says_so() {
        let mut base = row("recvmmsg", 650.0, None, 900.0);
        base.charged.sender = None;
        let found = findings(&[base, row("af-xdp", 60.0, Some(650.0), 530.0)]);
        assert!(found[0].contains("the receiving sides only"), "{}", found[0]);
        assert!(found[0].contains("AF_XDP lanes 60 + NAPI threads 650 = 710 ns per datagram against the recvmmsg lane's lanes 650 = 650 = 1.09x"), "{}", found[0]);
    }

    /// An XDP row on a remote NIC without NAPI threads is not passed off as fully charged.
    #[test]
    fn an_xdp_row_without_napi_threads_says_its_driver_work_is_uncharged() {
        let mut xdp = row("af-xdp", 60.0, None, 530.0);
        xdp.xdp_mode = Some("native zero-copy".into());
        let found = findings(&[row("recvmmsg", 650.0, None, 900.0), xdp]);
        assert!(
            found
                .iter()
                .any(|f| f.starts_with("af-xdp: the rx host runs its NIC's NAPI as softirq")),
            "{found:?}"
        );
        assert!(!found.iter().any(|f| f == VETH_LIMITS), "{found:?}");
    }

    #[test]
    fn unknown_socket_counters_are_said_to_be_unknown() {
        let mut xdp = row("af-xdp", 60.0, Some(650.0), 530.0);
        (xdp.xsk, xdp.xsk_lost, xdp.xsk_unknown) = (None, None, true);
        let found = findings(&[row("recvmmsg", 650.0, None, 900.0), xdp]);
        assert!(found[0].contains("losses are unknown"), "{}", found[0]);
    }
}
