//! System calls made straight to the kernel.

use core::sync::atomic::AtomicU32;

use super::*;

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

/// fcntl(fd, F_DUPFD_CLOEXEC, lowest): a close-on-exec copy of `fd` at the lowest free number
/// from `lowest` on; the kernel's return (the new fd or -errno).
pub fn sys_dupfd_cloexec(fd: c_int, lowest: c_int) -> c_long {
    const F_DUPFD_CLOEXEC: usize = 1030;
    // SAFETY: F_DUPFD_CLOEXEC takes an integer, no pointer.
    unsafe { raw(nr::FCNTL, [fd as usize, F_DUPFD_CLOEXEC, lowest as usize, 0, 0, 0]) }
}

/// munmap(2) of a mapping the caller made; the kernel's return.
///
/// # Safety
/// Nothing may use the mapping any more (no reference into it may live on).
pub(super) unsafe fn sys_munmap(addr: usize, len: usize) -> c_long {
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

/// Lets any other runnable thread on this CPU run first (returns at once when there is none).
pub fn sys_sched_yield() {
    // SAFETY: sched_yield takes no argument.
    unsafe { raw(nr::SCHED_YIELD, [0; 6]) };
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
pub(super) unsafe fn sys_io_uring_setup(entries: u32, params: *mut c_void) -> c_long {
    // SAFETY: the caller's promise.
    unsafe { raw(nr::IO_URING_SETUP, [entries as usize, params as usize, 0, 0, 0, 0]) }
}

/// io_uring_enter(2).
///
/// # Safety
/// `arg` must be NULL or a live argument of `size` bytes.
pub(super) unsafe fn sys_io_uring_enter(
    fd: c_int,
    a: [usize; 4],
    arg: usize,
    size: usize,
) -> c_long {
    // SAFETY: the caller's promise.
    unsafe { raw(nr::IO_URING_ENTER, [fd as usize, a[0], a[1], a[2], arg, size]) }
}

/// io_uring_register(2).
///
/// # Safety
/// `arg` must be NULL or point to `count` entries of what `opcode` reads.
pub(super) unsafe fn sys_io_uring_register(
    fd: c_int,
    opcode: u32,
    arg: usize,
    count: u32,
) -> c_long {
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
