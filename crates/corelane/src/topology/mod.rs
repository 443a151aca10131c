//! CPUs, SMT siblings, last-level cache sharing and NUMA nodes, and the network interfaces
//! with their queues, steering masks and interrupts, read from sysfs and procfs.
//!
//! Everything is read relative to a root directory (`/` in production) so that tests can point
//! it at a fixture tree describing another machine.

mod cpulist;
mod irqname;
mod net;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

pub use cpulist::{CpuList, CpuListError};
pub use irqname::IrqRole;
pub(crate) use net::interrupt_names;
pub use net::{
    is_interface_name, queue_owners, read_net_softirqs, read_nic_settings, read_nics, Channels,
    Coalesce, NetSoftirqs, Nic, NicIrq, NicQueue, NicSettings, FLOW_TYPE_NAMES,
};

/// Where one online CPU sits.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CpuLocation {
    pub cpu: usize,
    pub core: usize,
    pub package: usize,
    pub numa_node: usize,
    /// CPUs sharing this CPU's physical core (itself included).
    pub smt_siblings: Vec<usize>,
    /// CPUs sharing this CPU's last-level cache (itself included).
    pub llc_shared: Vec<usize>,
}

/// A NUMA node: its CPUs and its distance to every node (SLIT units: 10 is local).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NumaNode {
    pub node: usize,
    pub cpus: Vec<usize>,
    /// `distances[i]` is the distance to the i-th node listed in `Topology::nodes`.
    pub distances: Vec<u32>,
}

/// The machine's online CPUs and its NUMA nodes (empty when the kernel shows none).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Topology {
    pub cpus: Vec<CpuLocation>,
    pub nodes: Vec<NumaNode>,
}

/// What `corelane topo --json` prints: the machine's CPUs, NUMA nodes, network interfaces and
/// per-CPU network softirq counts. One type, so the CLI that writes it and the lab (and its
/// tests) that read another host's are held to the same fields.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MachineReport {
    pub cpus: Vec<CpuLocation>,
    pub numa_nodes: Vec<NumaNode>,
    pub nics: Vec<Nic>,
    pub net_softirqs: NetSoftirqs,
}

impl MachineReport {
    /// Reads the tree mounted at `root` (`/` in production).
    pub fn read_from(root: &Path) -> Result<Self, TopologyError> {
        let Topology { cpus, nodes } = Topology::read_from(root)?;
        let nics = read_nics(root)?;
        Ok(Self { cpus, numa_nodes: nodes, nics, net_softirqs: read_net_softirqs(root) })
    }
}

/// Why the topology could not be read, or a CPU list does not fit it.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path} holds `{text}`, not a CPU list")]
    Parse { path: PathBuf, text: String },
    #[error("CPU {cpu} does not exist or is offline; this machine's online CPUs are {online}")]
    NoSuchCpu { cpu: usize, online: CpuList },
    #[error("no CPU to pin to: give at least one of this machine's online CPUs ({online})")]
    NoCpus { online: CpuList },
}

fn read_trimmed(path: &Path) -> Result<String, TopologyError> {
    fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .map_err(|source| TopologyError::Read { path: path.into(), source })
}

fn read_list(path: &Path) -> Result<CpuList, TopologyError> {
    let text = read_trimmed(path)?;
    text.parse().map_err(|_| TopologyError::Parse { path: path.into(), text })
}

fn read_number(path: &Path) -> Option<usize> {
    read_trimmed(path).ok()?.parse::<i64>().ok().and_then(|n| usize::try_from(n).ok())
}

impl Topology {
    /// Reads the running machine.
    pub fn read() -> Result<Self, TopologyError> {
        Self::read_from(Path::new("/"))
    }

    /// Reads a sysfs tree mounted at `root` (`root/sys/devices/system/...`).
    pub fn read_from(root: &Path) -> Result<Self, TopologyError> {
        let system = root.join("sys/devices/system");
        let online = read_list(&system.join("cpu/online"))?;
        let nodes = Self::read_nodes(&system.join("node"));
        let mut cpus = Vec::with_capacity(online.len());
        for &cpu in online.cpus() {
            let dir = system.join(format!("cpu/cpu{cpu}"));
            let topo = dir.join("topology");
            let smt_siblings = read_list(&topo.join("thread_siblings_list"))
                .map(|l| l.cpus().to_vec())
                .unwrap_or_else(|_| vec![cpu]);
            let llc_shared = Self::read_llc(&dir.join("cache")).unwrap_or_else(|| vec![cpu]);
            let numa_node = nodes
                .iter()
                .find(|(_, list)| list.contains(cpu))
                .map(|(node, _)| *node)
                .unwrap_or(0);
            cpus.push(CpuLocation {
                cpu,
                core: read_number(&topo.join("core_id")).unwrap_or(cpu),
                package: read_number(&topo.join("physical_package_id")).unwrap_or(0),
                numa_node,
                smt_siblings,
                llc_shared,
            });
        }
        let nodes = nodes
            .into_iter()
            .map(|(node, list)| {
                let path = system.join(format!("node/node{node}/distance"));
                let distances = read_trimmed(&path)
                    .map(|t| t.split_whitespace().filter_map(|d| d.parse().ok()).collect())
                    .unwrap_or_default();
                NumaNode { node, cpus: list.cpus().to_vec(), distances }
            })
            .collect();
        Ok(Self { cpus, nodes })
    }

    /// NUMA nodes and their CPUs; a machine without `node*` directories is one node 0.
    fn read_nodes(dir: &Path) -> Vec<(usize, CpuList)> {
        let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
        let mut nodes: Vec<(usize, CpuList)> = entries
            .filter_map(|e| {
                let name = e.ok()?.file_name().into_string().ok()?;
                let node: usize = name.strip_prefix("node")?.parse().ok()?;
                Some((node, read_list(&dir.join(&name).join("cpulist")).ok()?))
            })
            .collect();
        nodes.sort_by_key(|(node, _)| *node);
        nodes
    }

    /// The CPUs sharing the highest-level cache listed under `cpuN/cache/index*`.
    fn read_llc(dir: &Path) -> Option<Vec<usize>> {
        let mut best: Option<(usize, CpuList)> = None;
        for entry in fs::read_dir(dir).ok()? {
            let path = entry.ok()?.path();
            if !path.file_name()?.to_str()?.starts_with("index") {
                continue;
            }
            let Some(level) = read_number(&path.join("level")) else { continue };
            let Ok(shared) = read_list(&path.join("shared_cpu_list")) else { continue };
            if best.as_ref().is_none_or(|(l, _)| level > *l) {
                best = Some((level, shared));
            }
        }
        best.map(|(_, list)| list.cpus().to_vec())
    }

    /// All online CPUs.
    pub fn online(&self) -> CpuList {
        CpuList::new(self.cpus.iter().map(|c| c.cpu).collect())
    }

    pub fn cpu(&self, cpu: usize) -> Option<&CpuLocation> {
        self.cpus.iter().find(|c| c.cpu == cpu)
    }

    /// Checks that every CPU of `list` exists here, naming the first that does not.
    /// Checks a list lanes are to be pinned to, round-robin: [`check`](Self::check), and not
    /// empty (an empty list has nothing to spread lanes over).
    pub fn check_pin(&self, list: &CpuList) -> Result<(), TopologyError> {
        if list.is_empty() {
            return Err(TopologyError::NoCpus { online: self.online() });
        }
        self.check(list)
    }

    pub fn check(&self, list: &CpuList) -> Result<(), TopologyError> {
        match list.cpus().iter().find(|&&cpu| self.cpu(cpu).is_none()) {
            Some(&cpu) => Err(TopologyError::NoSuchCpu { cpu, online: self.online() }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `s` and a newline to the fixture file `p`, as sysfs shows a value, making its
    /// directories.
    pub(super) fn write(p: PathBuf, s: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, format!("{s}\n")).unwrap();
    }

    /// Writes a fixture: 2 packages × 2 cores × 2 SMT threads, one NUMA node per package,
    /// an L3 per package and an L2 per core.
    fn fixture() -> PathBuf {
        let root = tempfile::tempdir().unwrap().keep();
        let _ = fs::remove_dir_all(&root);
        let sys = root.join("sys/devices/system");
        write(sys.join("cpu/online"), "0-7");
        for cpu in 0..8usize {
            let package = cpu / 4;
            let core = (cpu % 4) / 2;
            let first = cpu - cpu % 2;
            let dir = sys.join(format!("cpu/cpu{cpu}"));
            write(dir.join("topology/core_id"), &core.to_string());
            write(dir.join("topology/physical_package_id"), &package.to_string());
            write(dir.join("topology/thread_siblings_list"), &format!("{first}-{}", first + 1));
            write(dir.join("cache/index2/level"), "2");
            write(dir.join("cache/index2/shared_cpu_list"), &format!("{first}-{}", first + 1));
            write(dir.join("cache/index3/level"), "3");
            let p0 = package * 4;
            write(dir.join("cache/index3/shared_cpu_list"), &format!("{p0}-{}", p0 + 3));
        }
        write(sys.join("node/node0/cpulist"), "0-3");
        write(sys.join("node/node1/cpulist"), "4-7");
        write(sys.join("node/node0/distance"), "10 21");
        write(sys.join("node/node1/distance"), "21 10");
        root
    }

    #[test]
    fn reads_a_two_package_smt_fixture() {
        let root = fixture();
        let topo = Topology::read_from(&root).unwrap();
        assert_eq!(topo.cpus.len(), 8);
        let cpu5 = topo.cpu(5).unwrap();
        assert_eq!((cpu5.core, cpu5.package, cpu5.numa_node), (0, 1, 1));
        assert_eq!(cpu5.smt_siblings, vec![4, 5]);
        assert_eq!(cpu5.llc_shared, vec![4, 5, 6, 7]);
        assert_eq!(topo.nodes.len(), 2);
        assert_eq!(topo.nodes[1].cpus, vec![4, 5, 6, 7]);
        assert_eq!(topo.nodes[1].distances, vec![21, 10]);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn check_names_the_missing_cpu_and_the_online_ones() {
        let topo = Topology::read().unwrap();
        let err = topo.check(&CpuList::new(vec![0, 4000 % CpuList::MAX_CPU])).unwrap_err();
        assert!(err.to_string().contains("CPU 928 does not exist"), "{err}");
        assert!(topo.check(&topo.online()).is_ok());
    }

    /// An empty list given as a pin used to reach `index % len` (a division by zero).
    #[test]
    fn an_empty_list_is_refused() {
        let topo = Topology::read().unwrap();
        let err = topo.check_pin(&CpuList::default()).unwrap_err();
        assert!(err.to_string().starts_with("no CPU to pin to"), "{err}");
    }

    #[test]
    fn a_missing_root_is_a_clear_read_error() {
        let err = Topology::read_from(Path::new("/nonexistent-corelane")).unwrap_err();
        assert!(err.to_string().starts_with("cannot read /nonexistent-corelane/sys"), "{err}");
    }
}
