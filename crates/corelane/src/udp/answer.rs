//! Which datagrams `udp echo` answers: requests in corelane's payload or sockperf's header,
//! each turned into its reply in place (corelane: one magic byte; sockperf: the client bit),
//! so the buffer that came in is the buffer sent back. Replies, sockperf messages that ask
//! for no answer and anything else are not answered: an answer is never a request, so two
//! echoes (or an echo and itself) cannot keep a datagram going between them.

use super::payload::{self, Direction};
use super::{sockperf, Wire};

/// What the echo does with one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A request, now its reply (edited in place): send it back.
    Answer,
    /// Already a reply (corelane's reply magic, or a sockperf answer).
    Reply,
    /// A sockperf client's message that asks for no answer.
    NotAsked,
    /// Neither wire's request: too short, another program's, or a wire not accepted.
    Unrecognised,
}

/// Classifies `datagram` and, if it is a request of a wire `wire` accepts (`None`: both),
/// turns it into its reply in place. A few byte compares; no other byte is read.
pub fn answer_in_place(datagram: &mut [u8], wire: Option<Wire>) -> Verdict {
    match payload::direction(datagram) {
        Some(Direction::Reply) => Verdict::Reply,
        Some(Direction::Request) if wire != Some(Wire::Sockperf) => {
            payload::answer_in_place(datagram);
            Verdict::Answer
        }
        Some(Direction::Request) => Verdict::Unrecognised,
        None if wire == Some(Wire::Corelane) => Verdict::Unrecognised,
        None => match sockperf::kind(datagram) {
            Some(sockperf::Kind::Request) => {
                sockperf::answer_in_place(datagram);
                Verdict::Answer
            }
            Some(sockperf::Kind::NotAsked) => Verdict::NotAsked,
            Some(sockperf::Kind::Answer) => Verdict::Reply,
            None => Verdict::Unrecognised,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn wires() -> impl Strategy<Value = Option<Wire>> {
        prop_oneof![Just(None), Just(Some(Wire::Corelane)), Just(Some(Wire::Sockperf))]
    }

    #[test]
    fn both_wires_are_answered_once_and_replies_never() {
        let mut corelane = vec![0u8; 64];
        payload::prefill(&mut corelane);
        payload::write_header(&mut corelane, 3, 9);
        let mut sp = vec![0u8; 64];
        sockperf::write_request(&mut sp, 9);
        for wire in [None, Some(Wire::Corelane)] {
            let mut d = corelane.clone();
            assert_eq!(answer_in_place(&mut d, wire), Verdict::Answer);
            assert_eq!(answer_in_place(&mut d, wire), Verdict::Reply);
        }
        assert_eq!(
            answer_in_place(&mut corelane.clone(), Some(Wire::Sockperf)),
            Verdict::Unrecognised
        );
        for wire in [None, Some(Wire::Sockperf)] {
            let mut d = sp.clone();
            assert_eq!(answer_in_place(&mut d, wire), Verdict::Answer);
            assert_eq!(answer_in_place(&mut d, wire), Verdict::Reply);
        }
        assert_eq!(answer_in_place(&mut sp.clone(), Some(Wire::Corelane)), Verdict::Unrecognised);
        sp[9] = 1; // from a client, asking for no answer
        assert_eq!(answer_in_place(&mut sp, None), Verdict::NotAsked);
        assert_eq!(answer_in_place(&mut [0u8; 64], None), Verdict::Unrecognised);
        assert_eq!(answer_in_place(&mut [], None), Verdict::Unrecognised);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// Any bytes, any wire: no panic; an answer changes at most one byte and is never
        /// answered again (by any echo, whatever wire it accepts); anything else is untouched.
        #[test]
        fn an_answer_is_never_answered_again(
            mut d in proptest::collection::vec(any::<u8>(), 0..48),
            magic in prop_oneof![Just(None), Just(Some(0xA7u8)), Just(Some(0xA6u8))],
            sockperf_len: bool,
            wire in wires(),
            again in wires(),
        ) {
            if let (Some(m), true) = (magic, d.len() >= 2) {
                d[0] = m;
                d[1] = 0xC1;
            }
            if sockperf_len && d.len() >= sockperf::HEADER_LEN {
                let len = d.len() as u32;
                d[10..14].copy_from_slice(&len.to_be_bytes());
            }
            let before = d.clone();
            let verdict = answer_in_place(&mut d, wire);
            let changed = d.iter().zip(&before).filter(|(a, b)| a != b).count();
            if verdict == Verdict::Answer {
                prop_assert_eq!(changed, 1);
                prop_assert_ne!(answer_in_place(&mut d.clone(), again), Verdict::Answer);
            } else {
                prop_assert_eq!(changed, 0);
            }
        }
    }
}
