//! What the summary says of the lanes that turned themselves off: per process, why (the
//! library's [`abi::off_reason`], in words and as a JSON name), what changed a thread's
//! rights, and when, after the program's start.

use serde::Serialize;

use super::abi;
use super::stats::LaneOff;

/// One process whose lane turned itself off.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaneOffEntry {
    pub pid: u32,
    /// rights_changed, carrier_stalled, ring_closed or start_failed.
    pub reason: &'static str,
    /// What changed a thread's rights (with `rights_changed`), else null.
    pub change: Option<&'static str>,
    /// Milliseconds after the program started.
    pub after_ms: f64,
    /// The reason in words (with the change), for the text summary.
    #[serde(skip)]
    pub words: String,
}

/// An off reason's JSON name and its words; `None` for a word the library never writes.
fn off_reason(word: u64) -> Option<(&'static str, &'static str)> {
    use abi::off_reason::{CARRIER_STALLED, RIGHTS_CHANGED, RING_CLOSED, START_FAILED};
    Some(match word {
        RIGHTS_CHANGED => ("rights_changed", "a thread changed its own rights"),
        CARRIER_STALLED => ("carrier_stalled", "a request waited 1 s for a syscall thread"),
        RING_CLOSED => ("ring_closed", "the program closed the lane's io_uring"),
        START_FAILED => ("start_failed", "no syscall thread could start"),
        _ => return None,
    })
}

/// A rights change's JSON name.
fn rights_change(word: u64) -> Option<&'static str> {
    use abi::rights_change::{
        CAPSET, LANDLOCK, RAW_SETID, SECCOMP, SETFSID, SETID, SETNS, UNSHARE,
    };
    Some(match word {
        SETID => "setid",
        CAPSET => "capset",
        SETFSID => "setfsid",
        RAW_SETID => "raw_setid",
        SECCOMP => "seccomp",
        LANDLOCK => "landlock",
        UNSHARE => "unshare",
        SETNS => "setns",
        _ => return None,
    })
}

/// The summary's entries for the processes whose lane stopped, timed from `started_ns`
/// (CLOCK_MONOTONIC, the clock the library stamps with).
pub fn lane_off_entries(off: &[LaneOff], started_ns: u64) -> Vec<LaneOffEntry> {
    off.iter()
        .filter_map(|o| {
            let (reason, words) = off_reason(o.reason)?;
            let change = if reason == "rights_changed" { rights_change(o.change) } else { None };
            let after_ms = o.at_ns.saturating_sub(started_ns) as f64 / 1e6;
            let words = match change {
                Some(change) => format!("{words} ({change})"),
                None => words.to_string(),
            };
            Some(LaneOffEntry { pid: o.pid, reason, change, after_ms, words })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_names_the_reason_the_change_and_the_time_after_the_start() {
        let off = [
            LaneOff {
                pid: 123,
                reason: abi::off_reason::RIGHTS_CHANGED,
                change: abi::rights_change::CAPSET,
                at_ns: 1_012_500_000,
            },
            LaneOff {
                pid: 124,
                reason: abi::off_reason::CARRIER_STALLED,
                change: abi::rights_change::SETID,
                at_ns: 10,
            },
            LaneOff { pid: 125, reason: 99, change: 0, at_ns: 0 },
        ];
        let entries = lane_off_entries(&off, 1_000_000_000);
        let json = serde_json::to_string(&entries).unwrap();
        assert_eq!(
            json,
            r#"[{"pid":123,"reason":"rights_changed","change":"capset","after_ms":12.5},{"pid":124,"reason":"carrier_stalled","change":null,"after_ms":0.0}]"#
        );
        assert_eq!(entries[0].words, "a thread changed its own rights (capset)");
        for (word, name) in [
            (abi::off_reason::RING_CLOSED, "ring_closed"),
            (abi::off_reason::START_FAILED, "start_failed"),
        ] {
            assert_eq!(off_reason(word).unwrap().0, name);
        }
        let names: Vec<_> = (1..=8).filter_map(rights_change).collect();
        assert_eq!(
            names,
            ["setid", "capset", "setfsid", "raw_setid", "seccomp", "landlock", "unshare", "setns"]
        );
    }
}
