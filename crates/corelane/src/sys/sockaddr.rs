//! A socket address as the kernel writes it (`sockaddr_in` / `sockaddr_in6` bytes, as
//! recvmmsg and io_uring's recvmsg leave them beside a datagram), read without unsafe code.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// The address in `bytes` (a `sockaddr` of exactly the length the kernel reported), or `None`
/// for another family or a length too short for its family.
pub(crate) fn from_bytes(bytes: &[u8]) -> Option<SocketAddr> {
    let family = i32::from(u16::from_ne_bytes(bytes.get(0..2)?.try_into().ok()?));
    let port = u16::from_be_bytes(bytes.get(2..4)?.try_into().ok()?);
    match family {
        libc::AF_INET => {
            let ip: [u8; 4] = bytes.get(4..8)?.try_into().ok()?;
            Some(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ip), port)))
        }
        libc::AF_INET6 => {
            let flow = u32::from_be_bytes(bytes.get(4..8)?.try_into().ok()?);
            let ip: [u8; 16] = bytes.get(8..24)?.try_into().ok()?;
            let scope = u32::from_ne_bytes(bytes.get(24..28)?.try_into().ok()?);
            Some(SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(ip), port, flow, scope)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What socket2 (libc's layout) writes reads back the same.
    #[test]
    fn reads_what_the_c_layout_holds() {
        for s in ["127.0.0.1:7", "[::1]:65535", "[fe80::1%3]:9", "[::ffff:10.0.0.1]:1"] {
            let addr: SocketAddr = s.parse().unwrap();
            let raw = socket2::SockAddr::from(addr);
            let bytes: Vec<u8> = raw_bytes(&raw);
            assert_eq!(from_bytes(&bytes), Some(addr), "{s}");
        }
        assert_eq!(from_bytes(&[]), None);
        assert_eq!(from_bytes(&[1, 0, 0, 0]), None, "AF_UNIX");
    }

    fn raw_bytes(raw: &socket2::SockAddr) -> Vec<u8> {
        // SAFETY: socket2 owns a sockaddr_storage at `as_ptr()` of which the first `len()`
        // bytes are the address; the borrow of `raw` keeps it alive while copied.
        unsafe { std::slice::from_raw_parts(raw.as_ptr().cast::<u8>(), raw.len() as usize) }
            .to_vec()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn any_bytes_read_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = from_bytes(&bytes);
        }

        #[test]
        fn addresses_round_trip(v6: bool, ip: u128, port: u16) {
            let addr = if v6 {
                SocketAddr::new(Ipv6Addr::from(ip).into(), port)
            } else {
                SocketAddr::new(Ipv4Addr::from(ip as u32).into(), port)
            };
            prop_assert_eq!(from_bytes(&raw_bytes(&socket2::SockAddr::from(addr))), Some(addr));
        }
    }
}
