//! Plans for the NICs the multi-host lab meets, each described by a fixture sysfs/procfs tree
//! as its driver lays it out: mlx5, ice, i40e, ixgbe, ena, virtio_net with four queue pairs
//! and with one, and devices stacked on them (VLAN, bond). Every NIC is on one machine, so an
//! interrupt matched to the wrong device shows up as an extra entry. The ethtool answers a
//! fixture cannot give (it has no device to ask) are set on the read `Nic` as each driver gives
//! them.

mod common;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use corelane::topology::{queue_owners, read_nics, Channels, IrqRole, Nic, NicSettings, Topology};
use corelane::tune::{changes, plan, plan_stack, Plan, RolePolicy};

use common::write;

/// One NIC of the fixture: its name, driver, device directory name and the interrupt names
/// its driver registers (queue interrupts and the others).
struct Layout {
    iface: &'static str,
    driver: &'static str,
    device: &'static str,
    queues: usize,
    irqs: Vec<String>,
}

fn layouts() -> Vec<Layout> {
    let four = 0..4;
    let named = |f: &dyn Fn(usize) -> String| four.clone().map(f).collect::<Vec<_>>();
    let with = |mut first: Vec<String>, rest: Vec<String>| {
        first.extend(rest);
        first
    };
    vec![
        Layout {
            iface: "ens1f0np0",
            driver: "mlx5_core",
            device: "0000:03:00.0",
            queues: 4,
            irqs: with(
                vec!["mlx5_async0@pci:0000:03:00.0".into()],
                named(&|q| format!("mlx5_comp{q}@pci:0000:03:00.0")),
            ),
        },
        Layout {
            iface: "ens2f0",
            driver: "ice",
            device: "0000:3b:00.0",
            queues: 4,
            irqs: with(
                vec!["ice-0000:3b:00.0:misc".into()],
                named(&|q| format!("ice-ens2f0-TxRx-{q}")),
            ),
        },
        Layout {
            iface: "ens3f0",
            driver: "i40e",
            device: "0000:5e:00.0",
            queues: 4,
            irqs: with(
                vec!["i40e-0000:5e:00.0:misc".into()],
                named(&|q| format!("i40e-ens3f0-TxRx-{q}")),
            ),
        },
        Layout {
            iface: "eth2",
            driver: "ixgbe",
            device: "0000:05:00.0",
            queues: 4,
            irqs: with(named(&|q| format!("eth2-TxRx-{q}")), vec!["eth2".into()]),
        },
        Layout {
            iface: "ens5",
            driver: "ena",
            device: "0000:00:05.0",
            queues: 4,
            irqs: with(
                vec!["ena-mgmnt@pci:0000:00:05.0".into()],
                named(&|q| format!("ens5-Tx-Rx-{q}")),
            ),
        },
        Layout {
            iface: "eth0",
            driver: "virtio_net",
            device: "virtio1",
            queues: 4,
            irqs: with(
                vec!["virtio1-config".into()],
                four.clone()
                    .flat_map(|q| [format!("virtio1-input.{q}"), format!("virtio1-output.{q}")])
                    .collect(),
            ),
        },
        Layout {
            iface: "eth1",
            driver: "virtio_net",
            device: "virtio2",
            queues: 1,
            irqs: vec![
                "virtio2-config".into(),
                "virtio2-input.0".into(),
                "virtio2-output.0".into(),
            ],
        },
    ]
}

/// 8 CPUs on one node: 4 cores × 2 SMT threads (CPUs 2c and 2c+1), one L3.
fn cpus(root: &Path) {
    let sys = root.join("sys/devices/system");
    write(sys.join("cpu/online"), "0-7\n");
    for cpu in 0..8usize {
        let (dir, first) = (sys.join(format!("cpu/cpu{cpu}")), cpu - cpu % 2);
        write(dir.join("topology/core_id"), &format!("{}\n", cpu / 2));
        write(dir.join("topology/physical_package_id"), "0\n");
        write(dir.join("topology/thread_siblings_list"), &format!("{first}-{}\n", first + 1));
        write(dir.join("cache/index3/level"), "3\n");
        write(dir.join("cache/index3/shared_cpu_list"), "0-7\n");
    }
    write(sys.join("node/node0/cpulist"), "0-7\n");
}

/// The device directory, driver link, queues and interrupts of one NIC. A single-queue device
/// lists `xps_cpus` but the kernel answers ENOENT: a link to nothing does the same.
fn nic(root: &Path, l: &Layout, first_irq: u32, interrupts: &mut String) {
    let pci = root.join("sys/devices/pci0000:00").join(if l.device.starts_with("virtio") {
        format!("0000:00:0{}.0/{}", &l.device[6..], l.device)
    } else {
        l.device.to_string()
    });
    write(pci.join("numa_node"), "0\n");
    let driver = root.join("sys/bus/pci/drivers").join(l.driver);
    fs::create_dir_all(&driver).unwrap();
    symlink(&driver, pci.join("driver")).unwrap();
    let dir = root.join("sys/class/net").join(l.iface);
    fs::create_dir_all(&dir).unwrap();
    symlink(&pci, dir.join("device")).unwrap();
    for q in 0..l.queues {
        write(dir.join(format!("queues/rx-{q}/rps_cpus")), "00\n");
        let xps = dir.join(format!("queues/tx-{q}/xps_cpus"));
        if l.queues == 1 {
            fs::create_dir_all(xps.parent().unwrap()).unwrap();
            symlink(root.join("refused"), xps).unwrap();
        } else {
            write(xps, "00\n");
        }
    }
    for (i, name) in l.irqs.iter().enumerate() {
        let irq = first_irq + i as u32;
        interrupts.push_str(&format!(
            " {irq}:  10  0  0  0  0  0  0  0  IR-PCI-MSIX-{} {i}-edge      {name}\n",
            l.device
        ));
        write(root.join(format!("proc/irq/{irq}/smp_affinity_list")), "0-7\n");
    }
}

/// A stacked device: no `device` link, one `lower_NAME` link per device under it.
fn stacked(root: &Path, name: &str, lower: &[&str]) {
    let dir = root.join("sys/class/net").join(name);
    write(dir.join("queues/rx-0/rps_cpus"), "00\n");
    for l in lower {
        symlink(root.join("sys/class/net").join(l), dir.join(format!("lower_{l}"))).unwrap();
    }
}

fn machine() -> tempfile::TempDir {
    let root = tempfile::Builder::new().prefix("corelane-nics-").tempdir().unwrap();
    let r = root.path();
    cpus(r);
    let mut interrupts = String::from("            CPU0 CPU1 CPU2 CPU3 CPU4 CPU5 CPU6 CPU7\n");
    for (i, l) in layouts().iter().enumerate() {
        nic(r, l, 100 + 20 * i as u32, &mut interrupts);
    }
    stacked(r, "eth2.10", &["eth2"]);
    stacked(r, "bond0", &["ens2f0", "ens3f0"]);
    stacked(r, "vlan20", &["bond0"]);
    write(r.join("proc/interrupts"), &interrupts);
    root
}

/// The ethtool answers of each driver in its default state, as `ethtool -l` and `-n` print
/// them: ixgbe and ena hash UDP on addresses only, virtio_net without RSS hashes nothing.
fn driver_settings(nic: &mut Nic) {
    let combined = |now: u32, max: u32| {
        let mut c = Channels::default();
        (c.max_combined, c.combined) = (max, now);
        c
    };
    let hash = |udp: &str| {
        ["tcp4", "udp4", "tcp6", "udp6"]
            .iter()
            .map(|f| {
                (
                    f.to_string(),
                    if f.starts_with("tcp") && !udp.is_empty() { "sdfn" } else { udp }.to_string(),
                )
            })
            .collect()
    };
    let (channels, rx_flow_hash) = match nic.name.as_str() {
        "ens1f0np0" | "ens2f0" | "ens3f0" => (combined(4, 64), hash("sdfn")),
        "eth2" | "ens5" => (combined(4, 8), hash("sd")),
        "eth0" => (combined(4, 4), hash("")),
        "eth1" => (combined(1, 1), hash("")),
        _ => return,
    };
    nic.settings = Some(NicSettings {
        channels: Some(channels),
        coalesce: None,
        rx_flow_hash,
        ..Default::default()
    });
}

fn plan_for(root: &Path, name: &str) -> (Plan, Vec<Nic>) {
    let topo = Topology::read_from(root).unwrap();
    let mut nics = read_nics(root).unwrap();
    nics.iter_mut().for_each(driver_settings);
    let nic = nics.iter().find(|n| n.name == name).unwrap();
    let owners = queue_owners(&nics, name);
    let p = plan_stack(&topo, nic, &owners, None, &RolePolicy::Spread).unwrap();
    (p, nics)
}

#[test]
fn every_driver_layout_plans_its_queue_interrupts_masks_and_ethtool_settings() {
    let root = machine();
    let r = root.path();
    for l in layouts() {
        let (p, nics) = plan_for(r, l.iface);
        let nic = nics.iter().find(|n| n.name == l.iface).unwrap();
        assert_eq!(nic.irqs.len(), l.irqs.len(), "{}: {:?}", l.iface, nic.irqs);
        // An interrupt CPU per queue, at most half the 4 cores, on distinct cores: 0 and 2.
        let irq_cpus: &[usize] = if l.queues == 1 { &[0] } else { &[0, 2] };
        let list = irq_cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",");
        assert_eq!(p.irq_cpus, list, "{}", l.iface);
        let per_queue = if l.driver == "virtio_net" { 2 } else { 1 };
        assert_eq!(p.device.irqs.len(), l.queues * per_queue, "{}: {:?}", l.iface, p.device.irqs);
        let mut served: Vec<u32> = Vec::new();
        for placed in &p.device.irqs {
            let read = nic.irqs.iter().find(|i| i.irq == placed.irq).unwrap();
            let IrqRole::Queue(queue) = read.role else { panic!("{}: {read:?}", l.iface) };
            assert_eq!(
                placed.cpu,
                irq_cpus[queue as usize % irq_cpus.len()],
                "{}: {placed:?}",
                l.iface
            );
            served.push(queue);
        }
        served.sort_unstable();
        served.dedup();
        assert_eq!(served, (0..l.queues as u32).collect::<Vec<_>>(), "{}", l.iface);
        let control = l.irqs.iter().find(|n| !p.device.irqs.iter().any(|i| &i.name == *n)).unwrap();
        assert!(p.notes.iter().any(|n| n.contains(control.as_str())), "{}: {:?}", l.iface, p.notes);
        assert_eq!(
            p.device.rps_cpus, "0",
            "{}: RPS stays off where interrupts do the work",
            l.iface
        );
        if l.queues == 1 {
            assert!(p.device.xps_cpus.is_empty(), "{}: no XPS on a single-queue device", l.iface);
            assert!(p.notes.iter().any(|n| n.contains("no XPS")), "{:?}", p.notes);
            assert_eq!(p.device.queue_count, None);
        } else {
            // A queue per sending CPU: the syscall CPU 4 and the application CPUs 6 and 7.
            assert_eq!(p.device.xps_cpus, ["10", "40", "80", "10"], "{}", l.iface);
            assert_eq!(p.device.queue_count, Some(2), "{}: one queue per interrupt CPU", l.iface);
        }
        let flows: Vec<&str> = p.device.rx_flow_hash.iter().map(|h| h.flow.as_str()).collect();
        match l.iface {
            "eth2" | "ens5" => assert_eq!(flows, ["udp4", "udp6"], "UDP ports added to the hash"),
            "eth0" | "eth1" => {
                assert!(flows.is_empty());
                assert!(
                    p.notes.iter().any(|n| n.contains("hashes no fields of udp4")),
                    "{:?}",
                    p.notes
                );
            }
            _ => assert!(flows.is_empty(), "{}: already hashes sdfn", l.iface),
        }
        // The plan round-trips through TOML, and lists a change for every queue interrupt.
        let text = toml::to_string_pretty(&p).unwrap();
        assert_eq!(toml::from_str::<Plan>(&text).unwrap(), p);
        let list = changes(&p, r).unwrap();
        let irq_changes = list.iter().filter(|c| c.path.starts_with(r.join("proc/irq"))).count();
        assert_eq!(irq_changes, p.device.irqs.len(), "{}", l.iface);
    }
}

#[test]
fn stacked_devices_plan_their_lower_devices_and_say_so() {
    let root = machine();
    let r = root.path();
    let (vlan, _) = plan_for(r, "eth2.10");
    assert_eq!(vlan.device.nic, "eth2.10");
    assert!(
        vlan.device.irqs.is_empty()
            && vlan.device.xps_cpus.is_empty()
            && vlan.device.rps_cpus == "0"
    );
    assert_eq!(vlan.lower.iter().map(|d| d.nic.as_str()).collect::<Vec<_>>(), ["eth2"]);
    assert_eq!(vlan.lower[0].irqs.len(), 4);
    assert!(
        vlan.notes.iter().any(|n| n.contains("eth2.10 is stacked on eth2")),
        "{:?}",
        vlan.notes
    );
    // A VLAN on a bond on two NICs: both NICs.
    let (deep, _) = plan_for(r, "vlan20");
    let lower: Vec<&str> = deep.lower.iter().map(|d| d.nic.as_str()).collect();
    assert_eq!(lower, ["ens2f0", "ens3f0"]);
    let list = changes(&deep, r).unwrap();
    for nic in ["ens2f0", "ens3f0"] {
        // Queues 2 and 3 go with the new queue count: only 0 and 1 keep a mask to set.
        let xps = format!("sys/class/net/{nic}/queues/tx-1/xps_cpus");
        assert!(list.iter().any(|c| c.path == r.join(&xps)), "{xps} in {list:?}");
    }
    let text = toml::to_string_pretty(&deep).unwrap();
    assert_eq!(toml::from_str::<Plan>(&text).unwrap(), deep);
}

/// A plan file written before plans had notes' omissions or lower devices still reads, and
/// its XPS mask for a single-queue device is skipped with the reason, not an OS error.
#[test]
fn an_old_plan_file_still_reads_and_a_refused_setting_is_skipped_by_name() {
    let root = machine();
    let r = root.path();
    let old = "nic = \"eth1\"\npolicy = \"spread\"\nirq_cpus = \"0\"\nsyscall_cpus = \"1\"\napp_cpus = \"1\"\nrps_cpus = \"0\"\nxps_cpus = [\"2\"]\nirqs = []\n";
    let p: Plan = toml::from_str(old).unwrap();
    assert!(p.lower.is_empty() && p.notes.is_empty());
    let review = corelane::tune::review(&p, r).unwrap();
    assert!(review.changes.is_empty(), "{:?}", review.changes);
    assert_eq!(review.skipped.len(), 1);
    assert!(review.skipped[0].path.ends_with("eth1/queues/tx-0/xps_cpus"));
    assert!(review.skipped[0].reason.contains("refuses XPS"), "{:?}", review.skipped);
    // A plain plan of the single-queue NIC has nothing refused in it.
    let topo = Topology::read_from(r).unwrap();
    let nics = read_nics(r).unwrap();
    let eth1 = nics.iter().find(|n| n.name == "eth1").unwrap();
    let fresh = plan(&topo, eth1, None, &RolePolicy::Spread).unwrap();
    assert!(corelane::tune::review(&fresh, r).unwrap().skipped.is_empty());
}
