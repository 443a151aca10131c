//! corelane's system-call library (seed 003): preloaded by `corelane run`, it carries a
//! program's network calls — the send and receive families, read/write/readv/writev on
//! sockets, sendfile, accept, connect, poll, select and epoll waits, splice that may not
//! block, close of sockets — to syscall threads pinned to the syscall CPUs, or io_uring's
//! SQPOLL thread (which carries the send and receive families with or without addresses,
//! read/write/readv/writev on sockets and accept: `uring.rs`), never with more rights than the
//! calling thread has (`rights.rs`). Which fds are sockets is followed for every descriptor
//! number however it is made, copied or closed (`sockets.rs`). Everything else goes straight
//! to libc. A static or Go program never calls it: `corelane run` says so. Loaded
//! without `corelane run`'s environment it passes every call through untouched.
//!
//! glibc's internal calls (for instance inside getaddrinfo) bypass it; `syscall(SYS_…)` is
//! seen only for what changes a thread's rights or the lane's descriptor (`raw.rs`).
//!
//! Unsafe code: all of it in `sys` (C declarations, dlsym, the library's own system calls,
//! `environ`, the counters' mapping, the lanes' shared memory). Outside it, only the C
//! interface allows it, item by item: each `#[no_mangle]` export and the constructor's
//! `link_section` entries (which the `unsafe_code` lint counts as unsafe); an export that
//! takes pointers is an `unsafe extern "C" fn` that hands them to `sys` untouched.

#[allow(unsafe_code)] // the one module that holds unsafe code
#[macro_use]
mod sys;

// Shared with `corelane run`'s reader, which uses the rest.
#[allow(dead_code)]
mod abi;
mod config;
mod contention;
mod environ;
mod exec;
mod exit;
mod exports;
mod lane;
mod raw;
mod rights;
mod sockets;
mod state;
mod stats;
mod uring;
