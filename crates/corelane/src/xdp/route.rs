//! Where an AF_XDP sender's frames go: the route's output interface and next hop (rtnetlink
//! RTM_GETROUTE), and the next hop's MAC from the kernel's neighbour table (RTM_GETNEIGH).
//! When the table has no usable entry, one empty datagram to the next hop's discard port (9)
//! makes the kernel resolve it (ARP or neighbour discovery), and the table is read again for
//! up to a second: the receiver's port never sees it.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use super::{netlink, Interface, XdpError};

/// The frames' way out.
#[derive(Debug, Clone)]
pub struct Egress {
    pub iface: Interface,
    pub next_hop: IpAddr,
    pub dst_mac: [u8; 6],
    /// How the MAC was found, in words.
    pub how: String,
}

/// Finds the interface, next hop and next-hop MAC for `target`.
pub fn resolve(target: IpAddr) -> Result<Egress, XdpError> {
    let (oif, next_hop) =
        netlink::route_to(target).map_err(|e| XdpError::io(format!("no route to {target}"), e))?;
    let iface = Interface::by_index(oif)?;
    let lookup = || {
        netlink::neighbour(oif, next_hop)
            .map_err(|e| XdpError::io("cannot read the neighbour table", e))
    };
    if let Some(mac) = lookup()? {
        let how = format!("neighbour table entry for {next_hop} on {}", iface.name);
        return Ok(Egress { iface, next_hop, dst_mac: mac, how });
    }
    let probe = UdpSocket::bind(SocketAddr::new(
        if next_hop.is_ipv4() { [0u8; 4].into() } else { [0u16; 8].into() },
        0,
    ))
    .map_err(|e| XdpError::io("cannot open a socket to resolve the next hop", e))?;
    let _ = probe.send_to(&[], SocketAddr::new(next_hop, 9));
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        if let Some(mac) = lookup()? {
            let how = format!(
                "resolved {next_hop} on {} (one empty datagram to its port 9, then the neighbour table)",
                iface.name
            );
            return Ok(Egress { iface, next_hop, dst_mac: mac, how });
        }
    }
    Err(XdpError::NoNeighbour { next_hop, dev: iface.name })
}
