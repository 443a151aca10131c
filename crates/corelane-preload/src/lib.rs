//! corelane's system-call library (seed 003): preloaded by `corelane run`, it carries a
//! program's network calls — the send and receive families, read/write/readv/writev on
//! sockets, sendfile, accept, connect, poll and epoll waits, close of sockets — to syscall
//! threads pinned to the syscall CPUs. Everything else goes straight to libc. Loaded without
//! `corelane run`'s environment it passes every call through untouched.
//!
//! `syscall(SYS_…)` and glibc's internal calls (for instance inside getaddrinfo) bypass it.
// An interposer is FFI through and through: `#[no_mangle]` exports, `dlsym`, raw pointers
// handed on to libc. Every unsafe block says why it is sound.
#![allow(unsafe_code)]

/// The real libc function `name` (dlsym RTLD_NEXT, resolved once), or None with errno ENOSYS
/// when this libc has no such symbol. Must be used inside an `unsafe` block.
macro_rules! real {
    ($name:ident ( $($t:ty),* $(,)? ) -> $r:ty) => {{
        static P: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
        let mut p = P.load(core::sync::atomic::Ordering::Relaxed);
        if p == 0 {
            p = $crate::ffi::dlsym(
                $crate::ffi::RTLD_NEXT,
                concat!(stringify!($name), "\0").as_ptr().cast(),
            ) as usize;
            P.store(p, core::sync::atomic::Ordering::Relaxed);
        }
        if p == 0 {
            $crate::ffi::set_errno($crate::ffi::ENOSYS);
            None
        } else {
            Some(core::mem::transmute::<usize, unsafe extern "C" fn($($t),*) -> $r>(p))
        }
    }};
}

// The contract with `corelane run`; its users move onto it one by one.
#[allow(dead_code)]
mod abi;
mod config;
mod exec;
mod exports;
mod ffi;
mod lane;
mod sockets;
mod stats;
mod uring;
