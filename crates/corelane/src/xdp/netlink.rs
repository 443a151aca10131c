//! The rtnetlink requests the XDP lifecycle needs, as bytes over a plain netlink socket: which
//! XDP programs an interface carries (RTM_GETLINK, `IFLA_XDP`), removing one exactly (RTM_SETLINK
//! with `XDP_FLAGS_REPLACE` and its descriptor as the expected one, so a program attached in
//! between is never removed), attaching one the old way (what a killed older run leaves), and
//! the interfaces' addresses (RTM_GETADDR). Hand-written because it is four messages and every
//! rtnetlink crate brings an async runtime.

use std::io::{self, Read};
use std::net::IpAddr;
use std::os::fd::{AsRawFd, BorrowedFd};

use socket2::{Domain, Protocol, Socket, Type};

const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_SETLINK: u16 = 19;
const RTM_NEWADDR: u16 = 20;
const RTM_GETADDR: u16 = 22;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const RTM_NEWNEIGH: u16 = 28;
const RTM_GETNEIGH: u16 = 30;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;
/// NUD_INCOMPLETE and NUD_FAILED: no usable address.
const NUD_UNUSABLE: u16 = 0x01 | 0x20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_DUMP: u16 = 0x300;
const IFLA_XDP: u16 = 43;
const NLA_F_NESTED: u16 = 0x8000;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_ATTACHED: u16 = 2;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_PROG_ID: u16 = 4;
const IFLA_XDP_DRV_PROG_ID: u16 = 5;
const IFLA_XDP_SKB_PROG_ID: u16 = 6;
const IFLA_XDP_EXPECTED_FD: u16 = 8;
const IFLA_ADDRESS: u16 = 1;
const IFLA_IFNAME: u16 = 3;
const IFLA_NUM_RX_QUEUES: u16 = 32;
const IFA_ADDRESS: u16 = 1;
const IFA_LOCAL: u16 = 2;

/// `XDP_FLAGS_UPDATE_IF_NOEXIST`.
const FLAG_NOEXIST: u32 = 1;
/// `XDP_FLAGS_SKB_MODE`: generic XDP, after the stack allocated an skb.
pub(crate) const FLAG_SKB: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`: native XDP, in the driver.
pub(crate) const FLAG_DRV: u32 = 1 << 2;
const FLAG_REPLACE: u32 = 1 << 4;

/// An XDP program attached to an interface, and in which mode (`FLAG_DRV` or `FLAG_SKB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Attached {
    pub prog_id: u32,
    pub mode: u32,
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// A request being built: header, fixed part, attributes.
struct Message(Vec<u8>);

impl Message {
    /// Every request asks for an acknowledgement, so every answer has a definite end.
    fn new(kind: u16, flags: u16, fixed: &[u8]) -> Self {
        let flags = flags | NLM_F_ACK;
        let mut m = vec![0u8; 16];
        m[4..6].copy_from_slice(&kind.to_ne_bytes());
        m[6..8].copy_from_slice(&flags.to_ne_bytes());
        m[8..12].copy_from_slice(&1u32.to_ne_bytes());
        m.extend_from_slice(fixed);
        Self(m)
    }

    fn attr(&mut self, kind: u16, payload: &[u8]) -> &mut Self {
        let len = 4 + payload.len();
        self.0.extend_from_slice(&(len as u16).to_ne_bytes());
        self.0.extend_from_slice(&kind.to_ne_bytes());
        self.0.extend_from_slice(payload);
        self.0.resize(align4(self.0.len()), 0);
        self
    }

    fn bytes(mut self) -> Vec<u8> {
        let len = self.0.len() as u32;
        self.0[0..4].copy_from_slice(&len.to_ne_bytes());
        self.0
    }
}

fn ifinfomsg(ifindex: u32) -> [u8; 16] {
    let mut m = [0u8; 16];
    m[4..8].copy_from_slice(&ifindex.to_ne_bytes());
    m
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The (type, payload) attributes in `b`; a malformed tail ends the walk.
fn attrs(mut b: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while let (Some(len), Some(kind)) = (u16_at(b, 0), u16_at(b, 2)) {
        let len = len as usize;
        if len < 4 || len > b.len() {
            break;
        }
        out.push((kind & !NLA_F_NESTED, &b[4..len]));
        b = &b[align4(len).min(b.len())..];
    }
    out
}

/// Sends `request` and returns every message of the answer as (type, body after the 16-byte
/// header), until the acknowledgement, the end of a dump, or an error (returned as such).
fn exchange(request: Vec<u8>) -> io::Result<Vec<(u16, Vec<u8>)>> {
    let socket = Socket::new(
        Domain::from(libc::AF_NETLINK),
        Type::RAW.cloexec(),
        Some(Protocol::from(libc::NETLINK_ROUTE)),
    )?;
    // Nothing here should take long: a silent kernel is an error, not a hang.
    socket.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    socket.send(&request)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = (&socket).read(&mut buf)?;
        let mut b = &buf[..n];
        while let (Some(len), Some(kind)) = (u32_at(b, 0), u16_at(b, 4)) {
            let len = len as usize;
            if len < 16 || len > b.len() {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "malformed netlink answer"));
            }
            let body = &b[16..len];
            match kind {
                NLMSG_ERROR => {
                    let code = u32_at(body, 0).unwrap_or(0) as i32;
                    return if code == 0 {
                        Ok(out)
                    } else {
                        Err(io::Error::from_raw_os_error(-code))
                    };
                }
                NLMSG_DONE => return Ok(out),
                _ => out.push((kind, body.to_vec())),
            }
            b = &b[align4(len).min(b.len())..];
        }
    }
}

/// The XDP programs attached to `ifindex` (none, one, or one per mode).
pub(crate) fn attached(ifindex: u32) -> io::Result<Vec<Attached>> {
    let request = Message::new(RTM_GETLINK, NLM_F_REQUEST, &ifinfomsg(ifindex)).bytes();
    let mut found = Vec::new();
    for (kind, body) in exchange(request)? {
        if kind != RTM_NEWLINK || body.len() < 16 {
            continue;
        }
        for (kind, xdp) in attrs(&body[16..]) {
            if kind != IFLA_XDP {
                continue;
            }
            let inner = attrs(xdp);
            let mode = inner
                .iter()
                .find(|(k, _)| *k == IFLA_XDP_ATTACHED)
                .and_then(|(_, v)| v.first().copied());
            for (k, v) in &inner {
                let Some(id) = u32_at(v, 0) else { continue };
                let mode = match (*k, mode) {
                    (IFLA_XDP_DRV_PROG_ID, _) | (IFLA_XDP_PROG_ID, Some(1)) => FLAG_DRV,
                    (IFLA_XDP_SKB_PROG_ID, _) | (IFLA_XDP_PROG_ID, Some(2)) => FLAG_SKB,
                    (IFLA_XDP_PROG_ID, _) => 0,
                    _ => continue,
                };
                if id != 0 && !found.iter().any(|a: &Attached| a.prog_id == id) {
                    found.push(Attached { prog_id: id, mode });
                }
            }
        }
    }
    Ok(found)
}

fn setlink_xdp(ifindex: u32, fd: i32, flags: u32, expected: Option<i32>) -> io::Result<()> {
    let mut nested = Message(Vec::new());
    nested.attr(IFLA_XDP_FD, &fd.to_ne_bytes()).attr(IFLA_XDP_FLAGS, &flags.to_ne_bytes());
    if let Some(e) = expected {
        nested.attr(IFLA_XDP_EXPECTED_FD, &e.to_ne_bytes());
    }
    let mut m = Message::new(RTM_SETLINK, NLM_F_REQUEST | NLM_F_ACK, &ifinfomsg(ifindex));
    m.attr(IFLA_XDP | NLA_F_NESTED, &nested.0);
    exchange(m.bytes()).map(drop)
}

/// Removes `prog` from `ifindex` if, and only if, it is still the program attached in `mode`.
pub(crate) fn detach_exactly(ifindex: u32, mode: u32, prog: BorrowedFd<'_>) -> io::Result<()> {
    setlink_xdp(ifindex, -1, mode | FLAG_REPLACE, Some(prog.as_raw_fd()))
}

/// Attaches `prog` the old way (no link: it stays after its loader exits) unless a program
/// is there already.
pub(crate) fn attach_without_link(ifindex: u32, mode: u32, prog: BorrowedFd<'_>) -> io::Result<()> {
    setlink_xdp(ifindex, prog.as_raw_fd(), mode | FLAG_NOEXIST, None)
}

/// An interface as rtnetlink describes it (read in the caller's network namespace, which
/// sysfs, mounted for another namespace, may not show).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Link {
    pub index: u32,
    pub name: String,
    pub rx_queues: u32,
    pub mac: [u8; 6],
}

/// The interface with index `index`, or (index 0) called `name`; ENODEV when absent.
pub(crate) fn link(index: u32, name: &str) -> io::Result<Link> {
    let mut m = Message::new(RTM_GETLINK, NLM_F_REQUEST, &ifinfomsg(index));
    if index == 0 {
        let mut bytes = name.as_bytes().to_vec();
        bytes.push(0);
        m.attr(IFLA_IFNAME, &bytes);
    }
    for (kind, body) in exchange(m.bytes())? {
        if kind != RTM_NEWLINK || body.len() < 16 {
            continue;
        }
        let mut link = Link {
            index: u32_at(&body, 4).unwrap_or(0),
            name: String::new(),
            rx_queues: 1,
            mac: [0; 6],
        };
        for (k, v) in attrs(&body[16..]) {
            match k {
                IFLA_IFNAME => {
                    let end = v.iter().position(|&b| b == 0).unwrap_or(v.len());
                    link.name = String::from_utf8_lossy(&v[..end]).into_owned();
                }
                IFLA_NUM_RX_QUEUES => link.rx_queues = u32_at(v, 0).unwrap_or(1).max(1),
                IFLA_ADDRESS if v.len() == 6 => link.mac.copy_from_slice(v),
                _ => {}
            }
        }
        return Ok(link);
    }
    Err(io::Error::from_raw_os_error(libc::ENODEV))
}

fn ip_of(family: u8, v: &[u8]) -> Option<IpAddr> {
    match (i32::from(family), v.len()) {
        (libc::AF_INET, 4) => Some(IpAddr::from(<[u8; 4]>::try_from(v).ok()?)),
        (libc::AF_INET6, 16) => Some(IpAddr::from(<[u8; 16]>::try_from(v).ok()?)),
        _ => None,
    }
}

fn family_of(ip: IpAddr) -> (u8, u8, Vec<u8>) {
    match ip {
        IpAddr::V4(a) => (libc::AF_INET as u8, 32, a.octets().to_vec()),
        IpAddr::V6(a) => (libc::AF_INET6 as u8, 128, a.octets().to_vec()),
    }
}

/// The route to `dst`: the output interface and the next hop (the gateway, or `dst` itself
/// when it is on the link).
pub(crate) fn route_to(dst: IpAddr) -> io::Result<(u32, IpAddr)> {
    let (family, bits, bytes) = family_of(dst);
    let mut rtmsg = [0u8; 12];
    rtmsg[0] = family;
    rtmsg[1] = bits;
    let mut m = Message::new(RTM_GETROUTE, NLM_F_REQUEST, &rtmsg);
    m.attr(RTA_DST, &bytes);
    for (kind, body) in exchange(m.bytes())? {
        if kind != RTM_NEWROUTE || body.len() < 12 {
            continue;
        }
        let (mut oif, mut via) = (0, dst);
        for (k, v) in attrs(&body[12..]) {
            match k {
                RTA_OIF => oif = u32_at(v, 0).unwrap_or(0),
                RTA_GATEWAY => via = ip_of(family, v).unwrap_or(dst),
                _ => {}
            }
        }
        if oif != 0 {
            return Ok((oif, via));
        }
    }
    Err(io::Error::from_raw_os_error(libc::ENETUNREACH))
}

/// The link-layer address the neighbour table holds for `ip` on `ifindex`, if usable.
pub(crate) fn neighbour(ifindex: u32, ip: IpAddr) -> io::Result<Option<[u8; 6]>> {
    let (family, _, _) = family_of(ip);
    let mut ndmsg = [0u8; 12];
    ndmsg[0] = family;
    let request = Message::new(RTM_GETNEIGH, NLM_F_REQUEST | NLM_F_DUMP, &ndmsg).bytes();
    for (kind, body) in exchange(request)? {
        if kind != RTM_NEWNEIGH || body.len() < 12 || u32_at(&body, 4) != Some(ifindex) {
            continue;
        }
        if u16_at(&body, 8).unwrap_or(0) & NUD_UNUSABLE != 0 {
            continue;
        }
        let (mut dst, mut mac) = (None, None);
        for (k, v) in attrs(&body[12..]) {
            match k {
                NDA_DST => dst = ip_of(family, v),
                NDA_LLADDR if v.len() == 6 => mac = <[u8; 6]>::try_from(v).ok(),
                _ => {}
            }
        }
        if dst == Some(ip) && mac.is_some() {
            return Ok(mac);
        }
    }
    Ok(None)
}

/// Every (interface index, address) the kernel knows.
pub(crate) fn addresses() -> io::Result<Vec<(u32, IpAddr)>> {
    let request = Message::new(RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, &[0u8; 8]).bytes();
    let mut out = Vec::new();
    for (kind, body) in exchange(request)? {
        if kind != RTM_NEWADDR || body.len() < 8 {
            continue;
        }
        let (family, index) = (body[0], u32_at(&body, 4).unwrap_or(0));
        for (k, v) in attrs(&body[8..]) {
            if k != IFA_LOCAL && k != IFA_ADDRESS {
                continue;
            }
            let ip = match (family as i32, v.len()) {
                (libc::AF_INET, 4) => IpAddr::from(<[u8; 4]>::try_from(v).unwrap_or_default()),
                (libc::AF_INET6, 16) => IpAddr::from(<[u8; 16]>::try_from(v).unwrap_or_default()),
                _ => continue,
            };
            if !out.contains(&(index, ip)) {
                out.push((index, ip));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_round_trip_and_a_lying_length_ends_the_walk() {
        let mut m = Message(Vec::new());
        m.attr(1, &[1, 2, 3]).attr(2, &7u32.to_ne_bytes());
        let parsed = attrs(&m.0);
        assert_eq!(parsed, vec![(1, &[1u8, 2, 3][..]), (2, &7u32.to_ne_bytes()[..])]);
        let mut bad = m.0.clone();
        bad[0] = 200;
        assert!(attrs(&bad).is_empty());
    }

    #[test]
    fn loopback_has_an_address_and_no_program() {
        let addrs = addresses().unwrap();
        assert!(addrs.iter().any(|(_, ip)| ip.is_loopback()), "{addrs:?}");
        assert!(attached(1).unwrap().is_empty());
        let lo = link(0, "lo").unwrap();
        assert_eq!((lo.index, lo.name.as_str()), (1, "lo"));
        assert_eq!(link(1, "").unwrap(), lo);
        assert_eq!(link(0, "corelane-nope0").unwrap_err().raw_os_error(), Some(libc::ENODEV));
    }
}
