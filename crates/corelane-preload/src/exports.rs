//! The interposed functions. Each makes the call itself (the real libc function) when the lane
//! is off, the fd is not a socket, or the syscall thread declines; otherwise it hands the call
//! to the lane and finishes what the non-blocking attempt could not (see `exec.rs`).
//! errno: unchanged on success, the call's own on failure.
//!
//! Each export is the C interface (`#[allow(unsafe_code)]` on the item: `#[no_mangle]` counts
//! as unsafe). One that takes pointers is an `unsafe extern "C" fn`: its safety contract is
//! the C function's, and it hands the program's pointers on untouched, to the real function
//! (`real::`) or to a lane as a [`Call`].

use std::cell::Cell;

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
fn io(call: &Call, pipe: bool, direct: impl Fn(usize) -> isize) -> isize {
    if !active() {
        return direct(0);
    }
    let (op, args) = (call.op(), call.args());
    let saved = errno();
    let fd = args[0] as c_int;
    let outcome = match lane::delegate(call) {
        Some(o) if !o.direct => o,
        _ => {
            set_errno(saved);
            return direct(0);
        }
    };
    if outcome.ret >= 0 {
        let sent = outcome.ret as usize;
        let short = crate::exec::is_short_send(op, args, outcome.ret);
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
            raise_sigpipe();
            set_errno(EPIPE);
            -1
        }
        err => {
            set_errno(err);
            -1
        }
    }
}

thread_local! {
    /// This thread's waits go straight to the kernel: its last probe found nothing ready, and
    /// no wait since returned events at once.
    static WAITS_DIRECT: Cell<bool> = const { Cell::new(false) };
}

/// A wait that returns events within this long found them ready (or nearly): the thread is
/// busy, and its next wait is probed on the syscall thread again.
const READY_NS: u64 = 20_000;

/// A wait (poll, epoll, select): probed on the syscall thread with a zero timeout (made
/// directly while the lane is off). When nothing is ready and the caller would wait, it waits
/// itself, so signals, masks and timeouts are the kernel's; and its next waits go straight to
/// the kernel (one call, not a probe and a wait), until one returns events at once.
fn probe(call: &Call, zero_timeout: bool, direct: impl Fn() -> c_int) -> c_int {
    if !active() {
        return direct();
    }
    if !zero_timeout && WAITS_DIRECT.with(Cell::get) {
        let start = monotonic_ns();
        let ret = direct();
        if ret > 0 && monotonic_ns().saturating_sub(start) < READY_NS {
            WAITS_DIRECT.with(|d| d.set(false));
        }
        return ret;
    }
    let saved = errno();
    match lane::delegate(call) {
        Some(o) if !o.direct && (o.ret != 0 || zero_timeout) => {
            set_errno(if o.ret < 0 { o.err } else { saved });
            o.ret as c_int
        }
        Some(o) => {
            // Nothing ready (or declined): the caller waits in the kernel, now and next time.
            WAITS_DIRECT.with(|d| d.set(!o.direct));
            set_errno(saved);
            direct()
        }
        None => {
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

/// Marks an export: the attributes every C entry point of this file carries.
macro_rules! export {
    ($item:item) => {
        #[allow(unsafe_code)] // an export (`#[no_mangle]`): the interposer's contract with C
        #[no_mangle]
        $item
    };
}

export! {
    /// # Safety
    /// send(2)'s contract: `buf` readable for `len` bytes.
    pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, len: SizeT, flags: c_int) -> SsizeT {
        let direct = |done: usize| {
            // SAFETY: the program's arguments; `done` <= len bytes of `buf` were already sent.
            unsafe { real::send(fd, skip(buf, done), len - done, flags) }
        };
        let args = [fd as u64, buf as u64, len as u64, flags as u64, 0, 0];
        // SAFETY: the program's own arguments, valid until this call returns.
        io(&unsafe { Call::new(SEND, args) }, !no_signal(flags), direct)
    }
}

export! {
    /// # Safety
    /// sendto(2)'s contract.
    pub unsafe extern "C" fn sendto(
        fd: c_int,
        buf: *const c_void,
        len: SizeT,
        flags: c_int,
        addr: *const c_void,
        addr_len: SocklenT,
    ) -> SsizeT {
        let direct = |done: usize| {
            // SAFETY: the program's arguments; `done` <= len bytes of `buf` were already sent.
            unsafe { real::sendto(fd, skip(buf, done), len - done, flags, addr, addr_len) }
        };
        let args = [fd as u64, buf as u64, len as u64, flags as u64, addr as u64, addr_len as u64];
        // SAFETY: the program's own arguments, valid until this call returns.
        io(&unsafe { Call::new(SEND, args) }, !no_signal(flags), direct)
    }
}

export! {
    /// # Safety
    /// recv(2)'s contract: `buf` writable for `len` bytes.
    pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, len: SizeT, flags: c_int) -> SsizeT {
        // SAFETY: the program's own arguments.
        let direct = |_| unsafe { real::recv(fd, buf, len, flags) };
        let args = [fd as u64, buf as u64, len as u64, flags as u64, 0, 0];
        // SAFETY: the program's own arguments, valid until this call returns.
        io(&unsafe { Call::new(RECV, args) }, false, direct)
    }
}

export! {
    /// # Safety
    /// recvfrom(2)'s contract.
    pub unsafe extern "C" fn recvfrom(
        fd: c_int,
        buf: *mut c_void,
        len: SizeT,
        flags: c_int,
        addr: *mut c_void,
        addr_len: *mut SocklenT,
    ) -> SsizeT {
        // SAFETY: the program's own arguments.
        let direct = |_| unsafe { real::recvfrom(fd, buf, len, flags, addr, addr_len) };
        let args = [fd as u64, buf as u64, len as u64, flags as u64, addr as u64, addr_len as u64];
        // SAFETY: the program's own arguments, valid until this call returns.
        io(&unsafe { Call::new(RECV, args) }, false, direct)
    }
}

export! {
    /// # Safety
    /// sendmsg(2)'s contract.
    pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const Msghdr, flags: c_int) -> SsizeT {
        let direct = |done: usize| {
            // SAFETY: the program's own arguments; `done` bytes of its vector were sent.
            unsafe {
                match done {
                    0 => real::sendmsg(fd, msg, flags),
                    _ => send_rest(fd, msg, done as u64, flags),
                }
            }
        };
        // SAFETY: sendmsg's contract: `msg` a valid header (or NULL: the kernel's EFAULT).
        let total = unsafe { msg_bytes(msg) };
        let args = [fd as u64, msg as u64, total, flags as u64, 0, 0];
        // SAFETY: the program's own arguments, valid until this call returns.
        io(&unsafe { Call::new(SENDMSG, args) }, !no_signal(flags), direct)
    }
}

export! {
    /// # Safety
    /// recvmsg(2)'s contract.
    pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut Msghdr, flags: c_int) -> SsizeT {
        // SAFETY: the program's own arguments.
        let direct = |_| unsafe { real::recvmsg(fd, msg, flags) };
        let args = [fd as u64, msg as u64, 0, flags as u64, 0, 0];
        // SAFETY: the program's own arguments, valid until this call returns.
        let ret = io(&unsafe { Call::new(RECVMSG, args) }, false, direct);
        if ret >= 0 {
            // SAFETY: recvmsg's contract; the kernel set `controllen` to what it wrote.
            unsafe { received_fds(msg, sockets::forget) };
        }
        ret
    }
}

export! {
    /// # Safety
    /// sendmmsg(2)'s contract.
    pub unsafe extern "C" fn sendmmsg(
        fd: c_int,
        vec: *mut c_void,
        vlen: c_uint,
        flags: c_int,
    ) -> c_int {
        // SAFETY: the program's own arguments.
        let direct = |_| unsafe { real::sendmmsg(fd, vec, vlen, flags) } as isize;
        let args = [fd as u64, vec as u64, vlen as u64, flags as u64, 0, 0];
        // SAFETY: the program's own arguments, valid until this call returns.
        io(&unsafe { Call::new(SENDMMSG, args) }, !no_signal(flags), direct) as c_int
    }
}

export! {
    /// # Safety
    /// recvmmsg(2)'s contract.
    pub unsafe extern "C" fn recvmmsg(
        fd: c_int,
        vec: *mut c_void,
        vlen: c_uint,
        flags: c_int,
        timeout: *mut Timespec,
    ) -> c_int {
        // SAFETY: the program's own arguments.
        let direct = |_| unsafe { real::recvmmsg(fd, vec, vlen, flags, timeout) } as isize;
        let args = [fd as u64, vec as u64, vlen as u64, flags as u64, timeout as u64, 0];
        // SAFETY: the program's own arguments, valid until this call returns.
        let ret = io(&unsafe { Call::new(RECVMMSG, args) }, false, direct) as c_int;
        if ret > 0 {
            // SAFETY: recvmmsg's contract: `ret` messages filled, each `controllen` set.
            unsafe { received_fds_each(vec, ret as usize, sockets::forget) };
        }
        ret
    }
}

export! {
    /// # Safety
    /// read(2)'s contract: `buf` writable for `len` bytes.
    pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, len: SizeT) -> SsizeT {
        // SAFETY: the program's own arguments.
        let direct = |_| unsafe { real::read(fd, buf, len) };
        if !active() || !sockets::is_socket(fd) {
            return direct(0);
        }
        let args = [fd as u64, buf as u64, len as u64, 0, 0, 0];
        // SAFETY: the program's own arguments, valid until this call returns.
        io(&unsafe { Call::new(READ, args) }, false, direct)
    }
}

export! {
    /// # Safety
    /// write(2)'s contract: `buf` readable for `len` bytes.
    pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, len: SizeT) -> SsizeT {
        let direct = |done: usize| {
            // SAFETY: the program's arguments; `done` <= len bytes of `buf` were already sent.
            unsafe { real::write(fd, skip(buf, done), len - done) }
        };
        if !active() || !sockets::is_socket(fd) {
            return direct(0);
        }
        let args = [fd as u64, buf as u64, len as u64, 0, 0, 0];
        // SAFETY: the program's own arguments, valid until this call returns.
        io(&unsafe { Call::new(WRITE, args) }, true, direct)
    }
}

/// readv and writev on a socket are delegated as a recvmsg/sendmsg of the same vector,
/// through this header (it only names the program's vector).
fn vector_header(iov: *const Iovec, count: c_int) -> Msghdr {
    Msghdr {
        name: core::ptr::null_mut(),
        namelen: 0,
        iov: iov as *mut Iovec,
        iovlen: count as SizeT,
        control: core::ptr::null_mut(),
        controllen: 0,
        flags: 0,
    }
}

export! {
    /// # Safety
    /// readv(2)'s contract: `iov` holds `count` vectors, each writable.
    pub unsafe extern "C" fn readv(fd: c_int, iov: *const Iovec, count: c_int) -> SsizeT {
        // SAFETY: the program's own arguments.
        let direct = |_| unsafe { real::readv(fd, iov, count) };
        if !active() || count < 0 || !sockets::is_socket(fd) {
            return direct(0);
        }
        let msg = vector_header(iov, count);
        let args = [fd as u64, &msg as *const Msghdr as u64, 0, 0, 0, 0];
        // SAFETY: `msg` lives in this frame until this call returns; the vector it names is
        // the program's own argument.
        io(&unsafe { Call::new(READV, args) }, false, direct)
    }
}

export! {
    /// # Safety
    /// writev(2)'s contract: `iov` holds `count` vectors, each readable.
    pub unsafe extern "C" fn writev(fd: c_int, iov: *const Iovec, count: c_int) -> SsizeT {
        let msg = vector_header(iov, count);
        let direct = |done: usize| {
            // SAFETY: the program's own arguments; `done` bytes of its vector were sent.
            unsafe {
                match done {
                    0 => real::writev(fd, iov, count),
                    _ => send_rest(fd, &msg, done as u64, 0),
                }
            }
        };
        if !active() || count < 0 || !sockets::is_socket(fd) {
            return direct(0);
        }
        // SAFETY: writev's contract: `iov` holds `count` entries.
        let total = unsafe { msg_bytes(&msg) };
        let args = [fd as u64, &msg as *const Msghdr as u64, total, 0, 0, 0];
        // SAFETY: `msg` lives in this frame until this call returns; the vector it names is
        // the program's own argument.
        io(&unsafe { Call::new(WRITEV, args) }, true, direct)
    }
}

export! {
    /// # Safety
    /// sendfile(2)'s contract: `offset` NULL or a valid offset.
    pub unsafe extern "C" fn sendfile(
        out_fd: c_int,
        in_fd: c_int,
        offset: *mut i64,
        count: SizeT,
    ) -> SsizeT {
        // SAFETY: the program's own arguments.
        let direct = |_| unsafe { real::sendfile(out_fd, in_fd, offset, count) };
        if !active() || !sockets::is_socket(out_fd) {
            return direct(0);
        }
        let args = [out_fd as u64, in_fd as u64, offset as u64, count as u64, 0, 0];
        // SAFETY: the program's own arguments, valid until this call returns.
        io(&unsafe { Call::new(SENDFILE, args) }, true, direct)
    }
}

export! {
    /// # Safety
    /// sendfile(2)'s contract.
    pub unsafe extern "C" fn sendfile64(
        out_fd: c_int,
        in_fd: c_int,
        offset: *mut i64,
        count: SizeT,
    ) -> SsizeT {
        // SAFETY: the same call under its other name, with the program's arguments.
        unsafe { sendfile(out_fd, in_fd, offset, count) }
    }
}

fn accepted(fd: c_int) -> c_int {
    if fd >= 0 {
        sockets::mark_socket(fd);
    }
    fd
}

export! {
    /// # Safety
    /// accept4(2)'s contract.
    pub unsafe extern "C" fn accept4(
        fd: c_int,
        addr: *mut c_void,
        len: *mut SocklenT,
        flags: c_int,
    ) -> c_int {
        // SAFETY: the program's own arguments.
        let direct = |_| unsafe { real::accept4(fd, addr, len, flags) } as isize;
        let args = [fd as u64, addr as u64, len as u64, flags as u64, 0, 0];
        // SAFETY: the program's own arguments, valid until this call returns.
        accepted(io(&unsafe { Call::new(ACCEPT, args) }, false, direct) as c_int)
    }
}

export! {
    /// # Safety
    /// accept(2)'s contract.
    pub unsafe extern "C" fn accept(fd: c_int, addr: *mut c_void, len: *mut SocklenT) -> c_int {
        // SAFETY: the program's own arguments.
        let direct = |_| unsafe { real::accept(fd, addr, len) } as isize;
        let args = [fd as u64, addr as u64, len as u64, 0, 0, 0];
        // SAFETY: the program's own arguments, valid until this call returns.
        accepted(io(&unsafe { Call::new(ACCEPT, args) }, false, direct) as c_int)
    }
}

export! {
    /// # Safety
    /// connect(2)'s contract: `addr` readable for `len` bytes.
    pub unsafe extern "C" fn connect(fd: c_int, addr: *const c_void, len: SocklenT) -> c_int {
        // SAFETY: the program's own arguments.
        let direct = |_| unsafe { real::connect(fd, addr, len) } as isize;
        let args = [fd as u64, addr as u64, len as u64, 0, 0, 0];
        // SAFETY: the program's own arguments, valid until this call returns.
        io(&unsafe { Call::new(CONNECT, args) }, false, direct) as c_int
    }
}

export! {
    pub extern "C" fn socket(domain: c_int, kind: c_int, protocol: c_int) -> c_int {
        accepted(real::socket(domain, kind, protocol))
    }
}

export! {
    pub extern "C" fn close(fd: c_int) -> c_int {
        uring::before_fds_replaced(fd, fd);
        let direct = |_| real::close(fd) as isize;
        let was_socket = sockets::known_socket(fd);
        sockets::forget(fd);
        if !active() || !was_socket {
            return direct(0) as c_int;
        }
        // SAFETY: close takes no pointer.
        io(&unsafe { Call::new(CLOSE, [fd as u64, 0, 0, 0, 0, 0]) }, false, direct) as c_int
    }
}

export! {
    pub extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
        if old != new {
            uring::before_fds_replaced(new, new);
        }
        sockets::forget(new);
        let fd = real::dup2(old, new);
        sockets::copied(old, fd);
        fd
    }
}

export! {
    pub extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
        if old != new {
            uring::before_fds_replaced(new, new);
        }
        sockets::forget(new);
        let fd = real::dup3(old, new, flags);
        sockets::copied(old, fd);
        fd
    }
}

export! {
    pub extern "C" fn dup(old: c_int) -> c_int {
        let fd = real::dup(old);
        sockets::copied(old, fd);
        fd
    }
}

export! {
    /// fcntl is C-variadic: defined with one unsigned long after the command, which is where
    /// a variadic caller's third argument arrives on x86_64 and aarch64 (see `real::fcntl_with`).
    ///
    /// # Safety
    /// fcntl(2)'s contract: `arg` what command `cmd` expects.
    pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
        // SAFETY: the program's own arguments, passed on untouched.
        let ret = unsafe { real::fcntl_with(fd, cmd, arg) };
        if matches!(cmd, F_DUPFD | F_DUPFD_CLOEXEC) {
            sockets::copied(fd, ret);
        }
        ret
    }
}

export! {
    /// # Safety
    /// fcntl(2)'s contract (fcntl64 is its name under 64-bit file offsets).
    pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
        // SAFETY: the same call under its other name, with the program's arguments.
        unsafe { fcntl(fd, cmd, arg) }
    }
}

export! {
    /// # Safety
    /// socketpair(2)'s contract: `pair` writable for two ints.
    pub unsafe extern "C" fn socketpair(
        domain: c_int,
        kind: c_int,
        protocol: c_int,
        pair: *mut c_int,
    ) -> c_int {
        // SAFETY: the program's own arguments.
        let (rc, made) = unsafe { real::socketpair_made(domain, kind, protocol, pair) };
        for fd in made.into_iter().flatten() {
            sockets::mark_socket(fd);
        }
        rc
    }
}

const CLOSE_RANGE_UNSHARE: c_uint = 2;
const CLOSE_RANGE_CLOEXEC: c_uint = 4;

export! {
    pub extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_uint) -> c_int {
        if flags & CLOSE_RANGE_CLOEXEC == 0 {
            let fd = |n: c_uint| c_int::try_from(n).unwrap_or(c_int::MAX);
            uring::before_fds_replaced(fd(first), fd(last));
        }
        let rc = real::close_range(first, last, flags);
        if rc == 0 && flags & CLOSE_RANGE_CLOEXEC == 0 {
            let fd = |n: c_uint| c_int::try_from(n).unwrap_or(c_int::MAX);
            sockets::forget_range(fd(first), fd(last));
        }
        if rc == 0 && flags & CLOSE_RANGE_UNSHARE != 0 {
            // The thread has a descriptor table of its own now.
            crate::rights::changed(crate::abi::rights_change::UNSHARE, false);
        }
        rc
    }
}

export! {
    pub extern "C" fn closefrom(first: c_int) {
        uring::before_fds_replaced(first.max(0), c_int::MAX);
        real::closefrom(first);
        sockets::forget_range(first.max(0), c_int::MAX);
    }
}

export! {
    /// # Safety
    /// poll(2)'s contract: `fds` holds `count` entries.
    pub unsafe extern "C" fn poll(fds: *mut c_void, count: u64, timeout: c_int) -> c_int {
        // SAFETY: the program's own arguments.
        let direct = || unsafe { real::poll(fds, count, timeout) };
        // SAFETY: the program's own arguments, valid until this call returns.
        let call = unsafe { Call::new(POLL, [fds as u64, count, 0, 0, 0, 0]) };
        probe(&call, timeout == 0, direct)
    }
}

export! {
    /// # Safety
    /// ppoll(2)'s contract: `timeout` and `mask` NULL or valid.
    pub unsafe extern "C" fn ppoll(
        fds: *mut c_void,
        count: u64,
        timeout: *const Timespec,
        mask: *const Bits1024,
    ) -> c_int {
        // SAFETY: the program's own arguments.
        let direct = || unsafe { real::ppoll(fds, count, timeout, mask) };
        // SAFETY: the program's own arguments, valid until this call returns.
        let call = unsafe { Call::new(POLL, [fds as u64, count, 0, 0, 0, 0]) };
        // SAFETY: `timeout` is NULL or a valid timespec (ppoll's contract).
        probe(&call, unsafe { real::timespec_is_zero(timeout) }, direct)
    }
}

export! {
    /// # Safety
    /// epoll_wait(2)'s contract: `events` holds `max` entries.
    pub unsafe extern "C" fn epoll_wait(
        epfd: c_int,
        events: *mut c_void,
        max: c_int,
        timeout: c_int,
    ) -> c_int {
        // SAFETY: the program's own arguments.
        let direct = || unsafe { real::epoll_wait(epfd, events, max, timeout) };
        let args = [epfd as u64, events as u64, max as u64, 0, 0, 0];
        // SAFETY: the program's own arguments, valid until this call returns.
        probe(&unsafe { Call::new(EPOLL, args) }, timeout == 0, direct)
    }
}

export! {
    /// # Safety
    /// epoll_pwait(2)'s contract.
    pub unsafe extern "C" fn epoll_pwait(
        epfd: c_int,
        events: *mut c_void,
        max: c_int,
        timeout: c_int,
        mask: *const Bits1024,
    ) -> c_int {
        // SAFETY: the program's own arguments.
        let direct = || unsafe { real::epoll_pwait(epfd, events, max, timeout, mask) };
        let args = [epfd as u64, events as u64, max as u64, 0, 0, 0];
        // SAFETY: the program's own arguments, valid until this call returns.
        probe(&unsafe { Call::new(EPOLL, args) }, timeout == 0, direct)
    }
}

export! {
    /// # Safety
    /// epoll_pwait2(2)'s contract: `timeout` NULL or a valid timespec.
    pub unsafe extern "C" fn epoll_pwait2(
        epfd: c_int,
        events: *mut c_void,
        max: c_int,
        timeout: *const Timespec,
        mask: *const Bits1024,
    ) -> c_int {
        // SAFETY: the program's own arguments.
        let direct = || unsafe { real::epoll_pwait2(epfd, events, max, timeout, mask) };
        let args = [epfd as u64, events as u64, max as u64, 0, 0, 0];
        // SAFETY: the program's own arguments, valid until this call returns; `timeout` is
        // NULL or a valid timespec (epoll_pwait2's contract).
        unsafe { probe(&Call::new(EPOLL, args), real::timespec_is_zero(timeout), direct) }
    }
}

// glibc's _FORTIFY_SOURCE entry points: the bounds check is theirs (a failing one aborts in
// the real function), the call ours.

export! {
    /// # Safety
    /// recv(2)'s contract.
    pub unsafe extern "C" fn __recv_chk(
        fd: c_int,
        buf: *mut c_void,
        len: SizeT,
        buf_len: SizeT,
        flags: c_int,
    ) -> SsizeT {
        // SAFETY: the program's own arguments (the real check aborts the program, or the
        // call is recv's).
        unsafe {
            if len > buf_len {
                return real::__recv_chk(fd, buf, len, buf_len, flags);
            }
            recv(fd, buf, len, flags)
        }
    }
}

export! {
    /// # Safety
    /// recvfrom(2)'s contract.
    pub unsafe extern "C" fn __recvfrom_chk(
        fd: c_int,
        buf: *mut c_void,
        len: SizeT,
        buf_len: SizeT,
        flags: c_int,
        addr: *mut c_void,
        addr_len: *mut SocklenT,
    ) -> SsizeT {
        // SAFETY: the program's own arguments (the real check aborts the program, or the
        // call is recvfrom's).
        unsafe {
            if len > buf_len {
                return real::__recvfrom_chk(fd, buf, len, buf_len, flags, addr, addr_len);
            }
            recvfrom(fd, buf, len, flags, addr, addr_len)
        }
    }
}

export! {
    /// # Safety
    /// read(2)'s contract.
    pub unsafe extern "C" fn __read_chk(
        fd: c_int,
        buf: *mut c_void,
        len: SizeT,
        buf_len: SizeT,
    ) -> SsizeT {
        // SAFETY: the program's own arguments (the real check aborts the program, or the
        // call is read's).
        unsafe {
            if len > buf_len {
                return real::__read_chk(fd, buf, len, buf_len);
            }
            read(fd, buf, len)
        }
    }
}

export! {
    /// # Safety
    /// poll(2)'s contract.
    pub unsafe extern "C" fn __poll_chk(
        fds: *mut c_void,
        count: u64,
        timeout: c_int,
        fds_len: SizeT,
    ) -> c_int {
        // SAFETY: the program's own arguments (the real check aborts the program, or the
        // call is poll's).
        unsafe {
            if (fds_len / 8) < count as usize {
                return real::__poll_chk(fds, count, timeout, fds_len);
            }
            poll(fds, count, timeout)
        }
    }
}

/// select and pselect: probed like poll, on copies of the sets (the kernel rewrites the sets
/// it is given; the export made the copies and the `call` over them). Returns the answer and
/// whether the probe is it (then the export writes the copies back into the program's sets);
/// otherwise `direct` made the caller's own call on its own sets.
fn select_probe(call: &Call, zero_timeout: bool, direct: impl Fn() -> c_int) -> (c_int, bool) {
    let went_direct = core::cell::Cell::new(false);
    let direct = || {
        went_direct.set(true);
        direct()
    };
    let ret = probe(call, zero_timeout, direct);
    (ret, ret >= 0 && !went_direct.get())
}

/// The arguments of a SELECT call over `copies`.
fn select_args(count: c_int, copies: &mut FdSets) -> [u64; 6] {
    let [r, w, e] = copies.pointers();
    [count as u64, r as u64, w as u64, e as u64, 0, 0]
}

export! {
    /// # Safety
    /// select(2)'s contract.
    pub unsafe extern "C" fn select(
        count: c_int,
        read: *mut c_void,
        write: *mut c_void,
        except: *mut c_void,
        timeout: *mut Timeval,
    ) -> c_int {
        // SAFETY: the program's own arguments.
        let direct = || unsafe { real::select(count, read, write, except, timeout) };
        if !active() {
            return direct();
        }
        // SAFETY: `timeout` NULL or a valid timeval (select's contract).
        let zero = unsafe { timeout.as_ref() }.is_some_and(|t| t.tv_sec == 0 && t.tv_usec == 0);
        // SAFETY: the program's own sets, holding `count` bits (select's contract).
        let Some(mut copies) = (unsafe { FdSets::copy(count, [read, write, except]) }) else {
            return direct();
        };
        // SAFETY: the copies live in this frame until this call returns.
        let call = unsafe { Call::new(SELECT, select_args(count, &mut copies)) };
        let (ret, answered) = select_probe(&call, zero, direct);
        if answered {
            // SAFETY: the program's own sets, writable (select's contract).
            unsafe { copies.write_back() };
        }
        ret
    }
}

export! {
    /// # Safety
    /// pselect(2)'s contract.
    pub unsafe extern "C" fn pselect(
        count: c_int,
        read: *mut c_void,
        write: *mut c_void,
        except: *mut c_void,
        timeout: *const Timespec,
        mask: *const Bits1024,
    ) -> c_int {
        // SAFETY: the program's own arguments.
        let direct = || unsafe { real::pselect(count, read, write, except, timeout, mask) };
        if !active() {
            return direct();
        }
        // SAFETY: `timeout` NULL or a valid timespec (pselect's contract).
        let zero = unsafe { real::timespec_is_zero(timeout) };
        // SAFETY: the program's own sets, holding `count` bits (pselect's contract).
        let Some(mut copies) = (unsafe { FdSets::copy(count, [read, write, except]) }) else {
            return direct();
        };
        // SAFETY: the copies live in this frame until this call returns.
        let call = unsafe { Call::new(SELECT, select_args(count, &mut copies)) };
        let (ret, answered) = select_probe(&call, zero, direct);
        if answered {
            // SAFETY: the program's own sets, writable (pselect's contract).
            unsafe { copies.write_back() };
        }
        ret
    }
}

export! {
    /// splice with a socket at one end is carried only when the caller asked it not to block
    /// (SPLICE_F_NONBLOCK) and its socket end is non-blocking (checked by the carrier): then
    /// the carried call is the very call the caller would have made. Otherwise direct.
    ///
    /// # Safety
    /// splice(2)'s contract.
    pub unsafe extern "C" fn splice(
        fd_in: c_int,
        off_in: *mut i64,
        fd_out: c_int,
        off_out: *mut i64,
        len: SizeT,
        flags: c_uint,
    ) -> SsizeT {
        // SAFETY: the program's own arguments.
        let direct = |_| unsafe { real::splice(fd_in, off_in, fd_out, off_out, len, flags) };
        if !active() || flags & SPLICE_F_NONBLOCK == 0 {
            return direct(0);
        }
        let socket_out = if sockets::is_socket(fd_in) {
            0
        } else if sockets::is_socket(fd_out) {
            crate::exec::SPLICE_SOCKET_OUT
        } else {
            return direct(0);
        };
        let ends = [fd_in as u64, off_in as u64, fd_out as u64, off_out as u64];
        let args = [ends[0], ends[1], ends[2], ends[3], len as u64, u64::from(flags) | socket_out];
        // Into a socket, EPIPE raises SIGPIPE in the caller, as the kernel's would have.
        let pipe = socket_out != 0;
        // SAFETY: the program's own arguments, valid until this call returns.
        io(&unsafe { Call::new(SPLICE, args) }, pipe, direct)
    }
}
