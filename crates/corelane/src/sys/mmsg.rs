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

/// The arrays one batched call hands the kernel: `batch` buffers of `slot` bytes, an iovec and
/// a control area per buffer, and the mmsghdr array pointing at them. Built once per lane.
struct Messages {
    slot: usize,
    buffers: Vec<u8>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    controls: Vec<Control>,
}

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
        let mut iovecs: Vec<libc::iovec> = buffers
            .chunks_exact_mut(slot)
            .map(|chunk| libc::iovec { iov_base: chunk.as_mut_ptr().cast(), iov_len: slot })
            .collect();
        let headers = iovecs
            .iter_mut()
            .zip(controls.iter_mut())
            .map(|(iov, control)| {
                // SAFETY: msghdr is a plain C struct for which all-zero is a valid value.
                let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
                hdr.msg_iov = iov;
                hdr.msg_iovlen = 1;
                hdr.msg_control = control.0.as_mut_ptr().cast();
                hdr.msg_controllen = CONTROL_SPACE;
                libc::mmsghdr { msg_hdr: hdr, msg_len: 0 }
            })
            .collect();
        Self { slot, buffers, iovecs, headers, controls }
    }
}

/// A batch of receive buffers for recvmmsg.
pub(crate) struct MmsgRecv(Messages);

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
        for hdr in &mut self.0.headers {
            // The kernel overwrites these two on every call; reset them to the full space.
            hdr.msg_hdr.msg_controllen = CONTROL_SPACE;
            hdr.msg_hdr.msg_flags = 0;
        }
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

    /// One sendmmsg call for the first `count` messages; returns how many the kernel took.
    pub(crate) fn send(&mut self, fd: BorrowedFd<'_>, count: usize) -> io::Result<usize> {
        let count = count.min(self.0.headers.len());
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
