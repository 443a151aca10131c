//! Socket options that socket2 and rustix do not expose (UDP_SEGMENT, UDP_GRO,
//! SO_RCVBUFFORCE, TCP_DEFER_ACCEPT, the reuseport CPU-steering program).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use super::syscall;

fn set_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the kernel reads one c_int from `value`, on this frame for the call.
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

/// TCP_DEFER_ACCEPT: the listener hands out a connection only once its first data (the
/// request) has arrived, or after `secs`; a connection is then never accepted just to wait.
pub(crate) fn set_tcp_defer_accept(fd: BorrowedFd<'_>, secs: u32) -> io::Result<()> {
    let value = libc::c_int::try_from(secs).unwrap_or(libc::c_int::MAX);
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_DEFER_ACCEPT, value)
}

/// SO_RCVBUFFORCE lets root exceed net.core.rmem_max; callers fall back to SO_RCVBUF.
pub(crate) fn set_rcvbuf_force(fd: BorrowedFd<'_>, bytes: usize) -> io::Result<()> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, value)
}

/// Busy-polling options (include/uapi/asm-generic/socket.h), which libc exports only for some
/// targets: SO_BUSY_POLL (Linux 3.11), SO_PREFER_BUSY_POLL and SO_BUSY_POLL_BUDGET (5.11),
/// SO_INCOMING_NAPI_ID (4.12).
const SO_BUSY_POLL: libc::c_int = 46;
const SO_INCOMING_NAPI_ID: libc::c_int = 56;
const SO_PREFER_BUSY_POLL: libc::c_int = 69;

/// SO_BUSY_POLL: a blocking receive on this socket polls the device's NAPI context for up to
/// `usecs` before sleeping. Above net.core.busy_read the kernel wants CAP_NET_ADMIN (EPERM).
pub(crate) fn set_busy_poll(fd: BorrowedFd<'_>, usecs: u32) -> io::Result<()> {
    let value = libc::c_int::try_from(usecs).unwrap_or(libc::c_int::MAX);
    set_int(fd, libc::SOL_SOCKET, SO_BUSY_POLL, value)
}

/// SO_PREFER_BUSY_POLL: while the application busy-polls, the device's interrupts stay
/// deferred (with napi_defer_hard_irqs/gro_flush_timeout set on the device).
pub(crate) fn set_prefer_busy_poll(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    set_int(fd, libc::SOL_SOCKET, SO_PREFER_BUSY_POLL, on as libc::c_int)
}

/// The NAPI id of the last packet this socket received; 0 when the path has none (loopback,
/// veth without XDP/GRO), and then busy polling has nothing to poll.
pub(crate) fn incoming_napi_id(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let mut value: libc::c_uint = 0;
    let mut len = std::mem::size_of::<libc::c_uint>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` (one c_uint) bytes into `value`.
    syscall!(getsockopt(
        fd.as_raw_fd(),
        libc::SOL_SOCKET,
        SO_INCOMING_NAPI_ID,
        (&mut value as *mut libc::c_uint).cast(),
        &mut len,
    ))?;
    Ok(value)
}

/// SO_ATTACH_REUSEPORT_CBPF (include/uapi/asm-generic/socket.h; Linux 4.5+), which libc
/// exports only for Android.
const SO_ATTACH_REUSEPORT_CBPF: libc::c_int = 51;

/// Makes a SO_REUSEPORT group hand each datagram to the socket of the lane pinned to the CPU
/// that is processing it: a classic BPF program loads the current CPU and returns
/// `lane_cpus.iter().position(cpu)`. A CPU with no lane returns an index past the group, and
/// the kernel then falls back to its flow hash (net/core/sock_reuseport.c).
pub(crate) fn steer_reuseport_by_cpu(fd: BorrowedFd<'_>, lane_cpus: &[usize]) -> io::Result<()> {
    let insn =
        |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter { code: code as u16, jt, jf, k };
    let mut program = vec![insn(
        libc::BPF_LD | libc::BPF_W | libc::BPF_ABS,
        0,
        0,
        (libc::SKF_AD_OFF + libc::SKF_AD_CPU) as u32,
    )];
    for (index, &cpu) in lane_cpus.iter().enumerate() {
        // if A == cpu { return index } else skip the return
        program.push(insn(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 0, 1, cpu as u32));
        program.push(insn(libc::BPF_RET | libc::BPF_K, 0, 0, index as u32));
    }
    program.push(insn(libc::BPF_RET | libc::BPF_K, 0, 0, lane_cpus.len() as u32));
    let len = u16::try_from(program.len()).map_err(|_| {
        io::Error::new(io::ErrorKind::InvalidInput, "too many lanes for a BPF program")
    })?;
    let fprog = libc::sock_fprog { len, filter: program.as_mut_ptr() };
    // SAFETY: `fprog` points at `program`, `len` instructions alive for the call; the kernel
    // copies them.
    syscall!(setsockopt(
        fd.as_raw_fd(),
        libc::SOL_SOCKET,
        SO_ATTACH_REUSEPORT_CBPF,
        (&fprog as *const libc::sock_fprog).cast(),
        std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
    ))
    .map(drop)
}
