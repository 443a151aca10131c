//! What a syscall thread runs: every call in a form that cannot block it, so one application
//! thread's wait never stalls another's calls. Send and receive calls get MSG_DONTWAIT (and
//! sends MSG_NOSIGNAL: SIGPIPE is raised in the caller); calls with no such flag (accept,
//! connect, sendfile, the mmsg calls, MSG_WAITALL receives) run here only on non-blocking fds
//! and are declined otherwise; poll and epoll waits are probed with a zero timeout; a socket
//! with a linger time closes in its own thread. The caller finishes what would block itself,
//! so the kernel keeps every blocking, signal and timeout rule of its own.

use crate::abi::op::*;
use crate::sys::*;

/// What a lane hands back for one call.
#[derive(Clone, Copy)]
pub struct Outcome {
    pub ret: i64,
    pub err: c_int,
    /// The fd is in blocking mode (only looked up when the call would have blocked).
    pub blocking: bool,
    /// The lane declined (the call could block a syscall thread): the caller makes it itself.
    pub direct: bool,
}

fn fd_blocking(fd: c_int) -> bool {
    // SAFETY: F_GETFL takes no pointer argument.
    let flags = unsafe { fcntl(fd, F_GETFL) };
    flags >= 0 && flags & O_NONBLOCK == 0
}

fn declined() -> Outcome {
    Outcome { ret: -1, err: 0, blocking: true, direct: true }
}

fn done(ret: i64) -> Outcome {
    let err = if ret < 0 { errno() } else { 0 };
    Outcome { ret, err, blocking: false, direct: false }
}

/// Runs one request. `args` are the caller's arguments as integers: pointers into the calling
/// process, valid while the caller waits for this call.
pub fn execute(op: u32, a: [u64; 6]) -> Outcome {
    let fd = a[0] as c_int;
    let flags = a[3] as c_int;
    let needs_nonblocking_fd =
        matches!(op, SENDMMSG | RECVMMSG | SENDFILE | ACCEPT | CONNECT | SENDMSG | WRITEV)
            || (matches!(op, RECV | RECVMSG) && flags & MSG_WAITALL != 0);
    if needs_nonblocking_fd && fd_blocking(fd) {
        return declined();
    }
    let dontwait = MSG_DONTWAIT;
    let nosignal = MSG_DONTWAIT | MSG_NOSIGNAL;
    // SAFETY: every call below is the real libc function, called with the caller's own
    // arguments, which point into memory the caller keeps alive until we answer.
    let ret: i64 = unsafe {
        match op {
            SEND | WRITE => {
                real!(sendto(c_int, *const c_void, SizeT, c_int, *const c_void, SocklenT) -> SsizeT)
                    .map_or(-1, |f| {
                        f(fd, a[1] as _, a[2] as _, flags | nosignal, a[4] as _, a[5] as _) as i64
                    })
            }
            RECV | READ => real!(
                recvfrom(c_int, *mut c_void, SizeT, c_int, *mut c_void, *mut SocklenT) -> SsizeT
            )
            .map_or(-1, |f| {
                f(fd, a[1] as _, a[2] as _, flags | dontwait, a[4] as _, a[5] as _) as i64
            }),
            SENDMSG | WRITEV => real!(sendmsg(c_int, *const Msghdr, c_int) -> SsizeT)
                .map_or(-1, |f| f(fd, a[1] as _, a[3] as c_int | nosignal) as i64),
            RECVMSG | READV => real!(recvmsg(c_int, *mut Msghdr, c_int) -> SsizeT)
                .map_or(-1, |f| f(fd, a[1] as _, a[3] as c_int | dontwait) as i64),
            SENDMMSG => real!(sendmmsg(c_int, *mut c_void, c_uint, c_int) -> c_int)
                .map_or(-1, |f| f(fd, a[1] as _, a[2] as _, flags | MSG_NOSIGNAL) as i64),
            RECVMMSG => real!(recvmmsg(c_int, *mut c_void, c_uint, c_int, *mut Timespec) -> c_int)
                .map_or(-1, |f| f(fd, a[1] as _, a[2] as _, flags, a[4] as _) as i64),
            SENDFILE => real!(sendfile(c_int, c_int, *mut i64, SizeT) -> SsizeT)
                .map_or(-1, |f| f(fd, a[1] as _, a[2] as _, a[3] as _) as i64),
            ACCEPT => real!(accept4(c_int, *mut c_void, *mut SocklenT, c_int) -> c_int)
                .map_or(-1, |f| f(fd, a[1] as _, a[2] as _, flags) as i64),
            CONNECT => real!(connect(c_int, *const c_void, SocklenT) -> c_int)
                .map_or(-1, |f| f(fd, a[1] as _, a[2] as _) as i64),
            POLL => real!(poll(*mut c_void, u64, c_int) -> c_int)
                .map_or(-1, |f| f(a[0] as _, a[1], 0) as i64),
            EPOLL => real!(epoll_wait(c_int, *mut c_void, c_int, c_int) -> c_int)
                .map_or(-1, |f| f(fd, a[1] as _, a[2] as _, 0) as i64),
            CLOSE => {
                if lingers(fd) {
                    return declined();
                }
                real!(close(c_int) -> c_int).map_or(-1, |f| f(fd) as i64)
            }
            _ => {
                set_errno(ENOSYS);
                -1
            }
        }
    };
    let mut outcome = done(ret);
    let would_block = ret < 0 && outcome.err == EAGAIN;
    let short_send = matches!(op, SEND | WRITE) && ret >= 0 && (ret as u64) < a[2];
    if (would_block || short_send) && !matches!(op, POLL | EPOLL | CLOSE) {
        outcome.blocking = fd_blocking(fd);
    }
    outcome
}

/// A socket with SO_LINGER on: its close may wait for the peer, so it must not run here.
fn lingers(fd: c_int) -> bool {
    let mut linger = Linger { onoff: 0, linger: 0 };
    let mut len = core::mem::size_of::<Linger>() as SocklenT;
    // SAFETY: `linger` and `len` are valid out pointers of the sizes given.
    let rc = unsafe {
        getsockopt(fd, SOL_SOCKET, SO_LINGER, (&mut linger as *mut Linger).cast(), &mut len)
    };
    rc == 0 && linger.onoff != 0 && linger.linger > 0
}
