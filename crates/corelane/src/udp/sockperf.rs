//! sockperf's message header, so corelane's echo and ping can be crossed with sockperf's
//! client and server (`--wire sockperf`): 14 bytes, big-endian — sequence number (u64),
//! flags (u16: 1 = from the client, 2 = answer me), message length (u32, the whole
//! datagram). `sockperf sr` answers a message flagged 2 with the client bit cleared, so an
//! answer is never a request: an echo that answers only requests cannot bounce one.
//! Written here from the layout on the wire (sockperf's `Message.h`), not linked.

/// Bytes of the header.
pub const HEADER_LEN: usize = 14;
const CLIENT: u16 = 1;
const PONG_REQUEST: u16 = 2;

/// Writes a client's request header for message `seq` of a `len`-byte datagram.
pub fn write_request(buf: &mut [u8], seq: u64) {
    let len = u32::try_from(buf.len()).unwrap_or(u32::MAX);
    buf[0..8].copy_from_slice(&seq.to_be_bytes());
    buf[8..10].copy_from_slice(&(CLIENT | PONG_REQUEST).to_be_bytes());
    buf[10..14].copy_from_slice(&len.to_be_bytes());
}

/// The sequence number of a server's answer, if `datagram` is one: a whole sockperf
/// message (its length field matches) with the client bit cleared.
pub fn read_answer(datagram: &[u8]) -> Option<u64> {
    let (seq, flags) = read(datagram)?;
    (flags & CLIENT == 0).then_some(seq)
}

/// What a datagram is in sockperf's wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// From a client, asking for an answer.
    Request,
    /// From a client, asking for none (sockperf's `--reply-every` skips these).
    NotAsked,
    /// From a server: an answer.
    Answer,
}

/// What `datagram` is, if it is a whole sockperf message (its length field matches).
pub fn kind(datagram: &[u8]) -> Option<Kind> {
    let (_, flags) = read(datagram)?;
    Some(match (flags & CLIENT != 0, flags & PONG_REQUEST != 0) {
        (true, true) => Kind::Request,
        (true, false) => Kind::NotAsked,
        (false, _) => Kind::Answer,
    })
}

/// Turns a client's request into the server's answer in place (as `sockperf sr`): true when
/// `datagram` is a sockperf request asking for an answer.
pub fn answer_in_place(datagram: &mut [u8]) -> bool {
    if kind(datagram) != Some(Kind::Request) {
        return false;
    }
    datagram[9] &= !(CLIENT as u8); // the low byte of the big-endian flags
    true
}

fn read(datagram: &[u8]) -> Option<(u64, u16)> {
    let header = datagram.get(..HEADER_LEN)?;
    let seq = u64::from_be_bytes(header[0..8].try_into().ok()?);
    let flags = u16::from_be_bytes(header[8..10].try_into().ok()?);
    let len = u32::from_be_bytes(header[10..14].try_into().ok()?);
    (len as usize == datagram.len()).then_some((seq, flags))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The bytes sockperf 3.7's client sent for message 7 of 64 bytes, and what its server
    /// answered (captured on loopback).
    #[test]
    fn matches_sockperf_on_the_wire() {
        let mut m = vec![0u8; 64];
        write_request(&mut m, 7);
        assert_eq!(&m[..14], &[0, 0, 0, 0, 0, 0, 0, 7, 0, 3, 0, 0, 0, 64]);
        assert_eq!(read_answer(&m), None, "a request is not an answer");
        assert!(answer_in_place(&mut m));
        assert_eq!(&m[..14], &[0, 0, 0, 0, 0, 0, 0, 7, 0, 2, 0, 0, 0, 64]);
        assert_eq!(read_answer(&m), Some(7));
        assert!(!answer_in_place(&mut m), "an answer is not answered again");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn any_bytes_are_judged_without_panic(mut d in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = read_answer(&d);
            let _ = answer_in_place(&mut d);
        }

        /// Whatever the bytes, an answer is made only of a request, changes only the client
        /// bit, reads back as the answer to that sequence number and is never answered again.
        #[test]
        fn an_answer_is_never_a_request(mut d in proptest::collection::vec(any::<u8>(), 0..40), seq: u64, len_is_right: bool, flags: u16) {
            if len_is_right && d.len() >= HEADER_LEN {
                let len = d.len() as u32;
                d[0..8].copy_from_slice(&seq.to_be_bytes());
                d[8..10].copy_from_slice(&flags.to_be_bytes());
                d[10..14].copy_from_slice(&len.to_be_bytes());
            }
            let before = d.clone();
            let was = kind(&d);
            let answered = answer_in_place(&mut d);
            prop_assert_eq!(answered, was == Some(Kind::Request));
            if answered {
                prop_assert_eq!(kind(&d), Some(Kind::Answer));
                prop_assert_eq!(read_answer(&d), Some(u64::from_be_bytes(before[0..8].try_into().unwrap())));
                prop_assert_eq!(&d[..9], &before[..9]);
                prop_assert_eq!(&d[10..], &before[10..]);
                prop_assert_eq!(d[9], before[9] & !1);
                prop_assert!(!answer_in_place(&mut d));
            } else {
                prop_assert_eq!(&d, &before);
            }
        }

        /// A client's request round-trips: its sequence number comes back in the answer.
        #[test]
        fn requests_round_trip(seq: u64, len in HEADER_LEN..2000usize) {
            let mut m = vec![0u8; len];
            write_request(&mut m, seq);
            prop_assert_eq!(kind(&m), Some(Kind::Request));
            prop_assert_eq!(read_answer(&m), None);
            prop_assert!(answer_in_place(&mut m));
            prop_assert_eq!(read_answer(&m), Some(seq));
        }
    }
}
