//! Everything unsafe the library does, in one place: the C declarations it needs (written out
//! so the crate has no dependencies: the build script compiles it with rustc alone), the real
//! libc functions found with dlsym (`real!`, `real.rs`), the system calls it makes itself
//! (inline assembly, never through the `syscall` symbol, which is the library's own
//! interposer: `kernel.rs`), errno, `environ` (`envp.rs`), the counters' shared mapping
//! (`area.rs`), what it asks of an fd (`fd.rs`) and of threads (`thread.rs`), and the lanes'
//! shared memory: the request slots (`slot.rs`) and the io_uring (`ring.rs`), which carry a
//! program's [`Call`] (`call.rs`). Linux, glibc, 64-bit (x86_64, aarch64).
//!
//! Outside this module only the exports (`#[no_mangle]` items, the C interface) use unsafe:
//! they receive the program's raw pointers and make a [`Call`] or hand them to `real::`.

pub use core::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void};

pub type SsizeT = isize;
pub type SizeT = usize;
pub type SocklenT = u32;
pub type PthreadT = usize;

pub const RTLD_NEXT: *mut c_void = -1isize as *mut c_void;

pub const EAGAIN: c_int = 11;
pub const EPIPE: c_int = 32;
pub const ENOSYS: c_int = 38;
pub const ENOTSOCK: c_int = 88;

/// UIO_MAXIOV: the most pieces a vector may have.
pub const IOV_MAX: usize = 1024;

pub const MSG_WAITALL: c_int = 0x100;
pub const MSG_DONTWAIT: c_int = 0x40;
pub const MSG_NOSIGNAL: c_int = 0x4000;

pub const SOL_SOCKET: c_int = 1;
pub const SO_TYPE: c_int = 3;
pub const SO_LINGER: c_int = 13;
pub const SOCK_STREAM: c_int = 1;

pub const F_DUPFD: c_int = 0;
pub const F_GETFL: c_int = 3;
pub const F_DUPFD_CLOEXEC: c_int = 1030;
pub const SPLICE_F_NONBLOCK: c_uint = 2;
pub const O_NONBLOCK: c_int = 0o4000;
pub const SIGPIPE: c_int = 13;
pub const SIG_SETMASK: c_int = 2;

pub const PROT_READ_WRITE: c_int = 0x1 | 0x2;
pub const MAP_SHARED: c_int = 0x01;
pub const MAP_FAILED: *mut c_void = !0usize as *mut c_void;
pub const MADV_DONTFORK: c_int = 10;

pub const PR_SET_NAME: c_int = 15;
pub const PR_SET_TIMERSLACK: c_int = 29;
pub const CLOCK_MONOTONIC: c_int = 1;
pub const CLOCK_THREAD_CPUTIME_ID: c_int = 3;
pub const CLOCK_MONOTONIC_COARSE: c_int = 6;
pub const FUTEX_WAIT_PRIVATE: c_int = 128;
pub const FUTEX_WAKE_PRIVATE: c_int = 129;

/// System-call numbers: the ones the library makes itself, and the ones its `syscall()`
/// interposer looks at. `DUP2` does not exist on aarch64 (-1 matches no call).
#[cfg(target_arch = "x86_64")]
pub mod nr {
    use super::c_long;
    pub const CLOSE: c_long = 3;
    pub const FSTAT: c_long = 5;
    pub const FCNTL: c_long = 72;
    pub const MUNMAP: c_long = 11;
    pub const MADVISE: c_long = 28;
    pub const DUP2: c_long = 33;
    pub const EXIT_GROUP: c_long = 231;
    pub const GETTID: c_long = 186;
    pub const SCHED_YIELD: c_long = 24;
    pub const FUTEX: c_long = 202;
    pub const SETUID: c_long = 105;
    pub const SETGID: c_long = 106;
    pub const SETREUID: c_long = 113;
    pub const SETREGID: c_long = 114;
    pub const SETGROUPS: c_long = 116;
    pub const SETRESUID: c_long = 117;
    pub const SETRESGID: c_long = 119;
    pub const SETFSUID: c_long = 122;
    pub const SETFSGID: c_long = 123;
    pub const CAPSET: c_long = 126;
    pub const PRCTL: c_long = 157;
    pub const UNSHARE: c_long = 272;
    pub const DUP3: c_long = 292;
    pub const SETNS: c_long = 308;
    pub const KCMP: c_long = 312;
    pub const SECCOMP: c_long = 317;
    pub const IO_URING_SETUP: c_long = 425;
    pub const IO_URING_ENTER: c_long = 426;
    pub const IO_URING_REGISTER: c_long = 427;
    pub const CLOSE_RANGE: c_long = 436;
    pub const LANDLOCK_RESTRICT_SELF: c_long = 446;
}
#[cfg(target_arch = "aarch64")]
pub mod nr {
    use super::c_long;
    pub const CLOSE: c_long = 57;
    pub const FSTAT: c_long = 80;
    pub const FCNTL: c_long = 25;
    pub const MUNMAP: c_long = 215;
    pub const MADVISE: c_long = 233;
    pub const DUP2: c_long = -1;
    pub const EXIT_GROUP: c_long = 94;
    pub const GETTID: c_long = 178;
    pub const SCHED_YIELD: c_long = 124;
    pub const FUTEX: c_long = 98;
    pub const SETUID: c_long = 146;
    pub const SETGID: c_long = 144;
    pub const SETREUID: c_long = 145;
    pub const SETREGID: c_long = 143;
    pub const SETGROUPS: c_long = 159;
    pub const SETRESUID: c_long = 147;
    pub const SETRESGID: c_long = 149;
    pub const SETFSUID: c_long = 151;
    pub const SETFSGID: c_long = 152;
    pub const CAPSET: c_long = 91;
    pub const PRCTL: c_long = 167;
    pub const UNSHARE: c_long = 97;
    pub const DUP3: c_long = 24;
    pub const SETNS: c_long = 268;
    pub const KCMP: c_long = 272;
    pub const SECCOMP: c_long = 277;
    pub const IO_URING_SETUP: c_long = 425;
    pub const IO_URING_ENTER: c_long = 426;
    pub const IO_URING_REGISTER: c_long = 427;
    pub const CLOSE_RANGE: c_long = 436;
    pub const LANDLOCK_RESTRICT_SELF: c_long = 446;
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

/// struct timeval.
#[repr(C)]
pub struct Timeval {
    pub tv_sec: i64,
    pub tv_usec: i64,
}

/// `struct rusage`: two timevals, then fourteen longs (the last, `ru_nivcsw`, the involuntary
/// context switches).
#[repr(C)]
pub struct Rusage(pub [i64; 18]);

#[repr(C)]
pub struct Linger {
    pub onoff: c_int,
    pub linger: c_int,
}

extern "C" {
    pub fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    pub fn __errno_location() -> *mut c_int;
    pub fn getsockopt(
        fd: c_int,
        level: c_int,
        name: c_int,
        value: *mut c_void,
        len: *mut SocklenT,
    ) -> c_int;
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
    pub fn getrusage(who: c_int, usage: *mut Rusage) -> c_int;
}

/// The real libc function `name` (dlsym RTLD_NEXT, resolved once), or None with errno ENOSYS
/// when this libc has no such symbol. The signature written at the call must be the C one of
/// `name`: the transmute below is only as right as it. Must be used inside an `unsafe` block.
macro_rules! real {
    ($name:ident ( $($t:ty),* $(,)? ) -> $r:ty) => {{
        static P: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
        let mut p = P.load(core::sync::atomic::Ordering::Relaxed);
        if p == 0 {
            p = $crate::sys::dlsym(
                $crate::sys::RTLD_NEXT,
                concat!(stringify!($name), "\0").as_ptr().cast(),
            ) as usize;
            P.store(p, core::sync::atomic::Ordering::Relaxed);
        }
        if p == 0 {
            $crate::sys::set_errno($crate::sys::ENOSYS);
            None
        } else {
            Some(core::mem::transmute::<usize, unsafe extern "C" fn($($t),*) -> $r>(p))
        }
    }};
}

pub fn errno() -> c_int {
    // SAFETY: __errno_location returns the calling thread's errno, valid for its lifetime.
    unsafe { *__errno_location() }
}

pub fn set_errno(value: c_int) {
    // SAFETY: as in `errno`.
    unsafe { *__errno_location() = value }
}

mod area;
mod call;
mod envp;
mod fd;
mod fdset;
mod fdtable;
mod kernel;
pub mod real;
pub mod ring;
mod slot;
pub mod spin;
mod thread;

pub use area::Area;
pub use call::{msg_bytes, send_rest, Call};
pub use envp::{environ_apply, environ_entries};
pub use fd::{lingers, move_high, socket_type, status_flags};
pub use fdset::{received_fds, received_fds_each, FdSets};
pub use fdtable::FdBytes;
pub use kernel::*;
pub use slot::{reset_slots, slot, Outcome, Slot, MAX_SLOTS};
pub use thread::*;
