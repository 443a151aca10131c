//! Which lines of /proc/interrupts belong to a network interface, and which queue each one
//! serves, from the names drivers give their interrupts. There is no kernel interface that maps
//! an interrupt to a netdev queue; every tool (irqbalance, set_irq_affinity.sh) reads the names:
//!
//! | driver | queue interrupts | others |
//! |---|---|---|
//! | mlx5 | `mlx5_comp<N>@pci:<addr>` | `mlx5_async<N>@pci:<addr>`, `mlx5_cmd_eq@…` |
//! | ice, i40e | `ice-IFACE-TxRx-N`, `i40e-IFACE-TxRx-N` | `ice-<addr>:misc` |
//! | ixgbe, igb, bnxt | `IFACE-TxRx-N`, `IFACE-rx-N`, `IFACE-tx-N` | `IFACE` (link) |
//! | ena | `IFACE-Tx-Rx-N` | `ena-mgmnt@pci:<addr>` |
//! | virtio_net | `virtioN-input.M`, `virtioN-output.M` | `virtioN-config` |
//!
//! virtio_net with too few MSI-X vectors puts every queue on one `virtioN-virtqueues` line.

use serde::Serialize;

/// What one interrupt of a NIC serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IrqRole {
    /// The interrupt of queue (pair) N: RX and TX interrupts of one pair share the number.
    Queue(u32),
    /// One interrupt for every queue (virtio_net short of vectors).
    Shared,
    /// Link, mailbox, command or configuration events: no packets.
    Control,
}

/// What an interrupt name is compared with: the interface, its driver and the name of its
/// device directory (`virtio2`, or a PCI address such as `0000:03:00.0`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct IrqOwner<'a> {
    pub iface: &'a str,
    pub driver: Option<&'a str>,
    pub device: Option<&'a str>,
}

/// The role of the interrupt named `irq_name` if it belongs to `owner`, `None` if it does not.
pub(crate) fn classify(irq_name: &str, owner: &IrqOwner<'_>) -> Option<IrqRole> {
    if let Some(dev) = owner.device {
        // mlx5 and ena name interrupts after the PCI function: `KIND@pci:ADDR`.
        if let Some(kind) = irq_name.strip_suffix(dev).and_then(|h| h.strip_suffix("@pci:")) {
            return Some(match kind.strip_prefix("mlx5_comp").and_then(number) {
                Some(n) => IrqRole::Queue(n),
                None => IrqRole::Control,
            });
        }
        if let Some(rest) = after(irq_name, dev, '-') {
            return Some(role_of(rest));
        }
        // ice and i40e: `DRIVER-ADDR:misc`.
        if let Some(driver) = owner.driver {
            if after(irq_name, driver, '-').and_then(|r| after(r, dev, ':')).is_some() {
                return Some(IrqRole::Control);
            }
        }
    }
    if let Some(rest) = owner.driver.and_then(|d| after(irq_name, d, '-')) {
        if let Some(rest) = after(rest, owner.iface, '-') {
            return Some(role_of(rest));
        }
    }
    if irq_name == owner.iface {
        return Some(IrqRole::Control);
    }
    after(irq_name, owner.iface, '-').map(role_of)
}

/// What follows `prefix` and `separator` in `name`.
fn after<'a>(name: &'a str, prefix: &str, separator: char) -> Option<&'a str> {
    name.strip_prefix(prefix)?.strip_prefix(separator)
}

/// `TxRx-3`, `Tx-Rx-3`, `rx-3`, `input.3`: queue 3; `virtqueues`: all; anything else
/// (`config`, `misc`, `lsc`) carries no packets.
fn role_of(rest: &str) -> IrqRole {
    if rest == "virtqueues" {
        return IrqRole::Shared;
    }
    match rest.rsplit_once(['-', '.']).and_then(|(_, n)| number(n)) {
        Some(n) => IrqRole::Queue(n),
        None => IrqRole::Control,
    }
}

/// A queue number: ASCII digits only, short enough never to overflow.
fn number(text: &str) -> Option<u32> {
    (!text.is_empty() && text.len() <= 6 && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use IrqRole::*;

    fn of(name: &str, iface: &str, driver: &str, device: &str) -> Option<IrqRole> {
        classify(name, &IrqOwner { iface, driver: Some(driver), device: Some(device) })
    }

    #[test]
    fn every_common_drivers_names_map_to_their_queue() {
        let mlx = ("ens1f0np0", "mlx5_core", "0000:03:00.0");
        assert_eq!(of("mlx5_comp7@pci:0000:03:00.0", mlx.0, mlx.1, mlx.2), Some(Queue(7)));
        assert_eq!(of("mlx5_async0@pci:0000:03:00.0", mlx.0, mlx.1, mlx.2), Some(Control));
        assert_eq!(of("mlx5_comp7@pci:0000:03:00.1", mlx.0, mlx.1, mlx.2), None);
        for driver in ["ice", "i40e"] {
            let name = format!("{driver}-ens2f0-TxRx-12");
            assert_eq!(of(&name, "ens2f0", driver, "0000:3b:00.0"), Some(Queue(12)));
            let misc = format!("{driver}-0000:3b:00.0:misc");
            assert_eq!(of(&misc, "ens2f0", driver, "0000:3b:00.0"), Some(Control));
            let other = format!("{driver}-ens2f1-TxRx-1");
            assert_eq!(of(&other, "ens2f0", driver, "0000:3b:00.0"), None);
        }
        assert_eq!(of("eth2-TxRx-5", "eth2", "ixgbe", "0000:05:00.0"), Some(Queue(5)));
        assert_eq!(of("eth2", "eth2", "ixgbe", "0000:05:00.0"), Some(Control));
        assert_eq!(of("eth21-TxRx-5", "eth2", "ixgbe", "0000:05:00.0"), None);
        assert_eq!(of("ens5-Tx-Rx-3", "ens5", "ena", "0000:00:05.0"), Some(Queue(3)));
        assert_eq!(of("ena-mgmnt@pci:0000:00:05.0", "ens5", "ena", "0000:00:05.0"), Some(Control));
        assert_eq!(of("virtio2-input.3", "eth0", "virtio_net", "virtio2"), Some(Queue(3)));
        assert_eq!(of("virtio2-output.3", "eth0", "virtio_net", "virtio2"), Some(Queue(3)));
        assert_eq!(of("virtio2-config", "eth0", "virtio_net", "virtio2"), Some(Control));
        assert_eq!(of("virtio2-virtqueues", "eth0", "virtio_net", "virtio2"), Some(Shared));
        assert_eq!(of("virtio21-input.0", "eth0", "virtio_net", "virtio2"), None);
    }

    #[test]
    fn hostile_names_are_answered() {
        for name in ["", "-", "eth0-", "eth0-TxRx-99999999999999", "@pci:", "virtio2-.", "é-1"] {
            let _ = of(name, "eth0", "x", "virtio2");
        }
        assert_eq!(of("eth0-TxRx-99999999999999", "eth0", "x", "y"), Some(Control));
    }

    proptest::proptest! {
        /// Any /proc/interrupts name against any interface, driver and device: an answer.
        #[test]
        fn any_name_is_answered(name in ".{0,40}", iface in ".{0,16}", dev in ".{0,16}") {
            let _ = of(&name, &iface, &iface, &dev);
            let _ = classify(&name, &IrqOwner { iface: &iface, driver: None, device: None });
        }
    }
}
