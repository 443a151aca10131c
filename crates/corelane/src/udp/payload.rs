//! The test payload every corelane sender writes and every receiver checks: a 16-byte header
//! (magic, check word, flow id, sequence number) followed by a position-only filler pattern,
//! so that loss, duplication, reordering and corruption are all detectable at the receiver.
//!
//! ```text
//! 0      2      4          8                  16
//! | magic | check | flow id | sequence number | filler ...
//! ```
//! All fields little-endian. `check` folds flow and sequence into 16 bits so that a corrupted
//! header is told apart from a foreign datagram.
//!
//! The magic says which way a datagram goes: `0xC1A7` for a request (everything a sender or
//! `udp ping` writes), `0xC1A6` for an echo's reply. The echo turns one into the other by
//! rewriting one byte in place ([`answer_in_place`]), and answers nothing that is already a
//! reply, so two echoes can never keep a datagram bouncing between them.

/// Smallest payload that holds the header.
pub const HEADER_LEN: usize = 16;
/// How many filler bytes a receiver verifies (bounded so that checking stays O(1) per datagram).
pub const CHECKED_FILLER: usize = 16;

const MAGIC: u16 = 0xC1A7;
/// The magic of a reply: the request's with its lowest bit cleared (byte 0 on the wire).
const REPLY_MAGIC: u16 = 0xC1A6;

/// What a datagram's header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub flow: u32,
    pub seq: u64,
}

/// Why a datagram is not a valid corelane payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadError {
    /// Shorter than the header.
    Short,
    /// No corelane magic: another program's datagram.
    Foreign,
    /// Magic present but check word or filler wrong: damaged on the way.
    Corrupt,
}

fn check_word(flow: u32, seq: u64) -> u16 {
    let x = u64::from(flow).rotate_left(17) ^ seq ^ 0x9E37_79B9_7F4A_7C15;
    let x = x ^ (x >> 32);
    (x ^ (x >> 16)) as u16
}

const fn filler(i: usize) -> u8 {
    (i as u8).wrapping_mul(31) ^ 0xA5
}

/// The filler bytes a receiver checks, computed once so the check is one slice compare.
const CHECKED: [u8; CHECKED_FILLER] = {
    let mut bytes = [0u8; CHECKED_FILLER];
    let mut i = 0;
    while i < CHECKED_FILLER {
        bytes[i] = filler(HEADER_LEN + i);
        i += 1;
    }
    bytes
};

/// Writes the filler pattern after the header once; [`write_header`] then rewrites only the
/// header for each datagram, so a sender touches 16 bytes per datagram whatever its size.
pub fn prefill(buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate().skip(HEADER_LEN) {
        *b = filler(i);
    }
}

/// Writes the header of datagram `seq` of `flow` at the start of `buf` (`buf.len() >= 16`).
pub fn write_header(buf: &mut [u8], flow: u32, seq: u64) {
    buf[0..2].copy_from_slice(&MAGIC.to_le_bytes());
    buf[2..4].copy_from_slice(&check_word(flow, seq).to_le_bytes());
    buf[4..8].copy_from_slice(&flow.to_le_bytes());
    buf[8..16].copy_from_slice(&seq.to_le_bytes());
}

/// Which way a datagram of corelane's payload goes, by its magic alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Request,
    Reply,
}

/// The direction of `datagram` if it is at least a header long and carries corelane's
/// magic; two byte compares, nothing else checked (the echo's classification).
pub fn direction(datagram: &[u8]) -> Option<Direction> {
    if datagram.len() < HEADER_LEN {
        return None;
    }
    match u16::from_le_bytes([datagram[0], datagram[1]]) {
        MAGIC => Some(Direction::Request),
        REPLY_MAGIC => Some(Direction::Reply),
        _ => None,
    }
}

/// Turns a request into its reply in place (one byte written): true when `datagram` was a
/// request, false (and untouched) otherwise.
pub fn answer_in_place(datagram: &mut [u8]) -> bool {
    if direction(datagram) != Some(Direction::Request) {
        return false;
    }
    datagram[..2].copy_from_slice(&REPLY_MAGIC.to_le_bytes());
    true
}

/// Checks one request (a sender's or a client's datagram) and returns its header.
pub fn read(datagram: &[u8]) -> Result<Header, PayloadError> {
    read_with(datagram, MAGIC)
}

/// Checks one reply (an echo's answer) and returns its header.
pub fn read_reply(datagram: &[u8]) -> Result<Header, PayloadError> {
    read_with(datagram, REPLY_MAGIC)
}

fn read_with(datagram: &[u8], magic: u16) -> Result<Header, PayloadError> {
    if datagram.len() < HEADER_LEN {
        return Err(PayloadError::Short);
    }
    let word = |r: std::ops::Range<usize>| -> [u8; 8] {
        let mut a = [0u8; 8];
        a[..r.len()].copy_from_slice(&datagram[r]);
        a
    };
    if u16::from_le_bytes([datagram[0], datagram[1]]) != magic {
        return Err(PayloadError::Foreign);
    }
    let check = u16::from_le_bytes([datagram[2], datagram[3]]);
    let flow = u64::from_le_bytes(word(4..8)) as u32;
    let seq = u64::from_le_bytes(word(8..16));
    if check != check_word(flow, seq) {
        return Err(PayloadError::Corrupt);
    }
    let end = datagram.len().min(HEADER_LEN + CHECKED_FILLER);
    if datagram[HEADER_LEN..end] != CHECKED[..end - HEADER_LEN] {
        return Err(PayloadError::Corrupt);
    }
    Ok(Header { flow, seq })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Every byte of a datagram comes from the network: any bytes get an answer, no panic.
        #[test]
        fn any_bytes_get_an_answer(datagram in proptest::collection::vec(any::<u8>(), 0..4096)) {
            match read(&datagram) {
                Ok(_) => prop_assert!(datagram.len() >= HEADER_LEN),
                Err(PayloadError::Short) => prop_assert!(datagram.len() < HEADER_LEN),
                Err(_) => {}
            }
        }

        #[test]
        fn round_trips(flow: u32, seq: u64, len in HEADER_LEN..2000usize) {
            let mut buf = vec![0u8; len];
            prefill(&mut buf);
            write_header(&mut buf, flow, seq);
            prop_assert_eq!(read(&buf), Ok(Header { flow, seq }));
        }

        #[test]
        fn any_flipped_checked_byte_is_caught(flow: u32, seq: u64, at in 2..32usize, bit in 0..8u8) {
            let mut buf = vec![0u8; 32];
            prefill(&mut buf);
            write_header(&mut buf, flow, seq);
            buf[at] ^= 1 << bit;
            prop_assert_eq!(read(&buf), Err(PayloadError::Corrupt));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// A request becomes a reply of the same header and bytes but the magic, and a reply
        /// is never answered again (no two echoes can bounce it).
        #[test]
        fn a_request_answers_once_and_its_reply_reads_back(flow: u32, seq: u64, len in HEADER_LEN..600usize) {
            let mut buf = vec![0u8; len];
            prefill(&mut buf);
            write_header(&mut buf, flow, seq);
            let request = buf.clone();
            prop_assert_eq!(direction(&buf), Some(Direction::Request));
            prop_assert!(answer_in_place(&mut buf));
            prop_assert_eq!(&buf[1..], &request[1..]);
            prop_assert_eq!(direction(&buf), Some(Direction::Reply));
            prop_assert_eq!(read_reply(&buf), Ok(Header { flow, seq }));
            prop_assert_eq!(read(&buf), Err(PayloadError::Foreign));
            prop_assert_eq!(read_reply(&request), Err(PayloadError::Foreign));
            prop_assert!(!answer_in_place(&mut buf));
        }

        /// Any bytes: the answer, if any, is a reply, and nothing else changes.
        #[test]
        fn any_bytes_answer_at_most_once(mut d in proptest::collection::vec(any::<u8>(), 0..64)) {
            let before = d.clone();
            let answered = answer_in_place(&mut d);
            prop_assert_eq!(answered, direction(&before) == Some(Direction::Request));
            if answered {
                prop_assert_eq!(direction(&d), Some(Direction::Reply));
                prop_assert_eq!(&d[2..], &before[2..]);
            } else {
                prop_assert_eq!(&d, &before);
            }
            prop_assert!(!answer_in_place(&mut d) || !answered);
            let _ = read_reply(&d);
        }
    }

    #[test]
    fn short_and_foreign() {
        assert_eq!(read(&[0; 8]), Err(PayloadError::Short));
        assert_eq!(read(&[0; 32]), Err(PayloadError::Foreign));
    }
}
