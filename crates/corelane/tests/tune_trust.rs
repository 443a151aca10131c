//! Plans and revert files are files anyone may have edited: a crafted one must be refused
//! whole, with nothing read or written outside the settings a plan may change. Run against a
//! fake sysfs/procfs root (`--root`), so the machine's own settings are never touched.

use std::fs;
use std::path::{Path, PathBuf};

use corelane::tune::{
    apply, changes, read_revert_file, revert, ApplyError, Change, DevicePlan, IrqPlacement, Plan,
    SettingError,
};

fn fake_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let write = |p: PathBuf, s: &str| {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, s).unwrap();
    };
    write(root.path().join("proc/irq/38/smp_affinity_list"), "0-1\n");
    write(root.path().join("proc/irq/11/smp_affinity_list"), "0-1\n");
    write(root.path().join("sys/class/net/eth0/queues/rx-0/rps_cpus"), "00000000\n");
    // eth0's MSI interrupts (77 has no affinity file: a write to it fails), and a disk's.
    write(root.path().join("sys/class/net/eth0/device/msi_irqs/38"), "msix\n");
    write(root.path().join("sys/class/net/eth0/device/msi_irqs/77"), "msix\n");
    write(
        root.path().join("proc/interrupts"),
        "           CPU0       CPU1\n 11:  5  0  IO-APIC  11-fasteoi  ata_piix\n 38:  9  1  PCI-MSIX-0000:00:03.0  1-edge  eth0-TxRx-0\n",
    );
    root
}

fn plan(nic: &str) -> Plan {
    Plan {
        device: DevicePlan {
            nic: nic.into(),
            rps_cpus: "2".into(),
            irqs: vec![IrqPlacement { irq: 38, name: "q0".into(), cpu: 0 }],
            ..DevicePlan::default()
        },
        policy: "spread".into(),
        numa_node: None,
        irq_cpus: "0".into(),
        syscall_cpus: "1".into(),
        app_cpus: "1".into(),
        notes: vec![],
        lower: vec![],
        addresses: Vec::new(),
    }
}

/// `nic = "../../../some/dir"` made `apply` read and print files outside sysfs (and write
/// them with --yes). The name is refused before anything is read.
#[test]
fn a_plan_naming_a_path_instead_of_an_interface_is_refused() {
    let root = fake_root();
    let outside = root.path().join("outside/queues/rx-0");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("rps_cpus"), "secret\n").unwrap();
    for nic in ["../../../outside", "..", "eth0/../../../outside", "a\0b", ""] {
        let err = changes(&plan(nic), root.path()).unwrap_err();
        assert!(
            matches!(err, ApplyError::Invalid(SettingError::BadInterface(_))),
            "{nic:?}: {err}"
        );
        assert!(!err.to_string().contains("secret"));
    }
    let err = changes(&plan("eth9"), root.path()).unwrap_err();
    assert!(err.to_string().contains("no network interface `eth9`"), "{err}");
    let mut bad_mask = plan("eth0");
    bad_mask.device.rps_cpus = "../../x".into();
    assert!(matches!(changes(&bad_mask, root.path()), Err(ApplyError::Invalid(_))));
    assert_eq!(fs::read_to_string(outside.join("rps_cpus")).unwrap(), "secret\n");
}

/// A crafted revert file made `revert` create and write any path as root. Every entry is
/// now checked first, and one bad entry refuses the file: nothing is written, not even the
/// good entries before it.
#[test]
fn a_crafted_revert_file_is_refused_whole() {
    let root = fake_root();
    let r = root.path();
    let irq = r.join("proc/irq/38/smp_affinity_list");
    let victim = r.join("etc/cron.d/evil");
    let good = Change { path: irq.clone(), from: "0-1".into(), to: "0".into() };
    let crafted: Vec<Vec<Change>> = vec![
        vec![
            good.clone(),
            Change { path: victim.clone(), from: "* * * * * root sh".into(), to: "x".into() },
        ],
        vec![
            good.clone(),
            Change {
                path: r.join("proc/irq/38/../../../etc/cron.d/evil"),
                from: "1".into(),
                to: "0".into(),
            },
        ],
        vec![
            good.clone(),
            Change { path: irq.clone(), from: "* * * * * root sh".into(), to: "0".into() },
        ],
        vec![
            good.clone(),
            Change {
                path: PathBuf::from("ethtool:../../x/queues"),
                from: "1".into(),
                to: "2".into(),
            },
        ],
        vec![
            good.clone(),
            Change {
                path: r.join("sys/class/net/eth0/queues/rx-0/rps_cpus"),
                from: "zz".into(),
                to: "1".into(),
            },
        ],
    ];
    for (i, list) in crafted.iter().enumerate() {
        let file = r.join(format!("revert-{i}.json"));
        fs::write(&file, serde_json::to_vec(list).unwrap()).unwrap();
        let err = read_revert_file(&file, r).unwrap_err();
        assert!(matches!(err, ApplyError::Invalid(_)), "entry set {i}: {err}");
        // The library refuses the list itself too, whoever calls it.
        assert!(matches!(revert(list, r), Err(ApplyError::Invalid(_))), "entry set {i}");
        assert!(matches!(apply(list, r), Err(ApplyError::Invalid(_))), "entry set {i}");
    }
    assert!(!victim.exists() && !r.join("etc").exists());
    assert_eq!(fs::read_to_string(&irq).unwrap(), "0-1\n", "the good entry was not written");
    // Not JSON, or too large: refused with the reason.
    let junk = r.join("junk.json");
    fs::write(&junk, b"\xff\xfe not json").unwrap();
    assert!(matches!(read_revert_file(&junk, r), Err(ApplyError::RevertFile { .. })));
    fs::write(&junk, vec![b' '; 2 << 20]).unwrap();
    let err = read_revert_file(&junk, r).unwrap_err();
    assert!(err.to_string().contains("larger than"), "{err}");
}

/// A write goes only to an existing setting file: never created (no O_CREAT), never through
/// a symlink put in its place (O_NOFOLLOW).
#[test]
fn writes_never_create_or_follow() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: apply needs root");
        return;
    }
    let root = fake_root();
    let r = root.path();
    let victim = r.join("victim");
    fs::write(&victim, "precious").unwrap();
    let irq = r.join("proc/irq/38/smp_affinity_list");
    fs::remove_file(&irq).unwrap();
    std::os::unix::fs::symlink(&victim, &irq).unwrap();
    let list = [Change { path: irq.clone(), from: "0-1".into(), to: "0".into() }];
    assert!(matches!(apply(&list, r), Err(ApplyError::Write { .. })));
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
    let missing = [Change {
        path: r.join("proc/irq/77/smp_affinity_list"),
        from: "0".into(),
        to: "1".into(),
    }];
    assert!(matches!(apply(&missing, r), Err(ApplyError::Write { .. })));
    assert!(!Path::new(&r.join("proc/irq/77")).exists());
}

/// An edited plan for eth0 named a disk's interrupt, and `apply` moved it (its dry run
/// listed the change). Every interrupt of a plan must now be its interface's, and every
/// interrupt of a revert file some interface's: refused by name before anything is read.
#[test]
fn a_plan_or_revert_file_naming_a_foreign_interrupt_is_refused() {
    let root = fake_root();
    let r = root.path();
    let mut p = plan("eth0");
    p.device.irqs.push(IrqPlacement { irq: 11, name: "eth0-TxRx-1".into(), cpu: 0 });
    let err = changes(&p, r).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("interrupt 11 (ata_piix) does not belong to eth0"), "{text}");
    assert!(text.contains("38 (eth0-TxRx-0)"), "the interface's own are listed: {text}");
    p.device.irqs.retain(|i| i.irq == 38);
    assert_eq!(changes(&p, r).unwrap().len(), 2, "eth0's own interrupt is still moved");

    let disk = r.join("proc/irq/11/smp_affinity_list");
    let list = vec![Change { path: disk.clone(), from: "1".into(), to: "0-1".into() }];
    let file = r.join("revert.json");
    fs::write(&file, serde_json::to_vec(&list).unwrap()).unwrap();
    let err = read_revert_file(&file, r).unwrap_err().to_string();
    assert!(
        err.contains("interrupt 11 (ata_piix) does not belong to a network interface"),
        "{err}"
    );
    assert!(matches!(revert(&list, r), Err(ApplyError::Invalid(SettingError::ForeignIrq { .. }))));
    assert!(matches!(apply(&list, r), Err(ApplyError::Invalid(SettingError::ForeignIrq { .. }))));
    assert_eq!(fs::read_to_string(&disk).unwrap(), "0-1\n");
}

/// The same on this machine: a plan for a NIC naming an interrupt of another device here
/// (a disk's, a console's) is refused and nothing changes; the NIC's own queue interrupt is
/// moved, then put back.
#[test]
fn this_machines_nic_moves_only_its_own_interrupts() {
    let root = Path::new("/");
    let nics = corelane::topology::read_nics(root).unwrap();
    let Some(nic) = nics.iter().find(|n| !n.irqs.is_empty()) else {
        eprintln!("skipped: no network interface with interrupts here (a NIC with a bus device)");
        return;
    };
    let interrupts = fs::read_to_string("/proc/interrupts").unwrap();
    let foreign = interrupts.lines().skip(1).find_map(|l| {
        let irq: u32 = l.trim_start().split_once(':')?.0.parse().ok()?;
        let owned = nics.iter().any(|n| n.irqs.iter().any(|i| i.irq == irq));
        let movable = Path::new(&format!("/proc/irq/{irq}/smp_affinity_list")).exists();
        (!owned && movable).then(|| (irq, l.split_whitespace().last().unwrap().to_string()))
    });
    let Some((foreign, name)) = foreign else {
        eprintln!("skipped: every interrupt here belongs to a network interface");
        return;
    };
    let affinity = |irq: u32| fs::read_to_string(format!("/proc/irq/{irq}/smp_affinity_list"));
    let before = affinity(foreign).unwrap();
    let mut p = plan(&nic.name);
    p.device.rps_cpus = "0".into();
    p.device.irqs = vec![IrqPlacement { irq: foreign, name: "eth0-TxRx-0".into(), cpu: 0 }];
    let err = changes(&p, root).unwrap_err().to_string();
    let expected = format!("interrupt {foreign} ({name}) does not belong to {}", nic.name);
    assert!(err.contains(&expected), "{err}");
    assert_eq!(affinity(foreign).unwrap(), before);

    let own = &nic.irqs[0];
    let own_before = affinity(own.irq).unwrap();
    let cpu = if own_before.trim() == "0" { 1 } else { 0 };
    p.device.irqs = vec![IrqPlacement { irq: own.irq, name: own.name.clone(), cpu }];
    let list: Vec<Change> = changes(&p, root)
        .unwrap()
        .into_iter()
        .filter(|c| c.path.starts_with("/proc/irq"))
        .collect();
    assert_eq!(list.len(), 1, "{}'s own interrupt {} is moved: {list:?}", nic.name, own.irq);
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped the write half: apply needs root");
        return;
    }
    let skipped = apply(&list, root).unwrap();
    if skipped.is_empty() {
        assert_eq!(affinity(own.irq).unwrap().trim(), cpu.to_string());
    }
    revert(&list, root).unwrap();
    assert_eq!(affinity(own.irq).unwrap(), own_before);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

        /// Any bytes as a revert file: refused or read, never a panic, never a write.
        #[test]
        fn any_revert_file_is_answered(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let root = fake_root();
            let file = root.path().join("r.json");
            fs::write(&file, &bytes).unwrap();
            let _ = read_revert_file(&file, root.path());
        }

        /// Any interface name and masks in a plan: refused or planned, never a panic.
        #[test]
        fn any_plan_fields_are_answered(nic in ".{0,24}", rps in ".{0,24}", xps in ".{0,12}") {
            let root = fake_root();
            let mut p = plan(&nic);
            p.device.rps_cpus = rps;
            p.device.xps_cpus = vec![xps];
            let _ = changes(&p, root.path());
        }
    }
}
