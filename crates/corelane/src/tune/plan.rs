//! A partition proposal. Seed 003: interrupts on the processor package nearest the NIC, a
//! syscall thread on a CPU that shares the last-level cache with the interrupt CPUs, and the
//! application on the remaining cores — avoiding SMT siblings of the busy CPUs, whose shared
//! core would steal cycles from both. RolePolicy policies follow glommio's names.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::topology::{CpuList, CpuLocation, IrqRole, Nic, Topology, TopologyError};

/// How to place the three roles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RolePolicy {
    /// IRQ CPUs on distinct cores of the NIC's node; applications avoid the SMT siblings of
    /// IRQ and syscall CPUs, and may use other nodes.
    Spread,
    /// Everything as close to the NIC as possible: the syscall CPU is the IRQ CPU's SMT
    /// sibling when it has one, applications fill the NIC's node first.
    Pack,
    /// Like `Spread`, but nothing leaves the NIC's NUMA node.
    Fenced,
    /// The caller names the CPUs of each role.
    Custom { irq: CpuList, syscall: CpuList, app: CpuList },
}

impl RolePolicy {
    fn name(&self) -> &'static str {
        match self {
            RolePolicy::Spread => "spread",
            RolePolicy::Pack => "pack",
            RolePolicy::Fenced => "fenced",
            RolePolicy::Custom { .. } => "custom",
        }
    }
}

/// One NIC interrupt and the CPU the plan gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqPlacement {
    pub irq: u32,
    pub name: String,
    pub cpu: usize,
}

/// The header fields the NIC hashes for one flow type, in ethtool's letters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowHash {
    pub flow: String,
    pub fields: String,
}

/// A proposed partition, readable and editable as TOML or JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// `nic`'s own settings (their keys at the top level of the file).
    #[serde(flatten)]
    pub device: DevicePlan,
    pub policy: String,
    pub numa_node: Option<usize>,
    pub irq_cpus: String,
    pub syscall_cpus: String,
    pub app_cpus: String,
    /// Compromises the machine forced, and every setting left out because the kernel or the
    /// driver would refuse it, in words.
    #[serde(default)]
    pub notes: Vec<String>,
    /// When `nic` is stacked (VLAN, bond, bridge, macvlan), the settings of the devices below
    /// it that own the queues; the top-level settings are then `nic`'s own (no interrupts, no
    /// XPS, RPS off).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lower: Vec<DevicePlan>,
    /// Addresses (`ADDR/PREFIX`) to add on `nic`, e.g. the UDP study's extra receiver IPs; a
    /// revert removes them again. `corelane plan` proposes none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<String>,
}

/// The settings of one device: the top level of a [`Plan`] or one of its `lower` devices.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevicePlan {
    pub nic: String,
    /// RPS stays off: the interrupt CPUs do the receive work core partitioning assigns them.
    pub rps_cpus: String,
    /// XPS mask of each TX queue (index order): a queue per sending CPU (application and
    /// syscall CPUs), so a send completes on the CPU that sent it.
    #[serde(default)]
    pub xps_cpus: Vec<String>,
    #[serde(default)]
    pub irqs: Vec<IrqPlacement>,
    /// Queues (ethtool channels) to run: one per interrupt CPU; absent to leave as is.
    #[serde(default)]
    pub queue_count: Option<u32>,
    /// RX flow hashing per flow type (ethtool letters): UDP hashed on ports too, so the
    /// flows between two hosts spread over the queues (the UDP study needed extra IPs for that).
    #[serde(default)]
    pub rx_flow_hash: Vec<FlowHash>,
    /// Interrupt moderation (the web-serving study's ITR) in microseconds, when asked for.
    #[serde(default)]
    pub rx_usecs: Option<u32>,
}

impl Plan {
    /// Every device the plan sets: `nic` itself, then its lower devices.
    pub fn devices(&self) -> Vec<DevicePlan> {
        std::iter::once(self.device.clone()).chain(self.lower.iter().cloned()).collect()
    }
}

/// Why no plan could be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error("asked for {asked} application lanes but only {left} CPUs remain after the interrupt and syscall CPUs: lower --lanes or use --policy pack")]
    TooFewCpus { asked: usize, left: usize },
    #[error("--policy custom needs --irq-cpus, --syscall-cpus and --app-cpus")]
    CustomIncomplete,
    #[error("{nic}'s NUMA node {node:?} has no online CPU to place its work on: bring one online, or use --policy spread or custom")]
    NodeWithoutCpus { nic: String, node: Option<usize> },
}

fn list(cpus: &[usize]) -> String {
    CpuList::new(cpus.to_vec()).to_string()
}

/// The CPUs of the three roles.
struct Roles {
    irq: Vec<usize>,
    syscall: Vec<usize>,
    app: Vec<usize>,
}

/// Proposes a partition of `topo` around `nic` with `lanes` application CPUs (all that
/// remain when `None`).
pub fn plan(
    topo: &Topology,
    nic: &Nic,
    lanes: Option<usize>,
    placement: &RolePolicy,
) -> Result<Plan, PlanError> {
    plan_stack(topo, nic, &[], lanes, placement)
}

/// Like [`plan`], for an interface stacked on `lower` (the devices that own its queues, from
/// [`queue_owners`](crate::topology::queue_owners)): the interrupts, queues and ethtool
/// settings planned are theirs, and a note says so. With `lower` empty, or naming only `nic`,
/// it is [`plan`].
pub fn plan_stack(
    topo: &Topology,
    nic: &Nic,
    lower: &[&Nic],
    lanes: Option<usize>,
    placement: &RolePolicy,
) -> Result<Plan, PlanError> {
    let lower: Vec<&Nic> = lower.iter().copied().filter(|l| l.name != nic.name).collect();
    let mut notes = Vec::new();
    // The devices with queues decide the node and how many interrupt CPUs are wanted.
    let owners: Vec<&Nic> = if lower.is_empty() { vec![nic] } else { lower.clone() };
    let numa_node = owners.iter().find_map(|n| n.numa_node);
    let queues = owners.iter().map(|n| n.rx_queues.len()).max().unwrap_or(0);
    let (roles, node) = roles(topo, &nic.name, numa_node, queues, lanes, placement, &mut notes)?;
    let (top, lower) = if lower.is_empty() {
        (device_plan(nic, &roles, &mut notes), Vec::new())
    } else {
        let names: Vec<&str> = lower.iter().map(|n| n.name.as_str()).collect();
        notes.push(format!(
            "{} is stacked on {}: the plan sets the interrupts, queues and ethtool settings of {}, which own the queues, and leaves {}'s RPS off",
            nic.name,
            names.join(", "),
            if names.len() == 1 { "it" } else { "them" },
            nic.name
        ));
        let top =
            DevicePlan { nic: nic.name.clone(), rps_cpus: "0".into(), ..DevicePlan::default() };
        (top, lower.iter().map(|l| device_plan(l, &roles, &mut notes)).collect())
    };
    Ok(Plan {
        device: top,
        policy: placement.name().into(),
        numa_node: node,
        irq_cpus: list(&roles.irq),
        syscall_cpus: list(&roles.syscall),
        app_cpus: list(&roles.app),
        notes,
        lower,
        addresses: Vec::new(),
    })
}

/// The CPUs of each role for a NIC named `name` on `numa_node` with `queues` RX queues, and
/// the node they were chosen around.
fn roles(
    topo: &Topology,
    name: &str,
    numa_node: Option<usize>,
    queues: usize,
    lanes: Option<usize>,
    placement: &RolePolicy,
    notes: &mut Vec<String>,
) -> Result<(Roles, Option<usize>), PlanError> {
    let node = numa_node.or_else(|| topo.cpus.first().map(|c| c.numa_node));
    if numa_node.is_none() {
        notes.push(format!("{name} reports no NUMA node; using node {}", node.unwrap_or(0)));
    }
    let mut on_node: Vec<&CpuLocation> =
        topo.cpus.iter().filter(|c| Some(c.numa_node) == node).collect();
    if on_node.is_empty() && !matches!(placement, RolePolicy::Custom { .. }) {
        // A node whose CPUs are all offline (or a memory-only node): nothing to place there.
        if *placement == RolePolicy::Fenced || topo.cpus.is_empty() {
            return Err(PlanError::NodeWithoutCpus { nic: name.into(), node });
        }
        notes.push(format!(
            "{name}'s NUMA node {} has no online CPU; using the CPUs of every node",
            node.unwrap_or(0)
        ));
        on_node = topo.cpus.iter().collect();
    }
    let mut roles = match placement {
        RolePolicy::Custom { irq, syscall, app } => {
            for l in [irq, syscall, app] {
                topo.check(l)?;
            }
            if irq.is_empty() || syscall.is_empty() || app.is_empty() {
                return Err(PlanError::CustomIncomplete);
            }
            Roles {
                irq: irq.cpus().to_vec(),
                syscall: syscall.cpus().to_vec(),
                app: app.cpus().to_vec(),
            }
        }
        _ => automatic(topo, &on_node, node, queues, placement, name, notes)?,
    };
    if let Some(n) = lanes {
        if n > roles.app.len() {
            return Err(PlanError::TooFewCpus { asked: n, left: roles.app.len() });
        }
        roles.app.truncate(n);
    }
    Ok((roles, node))
}

/// Spread, pack and fenced: interrupt CPUs on distinct cores of the node, the syscall CPU in
/// their cache, applications on what remains.
fn automatic(
    topo: &Topology,
    on_node: &[&CpuLocation],
    node: Option<usize>,
    queues: usize,
    placement: &RolePolicy,
    name: &str,
    notes: &mut Vec<String>,
) -> Result<Roles, PlanError> {
    // One CPU per physical core of the NIC's node, in order.
    let mut seen = BTreeSet::new();
    let first_threads: Vec<&CpuLocation> =
        on_node.iter().copied().filter(|c| seen.insert((c.package, c.core))).collect();
    // One IRQ CPU per RX queue, but leave at least half the node's cores to the rest.
    let want = queues.max(1).min((first_threads.len() / 2).max(1));
    let irq: Vec<usize> = first_threads.iter().take(want).map(|c| c.cpu).collect();
    let busy_core =
        |c: &CpuLocation, cpus: &[usize]| cpus.iter().any(|b| c.smt_siblings.contains(b));
    let Some(irq_loc) = irq.first().and_then(|&c| topo.cpu(c)) else {
        return Err(PlanError::NodeWithoutCpus { nic: name.into(), node });
    };
    // The syscall CPU shares the IRQ CPUs' last-level cache.
    let candidates: Vec<&CpuLocation> = topo
        .cpus
        .iter()
        .filter(|c| !irq.contains(&c.cpu) && irq_loc.llc_shared.contains(&c.cpu))
        .collect();
    let sibling = candidates.iter().find(|c| busy_core(c, &irq)).map(|c| c.cpu);
    let other_core = candidates.iter().find(|c| !busy_core(c, &irq)).map(|c| c.cpu);
    let syscall = match (placement, sibling, other_core) {
        (RolePolicy::Pack, Some(s), _) => vec![s],
        (_, _, Some(o)) => vec![o],
        (_, Some(s), None) => vec![s],
        (_, None, None) => {
            notes.push(format!("no CPU other than the interrupt CPUs shares their cache; the syscall thread shares CPU {}", irq[0]));
            vec![irq[0]]
        }
    };
    let taken: Vec<usize> = irq.iter().chain(&syscall).copied().collect();
    let mut rest: Vec<&CpuLocation> = topo
        .cpus
        .iter()
        .filter(|c| !taken.contains(&c.cpu))
        .filter(|c| *placement != RolePolicy::Fenced || Some(c.numa_node) == node)
        .collect();
    // Nearest first: the NIC's node, then the others.
    rest.sort_by_key(|c| (Some(c.numa_node) != node, c.cpu));
    let (free, siblings): (Vec<&CpuLocation>, Vec<&CpuLocation>) =
        rest.into_iter().partition(|c| !busy_core(c, &taken));
    let mut app: Vec<usize> = free.iter().map(|c| c.cpu).collect();
    if *placement == RolePolicy::Pack || app.is_empty() {
        if *placement != RolePolicy::Pack && !siblings.is_empty() {
            notes.push(
                "no free core remains; applications share cores with the interrupt or syscall CPUs"
                    .into(),
            );
        }
        app.extend(siblings.iter().map(|c| c.cpu));
    }
    if app.is_empty() {
        notes.push(format!(
            "only {} CPUs: applications share CPU {} with the syscall thread",
            topo.cpus.len(),
            syscall[0]
        ));
        app.push(syscall[0]);
    }
    Ok(Roles { irq, syscall, app })
}

/// The settings of one device that owns queues, leaving out (with a note) whatever the kernel
/// or its driver would refuse.
fn device_plan(nic: &Nic, roles: &Roles, notes: &mut Vec<String>) -> DevicePlan {
    let irqs = irq_placements(nic, &roles.irq, notes);
    if irqs.is_empty() {
        notes.push(format!("{} has no interrupts of its own (a virtual device): the interrupt CPUs are where RPS should steer its receive work", nic.name));
    }
    let settings = nic.settings.clone().unwrap_or_default();
    // A virtual NIC has no interrupts to spread its queues over: its queue count stays.
    let queue_count = match settings.channels {
        Some(c) if !irqs.is_empty() => {
            let max = c.max_combined.max(c.max_rx);
            let now = if c.max_combined > 0 { c.combined } else { c.rx };
            let want = (roles.irq.len() as u32).min(max).max(1);
            (max > 0 && want != now).then_some(want)
        }
        None if !irqs.is_empty() && nic.settings.is_some() => {
            notes.push(format!("{}: its driver does not report channels (ethtool -l): the queue count is left as it is", nic.name));
            None
        }
        _ => None,
    };
    DevicePlan {
        nic: nic.name.clone(),
        rps_cpus: if irqs.is_empty() {
            CpuList::new(roles.irq.clone()).to_mask()
        } else {
            "0".into()
        },
        xps_cpus: xps_masks(nic, roles, notes),
        irqs,
        queue_count,
        rx_flow_hash: flow_hashes(nic, notes),
        rx_usecs: None,
    }
}

/// Queue interrupts spread over the interrupt CPUs by queue number, so that the RX and TX
/// interrupts of one queue pair share a CPU; interrupts that carry no packets are left alone.
fn irq_placements(nic: &Nic, cpus: &[usize], notes: &mut Vec<String>) -> Vec<IrqPlacement> {
    let control: Vec<&str> =
        nic.irqs.iter().filter(|i| i.role == IrqRole::Control).map(|i| i.name.as_str()).collect();
    if !control.is_empty() {
        notes.push(format!(
            "{}: interrupts that carry no packets ({}: link, command or configuration events) are left where they are",
            nic.name,
            control.join(", ")
        ));
    }
    nic.irqs
        .iter()
        .filter_map(|i| {
            let slot = match i.role {
                IrqRole::Queue(q) => q as usize,
                IrqRole::Shared => 0,
                IrqRole::Control => return None,
            };
            let cpu = *cpus.get(slot % cpus.len().max(1))?;
            Some(IrqPlacement { irq: i.irq, name: i.name.clone(), cpu })
        })
        .collect()
}

/// An XPS mask per TX queue: a queue per sending CPU (application and syscall CPUs). None at
/// all when the kernel refuses XPS on any of its queues (a single-queue device).
fn xps_masks(nic: &Nic, roles: &Roles, notes: &mut Vec<String>) -> Vec<String> {
    if let Some(why) = nic.tx_queues.iter().find_map(|q| q.unavailable.as_deref()) {
        notes.push(format!("{}: no XPS masks: {why}", nic.name));
        return Vec::new();
    }
    let mut senders: Vec<usize> = roles.app.iter().chain(&roles.syscall).copied().collect();
    senders.sort_unstable();
    senders.dedup();
    if senders.is_empty() {
        return Vec::new();
    }
    (0..nic.tx_queues.len())
        .map(|q| CpuList::new(vec![senders[q % senders.len()]]).to_mask())
        .collect()
}

/// UDP hashed on ports too (`sdfn`) where the driver hashes UDP at all and can say so.
fn flow_hashes(nic: &Nic, notes: &mut Vec<String>) -> Vec<FlowHash> {
    let Some(settings) = &nic.settings else { return Vec::new() };
    if settings.rx_flow_hash.is_empty() {
        notes
            .push(format!("{}: its driver does not expose RX flow hashing (ethtool -n)", nic.name));
        return Vec::new();
    }
    let mut out = Vec::new();
    for (flow, fields) in settings.rx_flow_hash.iter().filter(|(f, _)| f.starts_with("udp")) {
        if fields.is_empty() {
            // The driver answers but hashes nothing (virtio_net without RSS): it would refuse
            // a new field set too.
            notes.push(format!("{}: its driver hashes no fields of {flow} flows (no RSS): RX flow hashing left as it is", nic.name));
        } else if fields != "sdfn" {
            out.push(FlowHash { flow: flow.clone(), fields: "sdfn".into() });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{NicIrq, NicQueue};

    /// 2 packages × 2 cores × 2 SMT threads, node per package, L3 per package.
    fn machine() -> Topology {
        let cpus = (0..8)
            .map(|cpu| {
                let package = cpu / 4;
                let first = cpu - cpu % 2;
                CpuLocation {
                    cpu,
                    core: (cpu % 4) / 2,
                    package,
                    numa_node: package,
                    smt_siblings: vec![first, first + 1],
                    llc_shared: (package * 4..package * 4 + 4).collect(),
                }
            })
            .collect();
        Topology { cpus, nodes: Vec::new() }
    }

    fn nic(node: Option<usize>, queues: usize, irqs: u32) -> Nic {
        Nic {
            settings: None,
            name: "eth0".into(),
            driver: Some("test".into()),
            numa_node: node,
            rx_queues: (0..queues)
                .map(|index| NicQueue { index, mask: "0".into(), unavailable: None })
                .collect(),
            tx_queues: Vec::new(),
            lower: Vec::new(),
            irqs: (0..irqs)
                .map(|i| NicIrq {
                    irq: 40 + i,
                    name: format!("eth0-TxRx-{i}"),
                    affinity: "0-7".into(),
                    per_cpu: vec![],
                    role: IrqRole::Queue(i),
                })
                .collect(),
        }
    }

    #[test]
    fn spread_puts_irqs_near_the_nic_syscall_beside_them_and_apps_off_their_cores() {
        let p = plan(&machine(), &nic(Some(1), 2, 2), None, &RolePolicy::Spread).unwrap();
        assert_eq!(p.irq_cpus, "4");
        // Shares node 1's L3 with CPU 4 but not its core.
        assert_eq!(p.syscall_cpus, "6");
        // Not 5 or 7 (siblings of busy CPUs); node 1 first, then node 0.
        assert_eq!(p.app_cpus, "0-3");
        assert_eq!(p.device.irqs.iter().map(|i| i.cpu).collect::<Vec<_>>(), [4, 4]);
        assert_eq!(p.device.rps_cpus, "0");
    }

    #[test]
    fn pack_uses_the_smt_sibling_and_fenced_stays_on_the_node() {
        let pack = plan(&machine(), &nic(Some(0), 1, 1), None, &RolePolicy::Pack).unwrap();
        assert_eq!((pack.irq_cpus.as_str(), pack.syscall_cpus.as_str()), ("0", "1"));
        assert_eq!(pack.app_cpus, "2-7");
        let fenced = plan(&machine(), &nic(Some(0), 1, 1), None, &RolePolicy::Fenced).unwrap();
        assert_eq!((fenced.irq_cpus.as_str(), fenced.syscall_cpus.as_str()), ("0", "2"));
        assert!(fenced.notes.iter().any(|n| n.contains("share cores")), "{:?}", fenced.notes);
        assert_eq!(fenced.app_cpus, "1,3");
    }

    #[test]
    fn lanes_are_capped_with_a_clear_error_and_custom_is_checked() {
        let err = plan(&machine(), &nic(Some(1), 1, 1), Some(9), &RolePolicy::Spread).unwrap_err();
        assert!(err.to_string().contains("asked for 9 application lanes"), "{err}");
        let custom = RolePolicy::Custom {
            irq: "0".parse().unwrap(),
            syscall: "1".parse().unwrap(),
            app: "99".parse().unwrap(),
        };
        let err = plan(&machine(), &nic(Some(1), 1, 1), None, &custom).unwrap_err();
        assert!(err.to_string().contains("CPU 99 does not exist"), "{err}");
    }

    #[test]
    fn a_two_cpu_vm_with_a_virtual_nic_gets_a_plan_and_the_reasons() {
        let topo = Topology {
            cpus: (0..2)
                .map(|cpu| CpuLocation {
                    cpu,
                    core: cpu,
                    package: 0,
                    numa_node: 0,
                    smt_siblings: vec![cpu],
                    llc_shared: vec![0, 1],
                })
                .collect(),
            nodes: Vec::new(),
        };
        let p = plan(&topo, &nic(None, 1, 0), None, &RolePolicy::Spread).unwrap();
        assert_eq!(
            (p.irq_cpus.as_str(), p.syscall_cpus.as_str(), p.app_cpus.as_str()),
            ("0", "1", "1")
        );
        assert_eq!(
            p.device.rps_cpus, "1",
            "a virtual NIC's receive work is steered by RPS to the IRQ CPU"
        );
        assert!(p.notes.iter().any(|n| n.contains("no NUMA node")));
        assert!(p.notes.iter().any(|n| n.contains("no interrupts of its own")));
    }

    /// A NIC on a NUMA node with no online CPU indexed `irq[0]` of an empty list (a panic);
    /// it is now a plan on the other nodes' CPUs with a note, or a typed error when fenced.
    #[test]
    fn a_nic_on_a_node_without_cpus_gets_a_plan_or_a_clear_error() {
        let p = plan(&machine(), &nic(Some(3), 2, 2), None, &RolePolicy::Spread).unwrap();
        assert!(p.notes.iter().any(|n| n.contains("has no online CPU")), "{:?}", p.notes);
        let err = plan(&machine(), &nic(Some(3), 2, 2), None, &RolePolicy::Fenced).unwrap_err();
        assert!(matches!(err, PlanError::NodeWithoutCpus { .. }), "{err}");
        let empty = Topology { cpus: Vec::new(), nodes: Vec::new() };
        assert!(plan(&empty, &nic(Some(0), 1, 1), None, &RolePolicy::Spread).is_err());
    }
}
