//! CPU time of the calling thread or process (getrusage), the receiver-side cost measure that
//! stays meaningful when the sender, not the receiver, is the bottleneck.

use std::time::Duration;

use super::syscall;

/// User and system CPU time consumed so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuUsage {
    pub user: Duration,
    pub system: Duration,
}

fn tv(t: libc::timeval) -> Duration {
    Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000)
}

fn rusage(who: libc::c_int) -> CpuUsage {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // getrusage only fails for an invalid `who` or pointer; both are correct here.
    // SAFETY: the kernel fills the one rusage `ru` points at.
    match syscall!(getrusage(who, ru.as_mut_ptr())) {
        Ok(_) => {
            // SAFETY: getrusage returned 0, so it filled the whole struct.
            let ru = unsafe { ru.assume_init() };
            CpuUsage { user: tv(ru.ru_utime), system: tv(ru.ru_stime) }
        }
        Err(_) => CpuUsage::default(),
    }
}

/// CPU time of the calling thread (RUSAGE_THREAD).
pub fn thread() -> CpuUsage {
    rusage(libc::RUSAGE_THREAD)
}

/// CPU time of every child waited for, and of their waited-for descendants (RUSAGE_CHILDREN).
pub fn children() -> CpuUsage {
    rusage(libc::RUSAGE_CHILDREN)
}

/// CPU time of the whole process, all threads (RUSAGE_SELF).
pub fn process() -> CpuUsage {
    rusage(libc::RUSAGE_SELF)
}
