//! The few C declarations the library needs, written out so the crate has no dependencies
//! (the build script compiles it with rustc alone). Linux, glibc, 64-bit (x86_64, aarch64).

pub use core::ffi::{c_char, c_int, c_long, c_uint, c_void};

pub type SsizeT = isize;
pub type SizeT = usize;
pub type SocklenT = u32;
pub type PthreadT = usize;

pub const RTLD_NEXT: *mut c_void = -1isize as *mut c_void;

pub const EAGAIN: c_int = 11;
pub const EPIPE: c_int = 32;
pub const ENOSYS: c_int = 38;
pub const ENOTSOCK: c_int = 88;

pub const MSG_WAITALL: c_int = 0x100;
pub const MSG_DONTWAIT: c_int = 0x40;
pub const MSG_NOSIGNAL: c_int = 0x4000;

pub const SOL_SOCKET: c_int = 1;
pub const SO_TYPE: c_int = 3;
pub const SO_LINGER: c_int = 13;
pub const SOCK_STREAM: c_int = 1;

pub const F_GETFL: c_int = 3;
pub const F_SETFD: c_int = 2;
pub const FD_CLOEXEC: c_int = 1;
pub const O_NONBLOCK: c_int = 0o4000;
pub const SIGPIPE: c_int = 13;
pub const SIG_SETMASK: c_int = 2;
pub const SEEK_END: c_int = 2;

pub const PROT_READ_WRITE: c_int = 0x1 | 0x2;
pub const MAP_SHARED: c_int = 0x01;
pub const MAP_FAILED: *mut c_void = !0usize as *mut c_void;
pub const MADV_DONTFORK: c_int = 10;

pub const PR_SET_NAME: c_int = 15;
pub const CLOCK_MONOTONIC: c_int = 1;
pub const CLOCK_THREAD_CPUTIME_ID: c_int = 3;
pub const FUTEX_WAIT_PRIVATE: c_int = 128;
pub const FUTEX_WAKE_PRIVATE: c_int = 129;

#[cfg(target_arch = "x86_64")]
pub const SYS_FUTEX: c_long = 202;
#[cfg(target_arch = "aarch64")]
pub const SYS_FUTEX: c_long = 98;

/// System-call numbers for the calls made straight to the kernel (below).
#[cfg(target_arch = "x86_64")]
mod nr {
    pub const CLOSE: super::c_long = 3;
    pub const FSTAT: super::c_long = 5;
    pub const MUNMAP: super::c_long = 11;
    pub const MADVISE: super::c_long = 28;
}
#[cfg(target_arch = "aarch64")]
mod nr {
    pub const CLOSE: super::c_long = 57;
    pub const FSTAT: super::c_long = 80;
    pub const MUNMAP: super::c_long = 215;
    pub const MADVISE: super::c_long = 233;
}

#[repr(C)]
pub struct Timespec {
    pub tv_sec: i64,
    pub tv_nsec: i64,
}

/// `sigset_t` and `cpu_set_t` are both 1024 bits in glibc.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Bits1024(pub [u64; 16]);

#[repr(C)]
pub struct Iovec {
    pub base: *mut c_void,
    pub len: SizeT,
}

#[repr(C)]
pub struct Msghdr {
    pub name: *mut c_void,
    pub namelen: SocklenT,
    pub iov: *mut Iovec,
    pub iovlen: SizeT,
    pub control: *mut c_void,
    pub controllen: SizeT,
    pub flags: c_int,
}

#[repr(C)]
pub struct Linger {
    pub onoff: c_int,
    pub linger: c_int,
}

extern "C" {
    pub fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    pub fn __errno_location() -> *mut c_int;
    pub fn syscall(number: c_long, ...) -> c_long;
    pub fn getpid() -> c_int;
    pub fn getenv(name: *const c_char) -> *mut c_char;
    pub fn setenv(name: *const c_char, value: *const c_char, overwrite: c_int) -> c_int;
    pub fn unsetenv(name: *const c_char) -> c_int;
    pub fn getsockopt(
        fd: c_int,
        level: c_int,
        name: c_int,
        value: *mut c_void,
        len: *mut SocklenT,
    ) -> c_int;
    pub fn fcntl(fd: c_int, cmd: c_int, ...) -> c_int;
    pub fn lseek(fd: c_int, offset: i64, whence: c_int) -> i64;
    pub fn mmap(
        addr: *mut c_void,
        len: SizeT,
        prot: c_int,
        flags: c_int,
        fd: c_int,
        offset: i64,
    ) -> *mut c_void;
    pub fn prctl(option: c_int, ...) -> c_int;
    pub fn clock_gettime(clock: c_int, ts: *mut Timespec) -> c_int;
    pub fn pthread_getcpuclockid(thread: PthreadT, clock: *mut c_int) -> c_int;
    pub fn pthread_create(
        thread: *mut PthreadT,
        attr: *const c_void,
        start: extern "C" fn(*mut c_void) -> *mut c_void,
        arg: *mut c_void,
    ) -> c_int;
    pub fn pthread_detach(thread: PthreadT) -> c_int;
    pub fn pthread_self() -> PthreadT;
    pub fn pthread_kill(thread: PthreadT, sig: c_int) -> c_int;
    pub fn pthread_sigmask(how: c_int, set: *const Bits1024, old: *mut Bits1024) -> c_int;
    pub fn pthread_key_create(key: *mut c_uint, destructor: extern "C" fn(*mut c_void)) -> c_int;
    pub fn pthread_setspecific(key: c_uint, value: *const c_void) -> c_int;
    pub fn pthread_atfork(
        prepare: Option<extern "C" fn()>,
        parent: Option<extern "C" fn()>,
        child: Option<extern "C" fn()>,
    ) -> c_int;
    pub fn sched_getaffinity(pid: c_int, size: SizeT, mask: *mut Bits1024) -> c_int;
    pub fn sched_setaffinity(pid: c_int, size: SizeT, mask: *const Bits1024) -> c_int;
}

pub fn errno() -> c_int {
    // SAFETY: __errno_location returns the calling thread's errno, valid for its lifetime.
    unsafe { *__errno_location() }
}

pub fn set_errno(value: c_int) {
    // SAFETY: as in `errno`.
    unsafe { *__errno_location() = value }
}

// Straight to the kernel, one system call each: async-signal-safe, so usable in a forked
// child's atfork handler, and never through the library's own `close` export.

/// close(2); the kernel's return (0 or -errno).
pub fn sys_close(fd: c_int) -> c_long {
    // SAFETY: close takes no pointer; closing an fd the caller owns.
    unsafe { syscall(nr::CLOSE, fd) }
}

/// munmap(2) of a mapping the caller made; the kernel's return.
pub fn sys_munmap(addr: usize, len: usize) -> c_long {
    // SAFETY: the caller passes a mapping of its own that nothing uses any more.
    unsafe { syscall(nr::MUNMAP, addr, len) }
}

/// madvise(2); the kernel's return.
pub fn sys_madvise(addr: usize, len: usize, advice: c_int) -> c_long {
    // SAFETY: advice on a mapping the caller made; it takes no other pointer.
    unsafe { syscall(nr::MADVISE, addr, len, advice) }
}

/// The (device, inode) of an open fd: what it is, whatever its number.
pub fn sys_fd_identity(fd: c_int) -> Option<(u64, u64)> {
    // `struct stat` begins with st_dev and st_ino, both 64-bit, on x86_64 and aarch64; it is
    // at most 144 bytes there.
    let mut buf = [0u64; 32];
    // SAFETY: `buf` is larger than `struct stat` and lives across the call.
    let rc = unsafe { syscall(nr::FSTAT, fd, buf.as_mut_ptr()) };
    (rc == 0).then_some((buf[0], buf[1]))
}
