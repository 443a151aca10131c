//! Idle keep-alive connections (`corelane load http --hold-idle`): N connections to a
//! server, each after one answered GET, held open and silent, so that what an idle
//! connection costs the server can be read on its side. Bounded: the count by the caller,
//! every answer's head and body by [`MAX_HEAD`] and [`MAX_BODY`], every wait by a timeout.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// The longest response head read before the answer is refused.
pub const MAX_HEAD: usize = 64 * 1024;
/// The largest body an idle-to-be connection's one answer may carry.
pub const MAX_BODY: usize = 1 << 20;

/// The connections held, and how many of them got a 200 to their GET.
#[derive(Debug, Default)]
pub struct Held {
    pub streams: Vec<TcpStream>,
    pub answered: usize,
}

/// Opens `n` connections to `addr`, sends `GET path` on each (with `host` as the Host
/// header) and reads its answer whole, then keeps the connection: the caller holds them
/// open until it drops the result. A connection closed with a reset (linger 0), so the
/// client's ports are not left in TIME_WAIT. `stop` ends the opening early (the ones opened
/// so far are returned). A failure names the connection and what failed.
pub fn hold(
    addr: SocketAddr,
    host: &str,
    path: &str,
    n: usize,
    timeout: Duration,
    stop: &dyn Fn() -> bool,
) -> std::io::Result<Held> {
    let mut held = Held { streams: Vec::with_capacity(n.min(1 << 16)), answered: 0 };
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n");
    for i in 0..n {
        if stop() {
            break;
        }
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
        if read_answer(&mut s).map_err(|e| named("answer", e))? == 200 {
            held.answered += 1;
        }
        held.streams.push(s);
    }
    Ok(held)
}

/// Reads one HTTP/1.1 answer with a `Content-Length` body from `s`; its status code.
/// A head over [`MAX_HEAD`], a body over [`MAX_BODY`], no length, or an early end is an
/// error, never an unbounded read.
pub fn read_answer(s: &mut impl Read) -> std::io::Result<u16> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        if got.len() > MAX_HEAD {
            return Err(bad("a response head over 64 KiB"));
        }
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        got.extend_from_slice(&buf[..n]);
    };
    let head = std::str::from_utf8(&got[..end]).map_err(|_| bad("a response head not UTF-8"))?;
    let (status, length) = parse_head(head).ok_or_else(|| bad("not an HTTP/1.1 answer"))?;
    let length = length.ok_or_else(|| bad("an answer without Content-Length"))?;
    if length > MAX_BODY {
        return Err(bad("an answer body over 1 MiB"));
    }
    let mut left = (end + length).saturating_sub(got.len());
    while left > 0 {
        let n = s.read(&mut buf[..left.min(4096)])?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        left -= n;
    }
    // Bytes past the body would be a second answer to a request never sent.
    if got.len() > end + length {
        return Err(bad("more bytes than one answer"));
    }
    Ok(status)
}

/// The status code and `Content-Length` of a response head.
fn parse_head(head: &str) -> Option<(u16, Option<usize>)> {
    let mut lines = head.split("\r\n");
    let status = lines.next()?.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()?;
    let length = lines.find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse().ok())?
    });
    Some((status, length))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_whole_or_refused() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(read_answer(&mut &ok[..]).unwrap(), 200);
        let missing = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(read_answer(&mut &missing[..]).unwrap(), 404);
        for bad in [
            &b"HTTP/1.1 200 OK\r\n\r\nhello"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nContent-Length: 2000000\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab",
            b"SSH-2.0\r\n\r\n",
            b"HTTP/1.1 200",
        ] {
            assert!(read_answer(&mut &bad[..]).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    /// A peer that sends a head without end is cut off past 64 KiB, not read for ever.
    #[test]
    fn an_endless_head_is_cut_off() {
        let mut endless = std::io::repeat(b'a');
        let e = read_answer(&mut endless).unwrap_err();
        assert!(e.to_string().contains("64 KiB"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_are_an_answer_or_an_error_without_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)) {
            let _ = read_answer(&mut &bytes[..]);
        }
    }
}
