//! Which interrupts a plan or a revert file may move: those of its interface (or of the
//! devices it is stacked on), as sysfs and procfs show them when the change is made — the
//! device's MSI interrupts (`/sys/class/net/IFACE/device/msi_irqs/`) and the lines of
//! /proc/interrupts its driver names after it (see `topology::irqname`). A plan is a file
//! anyone may have edited: an interrupt of a disk or of another NIC is refused by name
//! before anything is read or written.

use std::collections::BTreeSet;
use std::path::Path;

use super::setting::SettingError;
use crate::topology::{interrupt_names, queue_owners, read_nics, Nic};

/// The interrupts that belong to some interfaces, with every interrupt's name to refuse by.
#[derive(Debug)]
pub(crate) struct Owned {
    owner: String,
    irqs: BTreeSet<u32>,
    names: Vec<(u32, String)>,
}

impl Owned {
    /// The interrupts of `nic` and of the devices under it (a VLAN's, a bond's NICs).
    pub(crate) fn by_interface(nic: &str, root: &Path) -> Self {
        // No list, no owner: every interrupt is then refused.
        let nics = read_nics(root).unwrap_or_default();
        let mut owners: Vec<&Nic> = queue_owners(&nics, nic);
        owners.extend(nics.iter().filter(|n| n.name == nic));
        Self::of(nic.to_string(), &owners, root)
    }

    /// The interrupts of every network interface (a revert file names no interface).
    pub(crate) fn by_any_interface(root: &Path) -> Self {
        let nics = read_nics(root).unwrap_or_default();
        Self::of("a network interface".to_string(), &nics.iter().collect::<Vec<_>>(), root)
    }

    fn of(owner: String, nics: &[&Nic], root: &Path) -> Self {
        let mut irqs = BTreeSet::new();
        for nic in nics {
            irqs.extend(nic.irqs.iter().map(|i| i.irq));
            irqs.extend(msi_irqs(&nic.name, root));
        }
        Self { owner, irqs, names: interrupt_names(root) }
    }

    /// Refuses `irq` when it is not one of these interfaces'.
    pub(crate) fn check(&self, irq: u32) -> Result<(), SettingError> {
        if self.irqs.contains(&irq) {
            return Ok(());
        }
        let owned: Vec<String> = self.irqs.iter().map(|i| self.describe(*i)).collect();
        Err(SettingError::ForeignIrq {
            irq,
            name: self.name(irq),
            owner: self.owner.clone(),
            owned: if owned.is_empty() { "none".into() } else { owned.join(", ") },
        })
    }

    fn name(&self, irq: u32) -> String {
        let found = self.names.iter().find(|(i, _)| *i == irq);
        found.map_or_else(|| "not in /proc/interrupts".into(), |(_, n)| n.clone())
    }

    fn describe(&self, irq: u32) -> String {
        format!("{irq} ({})", self.name(irq))
    }
}

/// The MSI and MSI-X interrupts of `nic`'s bus device.
fn msi_irqs(nic: &str, root: &Path) -> Vec<u32> {
    let dir = root.join("sys/class/net").join(nic).join("device/msi_irqs");
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect()
}
