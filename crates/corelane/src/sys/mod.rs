//! The only unsafe code in corelane: thin wrappers over the syscalls that rustix and socket2 do
//! not cover (recvmmsg/sendmmsg with control messages, UDP offload socket options, per-thread
//! rusage, bpf(2), AF_XDP rings, mlock of the program's own code, the pre-exec hook of
//! `corelane run`'s program). Contract: every function here is safe to call with any argument; the raw pointers it
//! hands the kernel point into memory the wrapper owns or borrows for the duration of the call.

pub(crate) mod bpf;
pub(crate) mod code_lock;
pub(crate) mod ethtool;
pub(crate) mod mmsg;
pub(crate) mod privilege;
pub(crate) mod sockaddr;
pub(crate) mod socket_ring;
pub(crate) mod sockopt;
pub(crate) mod spawn;
pub(crate) mod uring;
pub(crate) mod usage;
pub(crate) mod xsk;

/// Turns a libc `-1` return into the thread's `errno` as an `io::Error`. Every use carries
/// its own `// SAFETY:` line saying why its arguments meet the call's contract.
macro_rules! syscall {
    ($fn:ident ( $($arg:expr),* $(,)* ) ) => {{
        // SAFETY: the call site's `SAFETY:` line shows its arguments meet the contract.
        let res = unsafe { libc::$fn($($arg, )*) };
        if res == -1 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(res)
        }
    }};
}
pub(crate) use syscall;

/// Plain data the kernel may read or fill in: every bit pattern is a valid value, and it
/// holds no pointer or reference. The socket-option wrappers take only such types, so no
/// safe function here lets the kernel write into an arbitrary `T`. Our own trait, not
/// bytemuck's `Pod`, because the types are libc's, for which a foreign trait cannot be
/// implemented.
///
/// # Safety
/// Implement it only for integers and `#[repr(C)]` structs (or arrays) of integers.
pub(crate) unsafe trait Plain: Sized {}

// SAFETY: integers: every bit pattern is a value.
unsafe impl Plain for i32 {}
// SAFETY: as above.
unsafe impl Plain for u32 {}
