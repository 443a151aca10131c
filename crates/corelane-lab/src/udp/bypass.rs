//! Findings of the kernel-bypass rows: AF_XDP against the recvmmsg lane at the same offered
//! rate (CPU per datagram, against a goal of at most 0.9x), against the XDP_DROP ceiling,
//! and what a veth testbed can and cannot show.

use super::ConfigRow;

fn row<'a>(rows: &'a [ConfigRow], id: &str) -> Option<&'a ConfigRow> {
    rows.iter().find(|r| r.config == id)
}

/// The receive path's whole cost per datagram: the receiver's threads plus, on AF_XDP rows,
/// the NAPI threads that ran XDP for it.
pub fn total_ns(r: &ConfigRow) -> f64 {
    r.cpu_ns_per_datagram + r.napi_ns_per_datagram.unwrap_or(0.0)
}

pub fn findings(rows: &[ConfigRow]) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some(base), Some(xdp)) = (row(rows, "recvmmsg"), row(rows, "af-xdp")) {
        let ratio = total_ns(xdp) / total_ns(base).max(1.0);
        out.push(format!(
            "AF_XDP vs recvmmsg from the same sender at {:.3} Mpps offered: {:.0} ns per datagram (lanes {:.0} + NAPI threads {:.0}) against the recvmmsg lane's {:.0} ns (its own threads, RPS off) = {ratio:.2}x ({} the goal of at most 0.9x); received {:.4} vs {:.4} Mpps ({:+.1}%); {}.",
            base.offered_pps / 1e6,
            total_ns(xdp),
            xdp.cpu_ns_per_datagram,
            xdp.napi_ns_per_datagram.unwrap_or(0.0),
            total_ns(base),
            if ratio <= 0.9 { "meets" } else { "misses" },
            xdp.pps.median / 1e6,
            base.pps.median / 1e6,
            100.0 * (xdp.pps.median / base.pps.median.max(1.0) - 1.0),
            match xdp.xsk_lost {
                Some(0) => "the AF_XDP sockets lost no frame in any trial (XDP_STATISTICS)".to_string(),
                Some(n) => format!("the AF_XDP sockets lost {n} frames over the trials (XDP_STATISTICS: RX ring full or no fill frame)"),
                None => "no AF_XDP socket counters".to_string(),
            },
        ));
    }
    if let (Some(base), Some(xdp), Some(ceiling)) =
        (row(rows, "recvmmsg"), row(rows, "af-xdp"), row(rows, "xdp-drop"))
    {
        let floor = ceiling.napi_ns_per_datagram.unwrap_or(0.0);
        out.push(format!(
            "Where the AF_XDP cost sits: its lanes spend {:.0} ns per datagram, {:.2}x the recvmmsg lane's {:.0}; the rest is veth's NAPI path, and even XDP_DROP costs {floor:.0} ns per frame there ({:.2}x the recvmmsg lane alone), because veth copies every sender skb with less than 256 bytes of headroom into a page-pool buffer before any XDP program runs. Under this accounting (the recvmmsg lane's receive softirq runs on the sender's CPU, charged to no receiver thread) no XDP consumer on veth gets far below that floor; a NIC's driver runs XDP on its own DMA buffers.",
            xdp.cpu_ns_per_datagram,
            xdp.cpu_ns_per_datagram / base.cpu_ns_per_datagram.max(1.0),
            base.cpu_ns_per_datagram,
            floor / base.cpu_ns_per_datagram.max(1.0)
        ));
    }
    if let (Some(max), Some(ceiling)) = (row(rows, "af-xdp-max"), row(rows, "xdp-drop")) {
        out.push(format!(
            "XDP_DROP ceiling on the same veth: {:.3} Mpps dropped in the driver ({:.0} ns per frame in the NAPI threads); AF_XDP lanes at the same offered load received {:.3} Mpps, {:.0}% of the ceiling.",
            ceiling.pps.median / 1e6,
            ceiling.napi_ns_per_datagram.unwrap_or(0.0),
            max.pps.median / 1e6,
            100.0 * max.pps.median / ceiling.pps.median.max(1.0)
        ));
    }
    if let Some(tx) = row(rows, "af-xdp-tx") {
        out.push(format!(
            "AF_XDP sender: sent {:.3} Mpps of {:.3} offered through its TX ring; the recvmmsg lane received {:.3} Mpps at {:.0} ns per datagram.",
            tx.sent_pps / 1e6,
            tx.offered_pps / 1e6,
            tx.pps.median / 1e6,
            tx.cpu_ns_per_datagram
        ));
    }
    if rows.iter().any(|r| r.napi_ns_per_datagram.is_some()) {
        out.push(VETH_LIMITS.into());
    }
    out
}

/// What veth can and cannot show about AF_XDP.
pub const VETH_LIMITS: &str = "On veth, AF_XDP runs in copy mode only (veth has no XSK buffer pool, so every frame is copied into the UMEM); attaching XDP turns off software GSO toward the veth, so the sender segments every GSO message itself; and there is no NIC, DMA or interrupt to save. What veth can show is CPU per datagram: the UDP stack, socket queue and recvmmsg copy replaced by one copy and a ring. Zero-copy and line-rate figures need a NIC whose driver has AF_XDP zero-copy (ice, i40e, mlx5), with `corelane udp recv --backend xdp` run on that host.";
