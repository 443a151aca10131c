//! What a syscall thread runs: every call in a form that cannot block it, so one application
//! thread's wait never stalls another's calls. Send and receive calls get MSG_DONTWAIT (and
//! sends MSG_NOSIGNAL: SIGPIPE is raised in the caller); calls with no such flag (accept,
//! connect, sendfile, the mmsg calls, MSG_WAITALL receives) run here only on non-blocking fds
//! and are declined otherwise; poll, epoll and select waits are probed with a zero timeout; a splice
//! runs here only when its caller asked it not to block and its socket end is non-blocking; a socket
//! with a linger time closes in its own thread. The caller finishes what would block itself,
//! so the kernel keeps every blocking, signal and timeout rule of its own.

use crate::abi::op::*;
use crate::sys::*;

fn fd_blocking(fd: c_int) -> bool {
    let flags = status_flags(fd);
    flags >= 0 && flags & O_NONBLOCK == 0
}

fn declined() -> Outcome {
    Outcome { ret: -1, err: 0, blocking: true, direct: true }
}

fn done(ret: i64) -> Outcome {
    let err = if ret < 0 { errno() } else { 0 };
    Outcome { ret, err, blocking: false, direct: false }
}

/// A carried splice's arguments: fd_in, off_in, fd_out, off_out, len, and its flags with
/// [`SPLICE_SOCKET_OUT`] set when the socket is fd_out.
pub const SPLICE_SOCKET_OUT: u64 = 1 << 32;

/// The socket end of a carried splice.
pub fn splice_socket(a: [u64; 6]) -> c_int {
    (if a[5] & SPLICE_SOCKET_OUT != 0 { a[2] } else { a[0] }) as c_int
}

/// A send that queued less than it was given (`ret` its answer). For SEND and WRITE the length
/// is a[2]; SENDMSG and WRITEV carry their vector's total there (the export summed it).
pub fn is_short_send(op: u32, a: [u64; 6], ret: i64) -> bool {
    matches!(op, SEND | WRITE | SENDMSG | WRITEV) && ret >= 0 && (ret as u64) < a[2]
}

/// Runs one request: the program's call, made here only in a form that cannot block.
pub fn execute(call: &Call) -> Outcome {
    let (op, a) = (call.op(), call.args());
    let fd = a[0] as c_int;
    let flags = a[3] as c_int;
    let needs_nonblocking_fd =
        matches!(op, SENDMMSG | RECVMMSG | SENDFILE | ACCEPT | CONNECT | SENDMSG | WRITEV)
            || (matches!(op, RECV | RECVMSG) && flags & MSG_WAITALL != 0);
    if needs_nonblocking_fd && fd_blocking(fd) {
        return declined();
    }
    // A splice the caller asked not to block: only its socket end could still block.
    if op == SPLICE && fd_blocking(splice_socket(a)) {
        return declined();
    }
    // A socket with SO_LINGER on: its close may wait for the peer, so it must not run here.
    if op == CLOSE && lingers(fd) {
        return declined();
    }
    let ret = call.make_nonblocking();
    let mut outcome = done(ret);
    let would_block = ret < 0 && outcome.err == EAGAIN;
    let short_send = is_short_send(op, a, ret);
    if (would_block || short_send) && !matches!(op, POLL | EPOLL | CLOSE | SELECT | SPLICE) {
        outcome.blocking = fd_blocking(fd);
    }
    outcome
}
