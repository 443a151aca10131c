//! The uring lane: the same non-blocking calls submitted to one io_uring per process whose
//! SQPOLL thread (the kernel's own syscall thread, `iou-sqp-PID`) is pinned to the first
//! syscall CPU (IORING_SETUP_SQPOLL|SQ_AFF). Fallbacks, each recorded for `corelane run`: the
//! kernel refuses SQPOLL → a plain ring, each submission an io_uring_enter from the caller;
//! no io_uring that can be restricted (below) → the threads lane. Only what io_uring runs
//! without parking it on its poller goes there; each operation, what it carries, and why it
//! never blocks the SQPOLL thread:
//! - SEND, RECV: send/recv/read/write on sockets, no address, with MSG_DONTWAIT: the socket
//!   answers at once (data, or EAGAIN, which MSG_DONTWAIT makes the completion, not a wait);
//! - SENDMSG, RECVMSG: sendmsg/recvmsg (addresses and control data included), readv/writev on
//!   sockets, and sendto/recvfrom with an address (a header built on the caller's stack, kept
//!   until the completion), with MSG_DONTWAIT, likewise;
//! - ACCEPT: accept/accept4 with IORING_ACCEPT_DONTWAIT (Linux 6.10): nothing pending is
//!   EAGAIN at once instead of a poll armed for the next connection; an older kernel refuses
//!   the flag (EINVAL) and accepts go direct from then on.
//!
//! EAGAIN on a blocking socket, and the rest of a short send on a blocking stream socket, are
//! finished by the caller with its own blocking call (so signals and timeouts stay the
//! kernel's). MSG_WAITALL receives, connect, close, sendfile, the mmsg calls, splice and the
//! waits go direct in this lane. Threads submit under a spin lock (a few stores); whichever
//! waiting thread gets the completion lock hands every completion to its slot.
//!
//! The ring is the process's alone. SQPOLL's thread runs every SQE with the credentials of
//! the process that made the ring (root, for a root program), so: the ring is created
//! disabled and enabled only after IORING_REGISTER_RESTRICTIONS limits it to the lane's five
//! operations (no SQE flags, no later registration); both mappings are MADV_DONTFORK; and a
//! forked child closes the fd (and unmaps what it still inherited) in its atfork handler. A
//! child made by a raw clone keeps the fd (Linux has no close-on-fork), and with it a ring
//! that refuses anything but send, receive and accept on the parent's descriptors.
//!
//! The ring itself (its memory, submission, completion, retirement) is `sys::ring`.

use core::sync::atomic::Ordering::{Relaxed, SeqCst};
use core::sync::atomic::{AtomicU32, AtomicU64};

use crate::abi::off_reason::RING_CLOSED;
use crate::state;
use crate::stats;
use crate::sys::ring::{self, Waited};
use crate::sys::*;

/// How the ring was set up (recorded in the process's counters record).
pub use crate::abi::lane_mode::{
    URING_PLAIN as MODE_PLAIN, URING_SQPOLL as MODE_SQPOLL, URING_UNAVAILABLE as MODE_UNAVAILABLE,
};

static SQPOLL_TID: AtomicU64 = AtomicU64::new(0);
/// The thread that made the ring: its descriptor table is the ring's (SQPOLL's thread shares it).
static CREATOR_TID: AtomicU32 = AtomicU32::new(0);

/// Sets the ring up; returns the mode, or MODE_UNAVAILABLE (the caller starts threads). A ring
/// that cannot be restricted is never used.
pub fn start(cpu: u32) -> u64 {
    let Some(sqpoll) = ring::create(cpu) else {
        return MODE_UNAVAILABLE;
    };
    CREATOR_TID.store(sys_gettid(), SeqCst);
    SQPOLL_TID.store(0, SeqCst);
    if sqpoll {
        // The poller names itself `iou-sqp-PID` when it first runs, which may be a moment
        // after the setup returns: look for it for at most 50 ms, so `corelane run` can read
        // its CPU time from /proc whatever way the process ends.
        for _ in 0..200 {
            if let Some(tid) = sqpoll_tid() {
                stats::set_sqpoll_tid(tid);
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(250));
        }
        MODE_SQPOLL
    } else {
        MODE_PLAIN
    }
}

/// In a forked child: the parent's ring is not ours (`ring::forget_after_fork`).
pub fn forget_after_fork() {
    ring::forget_after_fork();
    SQPOLL_TID.store(0, SeqCst);
}

/// Retires the ring (`ring::retire`); returns whether it was released.
pub fn retire(close_fd: bool) -> bool {
    ring::retire(close_fd)
}

/// Before the program closes or replaces fds `first..=last`: if the ring's fd is among them
/// and is still the ring (device, inode, restricted), the ring is retired (its fd left for
/// the program's call) and the lane stops in this process. The program's call then proceeds
/// as it would have.
pub fn before_fds_replaced(first: c_int, last: c_int) {
    let Some(fd) = ring::fd_among(first, last) else { return };
    if !state::in_owner() {
        return;
    }
    if ring::is_ours(fd) {
        lose_ring(false);
    }
}

/// The ring is gone or going: the lane stops carrying in this process (RING_CLOSED).
fn lose_ring(close_fd: bool) {
    state::stop(RING_CLOSED);
    retire(close_fd);
}

/// The thread whose descriptor table the ring's calls use: SQPOLL's thread (it shares its
/// creator's), or the creator's.
pub fn carrier_tid() -> u32 {
    match SQPOLL_TID.load(Relaxed) {
        0 => CREATOR_TID.load(Relaxed),
        tid => tid as u32,
    }
}

/// Runs `call` for the caller holding slot `index` through the ring, or None: the caller
/// makes the call itself.
pub fn run(call: &Call, index: usize) -> Option<Outcome> {
    match ring::run(call, index)? {
        Waited::Done(outcome) => Some(outcome),
        Waited::RingLost => {
            // Closed behind the library's back (a raw system call it did not see). Residual:
            // the SQE stays in a ring nobody can wake and is never run; the caller makes the
            // call itself.
            lose_ring(false);
            None
        }
    }
}

/// The SQPOLL thread's id, found once in /proc/self/task by its name (iou-sqp-PID).
pub fn sqpoll_tid() -> Option<u64> {
    let known = SQPOLL_TID.load(Relaxed);
    if known != 0 {
        return Some(known);
    }
    // A retired ring's thread may linger a moment: the newest (largest id) is this ring's.
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let tid = tasks
        .flatten()
        .filter(|task| {
            let comm = std::fs::read(task.path().join("comm")).unwrap_or_default();
            comm.starts_with(b"iou-sqp")
        })
        .filter_map(|task| task.file_name().to_str()?.parse::<u64>().ok())
        .max()?;
    SQPOLL_TID.store(tid, Relaxed);
    Some(tid)
}

/// The SQPOLL thread's CPU time (its sum_exec_runtime, from schedstat), in ns.
pub fn sqpoll_cpu_ns() -> Option<u64> {
    let tid = SQPOLL_TID.load(Relaxed);
    if tid == 0 {
        return None;
    }
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    text.split_whitespace().next()?.parse().ok()
}
