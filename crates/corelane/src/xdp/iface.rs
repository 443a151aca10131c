//! The interface an XDP program goes on: found by name, or as the one that holds the bound
//! address, with its index, RX queue count and MAC address, all over rtnetlink (which answers
//! for the caller's network namespace; sysfs shows the namespace it was mounted in).

use std::net::{IpAddr, SocketAddr};

use super::netlink;
use super::XdpError;

/// A network interface as XDP sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub index: u32,
    /// RX queues in use (ethtool's rx + combined channels); one AF_XDP socket and lane each.
    pub rx_queues: u32,
    pub mac: [u8; 6],
}

impl Interface {
    fn lookup(index: u32, name: &str) -> Result<Self, XdpError> {
        match netlink::link(index, name) {
            Ok(l) => {
                // The queues in use (ethtool's channels, in this thread's namespace); netlink
                // gives only how many the device could have.
                let rx_queues = crate::sys::ethtool::channels(&l.name)
                    .ok()
                    .map(|c| c.rx + c.combined)
                    .filter(|&n| n > 0)
                    .unwrap_or(l.rx_queues);
                Ok(Self { name: l.name, index: l.index, rx_queues, mac: l.mac })
            }
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => {
                Err(XdpError::NoInterface(if index == 0 {
                    name.to_string()
                } else {
                    format!("#{index}")
                }))
            }
            Err(e) => Err(XdpError::io("cannot read the interface over rtnetlink", e)),
        }
    }

    /// The interface called `name`.
    pub fn by_name(name: &str) -> Result<Self, XdpError> {
        if name.is_empty() || name.len() > 15 {
            return Err(XdpError::NoInterface(name.to_string()));
        }
        Self::lookup(0, name)
    }

    /// The interface with index `index`.
    pub fn by_index(index: u32) -> Result<Self, XdpError> {
        Self::lookup(index, "")
    }

    /// The interface for a receiver bound to `addr`: `dev` if given (which must then hold
    /// `addr`, unless `addr` is unspecified), else the interface that holds `addr`.
    pub fn for_address(addr: SocketAddr, dev: Option<&str>) -> Result<Self, XdpError> {
        let ip = addr.ip();
        let holders = || -> Result<Vec<u32>, XdpError> {
            let all = netlink::addresses().map_err(|e| XdpError::io("cannot list addresses", e))?;
            Ok(all.into_iter().filter(|(_, a)| same_ip(*a, ip)).map(|(i, _)| i).collect())
        };
        match dev {
            Some(name) => {
                let iface = Self::by_name(name)?;
                if !ip.is_unspecified() && !holders()?.contains(&iface.index) {
                    return Err(XdpError::NotOnInterface { addr: ip, dev: iface.name });
                }
                Ok(iface)
            }
            None if ip.is_unspecified() => Err(XdpError::NeedInterface(addr)),
            None => {
                let index = *holders()?.first().ok_or(XdpError::AddressNowhere(ip))?;
                Self::by_index(index)
            }
        }
    }
}

fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_found_by_name_and_address() {
        let lo = Interface::by_name("lo").unwrap();
        assert_eq!(lo.index, 1);
        assert_eq!(Interface::for_address("127.0.0.1:9".parse().unwrap(), None).unwrap(), lo);
        assert!(matches!(Interface::by_name("corelane-nope0"), Err(XdpError::NoInterface(_))));
        assert!(matches!(
            Interface::for_address("0.0.0.0:9".parse().unwrap(), None),
            Err(XdpError::NeedInterface(_))
        ));
        assert!(matches!(
            Interface::for_address("192.0.2.77:9".parse().unwrap(), Some("lo")),
            Err(XdpError::NotOnInterface { .. })
        ));
    }
}
