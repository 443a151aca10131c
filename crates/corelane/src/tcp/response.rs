//! One HTTP/1.1 response as `load http` receives it: the head parsed within [`MAX_HEAD`]
//! bytes, the body framed by its Content-Length, counted and dropped as it arrives, so
//! whatever a server sends costs the client at most [`MAX_BUFFER`] bytes per connection.

use super::http::MAX_HEADERS;

/// The most a response's head may take; a longer one is refused, not waited for.
pub const MAX_HEAD: usize = 64 * 1024;
/// The most a connection's read buffer grows to (a large body is read in pieces this big).
pub const MAX_BUFFER: usize = 256 * 1024;
/// The buffer a connection starts with.
const FIRST_BUFFER: usize = 16 * 1024;

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

/// What the head at the start of the buffer says.
enum Head {
    /// A 1xx answer of this many bytes, to skip.
    Interim(usize),
    /// The final answer's head: its bytes, its body's length, whether 2xx, whether it closes.
    Final { head: usize, length: u64, ok: bool, server_closes: bool },
    /// Nothing whole yet, or nothing to frame.
    Taken(Taken),
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
        let mut start = 0;
        loop {
            match self.parse_head(start) {
                // An interim answer (100 Continue, 103 Early Hints): the real one follows it.
                Head::Interim(head) => start += head,
                Head::Final { head, length, ok, server_closes } => {
                    // Bytes past the body would answer a request never sent: dropped.
                    let body = (self.filled - start - head) as u64;
                    self.filled = 0;
                    return self.body(length.saturating_sub(body), ok, server_closes);
                }
                Head::Taken(taken) => {
                    // What follows the interim answers waits at the start for the rest.
                    self.buf.copy_within(start..self.filled, 0);
                    self.filled -= start;
                    return taken;
                }
            }
        }
    }

    /// The head at `start` in the buffer, if whole.
    fn parse_head(&self, start: usize) -> Head {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let head = match resp.parse(&self.buf[start..self.filled]) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if self.filled - start >= MAX_HEAD => {
                return Head::Taken(Taken::Bad("a response head longer than 64 KiB"))
            }
            Ok(httparse::Status::Partial) => return Head::Taken(Taken::More),
            Err(_) => return Head::Taken(Taken::Bad("not an HTTP/1.1 response")),
        };
        let code = resp.code.unwrap_or(0);
        if (100..200).contains(&code) {
            return Head::Interim(head);
        }
        // These never carry a body, whatever their headers say (RFC 9112, 6.3).
        let bodiless = matches!(code, 204 | 304);
        let mut length = bodiless.then_some(0);
        let mut server_closes = false;
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") && !bodiless {
                length =
                    std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse::<u64>().ok());
                if length.is_none() {
                    return Head::Taken(Taken::Bad("a Content-Length that is not a number"));
                }
            } else if h.name.eq_ignore_ascii_case("connection") {
                server_closes = h.value.eq_ignore_ascii_case(b"close");
            }
        }
        match length {
            Some(length) => {
                Head::Final { head, length, ok: (200..300).contains(&code), server_closes }
            }
            None => Head::Taken(Taken::Bad(
                "a response without Content-Length (chunked or read to close)",
            )),
        }
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
    fn interim_and_bodiless_answers_are_framed_as_http_says() {
        let text = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        for chunk in [1, 7, 4096] {
            let mut r = ResponseReader::default();
            let taken = feed(&mut r, text, chunk);
            assert_eq!(taken.last(), Some(&Taken::Whole { ok: true, server_closes: false }));
            assert_eq!(taken.iter().filter(|t| **t != Taken::More).count(), 1, "{chunk}");
        }
        // Thousands of interim answers in one read: skipped in a loop, not a recursion.
        let mut r = ResponseReader::default();
        let mut many = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(9_000);
        many.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(
            feed(&mut r, &many, usize::MAX).last(),
            Some(&Taken::Whole { ok: true, server_closes: false })
        );
        // 304 says the length the full answer would have; neither it nor 204 has a body.
        for text in [
            &b"HTTP/1.1 304 Not Modified\r\nContent-Length: 13\r\n\r\n"[..],
            b"HTTP/1.1 204 No Content\r\n\r\n",
        ] {
            let mut r = ResponseReader::default();
            assert_eq!(
                feed(&mut r, text, 4096),
                [Taken::Whole { ok: text[9] == b'2', server_closes: false }]
            );
        }
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
            let mut framed = ResponseReader::default();
            let mut text = format!("HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\n").into_bytes();
            text.extend(&bytes);
            feed(&mut framed, &text, chunk);
            prop_assert!(framed.buf.len() <= MAX_BUFFER);
            let mut raw = ResponseReader::default();
            feed(&mut raw, &bytes, chunk);
            prop_assert!(raw.buf.len() <= MAX_BUFFER);
        }
    }
}
