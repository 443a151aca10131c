//! Whether this process's lane carries calls: configured by `corelane run`'s environment,
//! started by the first carried call, stopped for good (in this process) when it could no
//! longer carry a call with its caller's rights, descriptors, or at all. A forked child starts
//! again from "configured": it has one thread, so every thread shares one context.

use core::sync::atomic::Ordering::SeqCst;
use core::sync::atomic::{AtomicBool, AtomicU32};

use crate::stats;
use crate::sys;

pub const LANE_OFF: u32 = 0;
pub const LANE_IDLE: u32 = 1;
pub const LANE_STARTING: u32 = 2;
pub const LANE_RUNNING: u32 = 3;

/// The lane's state in this process.
pub static LANE: AtomicU32 = AtomicU32::new(LANE_OFF);
/// `corelane run` asked for a lane (set once by the constructor): what a forked child returns to.
static CONFIGURED: AtomicBool = AtomicBool::new(false);
/// The process this state is of. A vfork child shares the memory but not the descriptor
/// table or the threads; a raw clone's child copies the memory but skipped the atfork
/// handler: neither may use, change or give back what the lane holds.
static OWNER_PID: AtomicU32 = AtomicU32::new(0);

/// Whether the calling process is the one this state belongs to.
pub fn in_owner() -> bool {
    std::process::id() == OWNER_PID.load(SeqCst)
}

/// Called by the constructor once the lane's settings are read.
pub fn configure() {
    OWNER_PID.store(std::process::id(), SeqCst);
    CONFIGURED.store(true, SeqCst);
    LANE.store(LANE_IDLE, SeqCst);
}

/// The lane may carry calls (configured, not stopped).
pub fn active() -> bool {
    LANE.load(SeqCst) != LANE_OFF
}

/// Stops carrying in this process, for `reason` (an `abi::off_reason`), recorded with the time.
/// Whatever held the lane (syscall threads, a ring) is the caller's to retire.
pub fn stop(reason: u64) {
    LANE.store(LANE_OFF, SeqCst);
    stats::set_off(reason, sys::monotonic_ns());
}

/// In a forked child: configured again, not started (its first call starts its own lane).
pub fn after_fork_in_child() {
    OWNER_PID.store(std::process::id(), SeqCst);
    if CONFIGURED.load(SeqCst) {
        LANE.store(LANE_IDLE, SeqCst);
    }
}

/// `corelane run` asked for a lane in this process.
pub fn configured() -> bool {
    CONFIGURED.load(SeqCst) && in_owner()
}
