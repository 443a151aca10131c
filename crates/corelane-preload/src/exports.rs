//! The interposed functions. Each makes the call itself (the real libc function) when the lane
//! is off, the fd is not a socket, or the syscall thread declines; otherwise it hands the call
//! to the lane and finishes what the non-blocking attempt could not (see `exec.rs`).
//! errno: unchanged on success, the call's own on failure.

use crate::abi::op::*;
use crate::lane;
use crate::sockets;
use crate::state::active;
use crate::sys::*;
use crate::uring;

/// Delegates one socket call (or makes it directly while the lane is off). `direct(done)` makes
/// the call itself, skipping the first `done` bytes (only a short send on a blocking stream
/// socket continues past 0). `pipe`: the caller did not ask for MSG_NOSIGNAL, so EPIPE raises
/// SIGPIPE in the calling thread as the kernel would have.
fn io(op: u32, args: [u64; 6], pipe: bool, direct: impl Fn(usize) -> isize) -> isize {
    if !active() {
        return direct(0);
    }
    let saved = errno();
    let fd = args[0] as c_int;
    let outcome = match lane::delegate(op, args) {
        Some(o) if !o.direct => o,
        _ => {
            set_errno(saved);
            return direct(0);
        }
    };
    if outcome.ret >= 0 {
        let sent = outcome.ret as usize;
        let short = matches!(op, SEND | WRITE) && (sent as u64) < args[2];
        if short && outcome.blocking && sockets::is_stream(fd) {
            // A blocking stream send queues everything or is interrupted: finish it here.
            set_errno(saved);
            let rest = direct(sent);
            set_errno(saved);
            return if rest >= 0 { sent as isize + rest } else { sent as isize };
        }
        set_errno(saved);
        return outcome.ret as isize;
    }
    match outcome.err {
        EAGAIN if outcome.blocking => {
            set_errno(saved);
            direct(0)
        }
        ENOTSOCK if matches!(op, READ | WRITE | READV | WRITEV) => {
            sockets::mark_other(fd);
            set_errno(saved);
            direct(0)
        }
        EPIPE if pipe => {
            // SAFETY: signals the calling thread itself; SIGPIPE is a valid signal.
            unsafe { pthread_kill(pthread_self(), SIGPIPE) };
            set_errno(EPIPE);
            -1
        }
        err => {
            set_errno(err);
            -1
        }
    }
}

/// A wait (poll, epoll): probed on the syscall thread with a zero timeout (made directly while
/// the lane is off); when nothing is ready and the caller would wait, it waits itself, so
/// signals and timeouts are the kernel's.
fn probe(op: u32, args: [u64; 6], zero_timeout: bool, direct: impl Fn() -> c_int) -> c_int {
    if !active() {
        return direct();
    }
    let saved = errno();
    match lane::delegate(op, args) {
        Some(o) if !o.direct && (o.ret != 0 || zero_timeout) => {
            set_errno(if o.ret < 0 { o.err } else { saved });
            o.ret as c_int
        }
        _ => {
            set_errno(saved);
            direct()
        }
    }
}

fn skip(buf: *const c_void, done: usize) -> *mut c_void {
    (buf as usize).wrapping_add(done) as *mut c_void
}

fn no_signal(flags: c_int) -> bool {
    flags & MSG_NOSIGNAL != 0
}

#[no_mangle]
pub extern "C" fn send(fd: c_int, buf: *const c_void, len: SizeT, flags: c_int) -> SsizeT {
    let direct = |done: usize| {
        // SAFETY: the caller's arguments; `done` <= len bytes of `buf` were already sent.
        unsafe {
            real!(send(c_int, *const c_void, SizeT, c_int) -> SsizeT)
                .map_or(-1, |f| f(fd, skip(buf, done), len - done, flags))
        }
    };
    let args = [fd as u64, buf as u64, len as u64, flags as u64, 0, 0];
    io(SEND, args, !no_signal(flags), direct)
}

#[no_mangle]
pub extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    len: SizeT,
    flags: c_int,
    addr: *const c_void,
    addr_len: SocklenT,
) -> SsizeT {
    let direct = |done: usize| {
        // SAFETY: the caller's arguments; `done` <= len bytes of `buf` were already sent.
        unsafe {
            real!(sendto(c_int, *const c_void, SizeT, c_int, *const c_void, SocklenT) -> SsizeT)
                .map_or(-1, |f| f(fd, skip(buf, done), len - done, flags, addr, addr_len))
        }
    };
    let args = [fd as u64, buf as u64, len as u64, flags as u64, addr as u64, addr_len as u64];
    io(SEND, args, !no_signal(flags), direct)
}

#[no_mangle]
pub extern "C" fn recv(fd: c_int, buf: *mut c_void, len: SizeT, flags: c_int) -> SsizeT {
    let direct = |_| {
        // SAFETY: the caller's own arguments.
        unsafe {
            real!(recv(c_int, *mut c_void, SizeT, c_int) -> SsizeT)
                .map_or(-1, |f| f(fd, buf, len, flags))
        }
    };
    io(RECV, [fd as u64, buf as u64, len as u64, flags as u64, 0, 0], false, direct)
}

#[no_mangle]
pub extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    len: SizeT,
    flags: c_int,
    addr: *mut c_void,
    addr_len: *mut SocklenT,
) -> SsizeT {
    let direct = |_| {
        // SAFETY: the caller's own arguments.
        unsafe {
            real!(recvfrom(c_int, *mut c_void, SizeT, c_int, *mut c_void, *mut SocklenT) -> SsizeT)
                .map_or(-1, |f| f(fd, buf, len, flags, addr, addr_len))
        }
    };
    let args = [fd as u64, buf as u64, len as u64, flags as u64, addr as u64, addr_len as u64];
    io(RECV, args, false, direct)
}

/// sendmsg and recvmsg: one message header, the same arguments both ways (`send` picks the
/// call, and SIGPIPE unless the caller asked for MSG_NOSIGNAL).
fn message(send: bool, fd: c_int, msg: *const Msghdr, flags: c_int) -> SsizeT {
    let direct = |_| {
        // SAFETY: the caller's own arguments, to the real function of the caller's call
        // (recvmsg's header was the caller's mutable one).
        unsafe {
            if send {
                real!(sendmsg(c_int, *const Msghdr, c_int) -> SsizeT)
                    .map_or(-1, |f| f(fd, msg, flags))
            } else {
                real!(recvmsg(c_int, *mut Msghdr, c_int) -> SsizeT)
                    .map_or(-1, |f| f(fd, msg as *mut Msghdr, flags))
            }
        }
    };
    let op = if send { SENDMSG } else { RECVMSG };
    let pipe = send && !no_signal(flags);
    io(op, [fd as u64, msg as u64, 0, flags as u64, 0, 0], pipe, direct)
}

#[no_mangle]
pub extern "C" fn sendmsg(fd: c_int, msg: *const Msghdr, flags: c_int) -> SsizeT {
    message(true, fd, msg, flags)
}

#[no_mangle]
pub extern "C" fn recvmsg(fd: c_int, msg: *mut Msghdr, flags: c_int) -> SsizeT {
    message(false, fd, msg, flags)
}

#[no_mangle]
pub extern "C" fn sendmmsg(fd: c_int, vec: *mut c_void, vlen: c_uint, flags: c_int) -> c_int {
    let direct = |_| {
        // SAFETY: the caller's own arguments.
        unsafe {
            real!(sendmmsg(c_int, *mut c_void, c_uint, c_int) -> c_int)
                .map_or(-1, |f| f(fd, vec, vlen, flags)) as isize
        }
    };
    let args = [fd as u64, vec as u64, vlen as u64, flags as u64, 0, 0];
    io(SENDMMSG, args, !no_signal(flags), direct) as c_int
}

#[no_mangle]
pub extern "C" fn recvmmsg(
    fd: c_int,
    vec: *mut c_void,
    vlen: c_uint,
    flags: c_int,
    timeout: *mut Timespec,
) -> c_int {
    let direct = |_| {
        // SAFETY: the caller's own arguments.
        unsafe {
            real!(recvmmsg(c_int, *mut c_void, c_uint, c_int, *mut Timespec) -> c_int)
                .map_or(-1, |f| f(fd, vec, vlen, flags, timeout)) as isize
        }
    };
    let args = [fd as u64, vec as u64, vlen as u64, flags as u64, timeout as u64, 0];
    io(RECVMMSG, args, false, direct) as c_int
}

#[no_mangle]
pub extern "C" fn read(fd: c_int, buf: *mut c_void, len: SizeT) -> SsizeT {
    let direct = |_| {
        // SAFETY: the caller's own arguments.
        unsafe { real!(read(c_int, *mut c_void, SizeT) -> SsizeT).map_or(-1, |f| f(fd, buf, len)) }
    };
    if !active() || !sockets::is_socket(fd) {
        return direct(0);
    }
    io(READ, [fd as u64, buf as u64, len as u64, 0, 0, 0], false, direct)
}

#[no_mangle]
pub extern "C" fn write(fd: c_int, buf: *const c_void, len: SizeT) -> SsizeT {
    let direct = |done: usize| {
        // SAFETY: the caller's arguments; `done` <= len bytes of `buf` were already sent.
        unsafe {
            real!(write(c_int, *const c_void, SizeT) -> SsizeT)
                .map_or(-1, |f| f(fd, skip(buf, done), len - done))
        }
    };
    if !active() || !sockets::is_socket(fd) {
        return direct(0);
    }
    io(WRITE, [fd as u64, buf as u64, len as u64, 0, 0, 0], true, direct)
}

/// readv and writev: on a socket, delegated as a recvmsg/sendmsg of the same vector (the two
/// share a signature, so one body serves both; `write` picks the call and SIGPIPE).
fn vectored(write: bool, fd: c_int, iov: *const Iovec, count: c_int) -> SsizeT {
    let direct = |_| {
        // SAFETY: the caller's own arguments, to the real function of the caller's call.
        unsafe {
            let real = if write {
                real!(writev(c_int, *const Iovec, c_int) -> SsizeT)
            } else {
                real!(readv(c_int, *const Iovec, c_int) -> SsizeT)
            };
            real.map_or(-1, |f| f(fd, iov, count))
        }
    };
    if !active() || count < 0 || !sockets::is_socket(fd) {
        return direct(0);
    }
    let msg = Msghdr {
        name: core::ptr::null_mut(),
        namelen: 0,
        iov: iov as *mut Iovec,
        iovlen: count as SizeT,
        control: core::ptr::null_mut(),
        controllen: 0,
        flags: 0,
    };
    let op = if write { WRITEV } else { READV };
    io(op, [fd as u64, &msg as *const Msghdr as u64, 0, 0, 0, 0], write, direct)
}

#[no_mangle]
pub extern "C" fn readv(fd: c_int, iov: *const Iovec, count: c_int) -> SsizeT {
    vectored(false, fd, iov, count)
}

#[no_mangle]
pub extern "C" fn writev(fd: c_int, iov: *const Iovec, count: c_int) -> SsizeT {
    vectored(true, fd, iov, count)
}

#[no_mangle]
pub extern "C" fn sendfile(out_fd: c_int, in_fd: c_int, offset: *mut i64, count: SizeT) -> SsizeT {
    let direct = |_| {
        // SAFETY: the caller's own arguments.
        unsafe {
            real!(sendfile(c_int, c_int, *mut i64, SizeT) -> SsizeT)
                .map_or(-1, |f| f(out_fd, in_fd, offset, count))
        }
    };
    if !active() || !sockets::is_socket(out_fd) {
        return direct(0);
    }
    let args = [out_fd as u64, in_fd as u64, offset as u64, count as u64, 0, 0];
    io(SENDFILE, args, true, direct)
}

#[no_mangle]
pub extern "C" fn sendfile64(
    out_fd: c_int,
    in_fd: c_int,
    offset: *mut i64,
    count: SizeT,
) -> SsizeT {
    sendfile(out_fd, in_fd, offset, count)
}

fn accepted(fd: c_int) -> c_int {
    if fd >= 0 {
        sockets::mark_socket(fd);
    }
    fd
}

#[no_mangle]
pub extern "C" fn accept4(fd: c_int, addr: *mut c_void, len: *mut SocklenT, flags: c_int) -> c_int {
    let direct = |_| {
        // SAFETY: the caller's own arguments.
        unsafe {
            real!(accept4(c_int, *mut c_void, *mut SocklenT, c_int) -> c_int)
                .map_or(-1, |f| f(fd, addr, len, flags)) as isize
        }
    };
    let args = [fd as u64, addr as u64, len as u64, flags as u64, 0, 0];
    accepted(io(ACCEPT, args, false, direct) as c_int)
}

#[no_mangle]
pub extern "C" fn accept(fd: c_int, addr: *mut c_void, len: *mut SocklenT) -> c_int {
    let direct = |_| {
        // SAFETY: the caller's own arguments.
        unsafe {
            real!(accept(c_int, *mut c_void, *mut SocklenT) -> c_int)
                .map_or(-1, |f| f(fd, addr, len)) as isize
        }
    };
    accepted(io(ACCEPT, [fd as u64, addr as u64, len as u64, 0, 0, 0], false, direct) as c_int)
}

#[no_mangle]
pub extern "C" fn connect(fd: c_int, addr: *const c_void, len: SocklenT) -> c_int {
    let direct = |_| {
        // SAFETY: the caller's own arguments.
        unsafe {
            real!(connect(c_int, *const c_void, SocklenT) -> c_int).map_or(-1, |f| f(fd, addr, len))
                as isize
        }
    };
    io(CONNECT, [fd as u64, addr as u64, len as u64, 0, 0, 0], false, direct) as c_int
}

#[no_mangle]
pub extern "C" fn socket(domain: c_int, kind: c_int, protocol: c_int) -> c_int {
    // SAFETY: the caller's own arguments.
    let fd = unsafe {
        real!(socket(c_int, c_int, c_int) -> c_int).map_or(-1, |f| f(domain, kind, protocol))
    };
    accepted(fd)
}

#[no_mangle]
pub extern "C" fn close(fd: c_int) -> c_int {
    uring::before_fds_replaced(fd, fd);
    let direct = |_| {
        // SAFETY: the caller's own argument.
        unsafe { real!(close(c_int) -> c_int).map_or(-1, |f| f(fd)) as isize }
    };
    let was_socket = sockets::known_socket(fd);
    sockets::forget(fd);
    if !active() || !was_socket {
        return direct(0) as c_int;
    }
    io(CLOSE, [fd as u64, 0, 0, 0, 0, 0], false, direct) as c_int
}

#[no_mangle]
pub extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    if old != new {
        uring::before_fds_replaced(new, new);
    }
    sockets::forget(new);
    // SAFETY: the caller's own arguments.
    unsafe { real!(dup2(c_int, c_int) -> c_int).map_or(-1, |f| f(old, new)) }
}

#[no_mangle]
pub extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    if old != new {
        uring::before_fds_replaced(new, new);
    }
    sockets::forget(new);
    // SAFETY: the caller's own arguments.
    unsafe { real!(dup3(c_int, c_int, c_int) -> c_int).map_or(-1, |f| f(old, new, flags)) }
}

const CLOSE_RANGE_UNSHARE: c_uint = 2;
const CLOSE_RANGE_CLOEXEC: c_uint = 4;

#[no_mangle]
pub extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_uint) -> c_int {
    if flags & CLOSE_RANGE_CLOEXEC == 0 {
        let fd = |n: c_uint| c_int::try_from(n).unwrap_or(c_int::MAX);
        uring::before_fds_replaced(fd(first), fd(last));
    }
    // SAFETY: the real function under its C signature, integer arguments.
    let rc = unsafe {
        real!(close_range(c_uint, c_uint, c_uint) -> c_int).map_or(-1, |f| f(first, last, flags))
    };
    if rc == 0 && flags & CLOSE_RANGE_UNSHARE != 0 {
        // The thread has a descriptor table of its own now.
        crate::rights::changed(crate::abi::rights_change::UNSHARE, false);
    }
    rc
}

#[no_mangle]
pub extern "C" fn closefrom(first: c_int) {
    uring::before_fds_replaced(first.max(0), c_int::MAX);
    // SAFETY: the real function under its C signature, an integer argument.
    unsafe {
        if let Some(f) = real!(closefrom(c_int) -> ()) {
            f(first);
        }
    }
}

#[no_mangle]
pub extern "C" fn poll(fds: *mut c_void, count: u64, timeout: c_int) -> c_int {
    let direct = || {
        // SAFETY: the caller's own arguments.
        unsafe {
            real!(poll(*mut c_void, u64, c_int) -> c_int).map_or(-1, |f| f(fds, count, timeout))
        }
    };
    probe(POLL, [fds as u64, count, 0, 0, 0, 0], timeout == 0, direct)
}

/// A timespec pointer that asks not to wait at all.
fn zero(ts: *const Timespec) -> bool {
    // SAFETY: ppoll and epoll_pwait2 take a valid timespec or NULL (NULL: wait forever);
    // glibc's own ppoll reads it too (to convert it), so this adds no fault of its own.
    !ts.is_null() && unsafe { (*ts).tv_sec == 0 && (*ts).tv_nsec == 0 }
}

#[no_mangle]
pub extern "C" fn ppoll(
    fds: *mut c_void,
    count: u64,
    timeout: *const Timespec,
    mask: *const Bits1024,
) -> c_int {
    let direct = || {
        // SAFETY: the caller's own arguments.
        unsafe {
            real!(ppoll(*mut c_void, u64, *const Timespec, *const Bits1024) -> c_int)
                .map_or(-1, |f| f(fds, count, timeout, mask))
        }
    };
    probe(POLL, [fds as u64, count, 0, 0, 0, 0], zero(timeout), direct)
}

#[no_mangle]
pub extern "C" fn epoll_wait(
    epfd: c_int,
    events: *mut c_void,
    max: c_int,
    timeout: c_int,
) -> c_int {
    let direct = || {
        // SAFETY: the caller's own arguments.
        unsafe {
            real!(epoll_wait(c_int, *mut c_void, c_int, c_int) -> c_int)
                .map_or(-1, |f| f(epfd, events, max, timeout))
        }
    };
    probe(EPOLL, [epfd as u64, events as u64, max as u64, 0, 0, 0], timeout == 0, direct)
}

#[no_mangle]
pub extern "C" fn epoll_pwait(
    epfd: c_int,
    events: *mut c_void,
    max: c_int,
    timeout: c_int,
    mask: *const Bits1024,
) -> c_int {
    let direct = || {
        // SAFETY: the caller's own arguments.
        unsafe {
            real!(epoll_pwait(c_int, *mut c_void, c_int, c_int, *const Bits1024) -> c_int)
                .map_or(-1, |f| f(epfd, events, max, timeout, mask))
        }
    };
    probe(EPOLL, [epfd as u64, events as u64, max as u64, 0, 0, 0], timeout == 0, direct)
}

#[no_mangle]
pub extern "C" fn epoll_pwait2(
    epfd: c_int,
    events: *mut c_void,
    max: c_int,
    timeout: *const Timespec,
    mask: *const Bits1024,
) -> c_int {
    let direct = || {
        // SAFETY: the caller's own arguments.
        unsafe {
            real!(
                epoll_pwait2(c_int, *mut c_void, c_int, *const Timespec, *const Bits1024) -> c_int
            )
            .map_or(-1, |f| f(epfd, events, max, timeout, mask))
        }
    };
    probe(EPOLL, [epfd as u64, events as u64, max as u64, 0, 0, 0], zero(timeout), direct)
}

// glibc's _FORTIFY_SOURCE entry points: the bounds check is theirs (a failing one aborts in
// the real function), the call ours.

#[no_mangle]
pub extern "C" fn __recv_chk(
    fd: c_int,
    buf: *mut c_void,
    len: SizeT,
    buf_len: SizeT,
    flags: c_int,
) -> SsizeT {
    if len > buf_len {
        // SAFETY: the caller's own arguments; the real check aborts the program.
        return unsafe {
            real!(__recv_chk(c_int, *mut c_void, SizeT, SizeT, c_int) -> SsizeT)
                .map_or(-1, |f| f(fd, buf, len, buf_len, flags))
        };
    }
    recv(fd, buf, len, flags)
}

#[no_mangle]
pub extern "C" fn __recvfrom_chk(
    fd: c_int,
    buf: *mut c_void,
    len: SizeT,
    buf_len: SizeT,
    flags: c_int,
    addr: *mut c_void,
    addr_len: *mut SocklenT,
) -> SsizeT {
    if len > buf_len {
        // SAFETY: the caller's own arguments; the real check aborts the program.
        return unsafe {
            real!(
                __recvfrom_chk(
                    c_int,
                    *mut c_void,
                    SizeT,
                    SizeT,
                    c_int,
                    *mut c_void,
                    *mut SocklenT,
                ) -> SsizeT
            )
            .map_or(-1, |f| f(fd, buf, len, buf_len, flags, addr, addr_len))
        };
    }
    recvfrom(fd, buf, len, flags, addr, addr_len)
}

#[no_mangle]
pub extern "C" fn __read_chk(fd: c_int, buf: *mut c_void, len: SizeT, buf_len: SizeT) -> SsizeT {
    if len > buf_len {
        // SAFETY: the caller's own arguments; the real check aborts the program.
        return unsafe {
            real!(__read_chk(c_int, *mut c_void, SizeT, SizeT) -> SsizeT)
                .map_or(-1, |f| f(fd, buf, len, buf_len))
        };
    }
    read(fd, buf, len)
}

#[no_mangle]
pub extern "C" fn __poll_chk(
    fds: *mut c_void,
    count: u64,
    timeout: c_int,
    fds_len: SizeT,
) -> c_int {
    if (fds_len / 8) < count as usize {
        // SAFETY: the caller's own arguments; the real check aborts the program.
        return unsafe {
            real!(__poll_chk(*mut c_void, u64, c_int, SizeT) -> c_int)
                .map_or(-1, |f| f(fds, count, timeout, fds_len))
        };
    }
    poll(fds, count, timeout)
}
