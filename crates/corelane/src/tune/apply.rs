//! Applying a plan: the kernel settings it changes (ethtool queue count, RX flow hashing and
//! interrupt moderation through the ethtool ioctl; IRQ affinity in /proc/irq; RPS and XPS masks
//! in sysfs), each recorded with its previous value so that the change can be shown before it
//! happens (dry run), rolled back if it fails half-way, and reverted later from a file.
//! ethtool settings are named `ethtool:IFACE/SETTING` where a file would have a path.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Plan;
use crate::sys::ethtool;

/// One setting: where it lives, what it holds now, what the plan wants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub path: PathBuf,
    pub from: String,
    pub to: String,
}

/// Why a change could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(
        "changing kernel settings needs root: run as root, or without --yes to see the changes"
    )]
    NotRoot,
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot write `{value}` to {path} ({source}); the {undone} change(s) already made were undone")]
    Write { path: PathBuf, value: String, source: io::Error, undone: usize },
}

fn current(path: &Path) -> Result<String, ApplyError> {
    fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .map_err(|source| ApplyError::Read { path: path.into(), source })
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

/// The ethtool settings a plan changes, read through the ioctl (live machine only). They go
/// first: a new queue count re-creates the queues, and with them their masks.
fn ethtool_changes(plan: &Plan) -> Result<Vec<Change>, ApplyError> {
    let mut out = Vec::new();
    let name = |setting: &str| PathBuf::from(format!("ethtool:{}/{setting}", plan.nic));
    let unreadable =
        |setting: &str, source: io::Error| ApplyError::Read { path: name(setting), source };
    if let Some(count) = plan.queue_count {
        let c = ethtool::channels(&plan.nic).map_err(|e| unreadable("queues", e))?;
        let now = if c.max_combined > 0 { c.combined } else { c.rx };
        if now != count {
            out.push(Change { path: name("queues"), from: now.to_string(), to: count.to_string() });
        }
    }
    for hash in &plan.rx_flow_hash {
        let setting = format!("rx-flow-hash/{}", hash.flow);
        let flow = flow_type(&hash.flow)
            .ok_or_else(|| unreadable(&setting, invalid("unknown flow type")))?;
        let bits = ethtool::rx_flow_hash(&plan.nic, flow).map_err(|e| unreadable(&setting, e))?;
        let now = ethtool::hash_letters(bits);
        if now != hash.fields {
            out.push(Change { path: name(&setting), from: now, to: hash.fields.clone() });
        }
    }
    if let Some(usecs) = plan.rx_usecs {
        let c = ethtool::coalesce(&plan.nic).map_err(|e| unreadable("rx-usecs", e))?;
        if c.rx_usecs != usecs || c.adaptive_rx {
            out.push(Change {
                path: name("rx-usecs"),
                from: c.rx_usecs.to_string(),
                to: usecs.to_string(),
            });
        }
    }
    Ok(out)
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_string())
}

fn flow_type(flow: &str) -> Option<u32> {
    ethtool::FLOW_TYPES.iter().find(|(n, _)| *n == flow).map(|(_, t)| *t)
}

/// Makes one change: a file write, or an ethtool ioctl for an `ethtool:` setting.
fn set(change: &Change, value: &str) -> io::Result<()> {
    let text = change.path.to_string_lossy();
    let Some(rest) = text.strip_prefix("ethtool:") else {
        return fs::write(&change.path, value);
    };
    let (nic, setting) = rest.split_once('/').ok_or_else(|| invalid("bad ethtool setting"))?;
    let number = || value.parse::<u32>().map_err(|_| invalid("not a number"));
    match setting {
        "queues" => ethtool::set_queue_count(nic, number()?),
        "rx-usecs" => ethtool::set_rx_usecs(nic, number()?),
        _ => {
            let flow = setting.strip_prefix("rx-flow-hash/").and_then(flow_type);
            let flow = flow.ok_or_else(|| invalid("unknown ethtool setting"))?;
            let bits = ethtool::hash_bits(value).ok_or_else(|| invalid("unknown hash fields"))?;
            ethtool::set_rx_flow_hash(nic, flow, bits)
        }
    }
}

/// The settings `plan` would change under `root` (`/` on a live machine), unchanged ones left out.
pub fn changes(plan: &Plan, root: &Path) -> Result<Vec<Change>, ApplyError> {
    let mut out = if root == Path::new("/") { ethtool_changes(plan)? } else { Vec::new() };
    for irq in &plan.irqs {
        let path = root.join(format!("proc/irq/{}/smp_affinity_list", irq.irq));
        let from = current(&path)?;
        let to = irq.cpu.to_string();
        if from != to {
            out.push(Change { path, from, to });
        }
    }
    let queues = root.join(format!("sys/class/net/{}/queues", plan.nic));
    let mut rx: Vec<PathBuf> = fs::read_dir(&queues)
        .map_err(|source| ApplyError::Read { path: queues.clone(), source })?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
        .map(|e| e.path().join("rps_cpus"))
        .collect();
    rx.sort();
    // Queues at or past a new queue count are gone once it is set: leave their masks alone.
    let kept = |path: &Path| {
        let index = path
            .parent()
            .and_then(|q| q.file_name())
            .and_then(|n| n.to_str())
            .and_then(|n| n.split_once('-'))
            .and_then(|(_, i)| i.parse::<u32>().ok());
        plan.queue_count.zip(index).is_none_or(|(count, i)| i < count)
    };
    rx.retain(|p| kept(p));
    for path in rx {
        let from = current(&path)?;
        if !same_mask(&from, &plan.rps_cpus) {
            out.push(Change { path, from, to: plan.rps_cpus.clone() });
        }
    }
    for (q, mask) in plan.xps_cpus.iter().enumerate() {
        let path = queues.join(format!("tx-{q}/xps_cpus"));
        if !path.exists() || !kept(&path) {
            continue;
        }
        let from = current(&path)?;
        if !same_mask(&from, mask) {
            out.push(Change { path, from, to: mask.clone() });
        }
    }
    Ok(out)
}

/// Writes every change in order; if one fails, writes back the ones already made.
pub fn apply(changes: &[Change]) -> Result<(), ApplyError> {
    if !rustix::process::geteuid().is_root() {
        return Err(ApplyError::NotRoot);
    }
    for (i, change) in changes.iter().enumerate() {
        if let Err(source) = set(change, &change.to) {
            for done in changes[..i].iter().rev() {
                let _ = set(done, &done.from);
            }
            return Err(ApplyError::Write {
                path: change.path.clone(),
                value: change.to.clone(),
                source,
                undone: i,
            });
        }
    }
    Ok(())
}

/// Restores the values recorded before `changes` were applied, last change first.
pub fn revert(changes: &[Change]) -> Result<(), ApplyError> {
    let undo: Vec<Change> = changes
        .iter()
        .rev()
        .map(|c| Change { path: c.path.clone(), from: c.to.clone(), to: c.from.clone() })
        .collect();
    apply(&undo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::IrqPlacement;

    fn fixture(name: &str) -> (PathBuf, Plan) {
        let root =
            std::env::temp_dir().join(format!("corelane-apply-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let write = |p: PathBuf, s: &str| {
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, format!("{s}\n")).unwrap();
        };
        write(root.join("proc/irq/38/smp_affinity_list"), "0-1");
        write(root.join("proc/irq/39/smp_affinity_list"), "0");
        write(root.join("sys/class/net/eth0/queues/rx-0/rps_cpus"), "00000000");
        write(root.join("sys/class/net/eth0/queues/rx-1/rps_cpus"), "0,00000002");
        let plan = Plan {
            nic: "eth0".into(),
            policy: "spread".into(),
            numa_node: Some(0),
            irq_cpus: "0".into(),
            syscall_cpus: "1".into(),
            app_cpus: "1".into(),
            rps_cpus: "2".into(),
            xps_cpus: vec!["2".into()],
            irqs: vec![
                IrqPlacement { irq: 38, name: "virtio2-input.0".into(), cpu: 0 },
                IrqPlacement { irq: 39, name: "virtio2-output.0".into(), cpu: 0 },
            ],
            queue_count: None,
            rx_flow_hash: vec![],
            rx_usecs: None,
            notes: vec![],
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
            assert!(matches!(apply(&list), Err(ApplyError::NotRoot)));
            eprintln!("skipped the write half: apply needs root");
            return;
        }
        apply(&list).unwrap();
        assert!(changes(&plan, &root).unwrap().is_empty());
        revert(&list).unwrap();
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
            Change { path: root.join("no/such/dir/file"), from: "x".into(), to: "y".into() },
        ];
        let err = apply(&list).unwrap_err();
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
