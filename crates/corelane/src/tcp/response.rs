//! One HTTP/1.1 response as `load http` receives it: the head parsed within [`MAX_HEAD`]
//! bytes, the body framed by its Content-Length, counted and dropped as it arrives, so
//! whatever a server sends costs the client at most [`MAX_BUFFER`] bytes per connection.

/// The most a response's head may take; a longer one is refused, not waited for.
pub const MAX_HEAD: usize = 64 * 1024;
/// The most a connection's read buffer grows to (a large body is read in pieces this big).
pub const MAX_BUFFER: usize = 256 * 1024;
/// The buffer a connection starts with.
const FIRST_BUFFER: usize = 16 * 1024;
/// Headers a response may carry.
const MAX_HEADERS: usize = 32;

/// What the bytes read so far make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// More bytes are needed.
    More,
    /// A whole response: whether its status was 2xx and whether the server said it closes.
    Whole { ok: bool, server_closes: bool },
    /// Not a response the client can frame (why).
    Bad(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Body { left: u64, ok: bool, server_closes: bool },
}

/// A connection's response reader: read into [`Self::space`], then tell [`Self::took`].
#[derive(Debug)]
pub struct ResponseReader {
    buf: Vec<u8>,
    filled: usize,
    state: State,
}

impl Default for ResponseReader {
    fn default() -> Self {
        Self { buf: vec![0; FIRST_BUFFER], filled: 0, state: State::Head }
    }
}

impl ResponseReader {
    /// Forgets a response under way (a new connection); the buffer is kept.
    pub fn reset(&mut self) {
        self.filled = 0;
        self.state = State::Head;
    }

    /// Where the next read goes: never empty (a full buffer grows up to [`MAX_BUFFER`]; a
    /// head that would need more was refused by [`Self::took`] before).
    pub fn space(&mut self) -> &mut [u8] {
        if self.filled == self.buf.len() {
            let grown = (self.buf.len() * 2).min(MAX_BUFFER);
            self.buf.resize(grown, 0);
        }
        &mut self.buf[self.filled..]
    }

    /// `n` more bytes were read into [`Self::space`].
    pub fn took(&mut self, n: usize) -> Taken {
        self.filled += n;
        match self.state {
            State::Head => self.head(),
            State::Body { left, ok, server_closes } => {
                let body = self.filled as u64;
                self.filled = 0;
                self.body(left.saturating_sub(body), ok, server_closes)
            }
        }
    }

    fn head(&mut self) -> Taken {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let head = match resp.parse(&self.buf[..self.filled]) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if self.filled >= MAX_HEAD => {
                return Taken::Bad("a response head longer than 64 KiB")
            }
            Ok(httparse::Status::Partial) => return Taken::More,
            Err(_) => return Taken::Bad("not an HTTP/1.1 response"),
        };
        let ok = resp.code.is_some_and(|c| (200..300).contains(&c));
        let mut length = None;
        let mut server_closes = false;
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                length =
                    std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse::<u64>().ok());
                if length.is_none() {
                    return Taken::Bad("a Content-Length that is not a number");
                }
            } else if h.name.eq_ignore_ascii_case("connection") {
                server_closes = h.value.eq_ignore_ascii_case(b"close");
            }
        }
        let Some(length) = length else {
            return Taken::Bad("a response without Content-Length (chunked or read to close)");
        };
        // Bytes past the body would answer a request never sent: dropped, as the head is.
        let body = (self.filled - head) as u64;
        self.filled = 0;
        self.body(length.saturating_sub(body), ok, server_closes)
    }

    fn body(&mut self, left: u64, ok: bool, server_closes: bool) -> Taken {
        if left == 0 {
            self.state = State::Head;
            return Taken::Whole { ok, server_closes };
        }
        self.state = State::Body { left, ok, server_closes };
        Taken::More
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Feeds `bytes` in reads of at most `chunk`, as a socket might hand them over.
    fn feed(r: &mut ResponseReader, bytes: &[u8], chunk: usize) -> Vec<Taken> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let space = r.space();
            let n = space.len().min(chunk).min(bytes.len() - at);
            space[..n].copy_from_slice(&bytes[at..at + n]);
            at += n;
            out.push(r.took(n));
        }
        out
    }

    #[test]
    fn a_response_is_whole_once_its_body_has_come_in_any_pieces() {
        let text = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        for chunk in 1..text.len() {
            let mut r = ResponseReader::default();
            let taken = feed(&mut r, text, chunk);
            assert_eq!(taken.last(), Some(&Taken::Whole { ok: true, server_closes: false }));
            assert!(taken[..taken.len() - 1].iter().all(|t| *t == Taken::More), "{chunk}");
        }
        let mut r = ResponseReader::default();
        let closes = b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(feed(&mut r, closes, 4096), [Taken::Whole { ok: false, server_closes: true }]);
    }

    #[test]
    fn an_endless_head_is_refused_within_the_bound() {
        let mut r = ResponseReader::default();
        let mut text = b"HTTP/1.1 200 OK\r\nX-Endless: ".to_vec();
        text.resize(MAX_HEAD + 1, b'a');
        let taken = feed(&mut r, &text, 4096);
        assert_eq!(taken.last(), Some(&Taken::Bad("a response head longer than 64 KiB")));
        assert!(r.buf.len() <= MAX_BUFFER);
    }

    #[test]
    fn a_huge_body_is_counted_not_held() {
        let mut r = ResponseReader::default();
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", u64::MAX);
        assert_eq!(feed(&mut r, head.as_bytes(), 4096), [Taken::More]);
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..64 {
            assert!(feed(&mut r, &chunk, usize::MAX).iter().all(|t| *t == Taken::More));
        }
        assert!(r.buf.len() <= MAX_BUFFER, "64 MiB of body read through {} bytes", r.buf.len());
    }

    #[test]
    fn responses_it_cannot_frame_are_refused() {
        let cases: [(&[u8], &str); 3] = [
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
                "a response without Content-Length (chunked or read to close)",
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
                "a Content-Length that is not a number",
            ),
            (b"SSH-2.0-OpenSSH_9.2\r\n\r\n", "not an HTTP/1.1 response"),
        ];
        for (text, why) in cases {
            let mut r = ResponseReader::default();
            assert_eq!(feed(&mut r, text, 4096).last(), Some(&Taken::Bad(why)));
        }
    }

    proptest! {
        /// Any bytes in any pieces: no panic, the buffer within its bound.
        #[test]
        fn any_bytes_are_taken_within_the_bound(
            bytes in proptest::collection::vec(any::<u8>(), 0..4096),
            length in any::<u64>(),
            chunk in 1usize..600,
        ) {
            let mut r = ResponseReader::default();
            let mut text = format!("HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\n").into_bytes();
            text.extend(&bytes);
            feed(&mut r, &text, chunk);
            let mut r = ResponseReader::default();
            feed(&mut r, &bytes, chunk);
            prop_assert!(r.buf.len() <= MAX_BUFFER);
        }
    }
}
