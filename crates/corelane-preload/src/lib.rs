//! corelane's system-call library (seed 003): preloaded by `corelane run`, it carries a
//! program's network calls — the send and receive families, read/write/readv/writev on
//! sockets, sendfile, accept, connect, poll and epoll waits, close of sockets — to syscall
//! threads pinned to the syscall CPUs (or io_uring's SQPOLL thread), never with more rights
//! than the calling thread has (`rights.rs`). Everything else goes straight to libc. Loaded
//! without `corelane run`'s environment it passes every call through untouched.
//!
//! glibc's internal calls (for instance inside getaddrinfo) bypass it; `syscall(SYS_…)` is
//! seen only for what changes a thread's rights or the lane's descriptor (`raw.rs`).
//!
//! Unsafe code: `sys` holds the C declarations, dlsym (`real!`), the system calls the library
//! makes itself, `environ` and the counters' mapping. The other modules allowed it are the C
//! interface itself: `#[no_mangle]` exports and the constructor's `link_section` (which the
//! `unsafe_code` lint counts as unsafe), whose bodies hand the caller's own pointers to the
//! real libc function, and (still, see each) the lanes' shared-memory handling.

#[allow(unsafe_code)]
#[macro_use]
mod sys;

// Shared with `corelane run`'s reader, which uses the rest.
#[allow(dead_code)]
mod abi;
#[allow(unsafe_code)]
mod config;
mod environ;
#[allow(unsafe_code)]
mod exec;
#[allow(unsafe_code)]
mod exit;
#[allow(unsafe_code)]
mod exports;
#[allow(unsafe_code)]
mod lane;
#[allow(unsafe_code)]
mod raw;
#[allow(unsafe_code)]
mod rights;
#[allow(unsafe_code)]
mod sockets;
mod state;
mod stats;
#[allow(unsafe_code)]
mod uring;
