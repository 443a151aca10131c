//! Network interfaces as the kernel shows them: driver, NUMA node, RX/TX queues with their
//! RPS/XPS masks, the interrupts that belong to the NIC (with their CPU affinity and counts
//! per CPU), and the per-CPU NET_RX/NET_TX softirq counts. Read from a sysfs/procfs root, so
//! tests can describe another machine with a fixture tree.

use std::fs;
use std::path::Path;

use serde::Serialize;

use super::irqname::{classify, IrqOwner, IrqRole};
use crate::sys::ethtool;
pub use crate::sys::ethtool::{Channels, Coalesce};

/// Longest interface name the kernel accepts (IFNAMSIZ, 16, with its NUL).
const IFNAMSIZ: usize = 16;

/// Stacks deeper than this (VLAN on bond on team…) are not followed: the kernel's own limit is
/// 8 (MAX_NEST_DEV), and a fixture tree may hold a loop.
const MAX_STACK_DEPTH: usize = 8;

/// Whether `name` can be an interface name: the kernel's dev_valid_name rules (1 to 15 bytes,
/// no '/', ':', whitespace or NUL, not `.` or `..`).
pub fn is_interface_name(name: &str) -> bool {
    !(name.is_empty()
        || name.len() >= IFNAMSIZ
        || name == "."
        || name == ".."
        || name.chars().any(|c| c == '/' || c == ':' || c == '\0' || c.is_whitespace()))
}

/// One interrupt line of a NIC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NicIrq {
    pub irq: u32,
    /// The name /proc/interrupts gives it, e.g. `virtio2-input.0` or `eth0-TxRx-3`.
    pub name: String,
    /// CPUs allowed to handle it (/proc/irq/N/smp_affinity_list).
    pub affinity: String,
    /// Interrupts handled so far, per CPU.
    pub per_cpu: Vec<u64>,
    /// The queue it serves, or that it serves none (link and configuration events).
    pub role: IrqRole,
}

/// One queue of a NIC and its software steering mask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NicQueue {
    pub index: usize,
    /// rps_cpus (RX) or xps_cpus (TX), as the kernel prints the mask; `0` means off, `n/a`
    /// when it cannot be read.
    pub mask: String,
    /// Why the mask cannot be read or set, when it cannot (`None` when it can).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// A network interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Nic {
    pub name: String,
    /// The kernel driver, or `None` for a virtual interface (veth, bridge, loopback…).
    pub driver: Option<String>,
    /// NUMA node of the device; `None` when the machine or the device has none.
    pub numa_node: Option<usize>,
    pub rx_queues: Vec<NicQueue>,
    pub tx_queues: Vec<NicQueue>,
    /// Interrupts of the device; empty for virtual interfaces.
    pub irqs: Vec<NicIrq>,
    /// The devices this one is stacked on (`lower_*` links: a VLAN's or macvlan's parent, a
    /// bond's or bridge's ports); empty for a device that owns its queues.
    pub lower: Vec<String>,
    /// ethtool settings, read through the ioctl when reading the live machine (`None` for a
    /// fixture root, whose devices do not exist).
    pub settings: Option<NicSettings>,
}

/// A NIC's ethtool settings in this network namespace; each is absent where the driver does
/// not implement it (veth has channels but no coalescing and no flow hashing).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NicSettings {
    pub channels: Option<Channels>,
    pub coalesce: Option<Coalesce>,
    /// Flow type (tcp4, udp4, tcp6, udp6) and the header fields its RX hash covers, in
    /// ethtool's letters (`sdfn`: source and destination address, both ports).
    pub rx_flow_hash: Vec<(String, String)>,
    /// Packets received per RX queue, where the driver's statistics (ethtool -S) count them
    /// under a per-queue name; empty where they do not (veth counts only its XDP path).
    /// Always printed, empty too: the lab reads it from a remote host's `topo --json`.
    pub rx_queue_packets: Vec<u64>,
}

/// The flow types whose RX hashing `NicSettings::rx_flow_hash` reports, in ethtool's names.
pub const FLOW_TYPE_NAMES: [&str; 4] = {
    let t = ethtool::FLOW_TYPES;
    [t[0].0, t[1].0, t[2].0, t[3].0]
};

/// Reads `name`'s ethtool settings in the calling thread's network namespace.
pub fn read_nic_settings(name: &str) -> NicSettings {
    NicSettings {
        channels: ethtool::channels(name).ok(),
        coalesce: ethtool::coalesce(name).ok(),
        rx_flow_hash: ethtool::FLOW_TYPES
            .iter()
            .filter_map(|(flow, t)| {
                let bits = ethtool::rx_flow_hash(name, *t).ok()?;
                Some((flow.to_string(), ethtool::hash_letters(bits)))
            })
            .collect(),
        rx_queue_packets: ethtool::stats(name).map(|s| rx_queue_packets(&s)).unwrap_or_default(),
    }
}

/// Per-queue received packets from a driver's statistics, by the names drivers use:
/// `rx_queue_0_packets` (ixgbe, ice, virtio_net), `rx0_packets` (mlx5), `rx-0.packets` (i40e).
/// Empty when no name matches or the queue numbers have gaps.
pub fn rx_queue_packets(stats: &[(String, u64)]) -> Vec<u64> {
    let queue_of = |name: &str| -> Option<usize> {
        let rest = name.strip_prefix("rx")?;
        let rest = rest.strip_prefix("_queue_").or_else(|| rest.strip_prefix('-')).unwrap_or(rest);
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let (number, tail) = rest.split_at(digits);
        (!number.is_empty() && matches!(tail, "_packets" | ".packets"))
            .then(|| number.parse().ok())
            .flatten()
            .filter(|&q: &usize| q < 4096)
    };
    let mut queues: Vec<(usize, u64)> =
        stats.iter().filter_map(|(n, v)| Some((queue_of(n)?, *v))).collect();
    queues.sort_unstable();
    queues.dedup_by_key(|(q, _)| *q);
    if queues.iter().enumerate().any(|(i, (q, _))| i != *q) {
        return Vec::new();
    }
    queues.into_iter().map(|(_, v)| v).collect()
}

/// NET_RX and NET_TX softirqs handled per CPU (/proc/softirqs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NetSoftirqs {
    pub net_rx: Vec<u64>,
    pub net_tx: Vec<u64>,
}

fn read(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
}

/// A queue's steering mask, or why the kernel will not show it: sysfs lists `xps_cpus` on
/// every TX queue but answers ENOENT on a single-queue device (net-sysfs.c checks
/// netif_is_multiqueue before reading or writing it).
fn read_mask(path: &Path, file: &str) -> Result<String, String> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(text.trim().to_owned()),
        // Listed (even as a link to nothing, as a fixture tree imitates it) but not there.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && path.symlink_metadata().is_ok() => {
            Err(format!(
                "the kernel refuses {file} on this device (XPS needs more than one TX queue)"
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(format!("no {file} here (a kernel built without RPS/XPS)"))
        }
        Err(e) => Err(format!("{file} cannot be read: {e}")),
    }
}

fn queues(dir: &Path, prefix: &str, mask_file: &str) -> Vec<NicQueue> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<NicQueue> = entries
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let index = name.strip_prefix(prefix)?.parse().ok()?;
            let (mask, unavailable) = match read_mask(&dir.join(&name).join(mask_file), mask_file) {
                Ok(mask) => (mask, None),
                Err(why) => ("n/a".to_string(), Some(why)),
            };
            Some(NicQueue { index, mask, unavailable })
        })
        .collect();
    out.sort_by_key(|q| q.index);
    out
}

/// Lines of /proc/interrupts: IRQ number, per-CPU counts, and the name (last column).
fn interrupts(text: &str) -> Vec<(u32, Vec<u64>, String)> {
    let mut lines = text.lines();
    let cpus = lines.next().map_or(0, |h| h.split_whitespace().count());
    lines
        .filter_map(|line| {
            let (irq, rest) = line.trim_start().split_once(':')?;
            let irq: u32 = irq.parse().ok()?;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let counts = fields.iter().take(cpus).map(|f| f.parse().unwrap_or(0)).collect();
            Some((irq, counts, fields.last()?.to_string()))
        })
        .collect()
}

/// Every interrupt of `root/proc/interrupts` with its name (the last column).
pub(crate) fn interrupt_names(root: &Path) -> Vec<(u32, String)> {
    let text = read(&root.join("proc/interrupts")).unwrap_or_default();
    interrupts(&text).into_iter().map(|(irq, _, name)| (irq, name)).collect()
}

/// The last path component of the link at `path` (`driver` -> `ixgbe`, `device` -> `virtio2`).
fn link_name(path: &Path, resolve: bool) -> Option<String> {
    let target = if resolve { fs::canonicalize(path).ok()? } else { fs::read_link(path).ok()? };
    Some(target.file_name()?.to_string_lossy().into_owned())
}

/// The interrupts of interface `name` among the lines of /proc/interrupts.
fn nic_irqs(root: &Path, owner: &IrqOwner<'_>, lines: &[(u32, Vec<u64>, String)]) -> Vec<NicIrq> {
    lines
        .iter()
        .filter_map(|(irq, counts, irq_name)| {
            let role = classify(irq_name, owner)?;
            Some(NicIrq {
                irq: *irq,
                name: irq_name.clone(),
                affinity: read(&root.join(format!("proc/irq/{irq}/smp_affinity_list")))
                    .unwrap_or_else(|| "n/a".into()),
                per_cpu: counts.clone(),
                role,
            })
        })
        .collect()
}

/// The devices `dir`'s interface is stacked on, from its `lower_NAME` links.
fn lower_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .filter_map(|e| {
            e.ok()?.file_name().into_string().ok()?.strip_prefix("lower_").map(String::from)
        })
        .filter(|n| is_interface_name(n))
        .collect();
    names.sort();
    names
}

fn read_nic(root: &Path, name: String, lines: &[(u32, Vec<u64>, String)]) -> Nic {
    let dir = root.join("sys/class/net").join(&name);
    let device = dir.join("device");
    let driver = link_name(&device.join("driver"), false);
    // The device's own numa_node, or its bus parent's (a virtio NIC sits on a PCI one).
    let numa_node = [device.join("numa_node"), device.join("../numa_node")]
        .iter()
        .find_map(|p| read(p))
        .and_then(|n| n.parse::<i64>().ok())
        .and_then(|n| usize::try_from(n).ok());
    // Only a device with a bus device behind it (PCI, virtio) has interrupts; a VLAN, bond,
    // veth or loopback has none, whatever their names resemble.
    let irqs = match device.exists().then(|| link_name(&device, true)).flatten() {
        Some(dev) => {
            let owner = IrqOwner { iface: &name, driver: driver.as_deref(), device: Some(&dev) };
            nic_irqs(root, &owner, lines)
        }
        None => Vec::new(),
    };
    Nic {
        settings: (root == Path::new("/")).then(|| read_nic_settings(&name)),
        rx_queues: queues(&dir.join("queues"), "rx-", "rps_cpus"),
        tx_queues: queues(&dir.join("queues"), "tx-", "xps_cpus"),
        lower: lower_names(&dir),
        name,
        driver,
        numa_node,
        irqs,
    }
}

/// Reads every interface under `root/sys/class/net`, with IRQs from `root/proc`. A directory
/// whose name no interface can have (a damaged or crafted tree) is left out; a list that
/// cannot be read is an error naming it (an empty list would read as "no NIC").
pub fn read_nics(root: &Path) -> Result<Vec<Nic>, super::TopologyError> {
    let class = root.join("sys/class/net");
    let lines = read(&root.join("proc/interrupts")).map(|t| interrupts(&t)).unwrap_or_default();
    let entries = fs::read_dir(&class)
        .map_err(|source| super::TopologyError::Read { path: class, source })?;
    let mut nics: Vec<Nic> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| is_interface_name(name))
        .map(|name| read_nic(root, name, &lines))
        .collect();
    nics.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(nics)
}

/// The devices that own the queues `name` sends and receives on: `name` itself when it is
/// stacked on nothing, else the bottom of every `lower_*` chain (a VLAN on a bond on two NICs
/// gives the two NICs), in name order. Lower devices missing from `nics` are left out.
pub fn queue_owners<'a>(nics: &'a [Nic], name: &str) -> Vec<&'a Nic> {
    let mut out: Vec<&Nic> = Vec::new();
    let mut stack: Vec<(&str, usize)> = vec![(name, 0)];
    while let Some((current, depth)) = stack.pop() {
        let Some(nic) = nics.iter().find(|n| n.name == current) else { continue };
        if nic.lower.is_empty() || depth >= MAX_STACK_DEPTH {
            if !out.iter().any(|n| n.name == nic.name) {
                out.push(nic);
            }
            continue;
        }
        stack.extend(nic.lower.iter().map(|l| (l.as_str(), depth + 1)));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// NET_RX and NET_TX per CPU from `root/proc/softirqs`.
pub fn read_net_softirqs(root: &Path) -> NetSoftirqs {
    let text = read(&root.join("proc/softirqs")).unwrap_or_default();
    let row = |label: &str| -> Vec<u64> {
        text.lines()
            .find(|l| l.trim_start().starts_with(label))
            .map(|l| l.split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect())
            .unwrap_or_default()
    };
    NetSoftirqs { net_rx: row("NET_RX:"), net_tx: row("NET_TX:") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_queue_packets_are_read_by_each_drivers_names() {
        let named = |names: &[&str]| -> Vec<(String, u64)> {
            names.iter().enumerate().map(|(i, n)| (n.to_string(), 10 + i as u64)).collect()
        };
        let ixgbe =
            named(&["rx_packets", "rx_queue_0_packets", "rx_queue_0_bytes", "rx_queue_1_packets"]);
        assert_eq!(rx_queue_packets(&ixgbe), [11, 13]);
        assert_eq!(rx_queue_packets(&named(&["rx1_packets", "rx0_packets"])), [11, 10]);
        assert_eq!(rx_queue_packets(&named(&["rx-0.packets", "tx-0.packets"])), [10]);
        // veth's XDP counters, a gap, a huge number, no digits: nothing per queue.
        assert!(rx_queue_packets(&named(&["rx_queue_0_xdp_packets"])).is_empty());
        assert!(rx_queue_packets(&named(&["rx_queue_0_packets", "rx_queue_2_packets"])).is_empty());
        assert!(
            rx_queue_packets(&named(&["rx99999999999999999999_packets", "rx_packets"])).is_empty()
        );
    }
    use std::path::PathBuf;

    use crate::topology::tests::write;

    /// A machine with a 2-queue virtio NIC on node 1 (its IRQs named after the device) and a
    /// veth with no device at all.
    fn fixture() -> PathBuf {
        let root = tempfile::tempdir().unwrap().keep();
        let _ = fs::remove_dir_all(&root);
        let pci = root.join("sys/devices/pci0000:00/0000:00:03.0/virtio2");
        write(pci.join("numa_node"), "1");
        fs::create_dir_all(root.join("sys/bus/virtio/drivers/virtio_net")).unwrap();
        std::os::unix::fs::symlink(
            root.join("sys/bus/virtio/drivers/virtio_net"),
            pci.join("driver"),
        )
        .unwrap();
        let eth0 = root.join("sys/class/net/eth0");
        fs::create_dir_all(&eth0).unwrap();
        std::os::unix::fs::symlink(&pci, eth0.join("device")).unwrap();
        for q in 0..2 {
            write(eth0.join(format!("queues/rx-{q}/rps_cpus")), if q == 0 { "2" } else { "0" });
            write(eth0.join(format!("queues/tx-{q}/xps_cpus")), "1");
        }
        write(root.join("sys/class/net/veth0/queues/rx-0/rps_cpus"), "0");
        write(
            root.join("proc/interrupts"),
            "           CPU0       CPU1\n 37:          0          0 PCI-MSIX-0000:00:03.0   0-edge      virtio2-config\n 38:          5       3345 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n 40:          1          2 PCI-MSIX-0000:00:04.0   1-edge      virtio3-input.0\nNMI:          0          0   Non-maskable interrupts",
        );
        write(root.join("proc/irq/38/smp_affinity_list"), "1");
        write(root.join("proc/irq/37/smp_affinity_list"), "0-1");
        write(root.join("proc/softirqs"), "                    CPU0       CPU1\n      NET_TX:        141        115\n      NET_RX:  311177150    6321143");
        root
    }

    #[test]
    fn reads_queues_masks_irqs_and_nodes() {
        let root = fixture();
        let nics = read_nics(&root).unwrap();
        assert_eq!(nics.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["eth0", "veth0"]);
        let eth0 = &nics[0];
        assert_eq!(eth0.driver.as_deref(), Some("virtio_net"));
        assert_eq!(eth0.numa_node, Some(1));
        assert_eq!(eth0.rx_queues.iter().map(|q| q.mask.as_str()).collect::<Vec<_>>(), ["2", "0"]);
        assert_eq!(eth0.tx_queues.len(), 2);
        let irqs: Vec<(u32, &str)> =
            eth0.irqs.iter().map(|i| (i.irq, i.affinity.as_str())).collect();
        assert_eq!(irqs, [(37, "0-1"), (38, "1")], "virtio3's IRQ belongs to another device");
        assert_eq!(eth0.irqs[1].per_cpu, [5, 3345]);
        let veth = &nics[1];
        assert!(veth.driver.is_none() && veth.irqs.is_empty() && veth.numa_node.is_none());
        let soft = read_net_softirqs(&root);
        assert_eq!(
            (soft.net_rx.clone(), soft.net_tx.clone()),
            (vec![311177150, 6321143], vec![141, 115])
        );
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn stacks_resolve_to_the_devices_that_own_queues() {
        let nic = |name: &str, lower: &[&str]| Nic {
            name: name.into(),
            driver: None,
            numa_node: None,
            rx_queues: vec![],
            tx_queues: vec![],
            irqs: vec![],
            lower: lower.iter().map(|s| s.to_string()).collect(),
            settings: None,
        };
        let nics = [
            nic("bond0", &["eth1", "eth0"]),
            nic("eth0", &[]),
            nic("eth1", &[]),
            nic("vlan7", &["bond0"]),
            nic("loop0", &["loop1"]),
            nic("loop1", &["loop0"]),
        ];
        let names =
            |n: &str| queue_owners(&nics, n).iter().map(|n| n.name.clone()).collect::<Vec<_>>();
        assert_eq!(names("vlan7"), ["eth0", "eth1"]);
        assert_eq!(names("eth0"), ["eth0"]);
        assert_eq!(names("nosuch"), Vec::<String>::new());
        assert!(names("loop0").len() <= 2, "a crafted loop ends");
    }

    /// A tree with no interface list is an error naming the directory, not "no NIC".
    #[test]
    fn an_unreadable_nic_list_names_its_path() {
        let root = tempfile::tempdir().unwrap();
        let err = read_nics(root.path()).unwrap_err().to_string();
        assert!(err.contains("sys/class/net"), "{err}");
    }

    #[test]
    fn reads_this_machine_without_failing() {
        let nics = read_nics(Path::new("/")).unwrap();
        assert!(nics.iter().any(|n| n.name == "lo"), "{nics:?}");
    }
}
