//! A carried call never has more rights than the same call made by its calling thread.
//!
//! On Linux credentials, capabilities, fsuid, seccomp filters, Landlock domains, namespaces
//! and the descriptor table belong to a thread; a carried call runs in another (a syscall
//! thread, or io_uring's SQPOLL thread, which keeps its ring creator's credentials and which
//! seccomp never sees). The library keeps one invariant: every thread that may carry shares
//! one context. Carriers are made lazily from a calling thread, so they start with it; every
//! libc entry that changes a thread's context is interposed here (and its `syscall()` forms in
//! `raw.rs`), and after it succeeds:
//! - the lane has not started and the process has one thread: every thread is still alike;
//! - glibc's set*id family (glibc changes every thread, syscall threads included): the
//!   threads lane carries on; an SQPOLL ring did not follow, so it is retired and the next
//!   call builds a new one from its caller's new context (counted in REBUILT);
//! - anything else (capset, setfsuid, seccomp in any form, Landlock, unshare, setns, a raw
//!   set*id): the lane stops for good in this process (OFF_REASON RIGHTS_CHANGED); a forked
//!   child, one thread again, carries again.

use core::sync::atomic::Ordering::SeqCst;

use crate::abi::off_reason::RIGHTS_CHANGED;
use crate::abi::rights_change::*;
use crate::lane;
use crate::state::{self, LANE, LANE_IDLE, LANE_STARTING};
use crate::stats;
use crate::sys::*;

const PR_SET_SECCOMP: c_int = 22;

/// The number of threads in /proc/self/stat's text (field 20, counted after the command
/// name's closing parenthesis: the name itself may hold spaces and parentheses).
pub fn threads_in_stat(text: &str) -> Option<u64> {
    let (_, rest) = text.rsplit_once(')')?;
    // Fields from 3 (state) on: num_threads is field 20.
    rest.split_whitespace().nth(17)?.parse().ok()
}

fn one_thread() -> bool {
    let text = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    threads_in_stat(&text) == Some(1)
}

/// A thread's context changed (`kind`, an `abi::rights_change`), the call having succeeded;
/// `every_thread`: glibc applied it to every thread of the process. Keeps errno.
pub fn changed(kind: u64, every_thread: bool) {
    if !state::configured() {
        return;
    }
    let saved = errno();
    let lane_state = LANE.load(SeqCst);
    if !(lane_state == LANE_IDLE && one_thread()) {
        stats::set_rights_change(kind);
        if !every_thread || lane_state == LANE_STARTING && !lane::threads_running() {
            // This thread alone changed (or a ring is being made meanwhile, with either
            // context): no carrier can match every caller any more.
            lane::stop(RIGHTS_CHANGED);
        } else {
            lane::rebuild_after_setid();
        }
    }
    set_errno(saved);
}

/// Exports a libc function that changes a thread's context: the real call, then `changed`
/// when it returned 0. `unsafe`: it takes pointers, which go to the real function untouched.
macro_rules! watched {
    ($name:ident ( $($arg:ident : $t:ty),* ), $kind:expr, $every:expr) => {
        #[allow(unsafe_code)] // an export (`#[no_mangle]`): the interposer's contract with C
        #[no_mangle]
        pub extern "C" fn $name($($arg: $t),*) -> c_int {
            let rc = real::$name($($arg),*);
            if rc == 0 {
                changed($kind, $every);
            }
            rc
        }
    };
    (unsafe $name:ident ( $($arg:ident : $t:ty),* ), $kind:expr, $every:expr) => {
        /// # Safety
        /// The C function's contract: its pointers valid for what it reads.
        #[allow(unsafe_code)] // an export (`#[no_mangle]`): the interposer's contract with C
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $t),*) -> c_int {
            // SAFETY: the program's own arguments, under the contract it called us with.
            let rc = unsafe { real::$name($($arg),*) };
            if rc == 0 {
                changed($kind, $every);
            }
            rc
        }
    };
}

watched!(setuid(uid: c_uint), SETID, true);
watched!(setgid(gid: c_uint), SETID, true);
watched!(seteuid(uid: c_uint), SETID, true);
watched!(setegid(gid: c_uint), SETID, true);
watched!(setreuid(r: c_uint, e: c_uint), SETID, true);
watched!(setregid(r: c_uint, e: c_uint), SETID, true);
watched!(setresuid(r: c_uint, e: c_uint, s: c_uint), SETID, true);
watched!(setresgid(r: c_uint, e: c_uint, s: c_uint), SETID, true);
watched!(unsafe setgroups(size: SizeT, list: *const c_uint), SETID, true);
watched!(unsafe initgroups(user: *const c_char, group: c_uint), SETID, true);
watched!(unsafe capset(header: *mut c_void, data: *const c_void), CAPSET, false);
watched!(setns(fd: c_int, kind: c_int), SETNS, false);

#[allow(unsafe_code)] // an export (`#[no_mangle]`): the interposer's contract with C
#[no_mangle]
pub extern "C" fn unshare(flags: c_int) -> c_int {
    let rc = real::unshare(flags);
    if rc == 0 && flags != 0 {
        changed(UNSHARE, false);
    }
    rc
}

/// setfsuid and setfsgid return the previous id whatever happens; asking again with -1 (which
/// changes nothing) says whether the id is now another.
fn fs_id(user: bool, id: c_uint) -> c_int {
    let Some((before, now)) = real::set_fs_id(user, id) else { return -1 };
    if before != now {
        changed(SETFSID, false);
    }
    before
}

#[allow(unsafe_code)] // an export (`#[no_mangle]`): the interposer's contract with C
#[no_mangle]
pub extern "C" fn setfsuid(id: c_uint) -> c_int {
    fs_id(true, id)
}

#[allow(unsafe_code)] // an export (`#[no_mangle]`): the interposer's contract with C
#[no_mangle]
pub extern "C" fn setfsgid(id: c_uint) -> c_int {
    fs_id(false, id)
}

/// prctl is C-variadic: defined here with all four further arguments (see `real::prctl`) and
/// forwarded whole.
///
/// # Safety
/// prctl's contract for `option`: what the further arguments point to is valid.
#[allow(unsafe_code)] // an export (`#[no_mangle]`): the interposer's contract with C
#[no_mangle]
pub unsafe extern "C" fn prctl(
    option: c_int,
    a2: c_ulong,
    a3: c_ulong,
    a4: c_ulong,
    a5: c_ulong,
) -> c_int {
    // SAFETY: the program's own arguments, under the contract it called us with.
    let rc = unsafe { real::prctl(option, a2, a3, a4, a5) };
    if rc == 0 && option == PR_SET_SECCOMP {
        changed(SECCOMP, false);
    }
    rc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_count_is_read_after_any_command_name() {
        let stat = "42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 100 1000 50";
        assert_eq!(threads_in_stat(stat), Some(3));
        assert_eq!(threads_in_stat("42 (x) S 1"), None);
        assert_eq!(threads_in_stat(""), None);
    }
}
