//! The uring lane's io_uring: its setup, its shared memory, submission and completion, and
//! its retirement. One ring per process, made disabled and enabled only once restricted to
//! the lane's five operations (see `uring.rs` for why); both mappings MADV_DONTFORK.
//!
//! [`Ring`] holds raw addresses into the ring's mapping. Its methods are safe because
//! [`create`] established, and this module keeps, these invariants:
//! - every address lies inside a mapping of the ring made by `create`, at the offsets the
//!   kernel gave in io_uring_params, aligned as the kernel aligns them;
//! - the mappings stay mapped while any `&Ring` is in use: a `Ring` is reached only through
//!   [`run`], which counts itself in USERS first, and [`retire`] unmaps (and frees the Ring)
//!   only after taking RING away and seeing USERS at 0; a forked child, which has only the
//!   forking thread, drops RING before it unmaps;
//! - the SQ tail and the SQE array are written only under SQ_LOCK, the CQ head only under
//!   CQ_LOCK; the kernel's words (SQ head, SQ flags, CQ tail) are read as atomics;
//! - an SQE carries a [`Call`]'s pointers, and [`run`] returns its answer only once the
//!   completion came: the one exception is a ring whose fd the program closed behind the
//!   library's back (a raw system call), whose SQE nobody can wake any more (the residual
//!   `uring.rs` describes).

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use core::sync::atomic::{
    fence, AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize,
};

use super::spin::{Spinner, URING_WAITER};
use crate::abi::op::*;

use super::*;

const SETUP_SQPOLL: u32 = 2;
const SETUP_SQ_AFF: u32 = 4;
const SETUP_R_DISABLED: u32 = 64;
const REGISTER_PROBE: u32 = 8;
const REGISTER_RESTRICTIONS: u32 = 11;
const EACCES: c_int = 13;
const REGISTER_ENABLE_RINGS: u32 = 12;
const RESTRICTION_SQE_OP: u16 = 1;
const FEAT_SINGLE_MMAP: u32 = 1;
const ENTER_GETEVENTS: u32 = 1;
const ENTER_SQ_WAKEUP: u32 = 2;
const ENTER_EXT_ARG: u32 = 8;
const SQ_NEED_WAKEUP: u32 = 1;
const OFF_SQES: i64 = 0x1000_0000;
const OP_SENDMSG: u8 = 9;
const OP_RECVMSG: u8 = 10;
const OP_ACCEPT: u8 = 13;
const OP_SEND: u8 = 26;
const OP_RECV: u8 = 27;
/// Every operation `sqe_for` makes: the ring accepts these and nothing else.
const LANE_OPS: [u8; 5] = [OP_SENDMSG, OP_RECVMSG, OP_ACCEPT, OP_SEND, OP_RECV];
/// IORING_ACCEPT_DONTWAIT (Linux 6.10, in the SQE's ioprio): an accept with nothing pending
/// completes with EAGAIN instead of waiting for a connection.
const ACCEPT_DONTWAIT: u16 = 2;
const EINVAL: c_int = 22;
/// SOCK_NONBLOCK | SOCK_CLOEXEC: what accept4 takes.
const ACCEPT4_FLAGS: u64 = 0o4000 | 0o2000000;
/// The kernel refused ACCEPT_DONTWAIT once (before 6.10): accepts go direct from then on.
static ACCEPT_REFUSED: AtomicBool = AtomicBool::new(false);
const ENTRIES: u32 = 256;

/// How long a retirement waits for the ring's users, and a caller for its completion, before
/// looking at what went wrong.
const SECOND_NS: u64 = 1_000_000_000;

#[repr(C)]
#[derive(Default)]
struct Params {
    sq_entries: u32,
    cq_entries: u32,
    flags: u32,
    sq_thread_cpu: u32,
    sq_thread_idle: u32,
    features: u32,
    wq_fd: u32,
    resv: [u32; 3],
    sq_off: [u32; 10],
    cq_off: [u32; 10],
}

#[repr(C)]
struct Sqe {
    opcode: u8,
    flags: u8,
    ioprio: u16,
    fd: i32,
    off: u64,
    addr: u64,
    len: u32,
    op_flags: u32,
    user_data: u64,
    tail: [u64; 3],
}

/// struct io_uring_restriction (16 bytes).
#[repr(C)]
struct Restriction {
    kind: u16,
    op: u8,
    resv: u8,
    resv2: [u32; 3],
}

#[repr(C)]
struct GeteventsArg {
    sigmask: u64,
    sigmask_sz: u32,
    min_wait_usec: u32,
    ts: u64,
}

/// The mapped ring: raw addresses of its fields (see the invariants above).
struct Ring {
    fd: c_int,
    sqpoll: bool,
    sq_head: *const AtomicU32,
    sq_tail: *const AtomicU32,
    sq_mask: u32,
    sq_flags: *const AtomicU32,
    sq_array: *mut u32,
    sqes: *mut Sqe,
    cq_head: *const AtomicU32,
    cq_tail: *const AtomicU32,
    cq_mask: u32,
    cqes: *const [u64; 2],
}

static RING: AtomicPtr<Ring> = AtomicPtr::new(core::ptr::null_mut());
static SQ_LOCK: AtomicBool = AtomicBool::new(false);
static CQ_LOCK: AtomicBool = AtomicBool::new(false);
/// `run` calls between taking the ring and their last touch of it: a retirement waits for 0
/// before it unmaps anything.
static USERS: AtomicU32 = AtomicU32::new(0);

fn enter(fd: c_int, submit: u32, wait: u32, flags: u32, arg: Option<&GeteventsArg>) -> c_long {
    let (arg, size) =
        arg.map_or((0, 0), |a| (a as *const GeteventsArg as usize, core::mem::size_of_val(a)));
    let a = [submit as usize, wait as usize, flags as usize, 0];
    // SAFETY: `arg` is NULL or a live getevents argument of the size given.
    unsafe { sys_io_uring_enter(fd, a, arg, size) }
}

/// What this process holds of its ring, recorded as each piece is made, so a failed start
/// and a forked child give back exactly that (and nothing that merely has the same number).
struct Held {
    fd: AtomicI32,
    /// The fd's (device, inode), to recognise it: the program may have closed ours and
    /// reused the number.
    dev: AtomicU64,
    ino: AtomicU64,
    /// Each mapping's address and length; `inherited` when MADV_DONTFORK failed on it.
    maps: [(AtomicUsize, AtomicUsize, AtomicBool); 2],
}

static HELD: Held = Held {
    fd: AtomicI32::new(-1),
    dev: AtomicU64::new(0),
    ino: AtomicU64::new(0),
    maps: [const { (AtomicUsize::new(0), AtomicUsize::new(0), AtomicBool::new(false)) }; 2],
};

/// Maps `len` bytes of the ring at `offset`, recorded in slot `n` of HELD, and marks it
/// MADV_DONTFORK: no child, however made (a raw clone skips every atfork handler), has it.
fn map(fd: c_int, len: usize, offset: i64, n: usize) -> Option<*mut c_void> {
    // SAFETY: mapping the rings of the fd just created, at the offsets the kernel gave.
    let addr = unsafe { mmap(core::ptr::null_mut(), len, PROT_READ_WRITE, MAP_SHARED, fd, offset) };
    if addr == MAP_FAILED {
        return None;
    }
    let (at, length, inherited) = &HELD.maps[n];
    length.store(len, SeqCst);
    inherited.store(true, SeqCst);
    at.store(addr as usize, SeqCst);
    // Should the kernel refuse, a forked child unmaps it in its atfork handler instead.
    inherited.store(sys_madvise(addr as usize, len, MADV_DONTFORK) != 0, SeqCst);
    Some(addr)
}

/// Gives back the fd and the mappings HELD records. In a forked child (`in_child`) only the
/// mappings it inherited are unmapped: where MADV_DONTFORK left a hole, another atfork
/// handler may have mapped something since. Async-signal-safe (system calls only).
/// `close_fd` false: the program is about to close or replace the fd itself.
fn release(in_child: bool, close_fd: bool) {
    for (at, length, inherited) in &HELD.maps {
        let (addr, len) = (at.swap(0, SeqCst), length.swap(0, SeqCst));
        if addr != 0 && (!in_child || inherited.load(SeqCst)) {
            // SAFETY: the ring's own mapping; its users are gone (a retirement waited for
            // them) or never existed here (a forked child has only the forking thread).
            unsafe { sys_munmap(addr, len) };
        }
    }
    let fd = HELD.fd.swap(-1, SeqCst);
    let ours = (HELD.dev.load(SeqCst), HELD.ino.load(SeqCst));
    // Before Linux 5.16 every io_uring (and epoll, eventfd…) fd shares one anonymous inode,
    // so in a child the number is also asked whether it is still a restricted ring.
    if close_fd
        && fd >= 0
        && sys_fd_identity(fd) == Some(ours)
        && (!in_child || is_restricted_ring(fd))
    {
        sys_close(fd);
    }
}

/// Whether `fd` is an io_uring with restrictions: such a ring refuses a registration it was
/// not allowed (EACCES) before looking at it; any other fd gets EOPNOTSUPP, an unrestricted
/// ring EFAULT or EINVAL. Keeps the caller's errno. Async-signal-safe.
fn is_restricted_ring(fd: c_int) -> bool {
    let saved = errno();
    // SAFETY: REGISTER_PROBE with a null argument and no entries writes nothing; it is
    // refused either way (EACCES on a restricted ring, an error on anything else).
    let refused = unsafe { sys_io_uring_register(fd, REGISTER_PROBE, 0, 0) };
    set_errno(saved);
    refused == -c_long::from(EACCES)
}

/// Limits the ring, created disabled, to exactly the operations `sqe_for` submits with no SQE
/// flags and no later registration, then enables it. The backstop for a child that kept the
/// fd: even SQPOLL's thread, running with the creator's credentials, refuses the rest
/// (OPENAT, READ, WRITE, SPLICE, …) with EACCES.
fn restrict_and_enable(fd: c_int) -> bool {
    let ops =
        LANE_OPS.map(|op| Restriction { kind: RESTRICTION_SQE_OP, op, resv: 0, resv2: [0; 3] });
    // SAFETY: `ops` is an array of io_uring_restriction of the length given.
    let limited = unsafe {
        sys_io_uring_register(fd, REGISTER_RESTRICTIONS, ops.as_ptr() as usize, ops.len() as u32)
    };
    // SAFETY: ENABLE_RINGS takes no argument.
    limited == 0 && unsafe { sys_io_uring_register(fd, REGISTER_ENABLE_RINGS, 0, 0) } == 0
}

/// A new ring's fd and parameters: SQPOLL pinned to `cpu` if the kernel allows, else plain;
/// disabled until `restrict_and_enable`.
fn setup(cpu: u32) -> Option<(c_int, Params, bool)> {
    let mut params = Params {
        flags: SETUP_SQPOLL | SETUP_SQ_AFF | SETUP_R_DISABLED,
        sq_thread_cpu: cpu,
        sq_thread_idle: 10,
        ..Params::default()
    };
    // SAFETY: `params` is a valid io_uring_params the kernel fills in.
    let fd = unsafe { sys_io_uring_setup(ENTRIES, (&mut params as *mut Params).cast()) } as c_int;
    if fd >= 0 {
        return Some((fd, params, true));
    }
    params = Params { flags: SETUP_R_DISABLED, ..Params::default() };
    // SAFETY: as above, without SQPOLL.
    let fd = unsafe { sys_io_uring_setup(ENTRIES, (&mut params as *mut Params).cast()) } as c_int;
    (fd >= 0).then_some((fd, params, false))
}

/// Sets the ring up, restricted and enabled: Some(whether its SQPOLL thread runs, pinned to
/// `cpu`), or None (nothing is left held). A ring that cannot be restricted is never used.
pub fn create(cpu: u32) -> Option<bool> {
    let (fd, params, sqpoll) = setup(cpu)?;
    // Out of the program's way: natively its next socket or file takes this number.
    let fd = move_high(fd);
    let Some((dev, ino)) = sys_fd_identity(fd) else {
        sys_close(fd);
        return None;
    };
    HELD.dev.store(dev, SeqCst);
    HELD.ino.store(ino, SeqCst);
    HELD.fd.store(fd, SeqCst);
    let (sq, cq) = (&params.sq_off, &params.cq_off);
    let ring_len = (sq[6] + params.sq_entries * 4).max(cq[5] + params.cq_entries * 16) as usize;
    let sqe_len = params.sq_entries as usize * core::mem::size_of::<Sqe>();
    let mapped = (params.features & FEAT_SINGLE_MMAP != 0)
        .then(|| Some((map(fd, ring_len, 0, 0)?, map(fd, sqe_len, OFF_SQES, 1)?)))
        .flatten();
    let Some((base, sqes)) = mapped.filter(|_| restrict_and_enable(fd)) else {
        release(false, true);
        return None;
    };
    let at = |off: u32| (base as usize + off as usize) as *mut u32;
    // SAFETY: the masks lie inside the ring mapping just made, at the kernel's offsets.
    let (sq_mask, cq_mask) = unsafe { (*at(sq[2]), *at(cq[2])) };
    let ring = Box::new(Ring {
        fd,
        sqpoll,
        sq_head: at(sq[0]).cast(),
        sq_tail: at(sq[1]).cast(),
        sq_mask,
        sq_flags: at(sq[4]).cast(),
        sq_array: at(sq[6]),
        sqes: sqes.cast(),
        cq_head: at(cq[0]).cast(),
        cq_tail: at(cq[1]).cast(),
        cq_mask,
        cqes: at(cq[5]).cast(),
    });
    RING.store(Box::into_raw(ring), Release);
    Some(sqpoll)
}

/// In a forked child: the parent's ring is not ours. Its fd is closed and any mapping it
/// inherited unmapped, so a worker that drops privileges cannot drive the ring of its
/// parent, whose SQPOLL thread runs with the parent's credentials. (The Ring record itself
/// is left: freeing is not async-signal-safe, and it is a few words once per child.)
/// Async-signal-safe; the child has only the forking thread, so no `run` is under way.
pub fn forget_after_fork() {
    RING.store(core::ptr::null_mut(), SeqCst);
    release(true, true);
    SQ_LOCK.store(false, SeqCst);
    CQ_LOCK.store(false, SeqCst);
    USERS.store(0, SeqCst);
}

/// Retires the ring: no new submission takes it, then, once the calls under way are done
/// (waited for at most a second), it is unmapped and (if `close_fd`) its fd closed. A ring
/// still in use after the second stays mapped: nothing is ever unmapped under a user (the
/// mapping and, then, the fd are left to the process). Returns whether it was released.
pub fn retire(close_fd: bool) -> bool {
    let ring = RING.swap(core::ptr::null_mut(), SeqCst);
    if ring.is_null() {
        return false;
    }
    let deadline = monotonic_ns().saturating_add(SECOND_NS);
    while USERS.load(SeqCst) != 0 {
        if monotonic_ns() >= deadline {
            return false;
        }
        std::thread::yield_now();
    }
    release(false, close_fd);
    // SAFETY: made by Box::into_raw in `create`; RING no longer holds it and no `run` is under
    // way (USERS is 0 and every later one finds RING null).
    drop(unsafe { Box::from_raw(ring) });
    true
}

/// The ring's fd, if a ring is in use and its fd is among `first..=last`.
pub fn fd_among(first: c_int, last: c_int) -> Option<c_int> {
    let fd = HELD.fd.load(SeqCst);
    let outside = fd < 0 || fd < first || fd > last;
    (!outside && !RING.load(SeqCst).is_null()).then_some(fd)
}

/// Whether `fd` is still the ring this process made (device, inode, restricted).
pub fn is_ours(fd: c_int) -> bool {
    let ours = (HELD.dev.load(SeqCst), HELD.ino.load(SeqCst));
    sys_fd_identity(fd) == Some(ours) && is_restricted_ring(fd)
}

/// Whether the ring's fd number still holds the ring this process made.
fn still_ours(fd: c_int) -> bool {
    let ours = (HELD.dev.load(SeqCst), HELD.ino.load(SeqCst));
    HELD.fd.load(SeqCst) == fd && sys_fd_identity(fd) == Some(ours) && is_restricted_ring(fd)
}

fn ring() -> Option<&'static Ring> {
    let ring = RING.load(Acquire);
    // SAFETY: non-null only after `create` leaked a fully built Ring; only `run` calls this,
    // counted in USERS, so `retire` frees it only once this reference is gone.
    (!ring.is_null()).then(|| unsafe { &*ring })
}

/// A header on the submitting caller's stack for a sendto or recvfrom with an address, which
/// the ring carries as SENDMSG or RECVMSG: the kernel reads it (and RECVMSG writes its
/// `namelen`) until the completion, which `run` waits for before this frame goes.
struct Scratch {
    msg: Msghdr,
    iov: Iovec,
    /// recvfrom's `addr_len`, to write the address's length back to once answered.
    addr_len: *mut SocklenT,
}

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            msg: Msghdr {
                name: core::ptr::null_mut(),
                namelen: 0,
                iov: core::ptr::null_mut(),
                iovlen: 1,
                control: core::ptr::null_mut(),
                controllen: 0,
                flags: 0,
            },
            iov: Iovec { base: core::ptr::null_mut(), len: 0 },
            addr_len: core::ptr::null_mut(),
        }
    }

    /// Names the buffer and address of a sendto/recvfrom (`a`: its arguments) in the header;
    /// returns the header's address. `recv`: a[5] is recvfrom's in/out length, read here.
    fn address_header(&mut self, a: [u64; 6], recv: bool) -> Option<u64> {
        self.iov = Iovec { base: a[1] as *mut c_void, len: a[2] as SizeT };
        self.msg.iov = &mut self.iov;
        self.msg.name = a[4] as *mut c_void;
        if recv {
            self.addr_len = a[5] as *mut SocklenT;
            if self.addr_len.is_null() {
                return None;
            }
            // SAFETY: recvfrom's contract: a non-null `addr_len` points to the length of the
            // buffer at `addr`, valid until the call is answered (`Call`'s invariant).
            self.msg.namelen = unsafe { self.addr_len.read() };
        } else {
            self.msg.namelen = a[5] as SocklenT;
        }
        Some(&self.msg as *const Msghdr as u64)
    }

    /// After a RECVMSG made for a recvfrom: its address's length, where recvfrom puts it.
    fn finish(&self, outcome: &Outcome) {
        if !self.addr_len.is_null() && outcome.ret >= 0 {
            // SAFETY: as in `address_header`: the caller's `addr_len`, still valid (the call
            // is being answered now).
            unsafe { self.addr_len.write(self.msg.namelen) };
        }
    }
}

/// The SQE for a call this lane runs, or None (the caller makes the call itself). A sendto or
/// recvfrom with an address goes as SENDMSG or RECVMSG through `scratch`'s header.
fn sqe_for(call: &Call, user_data: u64, scratch: &mut Scratch) -> Option<Sqe> {
    let (op, a) = (call.op(), call.args());
    let flags = a[3] as u32 as c_int;
    let send_flags = flags | MSG_DONTWAIT | MSG_NOSIGNAL;
    let recv_flags = flags | MSG_DONTWAIT;
    let waitall = flags & MSG_WAITALL != 0;
    let mut ioprio = 0;
    let mut off = 0;
    let (opcode, addr, len, op_flags) = match op {
        SEND | WRITE if a[4] == 0 => (OP_SEND, a[1], a[2], send_flags),
        SEND => (OP_SENDMSG, scratch.address_header(a, false)?, 1, send_flags),
        RECV | READ if waitall => return None,
        RECV | READ if a[4] == 0 => (OP_RECV, a[1], a[2], recv_flags),
        RECV => (OP_RECVMSG, scratch.address_header(a, true)?, 1, recv_flags),
        SENDMSG | WRITEV => (OP_SENDMSG, a[1], 1, send_flags),
        RECVMSG | READV if !waitall => (OP_RECVMSG, a[1], 1, recv_flags),
        ACCEPT if !ACCEPT_REFUSED.load(Relaxed) => {
            ioprio = ACCEPT_DONTWAIT;
            off = a[2];
            (OP_ACCEPT, a[1], 0, flags)
        }
        _ => return None,
    };
    let len = u32::try_from(len).ok()?;
    Some(Sqe {
        opcode,
        flags: 0,
        ioprio,
        fd: a[0] as i32,
        off,
        addr,
        len,
        op_flags: op_flags as u32,
        user_data,
        tail: [0; 3],
    })
}

fn lock(flag: &AtomicBool) {
    while flag.compare_exchange_weak(false, true, Acquire, Relaxed).is_err() {
        core::hint::spin_loop();
    }
}

impl Ring {
    fn submit(&self, sqe: Sqe) -> bool {
        let ring = self;
        lock(&SQ_LOCK);
        // SAFETY: the ring's fields point into its mapping; the SQ tail and the SQE array are
        // written only under SQ_LOCK, and entry `index` is free (tail - head < entries).
        let queued = unsafe {
            let tail = (*ring.sq_tail).load(Relaxed);
            let head = (*ring.sq_head).load(Acquire);
            if tail.wrapping_sub(head) > ring.sq_mask {
                false
            } else {
                let index = tail & ring.sq_mask;
                ring.sqes.add(index as usize).write(sqe);
                ring.sq_array.add(index as usize).write(index);
                (*ring.sq_tail).store(tail.wrapping_add(1), Release);
                true
            }
        };
        SQ_LOCK.store(false, Release);
        if !queued {
            return false;
        }
        fence(SeqCst);
        // SAFETY: the SQ flags word lies inside the ring mapping.
        let asleep = unsafe { (*ring.sq_flags).load(Relaxed) } & SQ_NEED_WAKEUP != 0;
        if !ring.sqpoll {
            enter(ring.fd, 1, 0, 0, None);
        } else if asleep {
            enter(ring.fd, 0, 0, ENTER_SQ_WAKEUP, None);
        }
        true
    }

    /// Hands every completion waiting in the CQ to its slot.
    fn drain(&self) {
        let ring = self;
        if CQ_LOCK.compare_exchange(false, true, Acquire, Relaxed).is_err() {
            return;
        }
        // SAFETY: CQ head is written only under CQ_LOCK; entries between head and tail are
        // complete (tail read with Acquire).
        unsafe {
            let mut head = (*ring.cq_head).load(Relaxed);
            let tail = (*ring.cq_tail).load(Acquire);
            while head != tail {
                let [user_data, res_flags] = *ring.cqes.add((head & ring.cq_mask) as usize);
                if let Some(slot) = (user_data as usize).checked_sub(1).and_then(slot) {
                    slot.complete(res_flags as u32 as i32);
                }
                head = head.wrapping_add(1);
            }
            (*ring.cq_head).store(head, Release);
        }
        CQ_LOCK.store(false, Release);
    }

    /// Waits for the completion of the caller's submission: spins (as long as
    /// `spin::URING_WAITER` allows), then sleeps in io_uring_enter. After each second without
    /// it, looks at the ring's fd: a ring that is no longer there never completes anything.
    fn wait(&self, slot: &Slot) -> Waited {
        let ring = self;
        let ts = Timespec { tv_sec: 0, tv_nsec: 1_000_000 };
        let wait = GeteventsArg {
            sigmask: 0,
            sigmask_sz: 8,
            min_wait_usec: 0,
            ts: &ts as *const Timespec as u64,
        };
        let mut spinner = Spinner::new(URING_WAITER, None);
        let mut deadline = 0;
        loop {
            ring.drain();
            if let Some(outcome) = slot.answer() {
                return Waited::Done(outcome);
            }
            if spinner.go_on() {
                continue;
            }
            // Sleeps until a completion (anyone's) or 1 ms, whichever first: a completion another
            // thread drains for us is never waited for longer than that.
            enter(ring.fd, 0, 1, ENTER_GETEVENTS | ENTER_EXT_ARG, Some(&wait));
            let now = monotonic_ns();
            if deadline == 0 {
                deadline = now.saturating_add(SECOND_NS);
            } else if now >= deadline {
                if !still_ours(ring.fd) {
                    return Waited::RingLost;
                }
                deadline = now.saturating_add(SECOND_NS);
            }
        }
    }
}

/// What became of a submitted call.
pub enum Waited {
    Done(Outcome),
    /// The ring's fd no longer holds our ring: the call will never complete.
    RingLost,
}

/// Runs `call` for the caller holding request slot `index` (marked under way with
/// `Slot::begin`) through the ring, or None: the ring does not run this call, is gone, or is
/// full, and the caller makes the call itself. Whichever waiting caller drains the ring hands
/// every completion to its slot.
pub fn run(call: &Call, index: usize) -> Option<Waited> {
    let slot = slot(index)?;
    let mut scratch = Scratch::new();
    let bad_flags = call.args()[3] & !ACCEPT4_FLAGS != 0;
    let sqe = sqe_for(call, index as u64 + 1, &mut scratch)?;
    USERS.fetch_add(1, SeqCst);
    let waited = ring().and_then(|ring| {
        if !ring.submit(sqe) {
            return None;
        }
        Some(ring.wait(slot))
    });
    USERS.fetch_sub(1, SeqCst);
    match waited? {
        Waited::Done(outcome) if call.op() == ACCEPT && outcome.err == EINVAL && !bad_flags => {
            // A kernel without ACCEPT_DONTWAIT (or flags accept4 refuses): the caller's own
            // accept4 answers either way.
            ACCEPT_REFUSED.store(true, Relaxed);
            None
        }
        Waited::Done(outcome) => {
            scratch.finish(&outcome);
            Some(Waited::Done(outcome))
        }
        lost => Some(lost),
    }
}
