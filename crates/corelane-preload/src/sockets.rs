//! Which fds are sockets: a per-fd cache (one byte for each of the first 65536 fds) so a read
//! or write on a file pays no extra system call after its first. It is cleared on close, dup2
//! and dup3 through this library; an fd closed some other way (glibc inside fclose, close_range)
//! can leave a stale entry, which is harmless: a stale "socket" gets ENOTSOCK from the kernel
//! and is corrected, a stale "not a socket" only keeps a socket's calls direct.

use core::sync::atomic::AtomicU8;
use core::sync::atomic::Ordering::Relaxed;

use crate::sys::*;

const CACHED: usize = 65536;
const UNKNOWN: u8 = 0;
const SOCKET: u8 = 1;
const OTHER: u8 = 2;

static KIND: [AtomicU8; CACHED] = [const { AtomicU8::new(UNKNOWN) }; CACHED];

fn set(fd: c_int, kind: u8) {
    if let Some(k) = usize::try_from(fd).ok().and_then(|i| KIND.get(i)) {
        k.store(kind, Relaxed);
    }
}

pub fn forget(fd: c_int) {
    set(fd, UNKNOWN);
}

pub fn mark_socket(fd: c_int) {
    set(fd, SOCKET);
}

pub fn mark_other(fd: c_int) {
    set(fd, OTHER);
}

/// Known to be a socket, without asking the kernel.
pub fn known_socket(fd: c_int) -> bool {
    usize::try_from(fd).ok().and_then(|i| KIND.get(i)).is_some_and(|k| k.load(Relaxed) == SOCKET)
}

/// Whether `fd` is a socket; asks the kernel (getsockopt SO_TYPE) the first time. errno is
/// left as it was.
pub fn is_socket(fd: c_int) -> bool {
    let Ok(index) = usize::try_from(fd) else { return false };
    match KIND.get(index).map(|k| k.load(Relaxed)) {
        Some(SOCKET) => return true,
        Some(OTHER) => return false,
        _ => {}
    }
    let saved = errno();
    let answer = if socket_type(fd).is_some() {
        mark_socket(fd);
        true
    } else {
        if errno() == ENOTSOCK {
            mark_other(fd);
        }
        false
    };
    set_errno(saved);
    answer
}

/// A stream socket (a short send on it may be continued; a datagram's may not).
pub fn is_stream(fd: c_int) -> bool {
    let saved = errno();
    let kind = socket_type(fd);
    set_errno(saved);
    kind == Some(SOCK_STREAM)
}
