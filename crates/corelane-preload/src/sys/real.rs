//! The real libc functions the exports stand in front of, each under its C prototype: what
//! the library calls when it makes the program's call itself. Found with dlsym once
//! (`real!`); a libc without the symbol makes the call fail with ENOSYS.
//!
//! The hazard of each: the prototype written here must be the C one exactly (the transmute of
//! dlsym's address to a function-pointer type is only as right as it). Functions that take
//! pointers are `unsafe fn`: they read or write through them, so the caller promises what the
//! C function's contract asks (in practice the program passed them to the export of the same
//! name, and they go on untouched).

use super::*;

/// Defines `pub unsafe fn NAME(args) -> R`, the real NAME; `fail` when libc has none.
macro_rules! forward {
    (unsafe $name:ident ( $($arg:ident : $t:ty),* $(,)? ) -> $r:ty = $fail:expr) => {
        #[doc = concat!("The real `", stringify!($name), "`.")]
        ///
        /// # Safety
        /// Every pointer among the arguments must be valid as the C function's contract
        /// requires for the length of the call (the program's own, passed on untouched).
        pub unsafe fn $name($($arg: $t),*) -> $r {
            // SAFETY: the prototype above is the C one (the transmute's hazard); the caller
            // answers for the pointers.
            unsafe { real!($name($($t),*) -> $r).map_or($fail, |f| f($($arg),*)) }
        }
    };
    ($name:ident ( $($arg:ident : $t:ty),* $(,)? ) -> $r:ty = $fail:expr) => {
        #[doc = concat!("The real `", stringify!($name), "`: integer arguments only.")]
        pub fn $name($($arg: $t),*) -> $r {
            // SAFETY: the prototype above is the C one (the transmute's hazard); no argument
            // is a pointer.
            unsafe { real!($name($($t),*) -> $r).map_or($fail, |f| f($($arg),*)) }
        }
    };
}

forward!(unsafe send(fd: c_int, buf: *const c_void, len: SizeT, flags: c_int) -> SsizeT = -1);
forward!(unsafe sendto(
    fd: c_int,
    buf: *const c_void,
    len: SizeT,
    flags: c_int,
    addr: *const c_void,
    addr_len: SocklenT,
) -> SsizeT = -1);
forward!(unsafe recv(fd: c_int, buf: *mut c_void, len: SizeT, flags: c_int) -> SsizeT = -1);
forward!(unsafe recvfrom(
    fd: c_int,
    buf: *mut c_void,
    len: SizeT,
    flags: c_int,
    addr: *mut c_void,
    addr_len: *mut SocklenT,
) -> SsizeT = -1);
forward!(unsafe sendmsg(fd: c_int, msg: *const Msghdr, flags: c_int) -> SsizeT = -1);
forward!(unsafe recvmsg(fd: c_int, msg: *mut Msghdr, flags: c_int) -> SsizeT = -1);
forward!(unsafe sendmmsg(fd: c_int, vec: *mut c_void, vlen: c_uint, flags: c_int) -> c_int = -1);
forward!(unsafe recvmmsg(
    fd: c_int,
    vec: *mut c_void,
    vlen: c_uint,
    flags: c_int,
    timeout: *mut Timespec,
) -> c_int = -1);
forward!(unsafe read(fd: c_int, buf: *mut c_void, len: SizeT) -> SsizeT = -1);
forward!(unsafe write(fd: c_int, buf: *const c_void, len: SizeT) -> SsizeT = -1);
forward!(unsafe readv(fd: c_int, iov: *const Iovec, count: c_int) -> SsizeT = -1);
forward!(unsafe writev(fd: c_int, iov: *const Iovec, count: c_int) -> SsizeT = -1);
forward!(unsafe sendfile(out_fd: c_int, in_fd: c_int, offset: *mut i64, count: SizeT) -> SsizeT = -1);
forward!(unsafe accept4(fd: c_int, addr: *mut c_void, len: *mut SocklenT, flags: c_int) -> c_int = -1);
forward!(unsafe accept(fd: c_int, addr: *mut c_void, len: *mut SocklenT) -> c_int = -1);
forward!(unsafe connect(fd: c_int, addr: *const c_void, len: SocklenT) -> c_int = -1);
forward!(socket(domain: c_int, kind: c_int, protocol: c_int) -> c_int = -1);
forward!(close(fd: c_int) -> c_int = -1);
forward!(dup(old: c_int) -> c_int = -1);
forward!(unsafe socketpair(domain: c_int, kind: c_int, protocol: c_int, pair: *mut c_int) -> c_int = -1);
forward!(unsafe select(
    count: c_int,
    read: *mut c_void,
    write: *mut c_void,
    except: *mut c_void,
    timeout: *mut Timeval,
) -> c_int = -1);
forward!(unsafe pselect(
    count: c_int,
    read: *mut c_void,
    write: *mut c_void,
    except: *mut c_void,
    timeout: *const Timespec,
    mask: *const Bits1024,
) -> c_int = -1);
forward!(unsafe splice(
    fd_in: c_int,
    off_in: *mut i64,
    fd_out: c_int,
    off_out: *mut i64,
    len: SizeT,
    flags: c_uint,
) -> SsizeT = -1);
forward!(dup2(old: c_int, new: c_int) -> c_int = -1);
forward!(dup3(old: c_int, new: c_int, flags: c_int) -> c_int = -1);
forward!(close_range(first: c_uint, last: c_uint, flags: c_uint) -> c_int = -1);
forward!(closefrom(first: c_int) -> () = ());
forward!(unsafe poll(fds: *mut c_void, count: u64, timeout: c_int) -> c_int = -1);
forward!(unsafe ppoll(
    fds: *mut c_void,
    count: u64,
    timeout: *const Timespec,
    mask: *const Bits1024,
) -> c_int = -1);
forward!(unsafe epoll_wait(epfd: c_int, events: *mut c_void, max: c_int, timeout: c_int) -> c_int = -1);
forward!(unsafe epoll_pwait(
    epfd: c_int,
    events: *mut c_void,
    max: c_int,
    timeout: c_int,
    mask: *const Bits1024,
) -> c_int = -1);
forward!(unsafe epoll_pwait2(
    epfd: c_int,
    events: *mut c_void,
    max: c_int,
    timeout: *const Timespec,
    mask: *const Bits1024,
) -> c_int = -1);

// glibc's _FORTIFY_SOURCE entry points (their bounds check fails: they abort the program).
forward!(unsafe __recv_chk(
    fd: c_int,
    buf: *mut c_void,
    len: SizeT,
    buf_len: SizeT,
    flags: c_int,
) -> SsizeT = -1);
forward!(unsafe __recvfrom_chk(
    fd: c_int,
    buf: *mut c_void,
    len: SizeT,
    buf_len: SizeT,
    flags: c_int,
    addr: *mut c_void,
    addr_len: *mut SocklenT,
) -> SsizeT = -1);
forward!(unsafe __read_chk(fd: c_int, buf: *mut c_void, len: SizeT, buf_len: SizeT) -> SsizeT = -1);
forward!(unsafe __poll_chk(fds: *mut c_void, count: u64, timeout: c_int, fds_len: SizeT) -> c_int = -1);

// What changes a thread's context (rights.rs).
forward!(setuid(uid: c_uint) -> c_int = -1);
forward!(setgid(gid: c_uint) -> c_int = -1);
forward!(seteuid(uid: c_uint) -> c_int = -1);
forward!(setegid(gid: c_uint) -> c_int = -1);
forward!(setreuid(r: c_uint, e: c_uint) -> c_int = -1);
forward!(setregid(r: c_uint, e: c_uint) -> c_int = -1);
forward!(setresuid(r: c_uint, e: c_uint, s: c_uint) -> c_int = -1);
forward!(setresgid(r: c_uint, e: c_uint, s: c_uint) -> c_int = -1);
forward!(unsafe setgroups(size: SizeT, list: *const c_uint) -> c_int = -1);
forward!(unsafe initgroups(user: *const c_char, group: c_uint) -> c_int = -1);
forward!(unsafe capset(header: *mut c_void, data: *const c_void) -> c_int = -1);
forward!(setns(fd: c_int, kind: c_int) -> c_int = -1);
forward!(unshare(flags: c_int) -> c_int = -1);

/// The real `fcntl`. C-variadic (a third argument, an int or a pointer, for the commands
/// that take one): declared with one unsigned long, which on x86_64 SysV and aarch64 Linux
/// arrives where a variadic caller put it, and reaches glibc's `va_arg` the same way.
///
/// # Safety
/// `arg` must be what command `cmd` expects (a pointer valid for it, for the commands that
/// take one: the program's own, passed on untouched).
pub unsafe fn fcntl_with(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: the prototype is the variadic one's as the ABI passes it; the caller answers
    // for `arg`.
    unsafe { real!(fcntl(c_int, c_int, c_ulong) -> c_int).map_or(-1, |f| f(fd, cmd, arg)) }
}

/// fcntl with a command whose argument is an integer or absent (F_GETFL, F_DUPFD…).
pub fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: the callers pass only commands whose argument is not a pointer.
    unsafe { fcntl_with(fd, cmd, arg) }
}

/// socketpair, and the pair it made (read here from the program's array).
///
/// # Safety
/// `pair` writable for two ints (socketpair's contract).
pub unsafe fn socketpair_made(
    domain: c_int,
    kind: c_int,
    protocol: c_int,
    pair: *mut c_int,
) -> (c_int, Option<[c_int; 2]>) {
    // SAFETY: the caller's promise.
    unsafe {
        let rc = socketpair(domain, kind, protocol, pair);
        (rc, (rc == 0).then(|| [*pair, *pair.add(1)]))
    }
}

/// prctl is C-variadic (an option, then up to four unsigned longs): declared here with all
/// four, which on x86_64 SysV and aarch64 Linux arrive where a variadic caller put them (the
/// registers of a 5-argument call).
///
/// # Safety
/// Whatever `option` reads or writes through the further arguments must be valid (the
/// program's own, passed on untouched).
pub unsafe fn prctl(option: c_int, a2: c_ulong, a3: c_ulong, a4: c_ulong, a5: c_ulong) -> c_int {
    // SAFETY: glibc's prctl reads its four further arguments as unsigned longs from the
    // registers this prototype passes them in; the caller answers for what they point to.
    unsafe {
        real!(prctl(c_int, c_ulong, c_ulong, c_ulong, c_ulong) -> c_int)
            .map_or(-1, |f| f(option, a2, a3, a4, a5))
    }
}

/// glibc's `syscall` under a 7-integer prototype: C-variadic, which stable Rust cannot name;
/// on x86_64 SysV and aarch64 Linux a variadic call's integer arguments arrive in the
/// registers a 7-argument function reads (and glibc's `syscall`, written in assembly, reads
/// them the same way when called with all seven).
///
/// # Safety
/// Whatever system call `number` reads or writes through the arguments must be valid (the
/// program's own, passed on untouched).
pub unsafe fn syscall(n: c_long, a: [c_long; 6]) -> c_long {
    // SAFETY: the prototype above; the caller answers for what the arguments point to.
    unsafe {
        real!(syscall(c_long, c_long, c_long, c_long, c_long, c_long, c_long) -> c_long)
            .map_or(-1, |f| f(n, a[0], a[1], a[2], a[3], a[4], a[5]))
    }
}

/// setfsuid (`user`) or setfsgid with `id`, then again with -1 (which changes nothing), under
/// the real function: (the id before, the id now), or None when libc has none. Both return
/// the previous id whatever happens, so the second call says whether the first changed it.
pub fn set_fs_id(user: bool, id: c_uint) -> Option<(c_int, c_int)> {
    // SAFETY: the prototypes are the C ones (the transmute's hazard); integer arguments.
    unsafe {
        let set = if user {
            real!(setfsuid(c_uint) -> c_int)?
        } else {
            real!(setfsgid(c_uint) -> c_int)?
        };
        Some((set(id), set(u32::MAX)))
    }
}

/// Ends the process with the real `_exit` (`quick`: `_Exit`), or exit_group if libc has none.
pub fn exit_now(quick: bool, status: c_int) -> ! {
    // SAFETY: the prototypes are the C ones (the transmute's hazard; `()` for a function
    // that does not return); an integer argument.
    unsafe {
        let end = if quick { real!(_Exit(c_int) -> ()) } else { real!(_exit(c_int) -> ()) };
        if let Some(f) = end {
            f(status);
        }
    }
    sys_exit_group(status)
}

/// Whether a timespec the program passed asks not to wait at all (NULL: wait forever).
///
/// # Safety
/// `ts` must be NULL or point to a readable timespec (ppoll's and epoll_pwait2's contract;
/// glibc's own ppoll reads it too, to convert it).
pub unsafe fn timespec_is_zero(ts: *const Timespec) -> bool {
    // SAFETY: the caller's promise.
    !ts.is_null() && unsafe { (*ts).tv_sec == 0 && (*ts).tv_nsec == 0 }
}
