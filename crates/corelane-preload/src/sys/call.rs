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
    /// caller's flags (sendmmsg with MSG_NOSIGNAL), poll and epoll_wait with a zero timeout.
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
                _ => {
                    set_errno(ENOSYS);
                    -1
                }
            }
        }
    }
}
