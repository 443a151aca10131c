//! What the library reads and writes of a program's descriptor sets and control messages:
//! select's fd_sets, copied so a probe never touches the program's until it is the answer,
//! and the numbers an SCM_RIGHTS message brought.

use super::*;

/// The most descriptors a select probe copies (glibc's FD_SETSIZE); more go direct.
pub const SELECT_LIMIT: c_int = 1024;
const WORDS: usize = SELECT_LIMIT as usize / 64;

/// Copies of select's three sets (a NULL one stays NULL), the first `count` bits of each.
pub struct FdSets {
    count: c_int,
    sets: [[u64; WORDS]; 3],
    given: [*mut u64; 3],
}

impl FdSets {
    /// Copies the program's sets, or None when `count` is outside 0..=SELECT_LIMIT.
    ///
    /// # Safety
    /// Each of `given` NULL or an fd_set holding at least `count` bits (select's contract).
    pub unsafe fn copy(count: c_int, given: [*mut c_void; 3]) -> Option<FdSets> {
        if !(0..=SELECT_LIMIT).contains(&count) {
            return None;
        }
        let given = given.map(|p| p.cast::<u64>());
        let mut sets = [[0u64; WORDS]; 3];
        let words = (count as usize).div_ceil(64);
        for (set, &from) in sets.iter_mut().zip(&given) {
            if !from.is_null() {
                // SAFETY: the caller's promise: `words` words of the program's set readable
                // (the kernel reads whole longs too).
                unsafe { core::ptr::copy_nonoverlapping(from, set.as_mut_ptr(), words) };
            }
        }
        Some(FdSets { count, sets, given })
    }

    /// The copies' addresses, NULL where the program gave none, for the probe.
    pub fn pointers(&mut self) -> [*mut c_void; 3] {
        let given = self.given;
        let mut out = [core::ptr::null_mut(); 3];
        for (i, set) in self.sets.iter_mut().enumerate() {
            if !given[i].is_null() {
                out[i] = set.as_mut_ptr().cast();
            }
        }
        out
    }

    /// Writes the probe's answer into the program's sets.
    ///
    /// # Safety
    /// As [`FdSets::copy`], and the sets writable.
    pub unsafe fn write_back(&self) {
        let words = (self.count as usize).div_ceil(64);
        for (set, &to) in self.sets.iter().zip(&self.given) {
            if !to.is_null() {
                // SAFETY: the caller's promise, as in `copy`.
                unsafe { core::ptr::copy_nonoverlapping(set.as_ptr(), to, words) };
            }
        }
    }
}

/// struct mmsghdr's size on 64-bit Linux (a msghdr, its length, padding).
const MMSGHDR: usize = core::mem::size_of::<Msghdr>() + 8;

/// [`received_fds`] over the first `count` messages of a recvmmsg vector.
///
/// # Safety
/// `vec` NULL or an array of at least `count` struct mmsghdr, each as `received_fds` wants
/// (recvmmsg's contract, after it returned `count`).
pub unsafe fn received_fds_each(vec: *const c_void, count: usize, mut each: impl FnMut(c_int)) {
    if vec.is_null() {
        return;
    }
    for i in 0..count {
        // SAFETY: the caller's promise: message `i` lies inside the array.
        unsafe { received_fds(vec.cast::<u8>().add(i * MMSGHDR).cast::<Msghdr>(), &mut each) };
    }
}

const SCM_RIGHTS: c_int = 1;
/// struct cmsghdr's size on 64-bit Linux (a size_t length, a level, a type).
const CMSG_HEADER: usize = 16;

/// Calls `each` with every descriptor number an SCM_RIGHTS control message in `msg` holds
/// (after a recvmsg: the kernel set `controllen` to what it wrote).
///
/// # Safety
/// `msg` NULL or a msghdr whose `control` holds `controllen` bytes (recvmsg's contract).
pub unsafe fn received_fds(msg: *const Msghdr, mut each: impl FnMut(c_int)) {
    // SAFETY: the caller's promise.
    let Some(msg) = (unsafe { msg.as_ref() }) else { return };
    if msg.control.is_null() {
        return;
    }
    let (base, total) = (msg.control.cast::<u8>(), msg.controllen);
    let mut at = 0usize;
    while at.checked_add(CMSG_HEADER).is_some_and(|end| end <= total) {
        // SAFETY: a header's 16 bytes lie inside the control buffer (checked above); read
        // unaligned, as a hostile buffer may be.
        let (len, level, kind) = unsafe {
            let h = base.add(at);
            (
                h.cast::<usize>().read_unaligned(),
                h.add(8).cast::<c_int>().read_unaligned(),
                h.add(12).cast::<c_int>().read_unaligned(),
            )
        };
        if len < CMSG_HEADER || len > total - at {
            return;
        }
        if level == SOL_SOCKET && kind == SCM_RIGHTS {
            for i in 0..(len - CMSG_HEADER) / 4 {
                // SAFETY: inside this message's `len` bytes, inside the buffer.
                each(unsafe {
                    base.add(at + CMSG_HEADER + 4 * i).cast::<c_int>().read_unaligned()
                });
            }
        }
        at = match at.checked_add(len.next_multiple_of(8)) {
            Some(next) => next,
            None => return,
        };
    }
}
