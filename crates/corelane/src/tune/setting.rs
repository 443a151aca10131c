//! The kernel settings a plan may change, as types: an interrupt's affinity, a queue's RPS or
//! XPS mask, an ethtool setting of a named interface. Plans and revert files are files a user
//! (or an attacker) can edit; everything in them is parsed into these before anything is read
//! or written, so no path, interface name or value from a file reaches the file system as is.

use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

use crate::sys::ethtool;
use crate::topology::{is_interface_name, CpuList};

/// Why a plan or revert file is refused; nothing has been read or written when it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    #[error("`{0}` is not an interface name: 1 to 15 characters, none of them '/', ':', whitespace or NUL, and not `.` or `..`")]
    BadInterface(String),
    #[error("no network interface `{name}` here (see `ip link`); the file names one this machine does not have")]
    NoInterface { name: String },
    #[error("`{0}` is not a setting a plan may change: only /proc/irq/N/smp_affinity_list, /sys/class/net/IFACE/queues/rx-N/rps_cpus, .../tx-N/xps_cpus, /sys/class/net/IFACE/{{napi_defer_hard_irqs,gro_flush_timeout}} and ethtool:IFACE/{{queues,rx-usecs,rx-flow-hash/FLOW}}")]
    NotASetting(String),
    #[error("interrupt {irq} ({name}) does not belong to {owner}: the interrupts of {owner} here are {owned}; make the plan again on this machine (`corelane plan`)")]
    ForeignIrq { irq: u32, name: String, owner: String, owned: String },
    #[error("`{value}` is not a valid value for {setting}: {expected}")]
    BadValue { setting: String, value: String, expected: &'static str },
}

/// A checked interface name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IfName(String);

impl IfName {
    /// Checks the form of `name` (the kernel's dev_valid_name rules).
    pub fn parse(name: &str) -> Result<Self, SettingError> {
        if !is_interface_name(name) {
            return Err(SettingError::BadInterface(name.into()));
        }
        Ok(Self(name.into()))
    }

    /// Checks the form and that the interface exists under `root` (`/` on a live machine).
    pub fn existing(name: &str, root: &Path) -> Result<Self, SettingError> {
        let name = Self::parse(name)?;
        if !root.join("sys/class/net").join(&name.0).exists() {
            return Err(SettingError::NoInterface { name: name.0 });
        }
        Ok(name)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An ethtool setting of one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ethtool {
    Queues,
    RxUsecs,
    /// RX flow hashing for one flow type (`tcp4`, `udp4`, `tcp6`, `udp6`).
    RxFlowHash {
        flow: u32,
        name: &'static str,
    },
}

/// One kernel setting a plan may change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setting {
    IrqAffinity {
        irq: u32,
    },
    RpsCpus {
        nic: IfName,
        queue: u32,
    },
    XpsCpus {
        nic: IfName,
        queue: u32,
    },
    Ethtool {
        nic: IfName,
        setting: Ethtool,
    },
    /// A busy-poll setting of an interface (`napi_defer_hard_irqs`, `gro_flush_timeout`), which
    /// `udp recv --backend xdp --busy-poll` changes for its run.
    BusyPoll {
        nic: IfName,
        file: &'static str,
    },
    /// An address on an interface: `present` or `absent`.
    Address {
        nic: IfName,
        addr: std::net::IpAddr,
        prefix: u8,
    },
}

impl Setting {
    /// The name a change list shows and a revert file records: a path under `root`, or
    /// `ethtool:IFACE/SETTING`.
    pub fn path(&self, root: &Path) -> PathBuf {
        match self {
            Setting::IrqAffinity { irq } => root.join(format!("proc/irq/{irq}/smp_affinity_list")),
            Setting::RpsCpus { nic, queue } => {
                root.join(format!("sys/class/net/{}/queues/rx-{queue}/rps_cpus", nic.0))
            }
            Setting::XpsCpus { nic, queue } => {
                root.join(format!("sys/class/net/{}/queues/tx-{queue}/xps_cpus", nic.0))
            }
            Setting::BusyPoll { nic, file } => root.join(format!("sys/class/net/{}/{file}", nic.0)),
            Setting::Address { nic, addr, prefix } => {
                PathBuf::from(format!("address:{}/{addr}/{prefix}", nic.0))
            }
            Setting::Ethtool { nic, setting } => PathBuf::from(format!(
                "ethtool:{}/{}",
                nic.0,
                match setting {
                    Ethtool::Queues => "queues".to_string(),
                    Ethtool::RxUsecs => "rx-usecs".to_string(),
                    Ethtool::RxFlowHash { name, .. } => format!("rx-flow-hash/{name}"),
                }
            )),
        }
    }

    /// Parses a recorded name back into a setting: it must be exactly one of the forms
    /// [`path`](Self::path) makes under `root`, of an interface that exists.
    pub fn from_path(path: &Path, root: &Path) -> Result<Self, SettingError> {
        let refuse = || SettingError::NotASetting(path.display().to_string());
        let text = path.to_str().ok_or_else(refuse)?;
        if let Some(rest) = text.strip_prefix("address:") {
            let (nic, cidr) = rest.split_once('/').ok_or_else(refuse)?;
            let (addr, prefix) = super::address::parse_cidr(cidr).ok_or_else(refuse)?;
            return Ok(Setting::Address { nic: IfName::existing(nic, root)?, addr, prefix });
        }
        if let Some(rest) = text.strip_prefix("ethtool:") {
            let (nic, what) = rest.split_once('/').ok_or_else(refuse)?;
            let setting = match what {
                "queues" => Ethtool::Queues,
                "rx-usecs" => Ethtool::RxUsecs,
                _ => {
                    let flow = what.strip_prefix("rx-flow-hash/").ok_or_else(refuse)?;
                    let (name, flow) = ethtool::FLOW_TYPES
                        .iter()
                        .find(|(n, _)| *n == flow)
                        .copied()
                        .ok_or_else(refuse)?;
                    Ethtool::RxFlowHash { flow, name }
                }
            };
            return Ok(Setting::Ethtool { nic: IfName::existing(nic, root)?, setting });
        }
        let rel = path.strip_prefix(root).map_err(|_| refuse())?;
        let parts: Vec<&str> = rel
            .components()
            .map(|c| match c {
                Component::Normal(p) => p.to_str().ok_or_else(refuse),
                _ => Err(refuse()),
            })
            .collect::<Result<_, _>>()?;
        let number = |s: &str| -> Result<u32, SettingError> {
            if s.is_empty() || s.len() > 10 || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(refuse());
            }
            s.parse().map_err(|_| refuse())
        };
        match parts.as_slice() {
            ["proc", "irq", n, "smp_affinity_list"] => Ok(Setting::IrqAffinity { irq: number(n)? }),
            ["sys", "class", "net", nic, file] => {
                let file = crate::tune::busy_poll::FILES
                    .into_iter()
                    .find(|f| f == file)
                    .ok_or_else(refuse)?;
                Ok(Setting::BusyPoll { nic: IfName::existing(nic, root)?, file })
            }
            ["sys", "class", "net", nic, "queues", queue, file] => {
                let nic = IfName::existing(nic, root)?;
                match (queue.split_once('-'), *file) {
                    (Some(("rx", q)), "rps_cpus") => {
                        Ok(Setting::RpsCpus { nic, queue: number(q)? })
                    }
                    (Some(("tx", q)), "xps_cpus") => {
                        Ok(Setting::XpsCpus { nic, queue: number(q)? })
                    }
                    _ => Err(refuse()),
                }
            }
            _ => Err(refuse()),
        }
    }

    /// Checks that `value` is what this setting holds: a CPU list for an interrupt's
    /// affinity, a CPU mask for RPS and XPS, a number or ethtool's hash letters.
    pub fn check_value(&self, value: &str, root: &Path) -> Result<(), SettingError> {
        let (ok, expected) = match self {
            Setting::IrqAffinity { .. } => {
                (CpuList::from_str(value).is_ok(), "a CPU list such as 0-3,6")
            }
            Setting::RpsCpus { .. } | Setting::XpsCpus { .. } => {
                (is_mask(value), "a hexadecimal CPU mask such as 3 or 00000000,0000000f")
            }
            Setting::Ethtool { setting: Ethtool::Queues | Ethtool::RxUsecs, .. } => {
                (value.len() <= 10 && value.parse::<u32>().is_ok(), "a whole number")
            }
            Setting::BusyPoll { .. } => {
                (value.len() <= 20 && value.parse::<u64>().is_ok(), "a whole number")
            }
            Setting::Ethtool { setting: Ethtool::RxFlowHash { .. }, .. } => (
                !value.is_empty() && ethtool::hash_bits(value).is_some(),
                "ethtool letters from mvtsdfn",
            ),
            Setting::Address { .. } => (
                [super::address::PRESENT, super::address::ABSENT].contains(&value),
                "present or absent",
            ),
        };
        if ok {
            Ok(())
        } else {
            Err(SettingError::BadValue {
                setting: self.path(root).display().to_string(),
                value: value.chars().take(64).collect(),
                expected,
            })
        }
    }
}

/// The kernel's bitmap format: comma-separated groups of at most 8 hex digits.
fn is_mask(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 4096
        && value
            .split(',')
            .all(|g| !g.is_empty() && g.len() <= 8 && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fake_root() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("sys/class/net/eth0/queues/rx-0")).unwrap();
        root
    }

    #[test]
    fn names_round_trip_and_nothing_else_parses() {
        let root = fake_root();
        let root = root.path();
        let eth0 = IfName::existing("eth0", root).unwrap();
        for s in [
            Setting::IrqAffinity { irq: 38 },
            Setting::RpsCpus { nic: eth0.clone(), queue: 0 },
            Setting::XpsCpus { nic: eth0.clone(), queue: 3 },
            Setting::Ethtool { nic: eth0.clone(), setting: Ethtool::Queues },
            Setting::Ethtool {
                nic: eth0.clone(),
                setting: Ethtool::RxFlowHash { flow: 2, name: "udp4" },
            },
            Setting::BusyPoll { nic: eth0.clone(), file: "napi_defer_hard_irqs" },
            Setting::BusyPoll { nic: eth0.clone(), file: "gro_flush_timeout" },
            Setting::Address { nic: eth0.clone(), addr: "10.0.0.5".parse().unwrap(), prefix: 24 },
            Setting::Address { nic: eth0.clone(), addr: "fd00::5".parse().unwrap(), prefix: 64 },
        ] {
            assert_eq!(Setting::from_path(&s.path(root), root).unwrap(), s);
        }
        for bad in [
            "/etc/shadow".to_string(),
            format!("{}/proc/irq/38/../../../etc/shadow", root.display()),
            format!("{}/sys/class/net/../../../../etc/queues/rx-0/rps_cpus", root.display()),
            format!("{}/sys/class/net/eth0/queues/rx-0/../../../../x", root.display()),
            format!("{}/proc/irq/-1/smp_affinity_list", root.display()),
            format!("{}/proc/irq/38/smp_affinity", root.display()),
            format!("{}/sys/class/net/eth0/queues/rx-0/xps_cpus", root.display()),
            format!("{}/sys/class/net/eth0/mtu", root.display()),
            format!("{}/sys/class/net/eth0/threaded", root.display()),
            format!("{}/sys/class/net/../gro_flush_timeout", root.display()),
            "ethtool:eth0/../../x".to_string(),
            "ethtool:eth0/rx-flow-hash/sctp4".to_string(),
            "address:eth0/10.0.0.5".to_string(),
            "address:eth0/10.0.0.5/24; reboot".to_string(),
            "address:eth0/../../x/24".to_string(),
            "address:nosuch0/10.0.0.5/24".to_string(),
        ] {
            assert!(Setting::from_path(Path::new(&bad), root).is_err(), "{bad}");
        }
        let err = Setting::from_path(Path::new("ethtool:nosuch0/queues"), root).unwrap_err();
        assert_eq!(err, SettingError::NoInterface { name: "nosuch0".into() });
    }

    #[test]
    fn interface_names_follow_the_kernels_rules() {
        for bad in ["", ".", "..", "../../etc", "a/b", "eth0:1", "a b", "sixteen-chars-xx", "a\0"] {
            assert!(IfName::parse(bad).is_err(), "{bad:?}");
        }
        assert!(IfName::parse("enp0s31f6").is_ok());
    }

    #[test]
    fn values_must_fit_their_setting() {
        let root = Path::new("/");
        let irq = Setting::IrqAffinity { irq: 1 };
        assert!(irq.check_value("0-3,6", root).is_ok());
        assert!(irq.check_value("../x", root).is_err());
        let rps = Setting::RpsCpus { nic: IfName::parse("eth0").unwrap(), queue: 0 };
        assert!(rps.check_value("00000000,0000000f", root).is_ok());
        assert!(rps.check_value("0x3", root).is_err());
        assert!(rps.check_value("", root).is_err());
    }

    proptest! {
        /// Any bytes as a recorded name or a value: an answer, never a panic.
        #[test]
        fn any_name_or_value_is_answered(name in ".{0,80}", value in ".{0,40}") {
            let root = Path::new("/nonexistent-root");
            if let Ok(s) = Setting::from_path(Path::new(&name), root) {
                let _ = s.check_value(&value, root);
            }
            let _ = IfName::parse(&name);
        }
    }
}
