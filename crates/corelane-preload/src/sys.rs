//! Everything unsafe the library does, in one place: the C declarations it needs (written out
//! so the crate has no dependencies: the build script compiles it with rustc alone), the real
//! libc functions found with dlsym (`real!`), the system calls it makes itself (inline
//! assembly, never through the `syscall` symbol, which is the library's own interposer),
//! errno, `environ`, and the counters' shared mapping. Linux, glibc, 64-bit (x86_64, aarch64).

pub use core::ffi::{c_char, c_int, c_long, c_uint, c_ulong, c_void};
use core::sync::atomic::{AtomicU32, AtomicU64};

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
pub const O_NONBLOCK: c_int = 0o4000;
pub const SIGPIPE: c_int = 13;
pub const SIG_SETMASK: c_int = 2;

pub const PROT_READ_WRITE: c_int = 0x1 | 0x2;
pub const MAP_SHARED: c_int = 0x01;
pub const MAP_FAILED: *mut c_void = !0usize as *mut c_void;
pub const MADV_DONTFORK: c_int = 10;

pub const PR_SET_NAME: c_int = 15;
pub const CLOCK_MONOTONIC: c_int = 1;
pub const CLOCK_THREAD_CPUTIME_ID: c_int = 3;
pub const FUTEX_WAIT_PRIVATE: c_int = 128;
pub const FUTEX_WAKE_PRIVATE: c_int = 129;

/// System-call numbers: the ones the library makes itself, and the ones its `syscall()`
/// interposer looks at. `DUP2` does not exist on aarch64 (-1 matches no call).
#[cfg(target_arch = "x86_64")]
pub mod nr {
    use super::c_long;
    pub const CLOSE: c_long = 3;
    pub const FSTAT: c_long = 5;
    pub const MUNMAP: c_long = 11;
    pub const MADVISE: c_long = 28;
    pub const DUP2: c_long = 33;
    pub const EXIT_GROUP: c_long = 231;
    pub const GETTID: c_long = 186;
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
    pub const MUNMAP: c_long = 215;
    pub const MADVISE: c_long = 233;
    pub const DUP2: c_long = -1;
    pub const EXIT_GROUP: c_long = 94;
    pub const GETTID: c_long = 178;
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
    pub fn fcntl(fd: c_int, cmd: c_int, ...) -> c_int;
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

// ---- System calls made straight to the kernel ------------------------------------------
// One instruction each, never through libc's `syscall` (the program's calls to that symbol
// come to this library's interposer, `raw.rs`): async-signal-safe, so usable in a forked
// child's atfork handler, and never through the library's own `close` export.

/// One system call with six integer arguments; the kernel's return (a value or -errno).
///
/// # Safety
/// The arguments must be valid for call `number`: any pointer among them must point to memory
/// the kernel may read or write as that call does.
#[cfg(target_arch = "x86_64")]
unsafe fn raw(number: c_long, a: [usize; 6]) -> c_long {
    let ret: c_long;
    // SAFETY: the `syscall` instruction clobbers rcx and r11 only (declared); the caller
    // answers for the arguments.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") number => ret,
            in("rdi") a[0], in("rsi") a[1], in("rdx") a[2],
            in("r10") a[3], in("r8") a[4], in("r9") a[5],
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// As above, for aarch64 (`svc 0`, number in x8).
///
/// # Safety
/// As above.
#[cfg(target_arch = "aarch64")]
unsafe fn raw(number: c_long, a: [usize; 6]) -> c_long {
    let ret: c_long;
    // SAFETY: `svc 0` returns in x0 and clobbers nothing else; the caller answers for the
    // arguments.
    unsafe {
        core::arch::asm!(
            "svc 0",
            in("x8") number,
            inlateout("x0") a[0] => ret,
            in("x1") a[1], in("x2") a[2], in("x3") a[3], in("x4") a[4], in("x5") a[5],
            options(nostack),
        );
    }
    ret
}

/// close(2); the kernel's return (0 or -errno).
pub fn sys_close(fd: c_int) -> c_long {
    // SAFETY: close takes no pointer.
    unsafe { raw(nr::CLOSE, [fd as usize, 0, 0, 0, 0, 0]) }
}

/// munmap(2) of a mapping the caller made; the kernel's return.
///
/// # Safety
/// Nothing may use the mapping any more (no reference into it may live on).
pub unsafe fn sys_munmap(addr: usize, len: usize) -> c_long {
    // SAFETY: the caller gives up the mapping.
    unsafe { raw(nr::MUNMAP, [addr, len, 0, 0, 0, 0]) }
}

/// madvise(2); the kernel's return. Advice changes no memory the caller can see.
pub fn sys_madvise(addr: usize, len: usize, advice: c_int) -> c_long {
    // SAFETY: madvise takes no pointer it reads or writes (the range is only advised on);
    // the library passes MADV_DONTFORK only.
    unsafe { raw(nr::MADVISE, [addr, len, advice as usize, 0, 0, 0]) }
}

/// What `fstat` says of an open fd: (device, inode, size).
pub fn sys_fstat(fd: c_int) -> Option<(u64, u64, u64)> {
    // `struct stat` begins with st_dev and st_ino, both 64-bit, on x86_64 and aarch64, and has
    // st_size at byte 48 on both; it is at most 144 bytes there.
    let mut buf = [0u64; 32];
    // SAFETY: `buf` is larger than `struct stat` and lives across the call.
    let rc = unsafe { raw(nr::FSTAT, [fd as usize, buf.as_mut_ptr() as usize, 0, 0, 0, 0]) };
    (rc == 0).then_some((buf[0], buf[1], buf[6]))
}

/// The (device, inode) of an open fd: what it is, whatever its number.
pub fn sys_fd_identity(fd: c_int) -> Option<(u64, u64)> {
    sys_fstat(fd).map(|(dev, ino, _)| (dev, ino))
}

/// The calling thread's id.
pub fn sys_gettid() -> u32 {
    // SAFETY: gettid takes no argument.
    unsafe { raw(nr::GETTID, [0; 6]) as u32 }
}

/// Whether threads `a` and `b` (of this process) share one descriptor table (kcmp
/// KCMP_FILES); None when the kernel cannot say (no kcmp, a thread gone).
pub fn sys_same_fd_table(a: u32, b: u32) -> Option<bool> {
    const KCMP_FILES: usize = 2;
    // SAFETY: kcmp takes no pointer for KCMP_FILES.
    let rc = unsafe { raw(nr::KCMP, [a as usize, b as usize, KCMP_FILES, 0, 0, 0]) };
    (rc >= 0).then_some(rc == 0)
}

/// FUTEX_WAIT on `word` while it holds `expected`, for at most `timeout` if given.
pub fn sys_futex_wait(word: &AtomicU32, expected: u32, timeout: Option<&Timespec>) {
    let ts = timeout.map_or(0, |t| t as *const Timespec as usize);
    let args = [word.as_ptr() as usize, FUTEX_WAIT_PRIVATE as usize, expected as usize, ts, 0, 0];
    // SAFETY: the futex word is a live atomic; the timeout, when given, outlives the call.
    unsafe { raw(nr::FUTEX, args) };
}

/// FUTEX_WAKE of every waiter on `word`.
pub fn sys_futex_wake(word: &AtomicU32) {
    let args = [word.as_ptr() as usize, FUTEX_WAKE_PRIVATE as usize, i32::MAX as usize, 0, 0, 0];
    // SAFETY: the futex word is a live atomic.
    unsafe { raw(nr::FUTEX, args) };
}

/// io_uring_setup(2): a new ring's fd (or -errno); `params` filled in by the kernel.
///
/// # Safety
/// `params` must point to a writable `struct io_uring_params`.
pub unsafe fn sys_io_uring_setup(entries: u32, params: *mut c_void) -> c_long {
    // SAFETY: the caller's promise.
    unsafe { raw(nr::IO_URING_SETUP, [entries as usize, params as usize, 0, 0, 0, 0]) }
}

/// io_uring_enter(2).
///
/// # Safety
/// `arg` must be NULL or a live argument of `size` bytes.
pub unsafe fn sys_io_uring_enter(fd: c_int, a: [usize; 4], arg: usize, size: usize) -> c_long {
    // SAFETY: the caller's promise.
    unsafe { raw(nr::IO_URING_ENTER, [fd as usize, a[0], a[1], a[2], arg, size]) }
}

/// io_uring_register(2).
///
/// # Safety
/// `arg` must be NULL or point to `count` entries of what `opcode` reads.
pub unsafe fn sys_io_uring_register(fd: c_int, opcode: u32, arg: usize, count: u32) -> c_long {
    // SAFETY: the caller's promise.
    unsafe { raw(nr::IO_URING_REGISTER, [fd as usize, opcode as usize, arg, count as usize, 0, 0]) }
}

/// exit_group(2): the end of the process.
pub fn sys_exit_group(status: c_int) -> ! {
    loop {
        // SAFETY: exit_group takes no pointer and does not return.
        unsafe { raw(nr::EXIT_GROUP, [status as usize, 0, 0, 0, 0, 0]) };
    }
}

/// CLOCK_MONOTONIC in ns.
pub fn monotonic_ns() -> u64 {
    clock_ns(CLOCK_MONOTONIC).unwrap_or(0)
}

/// A clock's reading in ns, or None if it cannot be read.
pub fn clock_ns(clock: c_int) -> Option<u64> {
    let mut ts = Timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out pointer.
    let ok = unsafe { clock_gettime(clock, &mut ts) } == 0;
    ok.then(|| (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64))
}

// ---- environ ------------------------------------------------------------------------------

extern "C" {
    static mut environ: *mut *mut c_char;
}

/// Upper bound on the entries read from `environ` (a hostile environment is bounded too).
const MAX_ENVIRON: usize = 1 << 16;

/// A copy of every `environ` entry (`NAME=value` bytes), in order.
///
/// Called only from the library's constructor, before main, while the process has one thread.
pub fn environ_entries() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    // SAFETY: `environ` is NULL or a NULL-terminated array of NUL-terminated strings (the
    // process's environment); no other thread exists yet to change it.
    unsafe {
        let list = environ;
        if list.is_null() {
            return out;
        }
        for i in 0..MAX_ENVIRON {
            let entry = *list.add(i);
            if entry.is_null() {
                break;
            }
            out.push(core::ffi::CStr::from_ptr(entry).to_bytes().to_vec());
        }
    }
    out
}

/// Applies an edit of `environ` made by [`crate::environ::without_library`] over the same
/// entries: `keep[i]` is None to drop entry i (its pointer leaves the array, the rest move
/// down), or the bytes entry i becomes, which are never longer than it (written in place).
///
/// Called only from the library's constructor, before main, while the process has one thread.
pub fn environ_apply(keep: &[Option<Vec<u8>>]) {
    // SAFETY: as in `environ_entries`; the entries are the ones it read (same count, same
    // order, nothing has run in between). A rewritten entry is written inside its own string
    // (never longer, the NUL included), and pointers only move towards the start of the array.
    unsafe {
        let list = environ;
        if list.is_null() {
            return;
        }
        let mut to = 0;
        for (from, kept) in keep.iter().enumerate() {
            let entry = *list.add(from);
            if entry.is_null() {
                break;
            }
            let Some(bytes) = kept else { continue };
            let old = core::ffi::CStr::from_ptr(entry).to_bytes().len();
            if bytes.len() <= old {
                core::ptr::copy_nonoverlapping(bytes.as_ptr(), entry.cast::<u8>(), bytes.len());
                *entry.add(bytes.len()) = 0;
            }
            *list.add(to) = entry;
            to += 1;
        }
        *list.add(to) = core::ptr::null_mut();
    }
}

// ---- The counters' mapping -------------------------------------------------------------

/// A shared mapping of a file, made once and never unmapped: its words can be handed out as
/// `&'static` atomics.
#[derive(Clone, Copy)]
pub struct Area {
    base: usize,
    len: usize,
}

impl Area {
    /// Maps `len` bytes of `fd` shared, read-write, if `fd` is (device, inode) and at least
    /// `len` long. Only fstat and mmap: the fd's offset and flags stay as they were.
    pub fn map(fd: c_int, dev: u64, ino: u64, len: usize) -> Option<Area> {
        let (d, i, size) = sys_fstat(fd)?;
        if (d, i) != (dev, ino) || size < len as u64 {
            return None;
        }
        // SAFETY: a fresh shared mapping of `len` bytes of a file at least that long (the
        // creator sealed it against shrinking, so no access faults); nothing else is mapped
        // over.
        let base = unsafe { mmap(core::ptr::null_mut(), len, PROT_READ_WRITE, MAP_SHARED, fd, 0) };
        (base != MAP_FAILED).then_some(Area { base: base as usize, len })
    }

    /// The 64-bit word at byte `offset`, if it lies inside and is aligned.
    pub fn u64_at(self, offset: usize) -> Option<&'static AtomicU64> {
        (offset % 8 == 0 && offset.checked_add(8)? <= self.len).then(|| {
            // SAFETY: inside the mapping, aligned, and the mapping is never unmapped; other
            // processes write it too, hence atomics only.
            unsafe { &*((self.base + offset) as *const AtomicU64) }
        })
    }

    /// The 32-bit word at byte `offset`, if it lies inside and is aligned.
    pub fn u32_at(self, offset: usize) -> Option<&'static AtomicU32> {
        (offset % 4 == 0 && offset.checked_add(4)? <= self.len).then(|| {
            // SAFETY: as in `u64_at`.
            unsafe { &*((self.base + offset) as *const AtomicU32) }
        })
    }
}

/// The calling thread's CPU affinity.
pub fn sched_affinity() -> Option<Bits1024> {
    let mut mask = Bits1024([0; 16]);
    // SAFETY: `mask` is a valid out mask of the size given.
    let rc = unsafe { sched_getaffinity(0, core::mem::size_of::<Bits1024>(), &mut mask) };
    (rc == 0).then_some(mask)
}

/// Runs `handler` in the child of every fork (pthread_atfork).
pub fn at_fork_in_child(handler: extern "C" fn()) {
    // SAFETY: a plain extern "C" fn with no arguments, as pthread_atfork calls it.
    unsafe { pthread_atfork(None, None, Some(handler)) };
}
