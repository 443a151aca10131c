//! The program's own `syscall()`: what it does to the context of its thread (a raw set*id,
//! capset, seccomp, Landlock, unshare, setns: see `rights.rs`) and to the lane's io_uring
//! descriptor (a raw close, dup2, dup3, close_range: see `uring::before_fds_replaced`).
//! Everything else passes straight on. The library's own system calls never come here
//! (`sys/kernel.rs` makes them with the instruction itself).

use crate::abi::rights_change::*;
use crate::rights;
use crate::sys::*;
use crate::uring;

const PR_SET_SECCOMP: c_long = 22;
const CLOSE_RANGE_UNSHARE: c_long = 2;
const CLOSE_RANGE_CLOEXEC: c_long = 4;

/// The change of context a successful `syscall(number, a1, a2, a3)` made to its thread alone,
/// if any (an `abi::rights_change`). `ret` is what it returned.
pub fn rights_change_of(number: c_long, a: [c_long; 3], ret: c_long) -> Option<u64> {
    let setid = [
        nr::SETUID,
        nr::SETGID,
        nr::SETREUID,
        nr::SETREGID,
        nr::SETRESUID,
        nr::SETRESGID,
        nr::SETGROUPS,
    ];
    if number == nr::SETFSUID || number == nr::SETFSGID {
        // These return the previous id, whatever happened.
        return Some(SETFSID);
    }
    if ret != 0 {
        return None;
    }
    match number {
        n if setid.contains(&n) => Some(RAW_SETID),
        n if n == nr::CAPSET => Some(CAPSET),
        n if n == nr::PRCTL && a[0] == PR_SET_SECCOMP => Some(SECCOMP),
        n if n == nr::SECCOMP => Some(SECCOMP),
        n if n == nr::LANDLOCK_RESTRICT_SELF => Some(LANDLOCK),
        n if n == nr::UNSHARE && a[0] != 0 => Some(UNSHARE),
        n if n == nr::SETNS => Some(SETNS),
        n if n == nr::CLOSE_RANGE && a[2] & CLOSE_RANGE_UNSHARE != 0 => Some(UNSHARE),
        _ => None,
    }
}

/// The fds `syscall(number, a1, a2, a3)` is about to close or replace, as (first, last).
pub fn fds_replaced_by(number: c_long, a: [c_long; 3]) -> Option<(c_int, c_int)> {
    let fd = |v: c_long| c_int::try_from(v).ok();
    match number {
        n if n == nr::CLOSE => Some((fd(a[0])?, fd(a[0])?)),
        n if (n == nr::DUP2 || n == nr::DUP3) && a[0] != a[1] => Some((fd(a[1])?, fd(a[1])?)),
        n if n == nr::CLOSE_RANGE && a[2] & CLOSE_RANGE_CLOEXEC == 0 => {
            let last = c_int::try_from(a[1] as c_uint).unwrap_or(c_int::MAX);
            Some((fd(a[0])?, last))
        }
        _ => None,
    }
}

/// `syscall()` is C-variadic, which stable Rust cannot define: it is defined with six integer
/// arguments after the number (see `real::syscall` for why that sees what the caller passed).
///
/// # Safety
/// The contract of system call `number`: what its arguments point to is valid.
#[allow(unsafe_code)] // an export (`#[no_mangle]`): the interposer's contract with C
#[no_mangle]
pub unsafe extern "C" fn syscall(
    number: c_long,
    a1: c_long,
    a2: c_long,
    a3: c_long,
    a4: c_long,
    a5: c_long,
    a6: c_long,
) -> c_long {
    if let Some((first, last)) = fds_replaced_by(number, [a1, a2, a3]) {
        uring::before_fds_replaced(first, last);
    }
    // SAFETY: the program's own arguments, under the contract it called us with.
    let ret = unsafe { real::syscall(number, [a1, a2, a3, a4, a5, a6]) };
    if let Some(kind) = rights_change_of(number, [a1, a2, a3], ret) {
        rights::changed(kind, false);
    }
    ret
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLONE_FILES: c_long = 0x400;

    #[test]
    fn raw_changes_of_rights_are_seen_and_failures_and_others_are_not() {
        assert_eq!(rights_change_of(nr::SETRESUID, [65534; 3], 0), Some(RAW_SETID));
        assert_eq!(rights_change_of(nr::SETRESUID, [65534; 3], -1), None);
        assert_eq!(rights_change_of(nr::SETFSUID, [65534, 0, 0], 0), Some(SETFSID));
        assert_eq!(rights_change_of(nr::PRCTL, [PR_SET_SECCOMP, 2, 0], 0), Some(SECCOMP));
        assert_eq!(rights_change_of(nr::PRCTL, [15, 0, 0], 0), None);
        assert_eq!(rights_change_of(nr::SECCOMP, [1, 1, 0], 0), Some(SECCOMP));
        assert_eq!(rights_change_of(nr::LANDLOCK_RESTRICT_SELF, [3, 0, 0], 0), Some(LANDLOCK));
        assert_eq!(rights_change_of(nr::UNSHARE, [CLONE_FILES, 0, 0], 0), Some(UNSHARE));
        assert_eq!(rights_change_of(nr::UNSHARE, [0, 0, 0], 0), None);
        assert_eq!(rights_change_of(nr::CLOSE_RANGE, [3, 9, 2], 0), Some(UNSHARE));
        assert_eq!(rights_change_of(nr::FUTEX, [0, 0, 0], 0), None);
    }

    #[test]
    fn closes_and_replacements_name_their_fds() {
        assert_eq!(fds_replaced_by(nr::CLOSE, [7, 0, 0]), Some((7, 7)));
        assert_eq!(fds_replaced_by(nr::DUP3, [3, 7, 0]), Some((7, 7)));
        assert_eq!(fds_replaced_by(nr::DUP3, [7, 7, 0]), None);
        assert_eq!(fds_replaced_by(nr::CLOSE_RANGE, [3, !0, 0]), Some((3, c_int::MAX)));
        assert_eq!(fds_replaced_by(nr::CLOSE_RANGE, [3, 9, CLOSE_RANGE_CLOEXEC]), None);
        assert_eq!(fds_replaced_by(nr::CLOSE, [1 << 40, 0, 0]), None);
        assert_eq!(fds_replaced_by(nr::FUTEX, [7, 7, 0]), None);
    }
}
