//! The counters `corelane run` reads: a sealed memfd it creates and names in CORELANE_STATS
//! (`FD:DEV:INO`). Each process that loads the library claims one fixed record; the layout is
//! `abi::stats`'s, written at exactly its offsets. Its reader bounds everything, since the
//! program can write here too.
//!
//! The fd number is only a hint: a program may have put anything there (`exec 100<file` in a
//! shell). The library maps it only if fstat names the device and inode `corelane run` gave
//! and it is large enough, and touches it with nothing but fstat and mmap (no seek, no flag).

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use core::sync::atomic::{AtomicU32, AtomicUsize};
use std::sync::OnceLock;

use crate::abi::stats as layout;
use crate::abi::{self, MAX_THREADS};
use crate::sys::{self, c_int, Area};

/// The counters' mapping, once made (it lives as long as the process).
static AREA: OnceLock<Area> = OnceLock::new();
/// This process's record's byte offset in the area, plus one (0: none).
static MINE: AtomicUsize = AtomicUsize::new(0);

/// `FD:DEV:INO` (CORELANE_STATS's value), or None if malformed.
pub fn parse_identity(text: &[u8]) -> Option<(c_int, u64, u64)> {
    let text = core::str::from_utf8(text).ok()?;
    let mut parts = text.split(':');
    let fd = parts.next()?.parse::<c_int>().ok().filter(|&fd| fd >= 0)?;
    let dev = parts.next()?.parse().ok()?;
    let ino = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((fd, dev, ino))
}

/// Maps the area at `fd` if it is still the one `corelane run` made (device, inode, size,
/// magic) and claims a record; otherwise the process runs uncounted and `fd` is left as it is.
pub fn map(fd: c_int, dev: u64, ino: u64) {
    let Some(area) = Area::map(fd, dev, ino, layout::SIZE) else { return };
    if area.u64_at(layout::HEADER_MAGIC).map(|m| m.load(Acquire)) != Some(layout::MAGIC) {
        return;
    }
    if AREA.set(area).is_ok() {
        claim_record();
    }
}

fn area() -> Option<Area> {
    AREA.get().copied()
}

/// Claims this process's record (at load and again in a forked child).
pub fn claim_record() {
    MINE.store(0, Release);
    let Some(area) = area() else { return };
    let Some(claimed) = area.u64_at(layout::HEADER_CLAIMED) else { return };
    let index = claimed.fetch_add(1, Relaxed) as usize;
    if index >= layout::MAX_RECORDS {
        return;
    }
    let offset = layout::HEADER + index * layout::RECORD;
    if let Some(pid) = area.u64_at(offset + layout::PID) {
        pid.store(u64::from(std::process::id()), Relaxed);
        MINE.store(offset + 1, Release);
    }
}

/// Word `field` (an `abi::stats` offset) of this process's record.
fn word(field: usize) -> Option<&'static core::sync::atomic::AtomicU64> {
    let mine = MINE.load(Acquire).checked_sub(1)?;
    area()?.u64_at(mine + field)
}

pub fn set_lane(mode: u64) {
    if let Some(w) = word(layout::LANE) {
        w.store(mode, Relaxed);
    }
}

pub fn set_threads(count: usize) {
    if let Some(w) = word(layout::THREADS) {
        w.store(count as u64, Relaxed);
    }
}

/// Counts one call a lane carried (`op` an `abi::op`).
pub fn count(op: u32) {
    if let Some(w) = word(layout::COUNTS + abi::kind_of(op) * 8) {
        w.fetch_add(1, Relaxed);
    }
}

/// Syscall thread `n`'s CPU time, in ns.
pub fn set_cpu(n: usize, ns: u64) {
    if let Some(w) = word(layout::CPU_NS + (n % MAX_THREADS) * 8) {
        w.store(ns, Relaxed);
    }
}

/// Called by syscall thread `n` itself, now and then and before it sleeps.
pub fn record_thread_cpu(n: usize) {
    if let Some(ns) = sys::clock_ns(sys::CLOCK_THREAD_CPUTIME_ID) {
        set_cpu(n, ns);
    }
}

/// The lane stopped carrying for `reason` (an `abi::off_reason`) at CLOCK_MONOTONIC `at_ns`;
/// the first reason is kept.
pub fn set_off(reason: u64, at_ns: u64) {
    if let (Some(r), Some(at)) = (word(layout::OFF_REASON), word(layout::OFF_AT_NS)) {
        if r.compare_exchange(0, reason, Relaxed, Relaxed).is_ok() {
            at.store(at_ns, Relaxed);
        }
    }
}

/// The last change of rights seen (an `abi::rights_change`).
pub fn set_rights_change(kind: u64) {
    if let Some(w) = word(layout::RIGHTS_CHANGE) {
        w.store(kind, Relaxed);
    }
}

/// The carriers were rebuilt after a change every thread followed.
pub fn add_rebuilt() {
    if let Some(w) = word(layout::REBUILT) {
        w.fetch_add(1, Relaxed);
    }
}

pub fn set_sqpoll_tid(tid: u64) {
    if let Some(w) = word(layout::SQPOLL_TID) {
        w.store(tid, Relaxed);
    }
}

/// Syscall thread `n`'s thread id (a 32-bit word of THREAD_TIDS).
pub fn set_thread_tid(n: usize, tid: u32) {
    let Some(mine) = MINE.load(Acquire).checked_sub(1) else { return };
    if n < MAX_THREADS {
        if let Some(w) = area().and_then(|a| a.u32_at(mine + layout::THREAD_TIDS + n * 4)) {
            w.store(tid, Relaxed);
        }
    }
}

/// A call the threads lane left to its caller on a contended syscall CPU.
pub fn count_in_place() {
    if let Some(w) = word(layout::IN_PLACE) {
        w.fetch_add(1, Relaxed);
    }
}

/// Until when `cpu` counts as contended by several processes' carriers
/// (`abi::stats::CPU_CONTENDED_UNTIL`); None without the run's area (a process alone cannot
/// see other processes' carriers).
pub fn contended_until(cpu: usize) -> Option<&'static AtomicU32> {
    let offset = layout::CPU_WORDS + cpu * layout::CPU_STRIDE + layout::CPU_CONTENDED_UNTIL;
    (cpu < layout::MAX_CPUS).then(|| area()?.u32_at(offset))?
}

/// The run's count of awake syscall threads on `cpu` (`abi::stats::CPU_WORDS`), shared by every
/// process of the run; a process without the area counts its own carriers only. The program
/// can write it too: a wrong count only makes carriers spin less or more.
pub fn awake_on(cpu: usize) -> Option<&'static AtomicU32> {
    static OWN: [AtomicU32; layout::MAX_CPUS] = [const { AtomicU32::new(0) }; layout::MAX_CPUS];
    if cpu >= layout::MAX_CPUS {
        return None;
    }
    match area() {
        Some(area) => area.u32_at(layout::CPU_WORDS + cpu * layout::CPU_STRIDE + layout::CPU_AWAKE),
        None => OWN.get(cpu),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_parses_and_hostile_text_does_not() {
        assert_eq!(parse_identity(b"100:64:12345"), Some((100, 64, 12345)));
        for bad in [&b""[..], b"100", b"100:1", b"-1:1:2", b"100:1:2:3", b"a:b:c", b"\xff"] {
            assert_eq!(parse_identity(bad), None, "{bad:?}");
        }
    }
}
