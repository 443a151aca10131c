//! The contract between `corelane run` and its preloaded library, in one file both compile:
//! the library crate as its `abi` module, corelane's `run` module through `#[path]`. The
//! environment's names, the operations the lanes carry, the kinds the counters count them
//! under, and the counters area's layout. Plain constants only: the library has no
//! dependencies and corelane reads the area as hostile bytes, so neither side needs more.

/// The syscall CPUs, as a CPU list ("1", "2-3,5").
pub const ENV_CPUS: &str = "CORELANE_SYSCALL_CPUS";
/// `threads` or `uring`.
pub const ENV_LANE: &str = "CORELANE_SYSCALL_LANE";
/// The counters area: `FD:DEV:INO`, its fd number and the (device, inode) that fd must still
/// be before the library touches it (a program may have put anything at that number).
pub const ENV_STATS: &str = "CORELANE_STATS";
/// `1`: programs this one executes run without the library.
pub const ENV_NO_FOLLOW_EXEC: &str = "CORELANE_NO_FOLLOW_EXEC";
/// Every variable the library reads begins so; the program gets only corelane's.
pub const ENV_PREFIX: &str = "CORELANE_";
/// The library's file name, as ld.so sees it in LD_PRELOAD.
pub const LIBRARY_FILE_NAME: &str = "libcorelane_preload.so";

/// At most this many syscall threads per process.
pub const MAX_THREADS: usize = 16;

/// The operations a lane carries (a slot's `op`).
pub mod op {
    pub const SEND: u32 = 1;
    pub const RECV: u32 = 2;
    pub const SENDMSG: u32 = 3;
    pub const RECVMSG: u32 = 4;
    pub const SENDMMSG: u32 = 5;
    pub const RECVMMSG: u32 = 6;
    pub const SENDFILE: u32 = 7;
    pub const ACCEPT: u32 = 8;
    pub const CONNECT: u32 = 9;
    pub const POLL: u32 = 10;
    pub const EPOLL: u32 = 11;
    pub const CLOSE: u32 = 12;
    /// Reads and writes on sockets run as RECV/SEND/RECVMSG/SENDMSG but are counted apart.
    pub const READ: u32 = 13;
    pub const WRITE: u32 = 14;
    pub const READV: u32 = 15;
    pub const WRITEV: u32 = 16;
    /// select and pselect, probed with a zero timeout on copies of the caller's sets.
    pub const SELECT: u32 = 17;
    /// splice with a socket at one end, asked not to block (SPLICE_F_NONBLOCK).
    pub const SPLICE: u32 = 18;
}

/// The kinds carried calls are counted under, in the record's order (the summary's keys).
pub const KINDS: [&str; 11] = [
    "send",
    "recv",
    "read",
    "write",
    "accept",
    "connect",
    "poll",
    "epoll_wait",
    "sendfile",
    "close",
    "other",
];

/// The kind (an index into [`KINDS`]) an operation is counted under.
pub const fn kind_of(operation: u32) -> usize {
    match operation {
        op::SEND | op::SENDMSG => 0,
        op::RECV | op::RECVMSG => 1,
        op::READ | op::READV => 2,
        op::WRITE | op::WRITEV => 3,
        op::ACCEPT => 4,
        op::CONNECT => 5,
        op::POLL | op::SELECT => 6,
        op::EPOLL => 7,
        op::SENDFILE => 8,
        op::CLOSE => 9,
        _ => 10,
    }
}

/// How a process's lane came up (the record's `lane` word).
pub mod lane_mode {
    pub const THREADS: u64 = 1;
    /// io_uring with SQPOLL pinned to the first syscall CPU.
    pub const URING_SQPOLL: u64 = 2;
    /// The kernel refused SQPOLL: a plain io_uring, entered by the program's own threads.
    pub const URING_PLAIN: u64 = 3;
    /// No io_uring that could be restricted: the threads lane ran instead.
    pub const URING_UNAVAILABLE: u64 = 4;
    /// One past the largest mode (the reader's array length).
    pub const COUNT: usize = 5;
}

/// Why a process's lane stopped carrying (the record's `off_reason` word; 0: it never did).
pub mod off_reason {
    /// A thread changed its own rights (credentials, capabilities, fsuid, seccomp, Landlock,
    /// namespaces, descriptor table) while other threads ran: the carriers could no longer
    /// match every caller, so every call is made by its caller from then on.
    pub const RIGHTS_CHANGED: u64 = 1;
    /// A request waited a second without a syscall thread taking it.
    pub const CARRIER_STALLED: u64 = 2;
    /// The program closed or replaced the lane's io_uring descriptor.
    pub const RING_CLOSED: u64 = 3;
    /// No syscall thread could be started.
    pub const START_FAILED: u64 = 4;
}

/// What changed a thread's rights (the record's `rights_change` word: the last one seen).
pub mod rights_change {
    /// setuid/setgid/setre*/setres*/setgroups/initgroups through libc (every thread follows).
    pub const SETID: u64 = 1;
    pub const CAPSET: u64 = 2;
    pub const SETFSID: u64 = 3;
    /// A set*id made with `syscall()`: this thread only.
    pub const RAW_SETID: u64 = 4;
    pub const SECCOMP: u64 = 5;
    pub const LANDLOCK: u64 = 6;
    pub const UNSHARE: u64 = 7;
    pub const SETNS: u64 = 8;
}

/// The counters area: a header, then one record per process that loaded the library.
pub mod stats {
    pub const MAGIC: u64 = u64::from_le_bytes(*b"clstats2");
    pub const HEADER: usize = 64;
    /// Header words: the magic, then how many records were claimed.
    pub const HEADER_MAGIC: usize = 0;
    pub const HEADER_CLAIMED: usize = 8;
    pub const RECORD: usize = 384;
    /// At most this many processes are counted; more run, uncounted.
    pub const MAX_RECORDS: usize = 256;
    /// After the records: one cache line per CPU, which only the library reads (`corelane
    /// run` does not). At [`CPU_AWAKE`], how many syscall threads of the run are awake
    /// (running, spinning or woken) on that CPU, so a carrier knows whether another needs its
    /// CPU; at [`CPU_CONTENDED_UNTIL`], until when (CLOCK_MONOTONIC_COARSE in ms, wrapping; 0:
    /// never) the CPU counts as contended by several processes' carriers.
    pub const CPU_WORDS: usize = HEADER + RECORD * MAX_RECORDS;
    pub const CPU_STRIDE: usize = 64;
    pub const CPU_AWAKE: usize = 0;
    pub const CPU_CONTENDED_UNTIL: usize = 4;
    /// CPUs from this one on have no word (their carriers count only themselves).
    pub const MAX_CPUS: usize = 256;
    pub const SIZE: usize = CPU_WORDS + CPU_STRIDE * MAX_CPUS;
    /// The lowest fd number `corelane run` moves the area to (out of the way of the low fds
    /// programs expect to be theirs: socket activation passes listeners from fd 3 on).
    pub const HIGH_FD: i32 = 100;

    /// Byte offsets of a record's 64-bit words.
    pub const PID: usize = 0;
    /// Syscall threads started (1 for an SQPOLL ring).
    pub const THREADS: usize = 8;
    /// One counter per kind of [`super::KINDS`].
    pub const COUNTS: usize = 16;
    /// One per syscall thread: its CPU time in ns as last recorded.
    pub const CPU_NS: usize = COUNTS + super::KINDS.len() * 8;
    /// A [`super::lane_mode`].
    pub const LANE: usize = CPU_NS + super::MAX_THREADS * 8;
    /// An [`super::off_reason`], 0 while the lane carries.
    pub const OFF_REASON: usize = LANE + 8;
    /// CLOCK_MONOTONIC ns at which the lane stopped carrying.
    pub const OFF_AT_NS: usize = OFF_REASON + 8;
    /// A [`super::rights_change`]: the last change of rights seen, 0 for none.
    pub const RIGHTS_CHANGE: usize = OFF_AT_NS + 8;
    /// How many times the carriers were rebuilt after a change every thread followed.
    pub const REBUILT: usize = RIGHTS_CHANGE + 8;
    /// The SQPOLL thread's id (the uring lane), so `corelane run` can read its CPU time.
    pub const SQPOLL_TID: usize = REBUILT + 8;
    /// Each syscall thread's id (the threads lane), likewise.
    pub const THREAD_TIDS: usize = SQPOLL_TID + 8;
    /// Calls the program's threads made themselves because the syscall CPU was contended by
    /// several processes' carriers (the threads lane steps aside there).
    pub const IN_PLACE: usize = THREAD_TIDS + 4 * super::MAX_THREADS;
    const END: usize = IN_PLACE + 8;

    const _: () = assert!(END <= RECORD && IN_PLACE % 8 == 0);
    // Each CPU's words on a cache line of its own, after the last record.
    const _: () = assert!(CPU_WORDS % CPU_STRIDE == 0 && CPU_CONTENDED_UNTIL + 4 <= CPU_STRIDE);
}
