//! Applying a plan: the kernel settings it changes (ethtool queue count, RX flow hashing and
//! interrupt moderation through the ethtool ioctl; IRQ affinity in /proc/irq; RPS and XPS masks
//! in sysfs), each recorded with its previous value so that the change can be shown before it
//! happens (dry run), rolled back if it fails half-way, and reverted later from a file.
//! ethtool settings are named `ethtool:IFACE/SETTING` where a file would have a path.
//!
//! Every name and value, from a plan or a revert file, is parsed into a [`Setting`] and
//! checked before the first read or write; one bad entry refuses the whole list.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::address;
use super::ownership::Owned;
use super::plan::DevicePlan;
use super::refusal::{explain, refusal};
use super::setting::{Ethtool, IfName, Setting, SettingError};
use super::Plan;
use crate::sys::ethtool;

/// A revert file larger than this is not one `corelane apply` wrote.
const MAX_REVERT_FILE: u64 = 1 << 20;

/// One setting: where it lives, what it holds now, what the plan wants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub path: PathBuf,
    pub from: String,
    pub to: String,
}

/// A setting the plan asks for that the kernel or the driver refuses on this device: left as
/// it is, and said so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub path: PathBuf,
    pub to: String,
    pub reason: String,
}

/// What a plan would do here: the changes to make and the settings refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Review {
    pub changes: Vec<Change>,
    pub skipped: Vec<Skipped>,
}

/// Why a change could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(
        "changing kernel settings needs root: run as root, or without --yes to see the changes"
    )]
    NotRoot,
    #[error("cannot read {path}: {}", explain(source))]
    Read { path: PathBuf, source: io::Error },
    #[error(
        "cannot write `{value}` to {path} ({}); the {undone} change(s) already made were undone",
        explain(source)
    )]
    Write { path: PathBuf, value: String, source: io::Error, undone: usize },
    #[error("refused before any change: {0}")]
    Invalid(#[from] SettingError),
    #[error("{path} is not a revert file written by `corelane apply --yes`: {reason}")]
    RevertFile { path: PathBuf, reason: String },
    #[error("the plan's lower device {device} is not under {nic} here (neither among {nic}'s lower_* links in /sys/class/net nor with {nic} as its master): make the plan on this machine with `corelane plan`")]
    ForeignLower { device: String, nic: String },
    #[error("cannot save the revert file {path} ({source}); nothing was changed")]
    SaveRevert { path: PathBuf, source: io::Error },
}

/// Compares two CPU masks the way the kernel prints them (`00000003` == `3`, `0,00000001` == `1`).
fn same_mask(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        let digits: String = s.chars().filter(|c| *c != ',').collect();
        let trimmed = digits.trim_start_matches('0').to_ascii_lowercase();
        if trimmed.is_empty() {
            "0".to_string()
        } else {
            trimmed
        }
    };
    norm(a) == norm(b)
}

/// Adds `setting` to `out`: a change when its value `now` is not `to` (as `same` compares
/// them), a skipped entry when the kernel refuses to show it on this device.
fn propose(
    out: &mut Review,
    setting: &Setting,
    root: &Path,
    now: io::Result<String>,
    to: String,
    same: impl Fn(&str, &str) -> bool,
) -> Result<(), ApplyError> {
    let path = setting.path(root);
    match now {
        Ok(from) if same(&from, &to) => {}
        Ok(from) => out.changes.push(Change { path, from, to }),
        Err(source) => {
            let exists =
                matches!(setting, Setting::Ethtool { .. }) || path.symlink_metadata().is_ok();
            match refusal(setting, &source, exists) {
                Some(reason) => out.skipped.push(Skipped { path, to, reason }),
                None => return Err(ApplyError::Read { path, source }),
            }
        }
    }
    Ok(())
}

/// The ethtool settings `device` changes, read through the ioctl (live machine only). They go
/// first: a new queue count re-creates the queues, and with them their masks.
fn ethtool_review(device: &DevicePlan, nic: &IfName, out: &mut Review) -> Result<(), ApplyError> {
    let root = Path::new("/");
    let named = |setting: Ethtool| Setting::Ethtool { nic: nic.clone(), setting };
    if let Some(count) = device.queue_count {
        let now = ethtool::channels(nic.as_str())
            .map(|c| if c.max_combined > 0 { c.combined } else { c.rx }.to_string());
        propose(out, &named(Ethtool::Queues), root, now, count.to_string(), |a, b| a == b)?;
    }
    for hash in &device.rx_flow_hash {
        let Some(&(name, flow)) = ethtool::FLOW_TYPES.iter().find(|(n, _)| *n == hash.flow) else {
            return Err(SettingError::NotASetting(format!("rx-flow-hash/{}", hash.flow)).into());
        };
        let now = ethtool::rx_flow_hash(nic.as_str(), flow).map(ethtool::hash_letters);
        let setting = named(Ethtool::RxFlowHash { flow, name });
        if now.as_ref().is_ok_and(|fields| fields.is_empty()) {
            // The driver answers but hashes nothing (virtio_net without RSS): it refuses a
            // field set too (EINVAL), and there is no value to restore.
            out.skipped.push(Skipped {
                path: setting.path(root),
                to: hash.fields.clone(),
                reason: format!("the driver hashes no fields of {name} flows (no RSS)"),
            });
            continue;
        }
        propose(out, &setting, root, now, hash.fields.clone(), |a, b| a == b)?;
    }
    if let Some(usecs) = device.rx_usecs {
        let coalesce = ethtool::coalesce(nic.as_str());
        // Adaptive moderation overrides rx-usecs: setting it turns adaptive off.
        let adaptive = coalesce.as_ref().is_ok_and(|c| c.adaptive_rx);
        let now = coalesce.map(|c| c.rx_usecs.to_string());
        let same = |a: &str, b: &str| a == b && !adaptive;
        propose(out, &named(Ethtool::RxUsecs), root, now, usecs.to_string(), same)?;
    }
    Ok(())
}

/// A setting file's value, trimmed.
fn read_value(path: &Path) -> io::Result<String> {
    fs::read_to_string(path).map(|s| s.trim().to_owned())
}

/// The interrupt affinities, RPS and XPS masks `device` changes under `root`.
fn sysfs_review(
    device: &DevicePlan,
    nic: &IfName,
    root: &Path,
    out: &mut Review,
) -> Result<(), ApplyError> {
    for irq in &device.irqs {
        let setting = Setting::IrqAffinity { irq: irq.irq };
        let now = read_value(&setting.path(root));
        propose(out, &setting, root, now, irq.cpu.to_string(), |a, b| a == b)?;
    }
    // Queues at or past a new queue count are gone once it is set: leave their masks alone.
    let kept = |queue: u32| device.queue_count.is_none_or(|count| queue < count);
    let queues = root.join(format!("sys/class/net/{}/queues", nic.as_str()));
    let mut rx: Vec<u32> = fs::read_dir(&queues)
        .map_err(|source| ApplyError::Read { path: queues.clone(), source })?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.strip_prefix("rx-")?.parse().ok())
        .filter(|&q| kept(q))
        .collect();
    rx.sort_unstable();
    for queue in rx {
        let setting = Setting::RpsCpus { nic: nic.clone(), queue };
        let now = read_value(&setting.path(root));
        propose(out, &setting, root, now, device.rps_cpus.clone(), same_mask)?;
    }
    for (queue, mask) in device.xps_cpus.iter().enumerate() {
        let Ok(queue) = u32::try_from(queue) else { break };
        let listed = queues.join(format!("tx-{queue}/xps_cpus")).symlink_metadata().is_ok();
        if !listed || !kept(queue) {
            continue;
        }
        let setting = Setting::XpsCpus { nic: nic.clone(), queue };
        let now = read_value(&setting.path(root));
        propose(out, &setting, root, now, mask.clone(), same_mask)?;
    }
    Ok(())
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_string())
}

/// Makes one change: a write to the setting's file (O_WRONLY|O_TRUNC|O_NOFOLLOW, never created), or
/// an ethtool ioctl.
fn set(setting: &Setting, root: &Path, value: &str) -> io::Result<()> {
    let number = || value.parse::<u32>().map_err(|_| invalid("not a number"));
    match setting {
        Setting::Ethtool { nic, setting: Ethtool::Queues } => {
            ethtool::set_queue_count(nic.as_str(), number()?)
        }
        Setting::Ethtool { nic, setting: Ethtool::RxUsecs } => {
            ethtool::set_rx_usecs(nic.as_str(), number()?)
        }
        Setting::Ethtool { nic, setting: Ethtool::RxFlowHash { flow, .. } } => {
            let bits = ethtool::hash_bits(value).ok_or_else(|| invalid("unknown hash fields"))?;
            ethtool::set_rx_flow_hash(nic.as_str(), *flow, bits)
        }
        Setting::Address { nic, addr, prefix } => address::set(nic.as_str(), *addr, *prefix, value),
        Setting::BusyPoll { nic, file } => {
            crate::tune::busy_poll::write_device_file(root, nic, file, value)
        }
        _ => {
            use rustix::fs::{Mode, OFlags};
            let flags = OFlags::WRONLY | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = rustix::fs::open(setting.path(root), flags, Mode::empty())?;
            fs::File::from(fd).write_all(value.as_bytes())
        }
    }
}

/// Parses and checks every change (names and both values) before any is made. A change
/// names no interface, so an interrupt must belong to some network interface here.
fn check_all(changes: &[Change], root: &Path) -> Result<Vec<Setting>, ApplyError> {
    let mut owned = None;
    changes
        .iter()
        .map(|c| {
            let setting = Setting::from_path(&c.path, root)?;
            setting.check_value(&c.from, root)?;
            setting.check_value(&c.to, root)?;
            if let Setting::IrqAffinity { irq } = setting {
                owned.get_or_insert_with(|| Owned::by_any_interface(root)).check(irq)?;
            }
            Ok(setting)
        })
        .collect()
}

/// Checks every device name and value of a plan before anything is read, and that every
/// interrupt it moves is its interface's (or a lower device's).
fn check_plan(plan: &Plan, root: &Path) -> Result<Vec<(DevicePlan, IfName)>, ApplyError> {
    let mut out = Vec::new();
    let top = IfName::existing(&plan.device.nic, root)?;
    for lower in &plan.lower {
        let device = IfName::existing(&lower.nic, root)?;
        if !is_under(&device, &top, root) {
            let (device, nic) = (device.as_str().to_owned(), top.as_str().to_owned());
            return Err(ApplyError::ForeignLower { device, nic });
        }
    }
    let owned = Owned::by_interface(top.as_str(), root);
    for device in plan.devices() {
        let nic = IfName::existing(&device.nic, root)?;
        for irq in &device.irqs {
            owned.check(irq.irq)?;
        }
        Setting::RpsCpus { nic: nic.clone(), queue: 0 }.check_value(&device.rps_cpus, root)?;
        for mask in &device.xps_cpus {
            Setting::XpsCpus { nic: nic.clone(), queue: 0 }.check_value(mask, root)?;
        }
        for hash in &device.rx_flow_hash {
            let flow = ethtool::FLOW_TYPES.iter().find(|(n, _)| *n == hash.flow);
            let Some(&(name, flow)) = flow else {
                return Err(SettingError::NotASetting(format!("rx-flow-hash/{}", hash.flow)).into());
            };
            let setting = Ethtool::RxFlowHash { flow, name };
            Setting::Ethtool { nic: nic.clone(), setting }.check_value(&hash.fields, root)?;
        }
        out.push((device, nic));
    }
    Ok(out)
}

/// Whether `device` is stacked under `nic` as sysfs shows it now: reached from `nic` through
/// `lower_*` links (a VLAN on a bond on NICs: transitively, at most 8 levels and 256
/// devices), or naming `nic` as its `master`.
fn is_under(device: &IfName, nic: &IfName, root: &Path) -> bool {
    let net = root.join("sys/class/net");
    let master = std::fs::read_link(net.join(device.as_str()).join("master"));
    if master.is_ok_and(|m| m.file_name().is_some_and(|n| n == nic.as_str())) {
        return true;
    }
    let mut level = vec![nic.as_str().to_owned()];
    let mut seen = 0;
    for _ in 0..8 {
        let mut next = Vec::new();
        for dev in &level {
            let Ok(entries) = std::fs::read_dir(net.join(dev)) else { continue };
            for entry in entries.flatten().take(256) {
                let name = entry.file_name();
                let Some(lower) = name.to_str().and_then(|n| n.strip_prefix("lower_")) else {
                    continue;
                };
                if lower == device.as_str() {
                    return true;
                }
                seen += 1;
                next.push(lower.to_owned());
            }
        }
        if next.is_empty() || seen > 256 {
            break;
        }
        level = next;
    }
    false
}

/// The addresses a plan adds on its interface, checked.
fn check_addresses(plan: &Plan, root: &Path) -> Result<Vec<Setting>, ApplyError> {
    let nic = IfName::existing(&plan.device.nic, root)?;
    let parse = |cidr: &String| {
        let (addr, prefix) = address::parse_cidr(cidr).ok_or_else(|| SettingError::BadValue {
            setting: format!("addresses of {}", plan.device.nic),
            value: cidr.chars().take(64).collect(),
            expected: "an address with its prefix length, such as 192.0.2.10/24",
        })?;
        Ok(Setting::Address { nic: nic.clone(), addr, prefix })
    };
    plan.addresses.iter().map(parse).collect()
}

/// What `plan` would do under `root` (`/` on a live machine): the settings it changes
/// (unchanged ones left out) and those the kernel or the driver refuses on the device. The
/// plan is checked first: its interfaces must exist and its masks be masks.
pub fn review(plan: &Plan, root: &Path) -> Result<Review, ApplyError> {
    let devices = check_plan(plan, root)?;
    let addresses = check_addresses(plan, root)?;
    let mut out = Review::default();
    if root == Path::new("/") {
        for (device, nic) in &devices {
            ethtool_review(device, nic, &mut out)?;
        }
        for setting in &addresses {
            let Setting::Address { nic, addr, .. } = setting else { continue };
            let now = address::state(nic.as_str(), *addr);
            propose(&mut out, setting, root, now, address::PRESENT.into(), |a, b| a == b)?;
        }
    }
    for (device, nic) in &devices {
        sysfs_review(device, nic, root, &mut out)?;
    }
    Ok(out)
}

/// The settings `plan` would change under `root` ([`review`] without the skipped ones).
pub fn changes(plan: &Plan, root: &Path) -> Result<Vec<Change>, ApplyError> {
    Ok(review(plan, root)?.changes)
}

/// Writes every change in order, once all are checked. A setting the kernel refuses on the
/// device is skipped and returned; if a change fails, the ones already made are written back.
pub fn apply(changes: &[Change], root: &Path) -> Result<Vec<Skipped>, ApplyError> {
    let settings = check_all(changes, root)?;
    if !rustix::process::geteuid().is_root() {
        return Err(ApplyError::NotRoot);
    }
    let mut made: Vec<usize> = Vec::new();
    let mut skipped = Vec::new();
    for (i, (change, setting)) in changes.iter().zip(&settings).enumerate() {
        let Err(source) = set(setting, root, &change.to) else {
            made.push(i);
            continue;
        };
        let exists = matches!(setting, Setting::Ethtool { .. }) || change.path.exists();
        if let Some(reason) = refusal(setting, &source, exists) {
            skipped.push(Skipped { path: change.path.clone(), to: change.to.clone(), reason });
            continue;
        }
        for &done in made.iter().rev() {
            let _ = set(&settings[done], root, &changes[done].from);
        }
        return Err(ApplyError::Write {
            path: change.path.clone(),
            value: change.to.clone(),
            source,
            undone: made.len(),
        });
    }
    Ok(skipped)
}

fn save_revert(
    changes: &[Change],
    out: &crate::fs::OutputFile,
    revert_file: &Path,
) -> Result<(), ApplyError> {
    let json = serde_json::to_vec_pretty(changes).map_err(|e| ApplyError::SaveRevert {
        path: revert_file.into(),
        source: io::Error::other(e),
    })?;
    out.write(&json).map_err(|source| ApplyError::SaveRevert { path: revert_file.into(), source })
}

/// Applies `changes` with their undo saved first: the revert file is written (atomically)
/// before the first change, so even a crash half-way can be undone, and removed again if
/// the changes fail (they were rolled back). Settings the kernel refused are dropped from it.
pub fn apply_saving_revert(
    changes: &[Change],
    root: &Path,
    revert_file: &Path,
) -> Result<Vec<Skipped>, ApplyError> {
    check_all(changes, root)?;
    if !rustix::process::geteuid().is_root() {
        return Err(ApplyError::NotRoot);
    }
    // The revert file's directory is opened once: both writes and the removal after a
    // rolled-back failure go through that descriptor, never the path again.
    let out = crate::fs::OutputFile::open(revert_file)
        .map_err(|source| ApplyError::SaveRevert { path: revert_file.into(), source })?;
    save_revert(changes, &out, revert_file)?;
    let skipped = apply(changes, root).inspect_err(|_| {
        let _ = out.remove();
    })?;
    if !skipped.is_empty() {
        let made: Vec<Change> =
            changes.iter().filter(|c| !skipped.iter().any(|s| s.path == c.path)).cloned().collect();
        save_revert(&made, &out, revert_file)?;
    }
    Ok(skipped)
}

/// Reads a revert file and checks every entry; one bad entry refuses the whole file.
pub fn read_revert_file(path: &Path, root: &Path) -> Result<Vec<Change>, ApplyError> {
    let refuse = |reason: String| ApplyError::RevertFile { path: path.into(), reason };
    let bytes = crate::fs::read_capped(path, MAX_REVERT_FILE).map_err(|e| refuse(e.to_string()))?;
    let changes: Vec<Change> = serde_json::from_slice(&bytes).map_err(|e| refuse(e.to_string()))?;
    check_all(&changes, root)?;
    Ok(changes)
}

/// The value a setting holds now under `root` (as a plan or a revert file records it).
fn current_value(setting: &Setting, root: &Path) -> io::Result<String> {
    let Setting::Ethtool { nic, setting: which } = setting else {
        return match setting {
            Setting::Address { nic, addr, .. } => address::state(nic.as_str(), *addr),
            _ => read_value(&setting.path(root)),
        };
    };
    match which {
        Ethtool::Queues => ethtool::channels(nic.as_str())
            .map(|c| if c.max_combined > 0 { c.combined } else { c.rx }.to_string()),
        Ethtool::RxUsecs => ethtool::coalesce(nic.as_str()).map(|c| c.rx_usecs.to_string()),
        Ethtool::RxFlowHash { flow, .. } => {
            ethtool::rx_flow_hash(nic.as_str(), *flow).map(ethtool::hash_letters)
        }
    }
}

/// What reverting `changes` (a revert file's entries, checked) would do now: each setting
/// whose CURRENT value differs from the one saved, as the change from what it holds now to
/// the saved value (last applied first); those already as saved are left out, and those the
/// kernel no longer shows (a queue gone, say) are skipped with the reason.
pub fn pending_revert(changes: &[Change], root: &Path) -> Result<Review, ApplyError> {
    let settings = check_all(changes, root)?;
    let mut out = Review::default();
    for (change, setting) in changes.iter().zip(&settings).rev() {
        let now = current_value(setting, root);
        let masks = matches!(setting, Setting::RpsCpus { .. } | Setting::XpsCpus { .. });
        let same = |a: &str, b: &str| if masks { same_mask(a, b) } else { a == b };
        propose(&mut out, setting, root, now, change.from.clone(), same)?;
    }
    Ok(out)
}

/// Restores the values recorded before `changes` were applied, last change first.
pub fn revert(changes: &[Change], root: &Path) -> Result<Vec<Skipped>, ApplyError> {
    let undo: Vec<Change> = changes
        .iter()
        .rev()
        .map(|c| Change { path: c.path.clone(), from: c.to.clone(), to: c.from.clone() })
        .collect();
    apply(&undo, root)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::IrqPlacement;

    fn fixture(_name: &str) -> (PathBuf, Plan) {
        let root = tempfile::tempdir().unwrap().keep();
        let write = |p: PathBuf, s: &str| {
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, format!("{s}\n")).unwrap();
        };
        write(root.join("proc/irq/38/smp_affinity_list"), "0-1");
        write(root.join("proc/irq/39/smp_affinity_list"), "0");
        for irq in [38, 39, 40] {
            write(root.join(format!("sys/class/net/eth0/device/msi_irqs/{irq}")), "msix");
        }
        write(root.join("sys/class/net/eth0/queues/rx-0/rps_cpus"), "00000000");
        write(root.join("sys/class/net/eth0/queues/rx-1/rps_cpus"), "0,00000002");
        let plan = Plan {
            device: DevicePlan {
                nic: "eth0".into(),
                rps_cpus: "2".into(),
                xps_cpus: vec!["2".into()],
                irqs: vec![
                    IrqPlacement { irq: 38, name: "virtio2-input.0".into(), cpu: 0 },
                    IrqPlacement { irq: 39, name: "virtio2-output.0".into(), cpu: 0 },
                ],
                ..DevicePlan::default()
            },
            policy: "spread".into(),
            numa_node: Some(0),
            irq_cpus: "0".into(),
            syscall_cpus: "1".into(),
            app_cpus: "1".into(),
            ..Plan::default()
        };
        (root, plan)
    }

    #[test]
    fn lists_only_what_would_change_then_applies_and_reverts_exactly() {
        let (root, plan) = fixture("round-trip");
        let list = changes(&plan, &root).unwrap();
        let summary: Vec<(String, &str, &str)> = list
            .iter()
            .map(|c| {
                (
                    c.path.strip_prefix(&root).unwrap().display().to_string(),
                    c.from.as_str(),
                    c.to.as_str(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("proc/irq/38/smp_affinity_list".to_string(), "0-1", "0"),
                ("sys/class/net/eth0/queues/rx-0/rps_cpus".to_string(), "00000000", "2")
            ],
            "IRQ 39 and rx-1 already match"
        );
        if !rustix::process::geteuid().is_root() {
            assert!(matches!(apply(&list, &root), Err(ApplyError::NotRoot)));
            eprintln!("skipped the write half: apply needs root");
            return;
        }
        apply(&list, &root).unwrap();
        assert!(changes(&plan, &root).unwrap().is_empty());
        revert(&list, &root).unwrap();
        assert_eq!(changes(&plan, &root).unwrap(), list);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_failure_half_way_undoes_what_was_done() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: apply needs root");
            return;
        }
        let (root, _) = fixture("half-way");
        let ok = root.join("proc/irq/38/smp_affinity_list");
        let list = vec![
            Change { path: ok.clone(), from: "0-1".into(), to: "0".into() },
            // A valid setting whose file is missing: the write (no O_CREAT) fails.
            Change {
                path: root.join("proc/irq/40/smp_affinity_list"),
                from: "0".into(),
                to: "1".into(),
            },
        ];
        let err = apply(&list, &root).unwrap_err();
        assert!(err.to_string().contains("1 change(s) already made were undone"), "{err}");
        assert_eq!(fs::read_to_string(&ok).unwrap(), "0-1");
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn masks_compare_as_the_kernel_prints_them() {
        assert!(same_mask("00000003", "3"));
        assert!(same_mask("0,00000001", "1"));
        assert!(same_mask("00000000", "0"));
        assert!(!same_mask("2", "3"));
    }
}
