//! `topo`, `plan` and the changes a plan makes, read from a fixture sysfs/procfs tree that
//! describes a machine this VM is not: two packages, two NUMA nodes, SMT, and a four-queue
//! NIC with one interrupt per queue on node 1.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use corelane::topology::{read_net_softirqs, read_nics, Topology};
use corelane::tune::{changes, plan, RolePolicy};

use common::write;

/// 16 CPUs: package p holds CPUs 8p..8p+7, core c of a package runs CPUs 8p+2c and 8p+2c+1
/// (SMT pairs), each package has its own L3 and NUMA node; eth0 hangs off node 1.
fn machine(name: &str) -> PathBuf {
    let root =
        tempfile::Builder::new().prefix(&format!("corelane-{name}-")).tempdir().unwrap().keep();
    let _ = fs::remove_dir_all(&root);
    let sys = root.join("sys/devices/system");
    write(sys.join("cpu/online"), "0-15");
    for cpu in 0..16usize {
        let (package, first) = (cpu / 8, cpu - cpu % 2);
        let dir = sys.join(format!("cpu/cpu{cpu}"));
        write(dir.join("topology/core_id"), &((cpu % 8) / 2).to_string());
        write(dir.join("topology/physical_package_id"), &package.to_string());
        write(dir.join("topology/thread_siblings_list"), &format!("{first}-{}", first + 1));
        write(dir.join("cache/index2/level"), "2");
        write(dir.join("cache/index2/shared_cpu_list"), &format!("{first}-{}", first + 1));
        write(dir.join("cache/index3/level"), "3");
        write(
            dir.join("cache/index3/shared_cpu_list"),
            &format!("{}-{}", package * 8, package * 8 + 7),
        );
    }
    write(sys.join("node/node0/cpulist"), "0-7");
    write(sys.join("node/node1/cpulist"), "8-15");
    write(sys.join("node/node0/distance"), "10 21");
    write(sys.join("node/node1/distance"), "21 10");
    let device = root.join("sys/devices/pci0000:80/0000:81:00.0");
    write(device.join("numa_node"), "1");
    let driver = root.join("sys/bus/pci/drivers/ixgbe");
    fs::create_dir_all(&driver).unwrap();
    std::os::unix::fs::symlink(&driver, device.join("driver")).unwrap();
    let eth0 = root.join("sys/class/net/eth0");
    fs::create_dir_all(&eth0).unwrap();
    std::os::unix::fs::symlink(&device, eth0.join("device")).unwrap();
    let mut interrupts = String::from("            ");
    interrupts.push_str(&(0..16).map(|c| format!("CPU{c:<7}")).collect::<Vec<_>>().join(" "));
    interrupts.push('\n');
    for q in 0..4 {
        write(eth0.join(format!("queues/rx-{q}/rps_cpus")), "0000");
        write(eth0.join(format!("queues/tx-{q}/xps_cpus")), "0000");
        let irq = 120 + q;
        let counts: Vec<String> =
            (0..16).map(|c| if c == 0 { "5000" } else { "0" }.to_string()).collect();
        interrupts.push_str(&format!(" {irq}: {} IR-PCI-MSI eth0-TxRx-{q}\n", counts.join(" ")));
        write(root.join(format!("proc/irq/{irq}/smp_affinity_list")), "0-15");
    }
    write(root.join("proc/interrupts"), &interrupts);
    let zeros = vec!["0"; 16].join(" ");
    write(root.join("proc/softirqs"), &format!("CPU0\n NET_TX: {zeros}\n NET_RX: {zeros}\n"));
    root
}

#[test]
fn topo_reads_packages_nodes_distances_queues_and_interrupts() {
    let root = machine("topo-fixture");
    let topo = Topology::read_from(&root).unwrap();
    assert_eq!(topo.cpus.len(), 16);
    assert_eq!(topo.nodes.len(), 2);
    assert_eq!(topo.nodes[0].distances, vec![10, 21]);
    let nics = read_nics(&root).unwrap();
    let eth0 = nics.iter().find(|n| n.name == "eth0").unwrap();
    assert_eq!(eth0.numa_node, Some(1));
    assert_eq!(eth0.driver.as_deref(), Some("ixgbe"));
    assert_eq!((eth0.rx_queues.len(), eth0.tx_queues.len(), eth0.irqs.len()), (4, 4, 4));
    assert_eq!(eth0.irqs[2].name, "eth0-TxRx-2");
    assert_eq!(eth0.irqs[0].per_cpu[0], 5000);
    assert!(eth0.settings.is_none(), "a fixture root has no live device to ask");
    assert_eq!(read_net_softirqs(&root).net_rx.len(), 16);
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn plan_puts_interrupts_on_the_nic_node_and_changes_name_every_setting() {
    let root = machine("plan-fixture");
    let topo = Topology::read_from(&root).unwrap();
    let nics = read_nics(&root).unwrap();
    let eth0 = nics.iter().find(|n| n.name == "eth0").unwrap();
    let p = plan(&topo, eth0, None, &RolePolicy::Spread).unwrap();
    let node1 = |list: &str| {
        list.split(',').all(|c| c.split('-').all(|n| n.parse::<usize>().unwrap() >= 8))
    };
    assert!(node1(&p.irq_cpus), "interrupts on the NIC's node: {}", p.irq_cpus);
    assert!(node1(&p.syscall_cpus), "the syscall CPU shares their LLC: {}", p.syscall_cpus);
    assert_eq!(p.device.irqs.len(), 4);
    assert_eq!(p.device.xps_cpus.len(), 4, "one XPS mask per TX queue");
    let fenced = plan(&topo, eth0, None, &RolePolicy::Fenced).unwrap();
    assert!(node1(&fenced.app_cpus), "fenced stays on node 1: {}", fenced.app_cpus);
    let list = changes(&p, &root).unwrap();
    let paths: Vec<String> =
        list.iter().map(|c| c.path.strip_prefix(&root).unwrap().display().to_string()).collect();
    assert!(paths.iter().any(|p| p == "proc/irq/121/smp_affinity_list"), "{paths:?}");
    assert!(paths.iter().any(|p| p.ends_with("tx-3/xps_cpus")), "{paths:?}");
    assert!(!paths.iter().any(|p| p.starts_with("ethtool:")), "no ioctl against a fixture");
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn this_vm_reads_without_error_and_says_what_it_lacks() {
    let topo = Topology::read_from(Path::new("/")).unwrap();
    assert!(!topo.cpus.is_empty());
    let nics = read_nics(Path::new("/")).unwrap();
    let lo = nics.iter().find(|n| n.name == "lo").expect("every namespace has lo");
    let settings = lo.settings.as_ref().expect("the live machine is asked");
    assert!(settings.coalesce.is_none(), "loopback has no interrupt moderation");
}
