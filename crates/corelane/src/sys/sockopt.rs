//! UDP offload options that socket2 does not expose (UDP_SEGMENT, UDP_GRO).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use super::syscall;

fn set_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    syscall!(setsockopt(
        fd.as_raw_fd(),
        level,
        name,
        (&value as *const libc::c_int).cast(),
        std::mem::size_of::<libc::c_int>() as libc::socklen_t,
    ))
    .map(drop)
}

/// Enables UDP_GRO (Linux 5.0+): the kernel may hand one buffer holding several datagrams of one
/// flow, with their segment size in a `UDP_GRO` control message.
pub(crate) fn set_udp_gro(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    set_int(fd, libc::SOL_UDP, libc::UDP_GRO, on as libc::c_int)
}

/// Sets a default UDP_SEGMENT size (Linux 4.18+); used as a probe before sending with GSO.
pub(crate) fn set_udp_segment(fd: BorrowedFd<'_>, size: u16) -> io::Result<()> {
    set_int(fd, libc::SOL_UDP, libc::UDP_SEGMENT, libc::c_int::from(size))
}

/// SO_RCVBUFFORCE lets root exceed net.core.rmem_max; callers fall back to SO_RCVBUF.
pub(crate) fn set_rcvbuf_force(fd: BorrowedFd<'_>, bytes: usize) -> io::Result<()> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, value)
}
