//! A call the program made through an export, as a lane carries it: its `abi::op` and its
//! arguments as integers, the program's pointers among them.

use crate::abi::op::*;

use super::*;

/// One call of the program's, to be carried. Only an export makes one ([`Call::new`] is
/// unsafe): it promises that the pointers among the arguments stay valid, as the C function's
/// contract says, until the call is answered. A lane keeps that promise by never answering
/// before its carrier is done with them: the request slot ([`super::Slot`]) and the ring
/// ([`super::ring`]) hand an outcome back only then. Neither `Clone` nor `Send`: it lives in
/// the export's frame, and a carrier sees it only through those two.
pub struct Call {
    op: u32,
    args: [u64; 6],
    _not_send: core::marker::PhantomData<*const ()>,
}

impl Call {
    /// The program's call `op` with `args`.
    ///
    /// # Safety
    /// Every pointer among `args` must stay valid, as the C function's contract for `op`
    /// requires (the program's own arguments, or memory of the export's frame that outlives
    /// the answer), until the call is answered.
    pub unsafe fn new(op: u32, args: [u64; 6]) -> Call {
        Call { op, args, _not_send: core::marker::PhantomData }
    }

    pub fn op(&self) -> u32 {
        self.op
    }

    /// The arguments as integers (reading them is harmless; what they point to is not read).
    pub fn args(&self) -> [u64; 6] {
        self.args
    }

    /// Makes the call with the real libc function in its form that cannot block: sends with
    /// MSG_DONTWAIT|MSG_NOSIGNAL, receives with MSG_DONTWAIT, the mmsg calls with their
    /// caller's flags (sendmmsg with MSG_NOSIGNAL), poll, epoll_wait and select (on the export's copies of
    /// its sets) with a zero timeout, splice only as asked (SPLICE_F_NONBLOCK).
    /// What else decides whether a call may run here (`exec.rs`) is the caller's. The
    /// kernel's return: a value, or -1 with errno.
    pub fn make_nonblocking(&self) -> i64 {
        let a = self.args;
        let fd = a[0] as c_int;
        let flags = a[3] as c_int;
        let dontwait = MSG_DONTWAIT;
        let nosignal = MSG_DONTWAIT | MSG_NOSIGNAL;
        // SAFETY: the program's own arguments to the call `op` it made (pointers as it passed
        // them, or the header its export built over them), valid until this call is answered
        // (`Call`'s invariant); each goes to the real function of that call, or of its message
        // form (read and write as recvfrom and sendto; readv and writev through a msghdr).
        unsafe {
            match self.op {
                SEND | WRITE => {
                    real::sendto(fd, a[1] as _, a[2] as _, flags | nosignal, a[4] as _, a[5] as _)
                        as i64
                }
                RECV | READ => {
                    real::recvfrom(fd, a[1] as _, a[2] as _, flags | dontwait, a[4] as _, a[5] as _)
                        as i64
                }
                SENDMSG | WRITEV => real::sendmsg(fd, a[1] as _, a[3] as c_int | nosignal) as i64,
                RECVMSG | READV => real::recvmsg(fd, a[1] as _, a[3] as c_int | dontwait) as i64,
                SENDMMSG => real::sendmmsg(fd, a[1] as _, a[2] as _, flags | MSG_NOSIGNAL) as i64,
                RECVMMSG => real::recvmmsg(fd, a[1] as _, a[2] as _, flags, a[4] as _) as i64,
                SENDFILE => real::sendfile(fd, a[1] as _, a[2] as _, a[3] as _) as i64,
                ACCEPT => real::accept4(fd, a[1] as _, a[2] as _, flags) as i64,
                CONNECT => real::connect(fd, a[1] as _, a[2] as _) as i64,
                POLL => real::poll(a[0] as _, a[1], 0) as i64,
                EPOLL => real::epoll_wait(fd, a[1] as _, a[2] as _, 0) as i64,
                CLOSE => real::close(fd) as i64,
                SELECT => {
                    let mut zero = Timeval { tv_sec: 0, tv_usec: 0 };
                    real::select(fd, a[1] as _, a[2] as _, a[3] as _, &mut zero) as i64
                }
                SPLICE => {
                    real::splice(fd, a[1] as _, a[2] as _, a[3] as _, a[4] as _, a[5] as u32) as i64
                }
                _ => {
                    set_errno(ENOSYS);
                    -1
                }
            }
        }
    }
}

/// The bytes a sendmsg's vector names (summed with saturation), or 0 when the header is NULL
/// or names more than IOV_MAX pieces (the kernel refuses those itself).
///
/// # Safety
/// `msg` NULL or a msghdr whose `iov` holds `iovlen` entries (sendmsg's contract).
pub unsafe fn msg_bytes(msg: *const Msghdr) -> u64 {
    // SAFETY: the caller's promise: a valid header and vector, or NULL.
    unsafe {
        let Some(msg) = msg.as_ref() else { return 0 };
        if msg.iov.is_null() || msg.iovlen > IOV_MAX {
            return 0;
        }
        (0..msg.iovlen).fold(0u64, |sum, i| sum.saturating_add((*msg.iov.add(i)).len as u64))
    }
}

/// Finishes a blocking sendmsg on a stream socket that a lane sent `done` bytes of: sends the
/// rest of the vector piece by piece with the caller's `flags` (no address: a stream socket's
/// peer is fixed; no ancillary data: it went with the first part). Returns the bytes sent
/// here, or -1 with errno when none could be.
///
/// # Safety
/// As [`msg_bytes`]; every piece readable for its length.
pub unsafe fn send_rest(fd: c_int, msg: *const Msghdr, done: u64, flags: c_int) -> isize {
    // SAFETY: the caller's promise, as in `msg_bytes`.
    let Some(msg) = (unsafe { msg.as_ref() }) else { return -1 };
    let (mut skip, mut sent) = (done, 0isize);
    for i in 0..msg.iovlen.min(IOV_MAX) {
        // SAFETY: entry `i` < iovlen of the program's vector.
        let piece = unsafe { &*msg.iov.add(i) };
        let len = piece.len as u64;
        if skip >= len {
            skip -= len;
            continue;
        }
        let start = (piece.base as usize).wrapping_add(skip as usize) as *const c_void;
        let want = (len - skip) as usize;
        skip = 0;
        // SAFETY: the rest of a piece the program gave, readable for `want` bytes.
        let n = unsafe { real::send(fd, start, want, flags) };
        if n < 0 {
            return if sent > 0 { sent } else { -1 };
        }
        sent += n;
        if (n as usize) < want {
            break;
        }
    }
    sent
}
