//! One connection's state, whatever carries its bytes, and its deadlines — the same for the
//! epoll and io_uring lanes: when a request has taken too long (answered 408, then closed),
//! when an idle or lingering connection is closed, and which connections a drain closes at once.

use std::time::Instant;

use super::answer_clock::AnswerClock;
use super::counters::{bump, ServerCounters};
use super::http::{self, Limits, Status};
use super::static_file::FileBody;

/// The HTTP side of one connection, whatever carries its bytes: received bytes, the
/// responses not yet handed to the socket, a file body, and the request's timing.
#[derive(Debug, Default)]
pub(crate) struct Exchange {
    /// Received bytes not yet consumed: `input[..filled]`.
    pub input: Vec<u8>,
    pub filled: usize,
    /// Responses not yet handed to the socket.
    pub output: Vec<u8>,
    /// A file body to send after `output`.
    pub file: Option<FileBody>,
    /// Request body bytes still to be skipped.
    pub skip_body: u64,
    /// Close once `output` and `file` are sent.
    pub close_after: bool,
    /// When the request now being received began: its first byte, or the accept for a
    /// connection's first request (for the header and request timeouts).
    pub request_since: Option<Instant>,
    /// When the requests whose answers are not yet written were parsed.
    pub clock: AnswerClock,
}

impl Exchange {
    /// The bytes of the lane's buffers lent to it (input and output).
    pub fn lent_bytes(&self) -> usize {
        self.input.capacity() + self.output.capacity()
    }

    pub fn consume(&mut self, n: usize) {
        if n < self.filled {
            self.input.copy_within(n..self.filled, 0);
        }
        self.filled -= n;
    }

    pub fn is_idle(&self) -> bool {
        self.filled == 0 && self.output.is_empty() && self.file.is_none()
    }

    /// Whether the request in progress has run out of time: its head within
    /// `header_timeout`, its body within `request_timeout`.
    pub fn timed_out(&self, now: Instant, limits: &Limits) -> bool {
        let limit = if self.skip_body > 0 { limits.request_timeout } else { limits.header_timeout };
        self.request_since.is_some_and(|t| now.duration_since(t) >= limit)
    }

    /// Appends received bytes (a provided buffer's), growing the input if a request spans
    /// more than one buffer.
    pub fn append(&mut self, bytes: &[u8]) {
        let end = self.filled + bytes.len();
        if end > self.input.len() {
            self.input.resize(end, 0);
        }
        self.input[self.filled..end].copy_from_slice(bytes);
        self.filled = end;
    }
}

/// What a lane's sweep does with a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Keep,
    /// The request in progress ran out of time: queue [`Exchange::time_out`], then close.
    TimedOut,
    /// Nothing moved for the idle timeout, or a closing connection's peer stopped reading.
    Close,
}

impl Exchange {
    /// What the sweep at `now` does with a connection last active at `last_active`;
    /// `closing`: the lane has already begun closing it.
    pub fn verdict(
        &self,
        last_active: Instant,
        closing: bool,
        now: Instant,
        limits: &Limits,
    ) -> Verdict {
        let closing = closing || self.close_after;
        if !closing && self.timed_out(now, limits) {
            return Verdict::TimedOut;
        }
        let stalled = now.duration_since(last_active);
        // A closing connection whose peer stopped reading is not kept for the idle timeout.
        if stalled >= limits.idle_timeout || (closing && stalled >= limits.linger_timeout) {
            Verdict::Close
        } else {
            Verdict::Keep
        }
    }

    /// Answers the request that ran out of time with 408 (after the answers already queued)
    /// and marks the connection to close once it is sent.
    pub fn time_out(&mut self, date: &str, counters: &ServerCounters) {
        let head = http::is_head(&self.input[..self.filled]);
        self.filled = 0;
        self.skip_body = 0;
        self.request_since = None;
        http::write_error(&mut self.output, Status::RequestTimeout, false, head, date);
        self.close_after = true;
        bump(&counters.timeouts, 1);
        bump(&counters.client_errors, 1);
    }

    /// Nothing received, queued or begun: a drain closes it at once rather than waiting.
    pub fn is_between_requests(&self) -> bool {
        self.is_idle() && self.request_since.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_slow_request_times_out_and_an_idle_connection_closes() {
        let limits = Limits::default();
        let t0 = Instant::now();
        let slow = Exchange { request_since: Some(t0), ..Exchange::default() };
        let later = t0 + limits.header_timeout + Duration::from_millis(1);
        assert_eq!(slow.verdict(later, false, later, &limits), Verdict::TimedOut);
        // Already closing: no 408, but a stalled peer is let go after the linger timeout.
        let lingering = t0 + limits.linger_timeout + Duration::from_millis(1);
        assert_eq!(slow.verdict(t0, true, lingering, &limits), Verdict::Close);
        let idle = Exchange::default();
        assert_eq!(idle.verdict(t0, false, t0, &limits), Verdict::Keep);
        let gone = t0 + limits.idle_timeout;
        assert_eq!(idle.verdict(t0, false, gone, &limits), Verdict::Close);
    }

    #[test]
    fn a_timeout_is_queued_behind_pending_answers() {
        let counters = ServerCounters::default();
        let mut e = Exchange { output: b"HTTP/1.1 200 OK\r\n\r\n".to_vec(), ..Exchange::default() };
        e.append(b"GET / HT");
        e.time_out("Thu, 01 Jan 1970 00:00:00 GMT", &counters);
        assert!(e.output.starts_with(b"HTTP/1.1 200 OK\r\n\r\nHTTP/1.1 408"));
        assert!(e.close_after && e.filled == 0);
        assert_eq!(counters.timeouts.load(std::sync::atomic::Ordering::Relaxed), 1);
    }
}
