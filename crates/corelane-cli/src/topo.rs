//! `corelane topo`: the CPUs this machine offers lanes, and its NICs' queues, steering masks
//! and interrupts.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use corelane::topology::{read_net_softirqs, read_nics, MachineReport, Topology};

use crate::args::outln;

#[derive(Debug, Args)]
pub struct TopoArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Read sysfs and procfs under this directory instead of / (a saved or fixture tree).
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
}

/// Every flow type with the fields its RX hash covers, `none` when the driver hashes none
/// (virtio_net without RSS), or `not supported` when the driver does not answer for it.
fn flow_hash(known: &[(String, String)]) -> String {
    corelane::topology::FLOW_TYPE_NAMES
        .iter()
        .map(|flow| {
            let fields = match known.iter().find(|(f, _)| f == flow) {
                Some((_, h)) if h.is_empty() => "none",
                Some((_, h)) => h.as_str(),
                None => "not supported",
            };
            format!("{flow}:{fields}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn run(args: TopoArgs) -> anyhow::Result<ExitCode> {
    let root: &Path = &args.root;
    if args.json {
        let report = MachineReport::read_from(root)?;
        outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    let topo = Topology::read_from(root)?;
    let nics = read_nics(root)?;
    let softirqs = read_net_softirqs(root);
    outln!("{} online CPUs: {}", topo.cpus.len(), topo.online());
    for c in &topo.cpus {
        outln!(
            "  cpu {:>3}  package {}  core {:>3}  node {}  smt {:?}  llc shared with {:?}",
            c.cpu,
            c.package,
            c.core,
            c.numa_node,
            c.smt_siblings,
            c.llc_shared
        );
    }
    if topo.nodes.is_empty() {
        outln!("no NUMA nodes shown by the kernel: one memory domain");
    }
    for n in &topo.nodes {
        outln!("  node {}  cpus {:?}  distances {:?}", n.node, n.cpus, n.distances);
    }
    if !softirqs.net_rx.is_empty() {
        outln!("softirqs per CPU: NET_RX {:?}  NET_TX {:?}", softirqs.net_rx, softirqs.net_tx);
    }
    outln!("{} network interfaces:", nics.len());
    for nic in &nics {
        let driver = nic.driver.as_deref().unwrap_or("virtual");
        let node = nic.numa_node.map_or("no NUMA node".to_string(), |n| format!("node {n}"));
        outln!("  {}  ({driver}, {node})", nic.name);
        let masks = |qs: &[corelane::topology::NicQueue]| {
            qs.iter().map(|q| format!("{}:{}", q.index, q.mask)).collect::<Vec<_>>().join(" ")
        };
        if !nic.lower.is_empty() {
            outln!("    stacked on {} (the devices that own its queues)", nic.lower.join(", "));
        }
        outln!("    rx queues (rps_cpus) {}", masks(&nic.rx_queues));
        outln!("    tx queues (xps_cpus) {}", masks(&nic.tx_queues));
        if let Some(settings) = &nic.settings {
            let channels = settings.channels.map_or("not supported".to_string(), |c| {
                if c.max_combined > 0 {
                    format!("{} combined of {}", c.combined, c.max_combined)
                } else {
                    format!("rx {} of {}, tx {} of {}", c.rx, c.max_rx, c.tx, c.max_tx)
                }
            });
            let coalesce = settings.coalesce.map_or("not supported".to_string(), |c| {
                format!(
                    "rx-usecs {} rx-frames {} adaptive {}",
                    c.rx_usecs, c.rx_frames, c.adaptive_rx
                )
            });
            let hash = flow_hash(&settings.rx_flow_hash);
            outln!("    ethtool: channels {channels}; coalescing {coalesce}; rx flow hash {hash}");
        }
        if nic.irqs.is_empty() {
            outln!("    no interrupts of its own (a virtual device: its receive work runs in the sender's softirq unless RPS steers it)");
        }
        for irq in &nic.irqs {
            outln!(
                "    irq {:>4} {:<28} affinity {:<8} per cpu {:?}",
                irq.irq,
                irq.name,
                irq.affinity,
                irq.per_cpu
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
