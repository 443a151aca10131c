//! Checked views of a received frame: Ethernet, up to two VLAN tags, IPv4 (with options) or
//! IPv6, then UDP. Every length a header states is checked against the bytes that arrived
//! before anything is read through it: a frame whose IP or UDP length claims more than it
//! carries is `LyingLength`, counted and dropped, never read past.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

const ETH_HLEN: usize = 14;
pub(super) const ETH_P_IP: u16 = 0x0800;
pub(super) const ETH_P_IPV6: u16 = 0x86dd;
pub(super) const ETH_P_8021Q: u16 = 0x8100;
pub(super) const ETH_P_8021AD: u16 = 0x88a8;
pub(super) const IPPROTO_UDP: u8 = 17;
const MAX_VLAN_TAGS: usize = 2;

/// Why a frame carries no UDP datagram corelane takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// Shorter than the headers it starts.
    Short,
    /// An IP or UDP length larger than the bytes that arrived (or smaller than its header).
    LyingLength,
    /// Not IPv4/IPv6, bad IPv4 version, header length or checksum.
    Malformed,
    /// Not UDP, or an IPv4 fragment.
    NotUdp,
}

/// A UDP datagram inside a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpView<'a> {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub payload: &'a [u8],
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// The Internet checksum of `header` (zero when the header's own checksum is right).
fn ip_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Writes the checksum of an IPv4 `header` (20 to 60 bytes) into its checksum field.
fn seal_ipv4_checksum(header: &mut [u8]) {
    header[10..12].fill(0);
    let sum = ip_checksum(header);
    header[10..12].copy_from_slice(&sum.to_be_bytes());
}

/// Reads the UDP datagram in `frame`.
pub fn parse(frame: &[u8]) -> Result<UdpView<'_>, FrameError> {
    let mut at = ETH_HLEN;
    let mut kind = be16(frame, 12).ok_or(FrameError::Short)?;
    for _ in 0..MAX_VLAN_TAGS {
        if kind != ETH_P_8021Q && kind != ETH_P_8021AD {
            break;
        }
        kind = be16(frame, at + 2).ok_or(FrameError::Short)?;
        at += 4;
    }
    let l3 = frame.get(at..).ok_or(FrameError::Short)?;
    let (src, dst, l4) = match kind {
        ETH_P_IP => ipv4(l3)?,
        ETH_P_IPV6 => ipv6(l3)?,
        _ => return Err(FrameError::Malformed),
    };
    if l4.len() < 8 {
        return Err(FrameError::LyingLength);
    }
    let udp_len = be16(l4, 4).ok_or(FrameError::Short)? as usize;
    if udp_len < 8 || udp_len > l4.len() {
        return Err(FrameError::LyingLength);
    }
    let sport = be16(l4, 0).ok_or(FrameError::Short)?;
    let dport = be16(l4, 2).ok_or(FrameError::Short)?;
    Ok(UdpView {
        src: SocketAddr::new(src, sport),
        dst: SocketAddr::new(dst, dport),
        payload: &l4[8..udp_len],
    })
}

/// The IPv4 header's addresses and the bytes its total length covers past the header.
fn ipv4(p: &[u8]) -> Result<(IpAddr, IpAddr, &[u8]), FrameError> {
    let first = *p.first().ok_or(FrameError::Short)?;
    let ihl = usize::from(first & 0x0f) * 4;
    if first >> 4 != 4 || ihl < 20 {
        return Err(FrameError::Malformed);
    }
    let header = p.get(..ihl).ok_or(FrameError::Short)?;
    let total = usize::from(be16(p, 2).ok_or(FrameError::Short)?);
    // The total length may be less than what arrived (Ethernet pads to 60 bytes), never more.
    if total < ihl || total > p.len() {
        return Err(FrameError::LyingLength);
    }
    if ip_checksum(header) != 0 {
        return Err(FrameError::Malformed);
    }
    if header[9] != IPPROTO_UDP || be16(header, 6).unwrap_or(0) & 0x3fff != 0 {
        return Err(FrameError::NotUdp);
    }
    let addr = |at: usize| {
        IpAddr::V4(Ipv4Addr::new(header[at], header[at + 1], header[at + 2], header[at + 3]))
    };
    Ok((addr(12), addr(16), &p[ihl..total]))
}

/// The IPv6 header's addresses and the bytes its payload length covers (UDP right after the
/// fixed header; extension headers are not followed).
fn ipv6(p: &[u8]) -> Result<(IpAddr, IpAddr, &[u8]), FrameError> {
    let header = p.get(..40).ok_or(FrameError::Short)?;
    if header[0] >> 4 != 6 {
        return Err(FrameError::Malformed);
    }
    let payload = usize::from(be16(header, 4).unwrap_or(0));
    if 40 + payload > p.len() {
        return Err(FrameError::LyingLength);
    }
    if header[6] != IPPROTO_UDP {
        return Err(FrameError::NotUdp);
    }
    let addr = |at: usize| {
        let mut b = [0u8; 16];
        b.copy_from_slice(&header[at..at + 16]);
        IpAddr::V6(Ipv6Addr::from(b))
    };
    Ok((addr(8), addr(24), &p[40..40 + payload]))
}

/// Builds the frame of one UDP datagram over IPv4 (header checksum filled, UDP checksum 0,
/// which IPv4 allows): the sender's per-flow template and the tests' frames.
pub fn build_ipv4(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: std::net::SocketAddrV4,
    dst: std::net::SocketAddrV4,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = Vec::with_capacity(IPV4_PAYLOAD_OFFSET + payload.len());
    push_ethernet(&mut f, src_mac, dst_mac, ETH_P_IP);
    push_ipv4_udp(&mut f, src, dst, payload);
    f
}

/// The Ethernet header: destination, source, then what the frame carries.
fn push_ethernet(f: &mut Vec<u8>, src_mac: [u8; 6], dst_mac: [u8; 6], ethertype: u16) {
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&ethertype.to_be_bytes());
}

/// The UDP header, its checksum 0 (none over IPv4; filled in afterwards over IPv6), and the
/// payload.
fn push_udp(f: &mut Vec<u8>, src_port: u16, dst_port: u16, payload: &[u8]) {
    f.extend_from_slice(&src_port.to_be_bytes());
    f.extend_from_slice(&dst_port.to_be_bytes());
    f.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
}

/// The IPv4 packet of one UDP datagram, without a link-layer header (for a raw IP socket):
/// what [`build_ipv4`] puts after the Ethernet header.
pub fn ipv4_udp_packet(
    src: std::net::SocketAddrV4,
    dst: std::net::SocketAddrV4,
    payload: &[u8],
) -> Vec<u8> {
    let mut p = Vec::with_capacity(20 + 8 + payload.len());
    push_ipv4_udp(&mut p, src, dst, payload);
    p
}

fn push_ipv4_udp(
    f: &mut Vec<u8>,
    src: std::net::SocketAddrV4,
    dst: std::net::SocketAddrV4,
    payload: &[u8],
) {
    let total = 20 + 8 + payload.len();
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    ip[6] = 0x40; // don't fragment
    ip[8] = 64;
    ip[9] = IPPROTO_UDP;
    ip[12..16].copy_from_slice(&src.ip().octets());
    ip[16..20].copy_from_slice(&dst.ip().octets());
    seal_ipv4_checksum(&mut ip);
    f.extend_from_slice(&ip);
    push_udp(f, src.port(), dst.port(), payload);
}

/// Where the payload starts in a frame from [`build_ipv4`].
pub const IPV4_PAYLOAD_OFFSET: usize = ETH_HLEN + 20 + 8;

/// Where the UDP header starts in a frame from [`build_ipv6`].
const IPV6_UDP_OFFSET: usize = ETH_HLEN + 40;
/// Where the payload starts in a frame from [`build_ipv6`].
pub const IPV6_PAYLOAD_OFFSET: usize = IPV6_UDP_OFFSET + 8;

/// The one's complement sum of `bytes` as big-endian 16-bit words (an odd last byte padded
/// with zero), not yet folded.
fn sum_words(bytes: &[u8]) -> u32 {
    bytes
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w.get(1).copied().unwrap_or(0)])))
        .fold(0u32, |a, w| a.wrapping_add(w))
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The UDP checksum of an IPv6 frame from [`build_ipv6`] (IPv6 requires one), kept right while
/// only the first `head` bytes of the payload change: the sum of everything else (pseudo-header,
/// UDP header, the rest of the payload) is taken once, and each datagram adds its head.
#[derive(Debug, Clone, Copy)]
pub struct Udp6Checksum {
    rest: u32,
    head: usize,
}

impl Udp6Checksum {
    /// The sum of `frame` without its checksum field and the payload's first `head` bytes
    /// (`head` even, so the rest stays word-aligned).
    pub fn of(frame: &[u8], head: usize) -> Self {
        let udp = &frame[IPV6_UDP_OFFSET..];
        let head = head.min(udp.len() - 8) & !1;
        let mut pseudo = [0u8; 40];
        pseudo[..32].copy_from_slice(&frame[ETH_HLEN + 8..ETH_HLEN + 40]);
        pseudo[32..36].copy_from_slice(&(udp.len() as u32).to_be_bytes());
        pseudo[39] = IPPROTO_UDP;
        let rest = sum_words(&pseudo)
            .wrapping_add(sum_words(&udp[..6]))
            .wrapping_add(sum_words(&udp[8 + head..]));
        Self { rest, head }
    }

    /// Writes the checksum of `frame` (its payload head as it is now) into its UDP header.
    pub fn write(&self, frame: &mut [u8]) {
        let at = IPV6_PAYLOAD_OFFSET;
        let sum = !fold(self.rest.wrapping_add(sum_words(&frame[at..at + self.head])));
        // A computed 0 goes on the wire as 0xffff (0 means "no checksum", refused over IPv6).
        let sum = if sum == 0 { 0xffff } else { sum };
        frame[IPV6_UDP_OFFSET + 6..IPV6_UDP_OFFSET + 8].copy_from_slice(&sum.to_be_bytes());
    }
}

/// Builds the frame of one UDP datagram over IPv6, its UDP checksum filled: the sender's
/// per-flow template.
pub fn build_ipv6(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: std::net::SocketAddrV6,
    dst: std::net::SocketAddrV6,
    payload: &[u8],
) -> Vec<u8> {
    let udp_len = 8 + payload.len();
    let mut f = Vec::with_capacity(IPV6_PAYLOAD_OFFSET + payload.len());
    push_ethernet(&mut f, src_mac, dst_mac, ETH_P_IPV6);
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(udp_len as u16).to_be_bytes());
    f.extend_from_slice(&[IPPROTO_UDP, 64]);
    f.extend_from_slice(&src.ip().octets());
    f.extend_from_slice(&dst.ip().octets());
    push_udp(&mut f, src.port(), dst.port(), payload);
    Udp6Checksum::of(&f, 0).write(&mut f);
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        build_ipv4(
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            "10.0.0.1:1000".parse().unwrap(),
            "10.0.0.2:4321".parse().unwrap(),
            payload,
        )
    }

    #[test]
    fn a_built_frame_parses_back() {
        let f = frame(b"hello world");
        let v = parse(&f).unwrap();
        assert_eq!(v.payload, b"hello world");
        assert_eq!(v.dst, "10.0.0.2:4321".parse::<SocketAddr>().unwrap());
        assert_eq!(v.src, "10.0.0.1:1000".parse::<SocketAddr>().unwrap());
    }

    #[test]
    fn ethernet_padding_is_not_payload() {
        let mut f = frame(b"hi");
        f.resize(60, 0);
        assert_eq!(parse(&f).unwrap().payload, b"hi");
    }

    #[test]
    fn a_lying_ip_total_length_is_caught() {
        let mut f = frame(&[7; 32]);
        // Claim 100 more bytes than arrived, with a checksum that matches the lie.
        let total = u16::from_be_bytes([f[16], f[17]]) + 100;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        seal_ipv4_checksum(&mut f[14..34]);
        assert_eq!(parse(&f), Err(FrameError::LyingLength));
    }

    #[test]
    fn a_lying_udp_length_is_caught() {
        let mut f = frame(&[7; 32]);
        f[38..40].copy_from_slice(&200u16.to_be_bytes());
        assert_eq!(parse(&f), Err(FrameError::LyingLength));
        f[38..40].copy_from_slice(&3u16.to_be_bytes());
        assert_eq!(parse(&f), Err(FrameError::LyingLength));
    }

    #[test]
    fn ipv4_options_and_vlan_tags_are_walked() {
        let f = frame(b"payload!");
        // Insert a VLAN tag and 4 bytes of IPv4 options (NOPs).
        let mut g = f[..12].to_vec();
        g.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        g.extend_from_slice(&f[12..14]);
        let mut ip = f[14..34].to_vec();
        ip[0] = 0x46;
        let total = u16::from_be_bytes([ip[2], ip[3]]) + 4;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip.extend_from_slice(&[1, 1, 1, 1]);
        seal_ipv4_checksum(&mut ip);
        g.extend_from_slice(&ip);
        g.extend_from_slice(&f[34..]);
        assert_eq!(parse(&g).unwrap().payload, b"payload!");
    }

    #[test]
    fn a_bad_ipv4_checksum_and_fragments_are_refused() {
        let mut f = frame(b"x");
        f[22] ^= 1; // TTL changes, checksum no longer matches
        assert_eq!(parse(&f), Err(FrameError::Malformed));
        let mut f = frame(b"x");
        f[20] = 0x20; // more fragments
        seal_ipv4_checksum(&mut f[14..34]);
        assert_eq!(parse(&f), Err(FrameError::NotUdp));
    }

    #[test]
    fn an_ipv6_frames_udp_checksum_verifies_and_follows_the_payload_head() {
        let src = "[fd00::1]:5000".parse().unwrap();
        let dst = "[fd00::2]:4321".parse().unwrap();
        let mut f = build_ipv6([1; 6], [2; 6], src, dst, &[7u8; 33]);
        let verify = |f: &[u8]| {
            let udp = &f[IPV6_UDP_OFFSET..];
            let mut pseudo = f[ETH_HLEN + 8..ETH_HLEN + 40].to_vec();
            pseudo.extend_from_slice(&(udp.len() as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, IPPROTO_UDP]);
            fold(sum_words(&pseudo).wrapping_add(sum_words(udp)))
        };
        assert_eq!(verify(&f), 0xffff, "the receiver's sum over all of it is all ones");
        let v = parse(&f).unwrap();
        assert_eq!((v.src, v.dst, v.payload.len()), (src.into(), dst.into(), 33));
        let c = Udp6Checksum::of(&f, 16);
        for seq in [1u8, 200, 255] {
            f[IPV6_PAYLOAD_OFFSET..IPV6_PAYLOAD_OFFSET + 16].fill(seq);
            c.write(&mut f);
            assert_eq!(verify(&f), 0xffff, "head {seq}");
        }
    }

    #[test]
    fn ipv6_parses_and_its_lying_length_is_caught() {
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&ETH_P_IPV6.to_be_bytes());
        let mut ip = [0u8; 40];
        ip[0] = 0x60;
        ip[4..6].copy_from_slice(&12u16.to_be_bytes());
        ip[6] = 17;
        ip[39] = 1;
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[0, 1, 0, 2, 0, 12, 0, 0, b'a', b'b', b'c', b'd']);
        let v = parse(&f).unwrap();
        assert_eq!(v.payload, b"abcd");
        assert_eq!(v.dst, "[::1]:2".parse::<SocketAddr>().unwrap());
        f[14 + 5] = 13;
        assert_eq!(parse(&f), Err(FrameError::LyingLength));
    }

    proptest! {
        /// Any bytes get an answer, and a payload returned lies inside the frame.
        #[test]
        fn any_bytes_get_an_answer(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(v) = parse(&bytes) {
                prop_assert!(v.payload.len() + 42 <= bytes.len() + 8);
            }
        }

        /// Any truncation or any length field of a valid frame rewritten: never a panic, never a
        /// payload longer than what the headers and the bytes both allow.
        #[test]
        fn rewritten_lengths_are_caught(len in 0..2000usize, cut in 0..80usize, ip_total: u16, udp_len: u16) {
            let payload = vec![9u8; len];
            let mut f = frame(&payload);
            f[16..18].copy_from_slice(&ip_total.to_be_bytes());
            seal_ipv4_checksum(&mut f[14..34]);
            f[38..40].copy_from_slice(&udp_len.to_be_bytes());
            f.truncate(f.len().saturating_sub(cut));
            match parse(&f) {
                Ok(v) => {
                    prop_assert!(usize::from(ip_total) <= f.len() - 14);
                    prop_assert_eq!(v.payload.len() + 8, usize::from(udp_len));
                }
                Err(e) => prop_assert!(matches!(e, FrameError::LyingLength | FrameError::Short), "{:?}", e),
            }
        }
    }
}
