//! Idle keep-alive connections (`corelane load http --hold-idle`): N connections to a
//! server, each after one answered GET, held open and silent, so that what an idle
//! connection costs the server can be read on its side. Bounded: the count by the caller,
//! every answer by `load http`'s own `ResponseReader` (head within 64 KiB, the body counted
//! and dropped) and by [`MAX_ANSWER`] bytes in all, every wait by a timeout.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::response::{ResponseReader, Taken};

/// The most bytes one answer may take (head and body) before it is refused.
pub const MAX_ANSWER: usize = (1 << 20) + 64 * 1024;

/// The connections held, and how many of them got a 2xx to their GET.
#[derive(Debug, Default)]
pub struct Held {
    pub streams: Vec<TcpStream>,
    pub answered: usize,
}

/// Opens `n` connections to `addr`, sends `GET path` on each (with `host` as the Host
/// header) and reads its answer whole, then keeps the connection: the caller holds them
/// open until it drops the result. A connection closed with a reset (linger 0), so the
/// client's ports are not left in TIME_WAIT. `stop` ends the opening early (the ones opened
/// so far are returned); so does `deadline`, which also bounds every wait (each is the
/// shorter of `timeout` and what is left). A failure names the connection and what failed.
pub fn hold(
    addr: SocketAddr,
    host: &str,
    path: &str,
    n: usize,
    timeout: Duration,
    deadline: Instant,
    stop: &dyn Fn() -> bool,
) -> std::io::Result<Held> {
    let mut held = Held { streams: Vec::with_capacity(n.min(1 << 16)), answered: 0 };
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n");
    for i in 0..n {
        let left = deadline.saturating_duration_since(Instant::now());
        if stop() || left.is_zero() {
            break;
        }
        let timeout = timeout.min(left);
        let named = |what: &str, e: std::io::Error| {
            std::io::Error::new(
                e.kind(),
                format!("connection {} of {n} to {addr}: {what}: {e}", i + 1),
            )
        };
        let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| named("connect", e))?;
        s.set_read_timeout(Some(timeout)).map_err(|e| named("timeout", e))?;
        s.set_write_timeout(Some(timeout)).map_err(|e| named("timeout", e))?;
        rustix::net::sockopt::set_socket_linger(&s, Some(Duration::ZERO))
            .map_err(|e| named("linger", e.into()))?;
        s.write_all(request.as_bytes()).map_err(|e| named("request", e))?;
        if read_answer(&mut s, deadline).map_err(|e| named("answer", e))? {
            held.answered += 1;
        }
        held.streams.push(s);
    }
    Ok(held)
}

/// Reads one HTTP/1.1 answer from `s` whole; whether it was 2xx. An answer `load http`
/// cannot frame (no Content-Length, a head over 64 KiB), one over [`MAX_ANSWER`] bytes, one
/// after which the server closes (a connection it will not hold), one still coming at
/// `deadline`, or an early end is an error, never an unbounded read.
pub fn read_answer(s: &mut impl Read, deadline: Instant) -> std::io::Result<bool> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let mut reader = ResponseReader::default();
    let mut total = 0usize;
    loop {
        let n = s.read(reader.space())?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        total += n;
        match reader.took(n) {
            Taken::Whole { server_closes: true, .. } => {
                return Err(bad(
                    "the server closes the connection after its answer: it cannot be held idle",
                ))
            }
            Taken::Whole { ok, .. } => return Ok(ok),
            Taken::More if Instant::now() >= deadline => {
                return Err(std::io::ErrorKind::TimedOut.into())
            }
            Taken::Bad(why) => return Err(bad(why)),
            Taken::More if total > MAX_ANSWER => return Err(bad("an answer over 1 MiB")),
            Taken::More => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    #[test]
    fn answers_are_read_whole_or_refused() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        assert!(read_answer(&mut &ok[..], far()).unwrap());
        let missing = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
        assert!(!read_answer(&mut &missing[..], far()).unwrap());
        for bad in [
            &b"HTTP/1.1 200 OK\r\n\r\nhello"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhello",
            b"SSH-2.0\r\n\r\n",
            b"HTTP/1.1 200",
            // Answered, but the server will not hold it.
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
        ] {
            assert!(read_answer(&mut &bad[..], far()).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    /// A peer that sends a head without end, or a body without end, is cut off, not read
    /// for ever.
    #[test]
    fn an_endless_head_or_body_is_cut_off() {
        let mut endless = (&b"HTTP/1.1 200 OK\r\nX-Long: "[..]).chain(std::io::repeat(b'a'));
        let e = read_answer(&mut endless, far()).unwrap_err();
        assert!(e.to_string().contains("64 KiB"), "{e}");
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n";
        let mut endless = (&head[..]).chain(std::io::repeat(b'a'));
        let e = read_answer(&mut endless, far()).unwrap_err();
        assert!(e.to_string().contains("over 1 MiB"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_are_an_answer_or_an_error_without_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = read_answer(&mut &bytes[..], far());
        }
    }
}
