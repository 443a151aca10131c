//! The library's constructor: reads what `corelane run` put in the environment (abi's
//! CORELANE_* names) by walking `environ`, edits `environ` for `--no-follow-exec`, and turns
//! the lane on; without that environment the library stays a pass-through.

use core::sync::atomic::Ordering::SeqCst;

use crate::abi::{self, MAX_THREADS};
use crate::environ;
use crate::lane::{self, CPUS, THREADS};
use crate::state;
use crate::stats;
use crate::sys::*;

#[allow(unsafe_code)] // the constructor's entry in .init_array: how the loader runs it
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

#[allow(unsafe_code)] // the fini's entry in .fini_array: how the loader runs it
#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = crate::exit::record_at_exit;

/// "1,3-4" into the CPUs it names (at most MAX_THREADS; below 1024).
fn parse_cpus(text: &[u8], out: &mut [u32; MAX_THREADS]) -> Option<usize> {
    let text = core::str::from_utf8(text).ok()?;
    let mut count = 0;
    for part in text.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u32>().ok()?, b.trim().parse::<u32>().ok()?),
            None => {
                let c = part.trim().parse::<u32>().ok()?;
                (c, c)
            }
        };
        if lo > hi || hi >= 1024 {
            return None;
        }
        for cpu in lo..=hi {
            *out.get_mut(count)? = cpu;
            count += 1;
        }
    }
    (count > 0).then_some(count)
}

extern "C" fn init() {
    // Before main: the process has one thread, and `environ` is the one it started with.
    let entries = environ_entries();
    let value = |name| environ::value(&entries, name);
    if value(abi::ENV_NO_FOLLOW_EXEC) == Some(b"1") {
        environ_apply(&environ::without_library(&entries));
    }
    match value(abi::ENV_LANE) {
        Some(b"threads") => {}
        Some(b"uring") => lane::WANT_URING.store(true, SeqCst),
        _ => return,
    }
    let mut cpus = [0u32; MAX_THREADS];
    let Some(count) = value(abi::ENV_CPUS).and_then(|t| parse_cpus(t, &mut cpus)) else {
        return;
    };
    for (slot, cpu) in CPUS.iter().zip(cpus) {
        slot.store(cpu, SeqCst);
    }
    THREADS.store(count, SeqCst);
    if let Some(mine) = sched_affinity() {
        let shared = cpus[..count].iter().any(|&c| mine.0[c as usize / 64] & 1 << (c % 64) != 0);
        lane::CALLER_SPINS.store(!shared, SeqCst);
    }
    if let Some((fd, dev, ino)) = value(abi::ENV_STATS).and_then(stats::parse_identity) {
        stats::map(fd, dev, ino);
    }
    lane::init_key();
    at_fork_in_child(lane::after_fork_in_child);
    state::configure();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_and_hostile_ones_do_not() {
        let mut out = [0u32; MAX_THREADS];
        assert_eq!(parse_cpus(b"1,3-4", &mut out), Some(3));
        assert_eq!(&out[..3], &[1, 3, 4]);
        for bad in [&b""[..], b"x", b"4-1", b"1024", b"0-4096", b"1,,2", b"\xff"] {
            assert_eq!(parse_cpus(bad, &mut out), None, "{bad:?}");
        }
        // More CPUs than syscall threads allowed: refused, not truncated.
        assert_eq!(parse_cpus(b"0-16", &mut out), None);
    }
}
