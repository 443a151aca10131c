//! The only unsafe code in corelane: thin wrappers over the syscalls that rustix and socket2 do
//! not cover (recvmmsg/sendmmsg with control messages, UDP offload socket options, per-thread
//! rusage, bpf(2), AF_XDP rings). Contract: every function here is safe to call with any argument; the raw pointers it
//! hands the kernel point into memory the wrapper owns or borrows for the duration of the call.

pub(crate) mod bpf;
pub(crate) mod ethtool;
pub(crate) mod mmsg;
pub(crate) mod pipe;
pub(crate) mod privilege;
pub(crate) mod sockaddr;
pub(crate) mod socket_ring;
pub(crate) mod sockopt;
pub(crate) mod uring;
pub(crate) mod usage;
pub(crate) mod xsk;

/// Turns a libc `-1` return into the thread's `errno` as an `io::Error`.
macro_rules! syscall {
    ($fn:ident ( $($arg:expr),* $(,)* ) ) => {{
        // SAFETY: the caller passes arguments that satisfy the syscall's contract (see each use).
        let res = unsafe { libc::$fn($($arg, )*) };
        if res == -1 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(res)
        }
    }};
}
pub(crate) use syscall;
