//! Writing an exchange to a non-blocking socket now, on the lane: its answers, then its file
//! body with sendfile(2), so the body goes from the page cache to the socket with no copy
//! through user space and no other thread. The epoll lane writes every connection this way;
//! the io_uring lane writes large file bodies this way, through the descriptor it installs
//! for the connection (its ring's fixed files have none).

use std::os::fd::BorrowedFd;

use rustix::io::Errno;
use rustix::net::SendFlags;

use super::counters::{bump, ServerCounters};
use super::exchange::Exchange;

/// How far a write got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Flushed {
    /// Everything is out: the output, and the file body if there was one.
    Done,
    /// The socket is full: write again once it is writable.
    Blocked,
    /// The peer is gone, or the file changed or shrank under us: the connection must end
    /// (short, never padded or mixed).
    Failed,
}

/// Writes `exchange.output[*sent..]`, then the file body, to `socket` until everything is out
/// or the socket is full. `*sent` counts the output bytes already written (the output is
/// cleared once all are); the body's offset moves with what sendfile took. Returns how far it
/// got and whether any byte moved (the idle deadline runs from the last that did).
pub(super) fn write_out(
    socket: BorrowedFd<'_>,
    exchange: &mut Exchange,
    sent: &mut usize,
    counters: &ServerCounters,
) -> (Flushed, bool) {
    let mut moved = false;
    // The head of a file body waits for the body's first bytes (MSG_MORE): one segment, not
    // a short one ahead of the body.
    let more = if exchange.file.is_some() { SendFlags::MORE } else { SendFlags::empty() };
    while *sent < exchange.output.len() {
        match rustix::net::send(socket, &exchange.output[*sent..], more | SendFlags::NOSIGNAL) {
            Ok(n) => {
                *sent += n;
                moved = true;
                bump(&counters.bytes_out, n as u64);
            }
            Err(Errno::AGAIN) => return (Flushed::Blocked, moved),
            Err(Errno::INTR) => {}
            Err(_) => return (Flushed::Failed, moved),
        }
    }
    exchange.output.clear();
    *sent = 0;
    let Some(body) = &mut exchange.file else { return (Flushed::Done, moved) };
    while body.offset < body.end {
        // The file is checked before every call: its pages go out as they are when sendfile
        // runs, so a file written since its head was made must not be sent on.
        if !body.unchanged() {
            return (Flushed::Failed, moved);
        }
        let chunk = (body.end - body.offset).min(1 << 30) as usize;
        match rustix::fs::sendfile(socket, &body.file, Some(&mut body.offset), chunk) {
            Ok(0) => return (Flushed::Failed, moved), // the file shrank under us
            Ok(n) => {
                moved = true;
                bump(&counters.bytes_out, n as u64);
                bump(&counters.sendfile_bytes, n as u64);
            }
            Err(Errno::AGAIN) => return (Flushed::Blocked, moved),
            Err(Errno::INTR) => {}
            Err(_) => return (Flushed::Failed, moved),
        }
    }
    exchange.file = None;
    (Flushed::Done, moved)
}
