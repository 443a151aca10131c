//! The rows of Table 1, laid out for this machine's CPUs.

use corelane::topology::CpuList;

use super::UdpLabOptions;
use crate::stage::udp::{Config, XdpRole, BUSY_POLL_US};

/// Datagrams per GSO message on the GRO row: the kernel's maximum.
pub const GRO_SEGMENTS: usize = 64;

/// Every configuration id, in table order.
pub const IDS: [&str; 14] = [
    "default",
    "placement",
    "multi-ip",
    "shared-socket",
    "reuseport",
    "reuseport-cpu",
    "gso-gro",
    "recvmmsg",
    "af-xdp",
    "af-xdp-bp",
    "xdp-floor",
    "af-xdp-tx",
    "af-xdp-max",
    "xdp-drop",
];

/// The configurations to run here, and the ones that cannot run, with why.
#[derive(Debug)]
pub struct Plan {
    pub configs: Vec<Config>,
    pub skipped: Vec<String>,
    pub receiver_cpu: usize,
    pub receiver_cpus: CpuList,
}

/// Where the rows run: the receiver's CPUs, the sender's CPU on its own host (and on the
/// receiver's when they share a machine: the receiver keeps off it where it can), why RPS
/// cannot be changed if it cannot, and how many receiver addresses there are.
#[derive(Debug, Clone)]
pub struct Stage {
    pub online: CpuList,
    pub sender_cpu: usize,
    pub shared_cpu: Option<usize>,
    pub no_rps: Option<&'static str>,
    pub rx_addrs: usize,
    /// The default row leaves the NIC as found (a real NIC on a remote host) instead of
    /// turning RPS off (the lab's own veth).
    pub default_as_found: bool,
}

pub fn plan(stage: &Stage, opts: &UdpLabOptions) -> Plan {
    let Stage { online, sender_cpu, shared_cpu, no_rps, rx_addrs, default_as_found } =
        stage.clone();
    let online = &online;
    let namespaced = no_rps.is_none();
    let others: Vec<usize> =
        online.cpus().iter().copied().filter(|&c| Some(c) != shared_cpu).collect();
    let receiver_cpus = if others.is_empty() { online.clone() } else { CpuList::new(others) };
    let receiver_cpu = receiver_cpus.cpus()[0];
    // Spreading needs two CPUs; on a 2-CPU machine that includes the sender's.
    let spread = if receiver_cpus.len() >= 2 { receiver_cpus.clone() } else { online.clone() };
    let rps = |cpus: &CpuList| namespaced.then(|| cpus.clone());
    let one = CpuList::new(vec![receiver_cpu]);
    let steering = |what: String| {
        if namespaced {
            what
        } else {
            "RPS as the host has it".to_string()
        }
    };
    let default_steering = if default_as_found {
        "the NIC as found".to_string()
    } else {
        steering(format!("RPS off (receive softirq on sender CPU {sender_cpu})"))
    };
    let label = format!("default: {default_steering}, 1 lane on CPU {receiver_cpu}, 1 IP");
    let rps_off = if default_as_found { None } else { rps(&CpuList::default()) };
    let base =
        Config::one_lane("default", label, rps_off, receiver_cpu, sender_cpu, opts.offered_pps);
    let mut configs = vec![base.clone()];
    let mut skipped = Vec::new();
    if namespaced {
        configs.push(Config {
            id: "placement",
            label: format!(
                "placement: RPS steers receive work to the lane's CPU {receiver_cpu} (same CPU)"
            ),
            rps: rps(&one),
            ..base.clone()
        });
    } else {
        skipped.push(format!("placement: {}", no_rps.unwrap_or_default()));
    }
    let multi = Config {
        id: "multi-ip",
        label: format!(
            "multiple IPs: 2 sender lanes to 2 receiver IPs, {}, 1 lane",
            steering(format!("RPS hashes flows over CPUs {spread}"))
        ),
        rps: rps(&spread),
        targets: 2,
        sender_threads: 2,
        ..base.clone()
    };
    if rx_addrs >= 2 {
        configs.push(multi.clone());
    } else {
        skipped.push("multi-ip: needs two receiver addresses (give --rx-addr twice)".into());
    }
    configs.push(Config {
        id: "shared-socket",
        label: format!(
            "multiple threads: {} lanes on CPUs {spread} share one socket",
            spread.len()
        ),
        lanes: spread.clone(),
        shared_socket: true,
        ..multi.clone()
    });
    let reuse = Config {
        id: "reuseport",
        label: format!("binding port: one SO_REUSEPORT socket per lane on CPUs {spread}"),
        lanes: spread.clone(),
        ..multi
    };
    configs.push(reuse.clone());
    configs.push(Config {
        id: "reuseport-cpu",
        label: "beyond the study: reuseport steered by CPU, each datagram to the lane on the CPU that ran its softirq".into(),
        steer_cpu: true,
        ..reuse.clone()
    });
    configs.push(Config {
        id: "gso-gro",
        label: format!("beyond the study: reuseport + UDP GRO, sender GSO {GRO_SEGMENTS} per send"),
        gro: true,
        gso_segments: GRO_SEGMENTS,
        offered_pps: opts.offered_gro_pps,
        ..reuse
    });
    match (namespaced, default_as_found) {
        (true, false) => configs.extend(xdp_rows(&base, opts, Where::Veth)),
        (true, true) => {
            configs.extend(xdp_rows(&base, opts, Where::RxNic));
            skipped.push(AF_XDP_TX_ACROSS_HOSTS.into());
        }
        (false, _) => skipped.push("af-xdp rows: need the namespace testbed's veth or a remote rx host's NIC (--rx-host): the lab attaches no XDP program to the controller's own interfaces".into()),
    }
    Plan { configs, skipped, receiver_cpu, receiver_cpus }
}

/// Why the AF_XDP sender's row does not run across hosts.
pub const AF_XDP_TX_ACROSS_HOSTS: &str = "af-xdp-tx: runs on the namespace testbed only: the AF_XDP sender needs the lab's own sending veth, and across hosts the load hosts send through the kernel's UDP path";

/// Where the AF_XDP rows attach: the namespace testbed's veth (threaded NAPI pinned to the
/// lanes' CPU by the lab) or a remote rx host's NIC (NAPI as the host has it: the lab
/// changes no NAPI setting there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Where {
    Veth,
    RxNic,
}

/// The kernel-bypass rows, RPS off like `default` (as found on a remote NIC): recvmmsg and
/// AF_XDP receivers (NAPI threads, then busy polling) fed by the same paced sender at the
/// XDP rate with the XDP_DROP floor at that rate beside them, on the veth the AF_XDP sender
/// into recvmmsg, and at the full offered rate AF_XDP against the XDP_DROP ceiling.
fn xdp_rows(base: &Config, opts: &UdpLabOptions, at_: Where) -> Vec<Config> {
    let cpu = base.lanes.cpus()[0];
    let rate = opts.offered_xdp_pps;
    let at = |pps: u64| format!("{:.3} Mpps offered", pps as f64 / 1e6);
    let (queues, napi, steering) = match at_ {
        Where::Veth => ("veth", format!("NAPI threads pinned to CPU {cpu}"), "RPS off"),
        Where::RxNic => ("NIC", "NAPI as the host has it".to_string(), "the NIC as found"),
    };
    let mut rows = vec![
        Config {
            id: "recvmmsg",
            label: format!("kernel bypass baseline: the default recvmmsg lane on CPU {cpu}, {steering}, {}", at(rate)),
            offered_pps: rate,
            ..base.clone()
        },
        Config {
            id: "af-xdp",
            label: format!("kernel bypass: AF_XDP lanes (one per {queues} queue) on CPU {cpu}, {napi}, {}", at(rate)),
            offered_pps: rate,
            xdp: XdpRole::Receive,
            ..base.clone()
        },
        Config {
            id: "af-xdp-bp",
            label: format!("kernel bypass: the AF_XDP lanes busy-polling their queues ({} µs), {napi} for what is left, {}", BUSY_POLL_US, at(rate)),
            offered_pps: rate,
            xdp: XdpRole::ReceiveBusyPoll,
            ..base.clone()
        },
        Config {
            id: "xdp-floor",
            label: format!("floor: XDP_DROP of the same frames in the driver ({napi}), nothing delivered, {}", at(rate)),
            offered_pps: rate,
            xdp: XdpRole::Drop,
            ..base.clone()
        },
        Config {
            id: "af-xdp-tx",
            label: format!("kernel bypass: the AF_XDP sender into the recvmmsg lane, {}", at(rate)),
            offered_pps: rate,
            gso_segments: 1,
            xdp: XdpRole::Send,
            ..base.clone()
        },
        Config {
            id: "af-xdp-max",
            label: format!("kernel bypass: AF_XDP lanes at {}", at(opts.offered_pps)),
            xdp: XdpRole::Receive,
            ..base.clone()
        },
        Config {
            id: "xdp-drop",
            label: format!("ceiling: XDP_DROP of the same frames in the driver, {}", at(opts.offered_pps)),
            xdp: XdpRole::Drop,
            ..base.clone()
        },
    ];
    if at_ == Where::RxNic {
        rows.retain(|c| c.xdp != XdpRole::Send);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two CPUs and two addresses on the namespace testbed, the sender on CPU 0.
    fn two_cpus() -> Stage {
        Stage {
            online: CpuList::new(vec![0, 1]),
            sender_cpu: 0,
            shared_cpu: Some(0),
            no_rps: None,
            rx_addrs: 2,
            default_as_found: false,
        }
    }

    #[test]
    fn two_cpus_give_the_seed_rows_in_order() {
        let opts = UdpLabOptions::quick("corelane".into());
        let plan = plan(&two_cpus(), &opts);
        let ids: Vec<_> = plan.configs.iter().map(|c| c.id).collect();
        assert_eq!(ids, IDS, "every row, in the table's order");
        assert_eq!(plan.receiver_cpu, 1);
        assert_eq!(plan.configs[0].rps, Some(CpuList::default()));
        assert_eq!(plan.configs[4].lanes.cpus(), &[0, 1]);
    }

    #[test]
    fn loopback_skips_placement_and_leaves_rps_alone() {
        let opts = UdpLabOptions::quick("corelane".into());
        let stage = Stage {
            online: CpuList::new(vec![0, 1, 2, 3]),
            no_rps: Some("loopback"),
            ..two_cpus()
        };
        let plan = plan(&stage, &opts);
        assert!(plan.configs.iter().all(|c| c.rps.is_none() && c.id != "placement"));
        assert!(plan.configs.iter().all(|c| c.xdp == XdpRole::Off));
        assert_eq!(plan.skipped.len(), 2);
        assert_eq!(plan.configs[3].lanes.cpus(), &[1, 2, 3]);
    }

    /// A receiver on its own machine uses all its CPUs; one address skips the multi-IP row.
    #[test]
    fn a_remote_receiver_uses_every_cpu_and_one_address_skips_multi_ip() {
        let opts = UdpLabOptions::quick("corelane".into());
        let stage = Stage {
            shared_cpu: None,
            no_rps: Some("remote"),
            rx_addrs: 1,
            default_as_found: true,
            ..two_cpus()
        };
        let plan = plan(&stage, &opts);
        assert_eq!(plan.receiver_cpu, 0);
        assert!(plan.configs.iter().all(|c| c.id != "multi-ip" && c.id != "placement"));
        assert_eq!(plan.skipped.len(), 3, "{:?}", plan.skipped);
        let reuse = plan.configs.iter().find(|c| c.id == "reuseport").unwrap();
        assert_eq!(reuse.lanes.cpus(), &[0, 1]);
    }

    /// A remote rx NIC runs every AF_XDP receive row (the receiver attaches there); only the
    /// AF_XDP sender's row is skipped, with why.
    #[test]
    fn a_remote_rx_nic_runs_the_af_xdp_receive_rows() {
        let opts = UdpLabOptions::quick("corelane".into());
        let stage = Stage { shared_cpu: None, default_as_found: true, ..two_cpus() };
        let plan = plan(&stage, &opts);
        let xdp: Vec<_> =
            plan.configs.iter().filter(|c| c.xdp != XdpRole::Off).map(|c| c.id).collect();
        assert_eq!(xdp, ["af-xdp", "af-xdp-bp", "xdp-floor", "af-xdp-max", "xdp-drop"]);
        assert!(plan.configs.iter().all(|c| !c.label.contains("NAPI threads pinned")));
        assert_eq!(plan.skipped, [AF_XDP_TX_ACROSS_HOSTS.to_string()]);
    }
}
