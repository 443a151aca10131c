//! Which fds are sockets: a per-fd cache (one byte for every descriptor number, `FdBytes`) so
//! a read or write on a file pays no extra system call after its first. It follows every way
//! the library sees a descriptor made, copied or closed: socket, socketpair and accept mark
//! theirs; dup, dup2, dup3 and fcntl's F_DUPFD copy the old number's kind to the new;
//! close, close_range and closefrom forget theirs; recvmsg and recvmmsg forget the numbers
//! SCM_RIGHTS brought. One closed some other way (glibc inside fclose, a raw system call) can leave a
//! stale entry, which is harmless: a stale "socket" gets ENOTSOCK from the kernel and is
//! corrected, a stale "not a socket" only keeps a socket's calls direct.

use core::sync::atomic::Ordering::Relaxed;

use crate::sys::*;

const UNKNOWN: u8 = 0;
const SOCKET: u8 = 1;
const OTHER: u8 = 2;

static KIND: FdBytes = FdBytes::new();

fn set(fd: c_int, kind: u8) {
    // Forgetting needs no page: a number without one is unknown already.
    if let Some(k) = KIND.get(fd, kind != UNKNOWN) {
        k.store(kind, Relaxed);
    }
}

fn kind(fd: c_int) -> u8 {
    KIND.get(fd, false).map_or(UNKNOWN, |k| k.load(Relaxed))
}

pub fn forget(fd: c_int) {
    set(fd, UNKNOWN);
}

/// Forgets every number in `first..=last` (close_range, closefrom).
pub fn forget_range(first: c_int, last: c_int) {
    KIND.each_in(first, last, |k| k.store(UNKNOWN, Relaxed));
}

/// `new` is now a copy of `old` (dup and its kin): it is what `old` is.
pub fn copied(old: c_int, new: c_int) {
    if new >= 0 && new != old {
        set(new, kind(old));
    }
}

pub fn mark_socket(fd: c_int) {
    set(fd, SOCKET);
}

pub fn mark_other(fd: c_int) {
    set(fd, OTHER);
}

/// Known to be a socket, without asking the kernel.
pub fn known_socket(fd: c_int) -> bool {
    kind(fd) == SOCKET
}

/// Whether `fd` is a socket; asks the kernel (getsockopt SO_TYPE) the first time. errno is
/// left as it was.
pub fn is_socket(fd: c_int) -> bool {
    if fd < 0 {
        return false;
    }
    match kind(fd) {
        SOCKET => return true,
        OTHER => return false,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_number_is_followed_and_ranges_are_forgotten() {
        for fd in [0, 65_535, 65_536, 1 << 20, c_int::MAX] {
            mark_socket(fd);
            assert!(known_socket(fd), "{fd}");
        }
        copied(1 << 20, 3_000_000);
        assert!(known_socket(3_000_000));
        forget_range(65_536, c_int::MAX);
        assert!(!known_socket(65_536) && !known_socket(c_int::MAX) && !known_socket(3_000_000));
        assert!(known_socket(65_535));
        forget(-1);
        assert!(!known_socket(-1));
    }
}
