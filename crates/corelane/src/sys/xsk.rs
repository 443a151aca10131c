//! An AF_XDP socket with its own UMEM and its four rings (fill, completion, RX, TX), written
//! here because the one maintained pure-Rust crate for it (xdpilone) is EUPL-1.2, a copyleft
//! licence the MIT/Apache workspace does not take. The rings are single-producer,
//! single-consumer queues shared with the kernel: user space reads the other side's index with
//! acquire and publishes its own with release (Documentation/networking/af_xdp.rst).
//!
//! Ownership of UMEM frames: RX frames are the kernel's while in the fill ring or being filled,
//! ours from the moment the RX ring hands their descriptor out until they go back to the fill
//! ring; TX frames are ours until put on the TX ring, the kernel's until the completion ring
//! returns them. Slices into the UMEM are only ever made for frames that are ours.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

use super::{syscall, Plain};

const SO_PREFER_BUSY_POLL: libc::c_int = 69;
const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

/// How to bind.
#[derive(Debug, Clone, Copy)]
pub(crate) struct XskConfig {
    pub ifindex: u32,
    pub queue: u32,
    /// UMEM frames for receiving: they live in the fill ring, the RX ring or the lane's hands.
    pub rx_frames: u32,
    /// UMEM frames for sending.
    pub tx_frames: u32,
    pub frame_size: u32,
    /// Entries of the fill ring (a power of two, at least `rx_frames` so every free RX frame
    /// fits in it at once).
    pub fill_ring: u32,
    /// Entries of the RX ring (a power of two).
    pub rx_ring: u32,
    /// Entries of the TX and completion rings (a power of two); 0: no TX ring (receive only),
    /// and the smallest completion ring the bind requires.
    pub tx_ring: u32,
    /// `Some(true)`: XDP_ZEROCOPY; `Some(false)`: XDP_COPY; `None`: the kernel picks.
    pub zerocopy: Option<bool>,
    /// Busy polling: SO_PREFER_BUSY_POLL, SO_BUSY_POLL (µs) and a budget.
    pub busy_poll_us: Option<u32>,
}

/// An anonymous mapping, unmapped on drop.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn anonymous(len: usize) -> io::Result<Self> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { ptr: ptr.cast(), len })
    }

    fn ring(fd: BorrowedFd<'_>, len: usize, offset: u64) -> io::Result<Self> {
        // SAFETY: maps the socket's ring at the page offset the uapi defines for it; the kernel
        // checks `len` against the ring it allocated.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { ptr: ptr.cast(), len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned, and nothing borrows the mapping
        // past its owner (slices into it borrow the owner).
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// One ring: the producer and consumer indexes, the flags word and the entries.
struct Ring {
    map: Mapping,
    producer: usize,
    consumer: usize,
    flags: usize,
    desc: usize,
    mask: u32,
    /// Our copy of our own index (the side we advance).
    local: u32,
}

impl Ring {
    fn new(map: Mapping, off: &libc::xdp_ring_offset, size: u32) -> Self {
        Self {
            map,
            producer: off.producer as usize,
            consumer: off.consumer as usize,
            flags: off.flags as usize,
            desc: off.desc as usize,
            mask: size - 1,
            local: 0,
        }
    }

    fn index(&self, at: usize) -> &AtomicU32 {
        // SAFETY: `at` is an offset the kernel gave for this mapping (XDP_MMAP_OFFSETS), 4-byte
        // aligned and inside it; the kernel updates the word concurrently, hence atomic access.
        unsafe { &*self.map.ptr.add(at).cast::<AtomicU32>() }
    }

    fn needs_wakeup(&self) -> bool {
        self.index(self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// Entry `i` (masked) as a pointer to `T`.
    fn entry<T>(&self, i: u32) -> *mut T {
        let at = self.desc + (i & self.mask) as usize * std::mem::size_of::<T>();
        debug_assert!(at + std::mem::size_of::<T>() <= self.map.len);
        // SAFETY: `i & mask` is below the ring's size, so the entry lies inside the mapping
        // (its length is desc + size x entry size).
        unsafe { self.map.ptr.add(at).cast::<T>() }
    }
}

/// Frame counters the kernel keeps for one socket (XDP_STATISTICS, struct xdp_statistics).
/// A frame the kernel could not deliver is counted in exactly one of `rx_dropped` (no free
/// UMEM frame: the fill ring was empty) and `rx_ring_full` (no room on the RX ring).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct XskStats {
    /// Frames dropped for want of a UMEM frame (the fill ring was empty), or for any reason on
    /// kernels older than 5.9, which count no `rx_ring_full` apart.
    pub rx_dropped: u64,
    /// RX descriptors the kernel found invalid.
    pub rx_invalid_descs: u64,
    /// TX descriptors user space wrote that the kernel refused (bad address or length).
    pub tx_invalid_descs: u64,
    /// Frames dropped because the RX ring was full (the lane did not keep up).
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the kernel found the TX ring empty when asked to send.
    pub tx_ring_empty_descs: u64,
}

impl XskStats {
    /// Frames that reached this socket's queue and were dropped there.
    pub fn rx_lost(&self) -> u64 {
        self.rx_dropped + self.rx_ring_full
    }

    /// The counts since `earlier` (a later reading minus an earlier one).
    pub fn since(&self, earlier: &XskStats) -> XskStats {
        XskStats {
            rx_dropped: self.rx_dropped.saturating_sub(earlier.rx_dropped),
            rx_invalid_descs: self.rx_invalid_descs.saturating_sub(earlier.rx_invalid_descs),
            tx_invalid_descs: self.tx_invalid_descs.saturating_sub(earlier.tx_invalid_descs),
            rx_ring_full: self.rx_ring_full.saturating_sub(earlier.rx_ring_full),
            rx_fill_ring_empty_descs: self
                .rx_fill_ring_empty_descs
                .saturating_sub(earlier.rx_fill_ring_empty_descs),
            tx_ring_empty_descs: self
                .tx_ring_empty_descs
                .saturating_sub(earlier.tx_ring_empty_descs),
        }
    }

    /// Adds another socket's counts.
    pub fn add(&mut self, o: &XskStats) {
        self.rx_dropped += o.rx_dropped;
        self.rx_invalid_descs += o.rx_invalid_descs;
        self.tx_invalid_descs += o.tx_invalid_descs;
        self.rx_ring_full += o.rx_ring_full;
        self.rx_fill_ring_empty_descs += o.rx_fill_ring_empty_descs;
        self.tx_ring_empty_descs += o.tx_ring_empty_descs;
    }
}

/// Reads XDP_STATISTICS of one socket through its own descriptor (a duplicate), so that a
/// thread other than the lane's can read the counters while the lane runs.
#[derive(Debug)]
pub(crate) struct XskStatsReader(OwnedFd);

impl XskStatsReader {
    /// A reader over any descriptor (tests: a socket whose read fails).
    #[cfg(test)]
    pub(crate) fn over(fd: OwnedFd) -> Self {
        Self(fd)
    }

    pub(crate) fn read(&self) -> io::Result<XskStats> {
        read_stats(self.0.as_fd())
    }
}

/// XDP_STATISTICS of the socket `fd`. A kernel older than 5.9 fills only the first three
/// fields (the rest read as zero).
fn read_stats(fd: BorrowedFd<'_>) -> io::Result<XskStats> {
    let s: Stats = getsockopt(fd, libc::SOL_XDP, libc::XDP_STATISTICS)?;
    Ok(XskStats {
        rx_dropped: s.0[0],
        rx_invalid_descs: s.0[1],
        tx_invalid_descs: s.0[2],
        rx_ring_full: s.0[3],
        rx_fill_ring_empty_descs: s.0[4],
        tx_ring_empty_descs: s.0[5],
    })
}

/// A bound AF_XDP socket.
pub(crate) struct XskSocket {
    fd: OwnedFd,
    umem: Mapping,
    frame_size: u32,
    rx_frames: u32,
    fill: Ring,
    completion: Ring,
    rx: Ring,
    /// None for a socket that only receives (no TX ring: a poll then never runs the kernel's
    /// copy-mode transmit path).
    tx: Option<Ring>,
    /// TX frames that are ours.
    tx_free: Vec<u64>,
    zerocopy: bool,
}

// SAFETY: the socket owns its mappings; the raw pointers in them are used only through
// `&mut self` (or `&self` for atomic index reads), so moving the socket to a lane thread is
// sound.
unsafe impl Send for XskSocket {}

impl std::fmt::Debug for XskSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XskSocket").field("fd", &self.fd).field("zerocopy", &self.zerocopy).finish()
    }
}

// SAFETY: a repr(C) struct of u64s and u32s (struct xdp_umem_reg).
unsafe impl Plain for libc::xdp_umem_reg {}
// SAFETY: six u64s.
unsafe impl Plain for Stats {}

fn setsockopt<T: Plain>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    v: &T,
) -> io::Result<()> {
    // SAFETY: the kernel reads at most `size_of::<T>()` bytes from `v`, which is borrowed for
    // the call; a `Plain` value has no pointer the kernel could follow.
    syscall!(setsockopt(
        fd.as_raw_fd(),
        level,
        name,
        (v as *const T).cast(),
        std::mem::size_of::<T>() as libc::socklen_t,
    ))
    .map(drop)
}

fn getsockopt<T: Plain + Default>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<T> {
    let mut v = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` (the size of `v`) bytes into `v`, and any bytes
    // make a valid `Plain` value.
    syscall!(getsockopt(fd.as_raw_fd(), level, name, (&mut v as *mut T).cast(), &mut len))?;
    Ok(v)
}

/// Whether this kernel has AF_XDP sockets at all.
pub(crate) fn af_xdp_available() -> io::Result<()> {
    // SAFETY: no pointer arguments.
    let fd = syscall!(socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0))?;
    // SAFETY: socket returned a new descriptor nobody else owns.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    Ok(())
}

impl XskSocket {
    /// Creates the socket, registers a UMEM of `frames x frame_size` bytes, sizes and maps the
    /// four rings and binds to the queue. Errors keep the kernel's errno (ENOBUFS: UMEM over
    /// RLIMIT_MEMLOCK; EOPNOTSUPP with zero-copy: the driver has no XSK buffer pool).
    pub(crate) fn bind(c: &XskConfig) -> io::Result<Self> {
        if c.rx_frames > c.fill_ring {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "more RX frames than the fill ring holds",
            ));
        }
        // SAFETY: no pointer arguments.
        let raw = syscall!(socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0))?;
        // SAFETY: socket returned a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let frames = c.rx_frames + c.tx_frames;
        let umem = Mapping::anonymous(frames as usize * c.frame_size as usize)?;
        let reg = libc::xdp_umem_reg {
            addr: umem.ptr as u64,
            len: umem.len as u64,
            chunk_size: c.frame_size,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(fd.as_fd(), libc::SOL_XDP, libc::XDP_UMEM_REG, &reg)?;
        let completion_ring = c.tx_ring.max(1);
        for (name, size) in [
            (libc::XDP_UMEM_FILL_RING, c.fill_ring),
            (libc::XDP_UMEM_COMPLETION_RING, completion_ring),
            (libc::XDP_RX_RING, c.rx_ring),
            (libc::XDP_TX_RING, c.tx_ring),
        ] {
            if size > 0 {
                setsockopt(fd.as_fd(), libc::SOL_XDP, name, &size)?;
            }
        }
        let off = Self::offsets(fd.as_fd())?;
        let desc = std::mem::size_of::<libc::xdp_desc>();
        let ring = |o: &libc::xdp_ring_offset, size: u32, entry: usize, pgoff: u64| {
            let map = Mapping::ring(fd.as_fd(), o.desc as usize + size as usize * entry, pgoff)?;
            Ok::<_, io::Error>(Ring::new(map, o, size))
        };
        let fill = ring(&off.fr, c.fill_ring, 8, libc::XDP_UMEM_PGOFF_FILL_RING)?;
        let completion = ring(&off.cr, completion_ring, 8, libc::XDP_UMEM_PGOFF_COMPLETION_RING)?;
        let rx = ring(&off.rx, c.rx_ring, desc, libc::XDP_PGOFF_RX_RING as u64)?;
        let tx = match c.tx_ring {
            0 => None,
            size => Some(ring(&off.tx, size, desc, libc::XDP_PGOFF_TX_RING as u64)?),
        };
        let rx_frames = c.rx_frames;
        let mut socket = Self {
            fd,
            umem,
            frame_size: c.frame_size,
            rx_frames,
            fill,
            completion,
            rx,
            tx,
            tx_free: (rx_frames..rx_frames + c.tx_frames)
                .map(|i| u64::from(i) * u64::from(c.frame_size))
                .collect(),
            zerocopy: false,
        };
        // Every RX frame starts in the fill ring (the kernel needs them before the first frame).
        let addrs: Vec<u64> =
            (0..rx_frames).map(|i| u64::from(i) * u64::from(c.frame_size)).collect();
        socket.refill(&addrs);
        if let Some(us) = c.busy_poll_us {
            let fd = socket.fd.as_fd();
            setsockopt(fd, libc::SOL_SOCKET, SO_PREFER_BUSY_POLL, &1i32)?;
            setsockopt(fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL, &(us as i32))?;
            setsockopt(fd, libc::SOL_SOCKET, SO_BUSY_POLL_BUDGET, &64i32)?;
        }
        let mut flags = libc::XDP_USE_NEED_WAKEUP;
        flags |= match c.zerocopy {
            Some(true) => libc::XDP_ZEROCOPY,
            Some(false) => libc::XDP_COPY,
            None => 0,
        };
        let addr = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: flags,
            sxdp_ifindex: c.ifindex,
            sxdp_queue_id: c.queue,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: `addr` is a sockaddr_xdp on this frame and the length is its size.
        syscall!(bind(
            socket.fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_xdp).cast(),
            std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        ))?;
        // XDP_OPTIONS says whether the bind ended in zero-copy.
        let options: u32 = getsockopt(socket.fd.as_fd(), libc::SOL_XDP, libc::XDP_OPTIONS)?;
        socket.zerocopy = options & libc::XDP_OPTIONS_ZEROCOPY != 0;
        Ok(socket)
    }

    fn offsets(fd: BorrowedFd<'_>) -> io::Result<libc::xdp_mmap_offsets> {
        let mut off = std::mem::MaybeUninit::<libc::xdp_mmap_offsets>::zeroed();
        let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
        // SAFETY: the kernel writes at most `len` bytes, the size of `off`, into it.
        syscall!(getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            off.as_mut_ptr().cast(),
            &mut len
        ))?;
        if len as usize != std::mem::size_of::<libc::xdp_mmap_offsets>() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this kernel's AF_XDP rings have no flags word (need_wakeup needs Linux 5.4+)",
            ));
        }
        // SAFETY: zero-initialised, then filled by the kernel; every bit pattern is valid u64s.
        Ok(unsafe { off.assume_init() })
    }

    pub(crate) fn zerocopy(&self) -> bool {
        self.zerocopy
    }

    /// Puts `addrs` (frame starts) on the fill ring; the ring has room for every RX frame
    /// (`rx_frames <= fill ring size`), so this never waits.
    fn refill(&mut self, addrs: &[u64]) {
        let ring = &mut self.fill;
        for &addr in addrs {
            // SAFETY: at most `rx_frames <= ring size` frames are ever outstanding, so the
            // slot at `local` is free; it is written before the release store below.
            unsafe { ring.entry::<u64>(ring.local).write(addr) };
            ring.local = ring.local.wrapping_add(1);
        }
        ring.index(ring.producer).store(ring.local, Ordering::Release);
    }

    /// Hands every frame on the RX ring to `each` (at most `budget`), then gives them back to
    /// the fill ring; returns how many there were.
    pub(crate) fn receive(&mut self, budget: u32, mut each: impl FnMut(&[u8])) -> u32 {
        let available =
            self.rx.index(self.rx.producer).load(Ordering::Acquire).wrapping_sub(self.rx.local);
        let n = available.min(budget);
        if n == 0 {
            return 0;
        }
        let mut back = [0u64; 64];
        let mut queued = 0;
        for i in 0..n {
            // SAFETY: entries between our consumer index and the producer's are written and
            // released by the kernel (acquire load above).
            let desc =
                unsafe { self.rx.entry::<libc::xdp_desc>(self.rx.local.wrapping_add(i)).read() };
            let start = desc.addr as usize;
            let end = start.saturating_add(desc.len as usize);
            if end <= self.umem.len {
                // SAFETY: the frame is ours until it goes back to the fill ring below, and
                // `start..end` lies inside the UMEM mapping.
                let frame =
                    unsafe { std::slice::from_raw_parts(self.umem.ptr.add(start), end - start) };
                each(frame);
            }
            back[queued] = desc.addr - desc.addr % u64::from(self.frame_size);
            queued += 1;
            if queued == back.len() {
                self.refill(&back);
                queued = 0;
            }
        }
        self.rx.local = self.rx.local.wrapping_add(n);
        self.rx.index(self.rx.consumer).store(self.rx.local, Ordering::Release);
        self.refill(&back[..queued]);
        n
    }

    /// Whether the RX ring holds frames for us.
    pub(crate) fn rx_ready(&self) -> bool {
        self.rx.index(self.rx.producer).load(Ordering::Acquire) != self.rx.local
    }

    /// One pass of the kernel's busy-poll path: a non-blocking recvfrom, which (with
    /// SO_BUSY_POLL set) runs the queue's NAPI poll in this thread, up to the budget.
    pub(crate) fn busy_poll_once(&self) -> io::Result<()> {
        // SAFETY: no buffer (null with length 0) and no address: the kernel writes nothing.
        match syscall!(recvfrom(
            self.fd.as_raw_fd(),
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut()
        )) {
            Ok(_) => Ok(()),
            // Nothing to poll now, or the device is down: the poll() that follows waits.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EAGAIN | libc::EINTR | libc::EBUSY | libc::ENETDOWN | libc::ENOBUFS)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Waits up to `timeout_ms` for frames (poll), which also wakes the kernel's RX side.
    pub(crate) fn wait(&self, timeout_ms: i32) -> io::Result<()> {
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd on this frame, and the count says one.
        match syscall!(poll(&mut pfd, 1, timeout_ms)) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Takes back TX frames the kernel has sent (completion ring).
    fn reclaim(&mut self) {
        let ring = &mut self.completion;
        let done = ring.index(ring.producer).load(Ordering::Acquire).wrapping_sub(ring.local);
        for i in 0..done {
            // SAFETY: entries up to the kernel's producer index are written (acquire above).
            let addr = unsafe { ring.entry::<u64>(ring.local.wrapping_add(i)).read() };
            self.tx_free.push(addr);
        }
        ring.local = ring.local.wrapping_add(done);
        ring.index(ring.consumer).store(ring.local, Ordering::Release);
    }

    /// Puts up to `n` frames on the TX ring, each written by `build(i, frame)` which returns
    /// its length (at most the frame size), then kicks the kernel if it needs it. Returns how
    /// many were queued (fewer when frames or ring slots are all in flight).
    pub(crate) fn transmit(
        &mut self,
        n: u32,
        mut build: impl FnMut(u32, &mut [u8]) -> usize,
    ) -> io::Result<u32> {
        self.reclaim();
        let Some(tx) = self.tx.as_mut() else { return Ok(0) };
        let ring_free =
            tx.mask + 1 - tx.local.wrapping_sub(tx.index(tx.consumer).load(Ordering::Acquire));
        let n = n.min(ring_free).min(self.tx_free.len() as u32);
        for i in 0..n {
            let Some(addr) = self.tx_free.pop() else { break };
            let start = addr as usize;
            // SAFETY: a TX frame on the free list is ours (not on the TX ring, or returned by
            // the completion ring) and lies inside the UMEM.
            let frame = unsafe {
                std::slice::from_raw_parts_mut(self.umem.ptr.add(start), self.frame_size as usize)
            };
            let len = build(i, frame).min(self.frame_size as usize) as u32;
            let desc = libc::xdp_desc { addr, len, options: 0 };
            // SAFETY: fewer than ring-size entries are outstanding (ring_free above), so the slot
            // is ours to write before the release store.
            unsafe { tx.entry::<libc::xdp_desc>(tx.local).write(desc) };
            tx.local = tx.local.wrapping_add(1);
        }
        tx.index(tx.producer).store(tx.local, Ordering::Release);
        // Copy mode sends only from a syscall (at most 32 frames per call: the kernel's
        // TX budget), zero-copy only when it asks (need_wakeup); kick while frames wait on
        // the ring, whether or not this call queued any.
        let pending = tx.local != tx.index(tx.consumer).load(Ordering::Acquire);
        if pending && (!self.zerocopy || tx.needs_wakeup()) {
            // SAFETY: no buffer and no address (null with length 0): a wake-up of the TX side.
            match syscall!(sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0
            )) {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::ENETDOWN)
                    ) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }

    /// TX frames the kernel still holds.
    pub(crate) fn tx_in_flight(&mut self) -> usize {
        self.reclaim();
        let total =
            (self.umem.len / self.frame_size as usize).saturating_sub(self.rx_frames as usize);
        total.saturating_sub(self.tx_free.len())
    }

    pub(crate) fn stats(&self) -> io::Result<XskStats> {
        read_stats(self.fd.as_fd())
    }

    /// A reader of this socket's counters for another thread (a duplicate descriptor).
    pub(crate) fn stats_reader(&self) -> io::Result<XskStatsReader> {
        Ok(XskStatsReader(self.fd.try_clone()?))
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// struct xdp_statistics as six u64s.
#[derive(Default)]
#[repr(C)]
struct Stats([u64; 6]);
