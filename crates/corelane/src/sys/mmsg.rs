//! recvmmsg(2)/sendmmsg(2) over preallocated message arrays, with the UDP_GRO and UDP_SEGMENT
//! control messages. Everything a batch needs (buffers, iovecs, headers, control space) is
//! allocated once and reused for every call: the hot path allocates nothing.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use super::syscall;

/// The kernel caps `vlen` at UIO_MAXIOV (1024); larger values are silently truncated
/// (recvmmsg(2), sendmmsg(2)), so we refuse them up front instead.
pub(crate) const MAX_BATCH: usize = 1024;

/// Control space per message: one `int` (UDP_GRO) or `u16` (UDP_SEGMENT) cmsg, rounded up.
const CONTROL_SPACE: usize = 64;

#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct Control([u8; CONTROL_SPACE]);

/// One received message: its length, whether it was cut short, and its GRO segment size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Received {
    pub len: usize,
    pub truncated: bool,
    /// Segment size when the kernel coalesced several datagrams (UDP_GRO), else `None`.
    pub segment_size: Option<usize>,
}

/// The arrays one batched call hands the kernel: `batch` buffers of `slot` bytes, an iovec, a
/// control area and an address per buffer, and the mmsghdr array pointing at them. Built once
/// per lane.
struct Messages {
    slot: usize,
    buffers: Vec<u8>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    controls: Vec<Control>,
    /// The headers' msg_name pointers point into it: recvmmsg writes each sender here.
    names: Vec<libc::sockaddr_storage>,
}

const NAME_SPACE: libc::socklen_t =
    std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;

// SAFETY: the raw pointers inside `iovecs` and `headers` point into the heap allocations of
// `buffers`, `iovecs` and `controls`, which this struct owns exclusively and never reallocates;
// moving the struct to another thread moves ownership of everything they point to.
unsafe impl Send for Messages {}

impl Messages {
    /// The caller keeps `batch` within `1..=MAX_BATCH` (the wrappers assert it).
    fn new(batch: usize, slot: usize) -> Self {
        assert!((1..=MAX_BATCH).contains(&batch) && slot > 0);
        let mut buffers = vec![0u8; batch * slot];
        let mut controls = vec![Control([0; CONTROL_SPACE]); batch];
        // SAFETY: sockaddr_storage is a plain C struct for which all-zero is a valid value.
        let mut names: Vec<libc::sockaddr_storage> = vec![unsafe { std::mem::zeroed() }; batch];
        let mut iovecs: Vec<libc::iovec> = buffers
            .chunks_exact_mut(slot)
            .map(|chunk| libc::iovec { iov_base: chunk.as_mut_ptr().cast(), iov_len: slot })
            .collect();
        let headers = iovecs
            .iter_mut()
            .zip(controls.iter_mut())
            .zip(names.iter_mut())
            .map(|((iov, control), name)| {
                // SAFETY: msghdr is a plain C struct for which all-zero is a valid value.
                let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
                hdr.msg_iov = iov;
                hdr.msg_iovlen = 1;
                hdr.msg_control = control.0.as_mut_ptr().cast();
                hdr.msg_controllen = CONTROL_SPACE;
                hdr.msg_name = (name as *mut libc::sockaddr_storage).cast();
                hdr.msg_namelen = NAME_SPACE;
                libc::mmsghdr { msg_hdr: hdr, msg_len: 0 }
            })
            .collect();
        Self { slot, buffers, iovecs, headers, controls, names }
    }
}

/// A batch of receive buffers for recvmmsg.
pub(crate) struct MmsgRecv(Messages);

impl std::fmt::Debug for MmsgRecv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MmsgRecv")
            .field("batch", &self.batch())
            .field("slot", &self.0.slot)
            .finish()
    }
}

impl MmsgRecv {
    /// `batch` messages of `slot` bytes each. The caller checks `1..=MAX_BATCH`.
    pub(crate) fn new(batch: usize, slot: usize) -> Self {
        Self(Messages::new(batch, slot))
    }

    pub(crate) fn batch(&self) -> usize {
        self.0.headers.len()
    }

    /// One recvmmsg call; returns how many messages arrived. `flags` are MSG_* flags
    /// (MSG_WAITFORONE to return as soon as one arrived, MSG_DONTWAIT to never block).
    pub(crate) fn recv(&mut self, fd: BorrowedFd<'_>, flags: libc::c_int) -> io::Result<usize> {
        let slot = self.0.slot;
        for (hdr, (iov, control)) in
            self.0.headers.iter_mut().zip(self.0.iovecs.iter_mut().zip(self.0.controls.iter_mut()))
        {
            // The kernel overwrites these on every call (and `reply` shortens the iovecs and
            // points the control area at a UDP_SEGMENT message): reset them to the full space.
            hdr.msg_hdr.msg_control = control.0.as_mut_ptr().cast();
            hdr.msg_hdr.msg_controllen = CONTROL_SPACE;
            hdr.msg_hdr.msg_namelen = NAME_SPACE;
            hdr.msg_hdr.msg_flags = 0;
            iov.iov_len = slot;
        }
        // SAFETY: every header points at this struct's own buffer (its iovec of `slot` bytes),
        // control area (CONTROL_SPACE bytes) and address (a sockaddr_storage), all alive and
        // unaliased for the call; the count is the header array's length; no timeout.
        let n = syscall!(recvmmsg(
            fd.as_raw_fd(),
            self.0.headers.as_mut_ptr(),
            self.0.headers.len() as libc::c_uint,
            flags,
            std::ptr::null_mut(),
        ))?;
        Ok(n as usize)
    }

    /// The `i`-th message of the last call (valid for `i < recv()`'s result).
    pub(crate) fn message(&self, i: usize) -> (Received, &[u8]) {
        let hdr = &self.0.headers[i];
        let len = (hdr.msg_len as usize).min(self.0.slot);
        let truncated = hdr.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
        let segment_size = gro_segment_size(&hdr.msg_hdr);
        let data = &self.0.buffers[i * self.0.slot..i * self.0.slot + len];
        (Received { len, truncated, segment_size }, data)
    }

    /// The sender of the `i`-th message of the last call (`None`: no IPv4/IPv6 address).
    pub(crate) fn source(&self, i: usize) -> Option<std::net::SocketAddr> {
        let len = (self.0.headers[i].msg_hdr.msg_namelen as usize)
            .min(std::mem::size_of::<libc::sockaddr_storage>());
        let name: *const libc::sockaddr_storage = &self.0.names[i];
        // SAFETY: `name` points at a live sockaddr_storage (plain bytes, borrowed from `self`
        // for the slice's life) and `len` is clamped to its size.
        let bytes = unsafe { std::slice::from_raw_parts(name.cast::<u8>(), len) };
        super::sockaddr::from_bytes(bytes)
    }

    /// Shortens the answer to the `i`-th message to its first `len` bytes (a GRO buffer
    /// whose later segments are not answered); `reply` sends that many.
    pub(crate) fn set_reply_len(&mut self, i: usize, len: usize) {
        let header = &mut self.0.headers[i];
        header.msg_len = header.msg_len.min(u32::try_from(len).unwrap_or(u32::MAX));
    }

    /// The `i`-th message of the last call, writable (an answer may be edited in place).
    pub(crate) fn message_mut(&mut self, i: usize) -> &mut [u8] {
        let len = (self.0.headers[i].msg_len as usize).min(self.0.slot);
        &mut self.0.buffers[i * self.0.slot..i * self.0.slot + len]
    }

    /// Sends messages `start..start + count` of the last recvmmsg back to their senders, each
    /// as it came (a GRO buffer goes back as GSO segments of the size it arrived in), in one
    /// sendmmsg; returns how many messages the kernel took (the caller retries the rest).
    /// Valid until the next `recv`, which restores the receive layout.
    pub(crate) fn reply(
        &mut self,
        fd: BorrowedFd<'_>,
        start: usize,
        count: usize,
    ) -> io::Result<usize> {
        let end = (start + count).min(self.0.headers.len());
        if start >= end {
            return Ok(0);
        }
        for i in start..end {
            let len = (self.0.headers[i].msg_len as usize).min(self.0.slot);
            let segment = gro_segment_size(&self.0.headers[i].msg_hdr)
                .filter(|&s| s < len)
                .and_then(|s| u16::try_from(s).ok());
            self.0.iovecs[i].iov_len = len;
            let control = self.0.controls[i].0.as_mut_ptr();
            let hdr = &mut self.0.headers[i].msg_hdr;
            hdr.msg_flags = 0;
            match segment {
                Some(size) => write_segment_cmsg(hdr, control, size),
                None => {
                    hdr.msg_control = std::ptr::null_mut();
                    hdr.msg_controllen = 0;
                }
            }
        }
        // SAFETY: `start < end <= headers.len()`, so the pointer and count stay inside the
        // header array; every header points at this struct's own iovec, control area (or
        // none) and the address recvmmsg wrote with its length, all alive for the call.
        let n = syscall!(sendmmsg(
            fd.as_raw_fd(),
            self.0.headers.as_mut_ptr().add(start),
            (end - start) as libc::c_uint,
            0,
        ))?;
        Ok(n as usize)
    }

    #[cfg(test)]
    fn iovecs_point_into_buffers(&self) -> bool {
        self.0.iovecs.iter().enumerate().all(|(i, iov)| {
            std::ptr::eq(
                iov.iov_base.cast::<u8>().cast_const(),
                self.0.buffers[i * self.0.slot..].as_ptr(),
            )
        }) && self.0.controls.len() == self.0.headers.len()
    }
}

/// Reads the UDP_GRO control message, if the kernel attached one.
fn gro_segment_size(hdr: &libc::msghdr) -> Option<usize> {
    // SAFETY: `hdr` was filled by recvmmsg; msg_control/msg_controllen describe the control
    // bytes the kernel wrote, which is exactly what the CMSG_* walkers expect (cmsg(3)).
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(hdr);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_UDP && (*cmsg).cmsg_type == libc::UDP_GRO {
                let size = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
                return usize::try_from(size).ok().filter(|&s| s > 0);
            }
            cmsg = libc::CMSG_NXTHDR(hdr, cmsg);
        }
    }
    None
}

/// Points `hdr` at `control` (a message's CONTROL_SPACE bytes) holding one UDP_SEGMENT
/// control message of `size`.
fn write_segment_cmsg(hdr: &mut libc::msghdr, control: *mut u8, size: u16) {
    let space = std::mem::size_of::<u16>() as libc::c_uint;
    hdr.msg_control = control.cast();
    // SAFETY: msg_control points at this message's CONTROL_SPACE (64) bytes, more than
    // CMSG_SPACE(2) (24 on 64-bit), and msg_controllen is set before CMSG_FIRSTHDR reads
    // it, so the first header is non-null and inside the buffer (cmsg(3)).
    unsafe {
        hdr.msg_controllen = libc::CMSG_SPACE(space) as usize;
        let cmsg = libc::CMSG_FIRSTHDR(hdr);
        (*cmsg).cmsg_level = libc::SOL_UDP;
        (*cmsg).cmsg_type = libc::UDP_SEGMENT;
        (*cmsg).cmsg_len = libc::CMSG_LEN(space) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), size);
    }
}

/// A batch of send buffers for sendmmsg on a connected socket; each message may carry a
/// UDP_SEGMENT control message so that one message leaves as several datagrams (GSO).
pub(crate) struct MmsgSend(Messages);

impl MmsgSend {
    /// `batch` messages of up to `slot` bytes each, without control messages until
    /// [`set_message`](Self::set_message) asks for one.
    pub(crate) fn new(batch: usize, slot: usize) -> Self {
        let mut messages = Messages::new(batch, slot);
        for hdr in &mut messages.headers {
            hdr.msg_hdr.msg_control = std::ptr::null_mut();
            hdr.msg_hdr.msg_controllen = 0;
            // Connected: no destination per message.
            hdr.msg_hdr.msg_name = std::ptr::null_mut();
            hdr.msg_hdr.msg_namelen = 0;
        }
        Self(messages)
    }

    /// The writable bytes of message `i` (the full slot).
    pub(crate) fn buffer_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.0.buffers[i * self.0.slot..(i + 1) * self.0.slot]
    }

    /// Sets message `i` to send `len` bytes, split into datagrams of `segment` bytes by the
    /// kernel (UDP_SEGMENT) when `segment` is `Some` and smaller than `len`.
    pub(crate) fn set_message(&mut self, i: usize, len: usize, segment: Option<u16>) {
        assert!(len <= self.0.slot);
        self.0.iovecs[i].iov_len = len;
        let control = self.0.controls[i].0.as_mut_ptr();
        let hdr = &mut self.0.headers[i].msg_hdr;
        let Some(size) = segment else {
            hdr.msg_control = std::ptr::null_mut();
            hdr.msg_controllen = 0;
            return;
        };
        write_segment_cmsg(hdr, control, size);
    }

    /// One sendmmsg call for the first `count` messages; returns how many the kernel took.
    pub(crate) fn send(&mut self, fd: BorrowedFd<'_>, count: usize) -> io::Result<usize> {
        let count = count.min(self.0.headers.len());
        // SAFETY: `count` is at most the header array's length; each header points at this
        // struct's own iovec (within its slot), control area or none, and no address.
        let n = syscall!(sendmmsg(
            fd.as_raw_fd(),
            self.0.headers.as_mut_ptr(),
            count as libc::c_uint,
            0,
        ))?;
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsFd;

    #[test]
    fn batch_round_trip_over_loopback() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let mut send = MmsgSend::new(4, 64);
        for i in 0..4 {
            send.buffer_mut(i)[..3].copy_from_slice(&[i as u8; 3]);
            send.set_message(i, 3, None);
        }
        assert_eq!(send.send(tx.as_fd(), 4).unwrap(), 4);
        let mut recv = MmsgRecv::new(8, 64);
        assert!(recv.iovecs_point_into_buffers());
        let mut got = Vec::new();
        while got.len() < 4 {
            let n = recv.recv(rx.as_fd(), libc::MSG_WAITFORONE).unwrap();
            for i in 0..n {
                let (meta, data) = recv.message(i);
                assert!(!meta.truncated);
                got.push(data.to_vec());
            }
        }
        assert_eq!(got, (0..4u8).map(|i| vec![i; 3]).collect::<Vec<_>>());
    }

    #[test]
    fn replies_go_back_to_each_sender() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.send_to(b"from a", server.local_addr().unwrap()).unwrap();
        b.send_to(b"b", server.local_addr().unwrap()).unwrap();
        let mut batch = MmsgRecv::new(4, 64);
        let mut got = 0;
        while got < 2 {
            let n = batch.recv(server.as_fd(), libc::MSG_WAITFORONE).unwrap();
            assert_eq!(batch.reply(server.as_fd(), 0, n).unwrap(), n);
            got += n;
        }
        let mut buf = [0u8; 64];
        let n = a.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"from a");
        let n = b.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"b");
        // The layout is restored for the next receive: a full-size datagram fits again.
        a.send_to(&[9u8; 64], server.local_addr().unwrap()).unwrap();
        assert_eq!(batch.recv(server.as_fd(), libc::MSG_WAITFORONE).unwrap(), 1);
        assert_eq!(batch.message(0).1, &[9u8; 64][..]);
        assert_eq!(batch.reply(server.as_fd(), 5, 3).unwrap(), 0, "out of range sends nothing");
    }

    #[test]
    fn a_datagram_larger_than_the_slot_is_marked_truncated() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(&[7u8; 100], rx.local_addr().unwrap()).unwrap();
        let mut recv = MmsgRecv::new(1, 16);
        assert_eq!(recv.recv(rx.as_fd(), libc::MSG_WAITFORONE).unwrap(), 1);
        let (meta, data) = recv.message(0);
        assert!(meta.truncated);
        assert_eq!(data.len(), 16);
    }
}
