//! The library's constructor: reads what `corelane run` put in the environment
//! (CORELANE_SYSCALL_CPUS, CORELANE_SYSCALL_LANE, CORELANE_STATS_FD, CORELANE_NO_FOLLOW_EXEC)
//! and turns the lane on; without them the library stays a pass-through.

use core::ffi::CStr;
use core::sync::atomic::Ordering::SeqCst;

use crate::ffi::*;
use crate::lane::{self, CPUS, LANE, LANE_IDLE, MAX_THREADS, OWNER_PID, THREADS};
use crate::stats;

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = stats::record_at_exit;

fn env(name: &CStr) -> Option<&'static [u8]> {
    // SAFETY: getenv returns NULL or a NUL-terminated string that lives as long as the
    // environment entry; we read it during the constructor only, before any thread exists.
    let value = unsafe { getenv(name.as_ptr()) };
    // SAFETY: non-null, NUL-terminated (checked above).
    (!value.is_null()).then(|| unsafe { CStr::from_ptr(value) }.to_bytes())
}

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

/// Removes our entry from LD_PRELOAD so programs this one executes run without us.
fn drop_from_ld_preload() {
    let Some(list) = env(c"LD_PRELOAD") else { return };
    let kept: Vec<&[u8]> = list
        .split(|&b| b == b':' || b == b' ')
        .filter(|e| !e.is_empty() && !e.ends_with(b"libcorelane_preload.so"))
        .collect();
    let mut joined = kept.join(&b':');
    if joined.is_empty() {
        // SAFETY: a NUL-terminated literal; no other thread exists yet.
        unsafe { unsetenv(c"LD_PRELOAD".as_ptr()) };
        return;
    }
    joined.push(0);
    // SAFETY: both strings are NUL-terminated; no other thread exists yet.
    unsafe { setenv(c"LD_PRELOAD".as_ptr(), joined.as_ptr().cast(), 1) };
}

extern "C" fn init() {
    let follow_exec = env(c"CORELANE_NO_FOLLOW_EXEC") != Some(b"1");
    if !follow_exec {
        drop_from_ld_preload();
    }
    match env(c"CORELANE_SYSCALL_LANE") {
        Some(b"threads") => {}
        Some(b"uring") => lane::WANT_URING.store(true, SeqCst),
        _ => return,
    }
    let mut cpus = [0u32; MAX_THREADS];
    let Some(count) = env(c"CORELANE_SYSCALL_CPUS").and_then(|t| parse_cpus(t, &mut cpus)) else {
        return;
    };
    for (slot, cpu) in CPUS.iter().zip(cpus) {
        slot.store(cpu, SeqCst);
    }
    THREADS.store(count, SeqCst);
    let mut mine = Bits1024([0; 16]);
    // SAFETY: `mine` is a valid out mask of the size given.
    if unsafe { sched_getaffinity(0, core::mem::size_of::<Bits1024>(), &mut mine) } == 0 {
        let shared = cpus[..count].iter().any(|&c| mine.0[c as usize / 64] & 1 << (c % 64) != 0);
        lane::CALLER_SPINS.store(!shared, SeqCst);
    }
    if let Some(fd) = env(c"CORELANE_STATS_FD")
        .and_then(|t| core::str::from_utf8(t).ok())
        .and_then(|t| t.parse::<c_int>().ok())
    {
        stats::map(fd);
        if !follow_exec {
            // Programs started without the library need not hold the counters open.
            // SAFETY: F_SETFD takes an integer argument.
            unsafe { fcntl(fd, F_SETFD, FD_CLOEXEC) };
        }
    }
    lane::init_key();
    // SAFETY: getpid has no preconditions; the handler is a plain extern "C" fn.
    unsafe {
        OWNER_PID.store(getpid() as u32, SeqCst);
        pthread_atfork(None, None, Some(lane::after_fork_in_child));
    }
    LANE.store(LANE_IDLE, SeqCst);
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
