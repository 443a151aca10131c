//! What the library asks of an fd: its status flags and, for a socket, its type and linger;
//! and where the library's own fd goes (`move_high`).
//! Every answer comes back in a local the call fills in.

use super::*;

/// The fd's status flags (fcntl F_GETFL), or -1 with errno set.
pub fn status_flags(fd: c_int) -> c_int {
    real::fcntl(fd, F_GETFL, 0)
}

/// The socket's type (getsockopt SO_TYPE), or None with errno set (ENOTSOCK: not a socket).
pub fn socket_type(fd: c_int) -> Option<c_int> {
    let mut kind: c_int = 0;
    let mut len = core::mem::size_of::<c_int>() as SocklenT;
    // SAFETY: `kind` and `len` are valid out pointers of the sizes given.
    let rc =
        unsafe { getsockopt(fd, SOL_SOCKET, SO_TYPE, (&mut kind as *mut c_int).cast(), &mut len) };
    (rc == 0).then_some(kind)
}

/// Whether the socket has SO_LINGER on with a time: its close may wait for the peer.
pub fn lingers(fd: c_int) -> bool {
    let mut linger = Linger { onoff: 0, linger: 0 };
    let mut len = core::mem::size_of::<Linger>() as SocklenT;
    // SAFETY: `linger` and `len` are valid out pointers of the sizes given.
    let rc = unsafe {
        getsockopt(fd, SOL_SOCKET, SO_LINGER, (&mut linger as *mut Linger).cast(), &mut len)
    };
    rc == 0 && linger.onoff != 0 && linger.linger > 0
}

/// Moves `fd`, one of the library's own (close-on-exec), to the lowest free number from
/// `abi::stats::HIGH_FD` on, closing the number the kernel gave it: the lowest free one, which
/// natively is the program's next fd. Returns the fd's number now (`fd` itself where nothing
/// from HIGH_FD on is free). Keeps errno.
pub fn move_high(fd: c_int) -> c_int {
    use crate::abi::stats::HIGH_FD;
    if fd >= HIGH_FD {
        return fd;
    }
    let moved = sys_dupfd_cloexec(fd, HIGH_FD);
    if moved < 0 {
        return fd;
    }
    sys_close(fd);
    moved as c_int
}
