//! Threads: affinity, fork handlers, the library's syscall threads.

use core::sync::atomic::AtomicU32;
use core::sync::atomic::Ordering::{Acquire, Release};

use super::*;

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

/// The library's one thread-specific key (u32::MAX: none yet): its destructor is handed a
/// thread's value when the thread exits.
static KEY: AtomicU32 = AtomicU32::new(u32::MAX);

/// Creates the key whose `destructor` gets an exiting thread's value (see
/// [`set_thread_value`]); called once, from the library's constructor.
pub fn create_thread_key(destructor: extern "C" fn(*mut c_void)) {
    let mut key: c_uint = 0;
    // SAFETY: `key` is a valid out pointer; `destructor` has the signature pthread calls it
    // with, and treats its argument as an integer (never dereferenced).
    if unsafe { pthread_key_create(&mut key, destructor) } == 0 {
        KEY.store(key, Release);
    }
}

/// Sets the calling thread's value of the key (an integer the destructor gets back); nothing
/// if the key was never made.
pub fn set_thread_value(value: usize) {
    let key = KEY.load(Acquire);
    if key != u32::MAX {
        // SAFETY: the key was made by pthread_key_create; the value is an integer, never
        // dereferenced by pthread.
        unsafe { pthread_setspecific(key, value as *const c_void) };
    }
}

/// Starts up to `count` detached threads, thread `n` running `start` with `n` as its
/// argument (an integer), each with every signal blocked: the mask is inherited, so no signal
/// meant for the program ever runs on one; the caller's own mask is restored after.
/// `created(n, thread)` is told of each as it is made, before it is detached. Stops at the
/// first that cannot be made; returns how many were.
pub fn spawn_detached(
    count: usize,
    start: extern "C" fn(*mut c_void) -> *mut c_void,
    mut created: impl FnMut(usize, PthreadT),
) -> usize {
    let all = Bits1024([u64::MAX; 16]);
    let mut old = Bits1024([0; 16]);
    // SAFETY: both masks are valid and live across the call.
    unsafe { pthread_sigmask(SIG_SETMASK, &all, &mut old) };
    let mut started = 0;
    for n in 0..count {
        let mut thread: PthreadT = 0;
        // SAFETY: `start` has the start routine's signature; its argument is an integer;
        // `thread` is a valid out pointer.
        let rc = unsafe { pthread_create(&mut thread, core::ptr::null(), start, n as *mut c_void) };
        if rc != 0 {
            break;
        }
        created(n, thread);
        // SAFETY: the thread was just created and is never joined.
        unsafe { pthread_detach(thread) };
        started += 1;
    }
    // SAFETY: restores the mask saved above.
    unsafe { pthread_sigmask(SIG_SETMASK, &old, core::ptr::null_mut()) };
    started
}

/// Pins the calling thread to `cpu` (below 1024), names it `name` (what /proc shows) and
/// gives its timed waits no slack (a syscall thread's naps are 25 µs; the default slack is
/// 50 µs).
pub fn pin_and_name(cpu: usize, name: &core::ffi::CStr) {
    let mut mask = Bits1024([0; 16]);
    mask.0[cpu / 64 % 16] |= 1 << (cpu % 64);
    // SAFETY: the mask and the NUL-terminated name outlive the calls; PR_SET_NAME reads at
    // most 16 bytes of the name, up to its NUL; PR_SET_TIMERSLACK takes a number.
    unsafe {
        sched_setaffinity(0, core::mem::size_of::<Bits1024>(), &mask);
        prctl(PR_SET_NAME, name.as_ptr());
        prctl(PR_SET_TIMERSLACK, 1usize);
    }
}

/// A thread's CPU time in ns, by its thread id: the clock glibc's pthread_getcpuclockid
/// names for that thread (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)); None when the thread is
/// gone or the clock cannot be read. Asking by id rather than by pthread handle needs no
/// promise that the handle's thread is still alive.
pub fn thread_cpu_ns(tid: u32) -> Option<u64> {
    const CPUCLOCK_SCHED: c_int = 2;
    const CPUCLOCK_PERTHREAD: c_int = 4;
    if tid == 0 {
        return None;
    }
    clock_ns((!(tid as c_int) << 3) | CPUCLOCK_SCHED | CPUCLOCK_PERTHREAD)
}

/// Raises SIGPIPE in the calling thread, as the kernel does for a send on a broken pipe.
pub fn raise_sigpipe() {
    // SAFETY: signals the calling thread itself, with a valid signal.
    unsafe { pthread_kill(pthread_self(), SIGPIPE) };
}

/// How many times the calling thread was preempted (`ru_nivcsw` of getrusage(RUSAGE_THREAD)):
/// a rise means another thread wanted its CPU. Keeps errno.
pub fn involuntary_switches() -> Option<u64> {
    const RUSAGE_THREAD: c_int = 1;
    let mut usage = Rusage([0; 18]);
    let saved = errno();
    // SAFETY: `usage` is a valid out struct rusage (144 bytes on 64-bit Linux).
    let rc = unsafe { getrusage(RUSAGE_THREAD, &mut usage) };
    set_errno(saved);
    (rc == 0).then_some(usage.0[17] as u64)
}
