//! Telling a setting the kernel or the driver does not offer on a device (skipped, with the
//! reason in words) from a change that failed (rolled back). The kernel says which by errno:
//!
//! - `ENOENT` from a sysfs file that exists: net-sysfs.c answers so for `xps_cpus` and
//!   `xps_rxqs` on a device with one TX queue (`netif_is_multiqueue`).
//! - `EOPNOTSUPP`: the driver has no such ethtool operation.
//! - `EIO` from /proc/irq/N/smp_affinity_list: `irq_can_set_affinity_usr` is false (a managed
//!   or per-CPU interrupt, or an interrupt chip without affinity).
//! - `EINVAL` from ETHTOOL_SRXFH: the driver does not hash on that field set (virtio_net
//!   without RSS, drivers with fixed UDP hashing).
//!
//! Everything else (EPERM, EBUSY, EINVAL from a mask, a missing file) is a failure.

use std::io;

use super::setting::{Ethtool, Setting};

/// Why the kernel refuses `setting` on this device, if `err` says it does; `exists` is
/// whether the setting's file is there (always true for an ethtool setting).
pub(crate) fn refusal(setting: &Setting, err: &io::Error, exists: bool) -> Option<String> {
    let errno = err.raw_os_error()?;
    let reason = match (setting, errno) {
        (Setting::XpsCpus { .. }, libc::ENOENT) if exists => {
            "the kernel refuses XPS on this device (XPS needs more than one TX queue)"
        }
        (Setting::RpsCpus { .. }, libc::ENOENT) if exists => {
            "the kernel refuses RPS on this device"
        }
        (Setting::IrqAffinity { .. }, libc::EIO) => {
            "the kernel does not let user space move this interrupt (a managed or per-CPU interrupt)"
        }
        (Setting::Ethtool { setting: Ethtool::RxFlowHash { .. }, .. }, libc::EINVAL) => {
            "the driver does not hash on these fields for this flow type"
        }
        (_, libc::EOPNOTSUPP) => "the driver does not support this setting",
        _ => return None,
    };
    Some(reason.to_string())
}

/// An errno in words, with what to do about it, for a change that failed.
pub(crate) fn explain(err: &io::Error) -> String {
    let hint = match err.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => {
            "not permitted: run as root (CAP_NET_ADMIN in the interface's network namespace)"
        }
        Some(libc::EINVAL) => {
            "the kernel refused the value (for a CPU mask: only isolated or offline CPUs?)"
        }
        Some(libc::EBUSY) => "the device is busy: try again, or with the interface down",
        Some(libc::ENODEV) => "the interface is gone (removed, or in another network namespace)",
        Some(libc::ENOENT) => "no such setting here: make the plan on this machine again",
        _ => "the kernel refused it",
    };
    // io::Error's text ends in "(os error N)"; the errno stays, in words a user can search.
    let text = err.to_string();
    let text = text.split(" (os error").next().unwrap_or_default();
    match err.raw_os_error() {
        Some(n) => format!("{hint} ({text}, errno {n})"),
        None => format!("{hint} ({text})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::IfName;

    #[test]
    fn refusals_are_told_from_failures() {
        let nic = IfName::parse("eth0").unwrap();
        let xps = Setting::XpsCpus { nic: nic.clone(), queue: 0 };
        let enoent = io::Error::from_raw_os_error(libc::ENOENT);
        assert!(refusal(&xps, &enoent, true).unwrap().contains("XPS"));
        assert_eq!(refusal(&xps, &enoent, false), None, "a missing file is a failure");
        let irq = Setting::IrqAffinity { irq: 3 };
        assert!(refusal(&irq, &io::Error::from_raw_os_error(libc::EIO), true).is_some());
        let rps = Setting::RpsCpus { nic, queue: 0 };
        assert_eq!(refusal(&rps, &io::Error::from_raw_os_error(libc::EINVAL), true), None);
        assert!(explain(&io::Error::from_raw_os_error(libc::EPERM)).contains("run as root"));
    }
}
