//! An io_uring for one lane's sockets. For TCP: multishot accept straight into the ring's
//! fixed-file table (registered files: no fd-table slot per connection), multishot receive
//! into a ring of provided buffers (no buffer per connection while it is idle), sends from
//! buffers the ring holds until they complete, shutdowns and closes of fixed files, and for
//! a connection that needs one (sendfile), a regular descriptor and a writability poll. For UDP:
//! a multishot receive per socket, one datagram per completion. An optional SQPOLL kernel
//! thread pinned to a CPU takes the submissions: seed 003's syscall thread. Everything unsafe
//! about sharing memory with the kernel stays in this file.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use io_uring::{cqueue, opcode, types, IoUring};

/// The provided-buffer group of the receives.
const GROUP: u16 = 0;

const ACCEPT: u64 = 1 << 60;
const RECV: u64 = 2 << 60;
const SEND: u64 = 3 << 60;
const OTHER: u64 = 4 << 60;
const RECVMSG: u64 = 5 << 60;
const REPLY: u64 = 6 << 60;
const INSTALL: u64 = 7 << 60;
const WRITABLE: u64 = 8 << 60;
const KIND: u64 = 0xf << 60;

/// What one completion reports.
#[derive(Debug)]
pub(crate) enum Completion {
    /// A connection was accepted into fixed file `slot`.
    Accepted { slot: u32, more: bool },
    /// Accepting failed (out of fixed-file slots or memory).
    AcceptFailed { more: bool },
    /// `len` bytes arrived for `slot` in provided buffer `buffer` (read it with
    /// [`SocketRing::buffer`], then hand it back with [`SocketRing::give_back`]).
    Received { slot: u32, buffer: u16, len: usize, more: bool },
    /// The receive on `slot` ended (or, with `more`, brought nothing): 0 when the peer closed
    /// (TCP) or an empty datagram came (UDP), else -errno (-ENOBUFS: out of provided buffers;
    /// re-arm once some are back).
    RecvEnded { slot: u32, result: i32, more: bool },
    /// A send on `slot` finished with `result` (bytes or -errno); its buffer comes back.
    Sent { slot: u32, result: i32, buf: Vec<u8>, offset: usize },
    /// A datagram and its sender's address arrived in provided buffer `buffer` (`len` bytes
    /// of the kernel's recvmsg layout: read it with [`SocketRing::datagram_from`]).
    ReceivedFrom { buffer: u16, len: usize, more: bool },
    /// An answer sent from provided buffer `buffer` finished with `result` (bytes or -errno);
    /// the buffer is the caller's to give back.
    Replied { buffer: u16, result: i32 },
    /// Connection `slot` got a regular descriptor (close-on-exec), or the kernel refused one
    /// (-EINVAL: a kernel before 6.8; -EMFILE: out of descriptors).
    Installed { slot: u32, socket: Result<OwnedFd, i32> },
    /// `slot` became writable (or failed: `result` then has POLLERR/POLLHUP, or -errno).
    Writable { slot: u32, result: i32 },
    /// A shutdown or close finished.
    Done,
}

/// Where a received datagram's parts lie in its provided buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DatagramParts {
    /// The sender's address (a sockaddr of this length).
    pub name: std::ops::Range<usize>,
    pub payload: std::ops::Range<usize>,
    pub truncated: bool,
}

/// Provided buffers: `count` buffers of `size` bytes and the ring the kernel picks them from.
#[derive(Debug)]
struct BufRing {
    entries: *mut types::BufRingEntry,
    entries_layout: Layout,
    pool: *mut u8,
    pool_layout: Layout,
    count: u16,
    size: usize,
    tail: u16,
}

impl BufRing {
    fn new(count: u16, size: usize) -> io::Result<Self> {
        let oom = || io::Error::new(io::ErrorKind::OutOfMemory, "cannot allocate provided buffers");
        let entries_layout = Layout::from_size_align(
            count as usize * std::mem::size_of::<types::BufRingEntry>(),
            4096,
        )
        .map_err(|_| oom())?;
        let pool_layout =
            Layout::from_size_align(count as usize * size, 4096).map_err(|_| oom())?;
        // SAFETY: both layouts have a non-zero size (count and size are checked by the caller).
        let (entries, pool) = unsafe { (alloc_zeroed(entries_layout), alloc_zeroed(pool_layout)) };
        if entries.is_null() || pool.is_null() {
            // SAFETY: each pointer, when not null, came from alloc_zeroed with its layout.
            unsafe {
                if !entries.is_null() {
                    dealloc(entries, entries_layout);
                }
                if !pool.is_null() {
                    dealloc(pool, pool_layout);
                }
            }
            return Err(oom());
        }
        let mut ring = Self {
            entries: entries.cast(),
            entries_layout,
            pool,
            pool_layout,
            count,
            size,
            tail: 0,
        };
        for bid in 0..count {
            ring.push(bid);
        }
        ring.publish();
        Ok(ring)
    }

    /// Puts buffer `bid` at the ring's tail (visible to the kernel after `publish`).
    fn push(&mut self, bid: u16) {
        let index = (self.tail & (self.count - 1)) as usize;
        // SAFETY: `index` < count, the number of entries allocated; the kernel only reads
        // entries between its head and the published tail, and this one is past the tail.
        let entry = unsafe { &mut *self.entries.add(index) };
        // SAFETY: bid < count, so the buffer lies inside the pool allocation.
        let addr = unsafe { self.pool.add(bid as usize * self.size) };
        entry.set_addr(addr as u64);
        entry.set_len(self.size as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail field overlays the first entry's reserved field (the kernel's
        // struct io_uring_buf_ring); it is a u16 the kernel reads, so it is stored atomically
        // with release ordering after the entries it makes visible.
        unsafe {
            let tail = types::BufRingEntry::tail(self.entries) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with these layouts; the ring that used them is gone
        // (SocketRing drops its IoUring first).
        unsafe {
            dealloc(self.entries.cast(), self.entries_layout);
            dealloc(self.pool, self.pool_layout);
        }
    }
}

/// How a lane's ring is set up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RingConfig {
    /// Fixed-file slots: connections open at once.
    pub files: u32,
    /// Provided buffers (a power of two) and their size.
    pub buffers: u16,
    pub buffer_size: usize,
    /// Pin an SQPOLL thread to this CPU.
    pub sqpoll_cpu: Option<usize>,
}

/// One lane's ring. Field order matters: the ring is dropped (and the kernel lets go of every
/// buffer) before the buffers and pending sends are freed.
pub(crate) struct SocketRing {
    ring: IoUring,
    bufs: BufRing,
    /// The buffer and offset of the send in flight on each slot.
    sends: Vec<Option<(Vec<u8>, usize)>>,
    /// The layout every multishot recvmsg follows (room for any sender's address, no
    /// control data); boxed, so its address stays put while receives are armed.
    recvmsg: Box<libc::msghdr>,
}

impl std::fmt::Debug for SocketRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SocketRing").field("bufs", &self.bufs).finish_non_exhaustive()
    }
}

// SAFETY: the raw pointers in BufRing point to allocations owned by this value alone.
unsafe impl Send for SocketRing {}

impl SocketRing {
    pub fn new(config: RingConfig) -> io::Result<Self> {
        if !config.buffers.is_power_of_two() || config.buffer_size == 0 || config.files == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "bad ring configuration"));
        }
        let entries = 4096;
        let mut builder = IoUring::builder();
        builder.setup_cqsize(entries * 8).setup_submit_all();
        if let Some(cpu) = config.sqpoll_cpu {
            builder.setup_sqpoll(1000).setup_sqpoll_cpu(cpu as u32);
        } else {
            builder.setup_coop_taskrun();
        }
        let ring = builder.build(entries)?;
        if !ring.params().is_feature_ext_arg() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this kernel's io_uring lacks timed waits (IORING_FEAT_EXT_ARG, Linux 5.11)",
            ));
        }
        ring.submitter().register_files_sparse(config.files)?;
        let bufs = BufRing::new(config.buffers, config.buffer_size)?;
        // SAFETY: the entries stay allocated until `bufs` is dropped, after `ring`.
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                bufs.entries as u64,
                bufs.count,
                GROUP,
                0,
            )?;
        }
        // SAFETY: msghdr is a plain C struct for which all-zero is a valid value.
        let mut recvmsg: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
        recvmsg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let sends = (0..config.files).map(|_| None).collect();
        Ok(Self { ring, bufs, sends, recvmsg })
    }

    fn push(&mut self, entry: io_uring::squeue::Entry) -> io::Result<()> {
        self.push_all(&[entry])
    }

    /// Queues `entries` together (a linked chain must not be split by a submit).
    fn push_all(&mut self, entries: &[io_uring::squeue::Entry]) -> io::Result<()> {
        loop {
            // SAFETY: every entry built here points only at memory this SocketRing keeps alive
            // until its completion (provided buffers, the send buffers in `sends`, a static
            // option value), or at none,
            // and names only descriptors that stay open until then (its fixed files).
            if unsafe { self.ring.submission().push_multiple(entries) }.is_ok() {
                return Ok(());
            }
            // Full: hand the queue to the kernel and try again.
            self.ring.submit()?;
        }
    }

    /// Accepts connections on `listener` into free fixed-file slots until cancelled.
    pub fn accept(&mut self, listener: BorrowedFd<'_>) -> io::Result<()> {
        // Non-blocking sockets: sendfile on one (through its installed descriptor) takes what
        // its buffer has room for and returns, instead of holding the lane until a slow
        // reader reads.
        let entry = opcode::AcceptMulti::new(types::Fd(listener.as_raw_fd()))
            .allocate_file_index(true)
            .flags(libc::SOCK_NONBLOCK)
            .build()
            .user_data(ACCEPT);
        self.push(entry)
    }

    /// Receives on `slot` into provided buffers until the peer closes or buffers run out.
    pub fn receive(&mut self, slot: u32) -> io::Result<()> {
        let entry =
            opcode::RecvMulti::new(types::Fixed(slot), GROUP).build().user_data(RECV | slot as u64);
        self.push(entry)
    }

    /// Receives datagrams on the (unregistered) socket `fd` into provided buffers, one per
    /// completion, reported under `token`; MSG_TRUNC makes a completion carry a datagram's
    /// full length even when the buffer held less.
    pub fn receive_datagrams(&mut self, fd: BorrowedFd<'_>, token: u32) -> io::Result<()> {
        let entry = opcode::RecvMulti::new(types::Fd(fd.as_raw_fd()), GROUP)
            .flags(libc::MSG_TRUNC)
            .build()
            .user_data(RECV | token as u64);
        self.push(entry)
    }

    /// Receives datagrams with their senders' addresses on `fd` (multishot recvmsg into
    /// provided buffers), reported under `token` as `ReceivedFrom`.
    pub fn receive_datagrams_from(&mut self, fd: BorrowedFd<'_>, token: u32) -> io::Result<()> {
        let msg: *const libc::msghdr = &*self.recvmsg;
        let entry = opcode::RecvMsgMulti::new(types::Fd(fd.as_raw_fd()), msg, GROUP)
            .build()
            .user_data(RECVMSG | token as u64);
        self.push(entry)
    }

    /// Where the address and payload of a `ReceivedFrom` completion lie in its buffer;
    /// `None` when the kernel's layout does not parse (then give the buffer back).
    pub fn datagram_from(&self, buffer: u16, len: usize) -> Option<DatagramParts> {
        let data = self.buffer(buffer, len);
        let out = types::RecvMsgOut::parse(data, &self.recvmsg).ok()?;
        let base = data.as_ptr() as usize;
        let (name, payload) = (out.name_data(), out.payload_data());
        let name_start = name.as_ptr() as usize - base;
        let name_len = (out.incoming_name_len() as usize).min(name.len());
        let payload_start = payload.as_ptr() as usize - base;
        Some(DatagramParts {
            name: name_start..name_start + name_len,
            payload: payload_start..payload_start + payload.len(),
            truncated: out.is_payload_truncated() || out.is_name_data_truncated(),
        })
    }

    /// The bytes of provided buffer `buffer`, writable (an answer edited in place).
    pub fn buffer_mut(&mut self, buffer: u16, len: usize) -> &mut [u8] {
        let len = len.min(self.bufs.size);
        let index = (buffer % self.bufs.count) as usize;
        // SAFETY: as `buffer`: the kernel does not touch this buffer until it is given back
        // (or handed to a send, which only reads it); `&mut self` makes this the only view.
        unsafe { std::slice::from_raw_parts_mut(self.bufs.pool.add(index * self.bufs.size), len) }
    }

    /// Sends `parts.payload` of provided buffer `buffer` to the address at `parts.name` in
    /// the same buffer, on `fd`: an answer with no copy. The buffer must not be given back
    /// before its `Replied` completion.
    pub fn reply_from_buffer(
        &mut self,
        fd: BorrowedFd<'_>,
        buffer: u16,
        parts: &DatagramParts,
    ) -> io::Result<()> {
        let size = self.bufs.size;
        if parts.name.end > size || parts.payload.end > size || parts.name.is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "answer outside its buffer"));
        }
        let index = (buffer % self.bufs.count) as usize;
        // SAFETY: index < count and both ranges end within the buffer's `size` bytes (checked
        // above), so every pointer stays inside the pool allocation, which outlives the ring.
        let (payload, name) = unsafe {
            let base = self.bufs.pool.add(index * size);
            (base.add(parts.payload.start), base.add(parts.name.start))
        };
        let entry =
            opcode::Send::new(types::Fd(fd.as_raw_fd()), payload, parts.payload.len() as u32)
                .dest_addr(name.cast())
                .dest_addr_len(parts.name.len() as libc::socklen_t)
                .build()
                .user_data(REPLY | u64::from(buffer));
        self.push(entry)
    }

    /// The size of each provided buffer.
    pub fn buffer_size(&self) -> usize {
        self.bufs.size
    }

    /// Sends `buf[offset..]` on `slot`; the buffer comes back in `Completion::Sent`.
    pub fn send(&mut self, slot: u32, buf: Vec<u8>, offset: usize) -> io::Result<()> {
        let index = slot as usize;
        let len = (buf.len() - offset) as u32;
        // The heap block of a Vec does not move when the Vec is moved into `sends`.
        let ptr = buf[offset..].as_ptr();
        self.sends[index] = Some((buf, offset));
        let entry = opcode::Send::new(types::Fixed(slot), ptr, len)
            .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
            .build()
            .user_data(SEND | slot as u64);
        self.push(entry)
    }

    /// Gives connection `slot` a regular descriptor beside its fixed file, for the system
    /// calls io_uring has no inline form of (sendfile); it comes in `Completion::Installed`.
    pub fn install_descriptor(&mut self, slot: u32) -> io::Result<()> {
        // Flags 0: the descriptor is close-on-exec.
        let entry = opcode::FixedFdInstall::new(types::Fixed(slot), 0)
            .build()
            .user_data(INSTALL | slot as u64);
        self.push(entry)
    }

    /// Turns Nagle's algorithm off on `slot` (TCP_NODELAY), in the ring: no system call of
    /// its own. A kernel before 6.7 refuses it (the completion is ignored).
    pub fn no_delay(&mut self, slot: u32) -> io::Result<()> {
        static ON: libc::c_int = 1;
        let entry = opcode::SetSockOpt::new(
            types::Fixed(slot),
            libc::IPPROTO_TCP as u32,
            libc::TCP_NODELAY as u32,
            std::ptr::addr_of!(ON).cast(),
            std::mem::size_of::<libc::c_int>() as u32,
        )
        .build()
        .user_data(OTHER);
        self.push(entry)
    }

    /// Reports in `Completion::Writable` once `slot` has room to send.
    pub fn when_writable(&mut self, slot: u32) -> io::Result<()> {
        let entry = opcode::PollAdd::new(types::Fixed(slot), libc::POLLOUT as u32)
            .build()
            .user_data(WRITABLE | slot as u64);
        self.push(entry)
    }

    /// Cancels the multishot receive of connection `slot`: it ends with a `RecvEnded`
    /// carrying -ECANCELED (or whatever ended it first).
    pub fn cancel_receive(&mut self, slot: u32) -> io::Result<()> {
        self.push(opcode::AsyncCancel::new(RECV | slot as u64).build().user_data(OTHER))
    }

    /// Cancels the multishot accept (on shutdown: the listener must stop taking connections).
    pub fn cancel_accept(&mut self) -> io::Result<()> {
        self.push(opcode::AsyncCancel::new(ACCEPT).build().user_data(OTHER))
    }

    /// Shuts `slot` down (`how`: libc::SHUT_WR or SHUT_RDWR).
    pub fn shutdown(&mut self, slot: u32, how: i32) -> io::Result<()> {
        self.push(opcode::Shutdown::new(types::Fixed(slot), how).build().user_data(OTHER))
    }

    /// Closes `slot`, freeing it for a later accept.
    pub fn close(&mut self, slot: u32) -> io::Result<()> {
        self.push(opcode::Close::new(types::Fixed(slot)).build().user_data(OTHER))
    }

    /// The bytes a `Received` completion reported.
    pub fn buffer(&self, buffer: u16, len: usize) -> &[u8] {
        let len = len.min(self.bufs.size);
        let index = (buffer % self.bufs.count) as usize;
        // SAFETY: the kernel wrote this buffer before posting the completion that named it,
        // and will not write it again until `give_back` returns it to the ring.
        unsafe { std::slice::from_raw_parts(self.bufs.pool.add(index * self.bufs.size), len) }
    }

    /// Returns a provided buffer to the kernel.
    pub fn give_back(&mut self, buffer: u16) {
        self.bufs.push(buffer % self.bufs.count);
        self.bufs.publish();
    }

    /// Submits what is queued and waits up to `timeout` for at least one completion.
    pub fn submit_and_wait(&mut self, timeout: Duration) -> io::Result<()> {
        let ts = types::Timespec::from(timeout);
        let args = types::SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY)) => {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Moves every available completion into `out`.
    pub fn completions(&mut self, out: &mut Vec<Completion>) {
        let mut cq = self.ring.completion();
        cq.sync();
        let cqes: Vec<cqueue::Entry> = cq.collect();
        for cqe in cqes {
            let data = cqe.user_data();
            let slot = (data & 0xffff_ffff) as u32;
            let (result, flags) = (cqe.result(), cqe.flags());
            let more = cqueue::more(flags);
            out.push(match data & KIND {
                ACCEPT if result >= 0 => Completion::Accepted { slot: result as u32, more },
                ACCEPT => Completion::AcceptFailed { more },
                RECV => match cqueue::buffer_select(flags) {
                    Some(buffer) if result > 0 => {
                        Completion::Received { slot, buffer, len: result as usize, more }
                    }
                    Some(buffer) => {
                        // A buffer with no data: return it at once.
                        self.give_back(buffer);
                        Completion::RecvEnded { slot, result, more }
                    }
                    None => Completion::RecvEnded { slot, result, more },
                },
                RECVMSG => match cqueue::buffer_select(flags) {
                    Some(buffer) if result > 0 => {
                        Completion::ReceivedFrom { buffer, len: result as usize, more }
                    }
                    Some(buffer) => {
                        self.give_back(buffer);
                        Completion::RecvEnded { slot, result, more }
                    }
                    None => Completion::RecvEnded { slot, result, more },
                },
                REPLY => Completion::Replied { buffer: slot as u16, result },
                SEND => match self.sends.get_mut(slot as usize).and_then(Option::take) {
                    Some((buf, offset)) => Completion::Sent { slot, result, buf, offset },
                    None => Completion::Done,
                },
                INSTALL if result >= 0 => {
                    // SAFETY: the kernel installed descriptor `result` for this completion
                    // alone; nothing else owns it.
                    let socket = unsafe { OwnedFd::from_raw_fd(result) };
                    Completion::Installed { slot, socket: Ok(socket) }
                }
                INSTALL => Completion::Installed { slot, socket: Err(result) },
                WRITABLE => Completion::Writable { slot, result },
                _ => Completion::Done,
            });
        }
    }
}

/// Whether this kernel runs the datagram ring a receive lane builds (timed waits, sparse
/// files, a provided-buffer ring, receive): the reason it does not, if so.
pub(crate) fn probe_datagram_ring() -> Result<(), String> {
    let config = RingConfig { files: 1, buffers: 8, buffer_size: 2048, sqpoll_cpu: None };
    let ring =
        SocketRing::new(config).map_err(|e| format!("io_uring is not available here ({e})"))?;
    let mut probe = io_uring::Probe::new();
    ring.ring
        .submitter()
        .register_probe(&mut probe)
        .map_err(|e| format!("io_uring probe failed ({e})"))?;
    if !probe.is_supported(opcode::Recv::CODE) {
        return Err("this kernel's io_uring cannot receive (IORING_OP_RECV, Linux 5.6)".into());
    }
    Ok(())
}

/// Whether this kernel gives a ring an SQPOLL thread on `cpu`: the reason it does not, if so.
pub(crate) fn probe_sqpoll(cpu: usize) -> Result<(), String> {
    IoUring::<io_uring::squeue::Entry>::builder()
        .setup_sqpoll(100)
        .setup_sqpoll_cpu(cpu as u32)
        .build(8)
        .map(drop)
        .map_err(|e| format!("the kernel refused an SQPOLL thread on CPU {cpu}: {e}"))
}
