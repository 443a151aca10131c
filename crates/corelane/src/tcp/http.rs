//! HTTP/1.1 in and out: request heads parsed by httparse under limits, and response heads
//! written into a lane's buffer.

use std::ops::Range;
use std::time::{Duration, Instant, SystemTime};

/// The most headers a request may carry before it is answered 431.
pub(crate) const MAX_HEADERS: usize = 64;

/// What protects a server from its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Limits {
    /// Request line plus headers; beyond it: 414 (no complete request line) or 431.
    pub max_header_bytes: usize,
    /// A larger Content-Length is answered 413.
    pub max_body_bytes: u64,
    /// Time from accept (or the end of the previous request) to a complete head, counted
    /// from the request's first byte on a kept-alive connection; beyond it: 408 and close. A
    /// connection that never sends a byte is closed at it, not at the idle timeout.
    pub header_timeout: Duration,
    /// Time from a request's first byte to the end of its body; beyond it: 408 and close (a
    /// body trickled a byte at a time cannot hold a connection longer).
    pub request_timeout: Duration,
    /// A connection being closed (its last response queued) whose peer makes no progress
    /// reading for this long is dropped.
    pub linger_timeout: Duration,
    /// Response bytes a connection may have waiting for its peer; beyond it the server stops
    /// reading and parsing that connection's requests until the peer reads (a pipelining
    /// client that never reads cannot grow the server).
    pub max_pending_output: usize,
    /// A keep-alive connection with no request in flight is closed after this.
    pub idle_timeout: Duration,
    /// Open connections over all lanes; more are answered 503 and closed.
    pub max_connections: usize,
    /// On shutdown, in-flight requests get this long to finish.
    pub drain_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_header_bytes: 8192,
            max_body_bytes: 1 << 20,
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            linger_timeout: Duration::from_secs(5),
            max_pending_output: 64 << 10,
            idle_timeout: Duration::from_secs(60),
            max_connections: 16384,
            drain_timeout: Duration::from_secs(5),
        }
    }
}

/// The statuses this server sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    PartialContent,
    MovedPermanently,
    NotModified,
    BadRequest,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    RequestTimeout,
    PreconditionFailed,
    PayloadTooLarge,
    UriTooLong,
    RangeNotSatisfiable,
    HeaderFieldsTooLarge,
    NotImplemented,
    ServiceUnavailable,
    VersionNotSupported,
}

impl Status {
    pub fn code(self) -> u16 {
        match self {
            Self::Ok => 200,
            Self::PartialContent => 206,
            Self::MovedPermanently => 301,
            Self::NotModified => 304,
            Self::BadRequest => 400,
            Self::Forbidden => 403,
            Self::NotFound => 404,
            Self::MethodNotAllowed => 405,
            Self::RequestTimeout => 408,
            Self::PreconditionFailed => 412,
            Self::PayloadTooLarge => 413,
            Self::UriTooLong => 414,
            Self::RangeNotSatisfiable => 416,
            Self::HeaderFieldsTooLarge => 431,
            Self::NotImplemented => 501,
            Self::ServiceUnavailable => 503,
            Self::VersionNotSupported => 505,
        }
    }

    pub fn reason(self) -> &'static str {
        match self {
            Self::Ok => "OK",
            Self::PartialContent => "Partial Content",
            Self::MovedPermanently => "Moved Permanently",
            Self::NotModified => "Not Modified",
            Self::BadRequest => "Bad Request",
            Self::Forbidden => "Forbidden",
            Self::NotFound => "Not Found",
            Self::MethodNotAllowed => "Method Not Allowed",
            Self::RequestTimeout => "Request Timeout",
            Self::PreconditionFailed => "Precondition Failed",
            Self::PayloadTooLarge => "Payload Too Large",
            Self::UriTooLong => "URI Too Long",
            Self::RangeNotSatisfiable => "Range Not Satisfiable",
            Self::HeaderFieldsTooLarge => "Request Header Fields Too Large",
            Self::NotImplemented => "Not Implemented",
            Self::ServiceUnavailable => "Service Unavailable",
            Self::VersionNotSupported => "HTTP Version Not Supported",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Other,
}

/// A complete request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    /// Where the target (path and query) lies in the parsed buffer.
    pub target: Range<usize>,
    /// Whether the connection stays open after the response (HTTP/1.1 unless `close`,
    /// HTTP/1.0 only with `keep-alive`).
    pub keep_alive: bool,
    /// Bytes of the head, CRLFCRLF included.
    pub head_len: usize,
    /// Body bytes that follow the head (Content-Length), to be skipped.
    pub body_len: u64,
    /// It carries a header a static file answers to (Range or a condition): the file's
    /// answer reads the head again for them (the static-file module); a plain request is
    /// spared the second look.
    pub conditional: bool,
}

/// What one look at a connection's input found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// The head is not complete yet.
    Partial,
    Request(Request),
    /// The request is refused with this status and the connection closes.
    Reject(Status),
}

/// The request headers a static file answers to.
pub(crate) const FILE_HEADERS: [&str; 6] =
    ["range", "if-range", "if-match", "if-none-match", "if-modified-since", "if-unmodified-since"];

/// Whether `name` is one of the headers a static file answers to.
pub fn is_file_header(name: &str) -> bool {
    FILE_HEADERS.iter().any(|h| name.eq_ignore_ascii_case(h))
}

/// Parses the request head at the start of `input`.
pub fn parse_request(input: &[u8], limits: &Limits) -> Parsed {
    // httparse skips empty lines before a request line (RFC 9112 §2.2 allows it); h11 and
    // most proxies do not, and a byte two parsers read differently is a smuggling vector.
    if input.first().is_some_and(|&b| b == b'\r' || b == b'\n') {
        return Parsed::Reject(Status::BadRequest);
    }
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(input) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            if input.len() < limits.max_header_bytes {
                return Parsed::Partial;
            }
            let line_complete = input.windows(2).any(|w| w == b"\r\n");
            return Parsed::Reject(if line_complete {
                Status::HeaderFieldsTooLarge
            } else {
                Status::UriTooLong
            });
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Parsed::Reject(Status::HeaderFieldsTooLarge)
        }
        Err(httparse::Error::Version) => return Parsed::Reject(Status::VersionNotSupported),
        Err(_) => return Parsed::Reject(Status::BadRequest),
    };
    if head_len > limits.max_header_bytes {
        return Parsed::Reject(Status::HeaderFieldsTooLarge);
    }
    let method = match req.method {
        Some("GET") => Method::Get,
        Some("HEAD") => Method::Head,
        _ => Method::Other,
    };
    let Some(target) = origin_form(req.path.unwrap_or("")) else {
        return Parsed::Reject(Status::BadRequest);
    };
    // httparse hands out slices of `input`; their offsets locate the target without a copy.
    let start = target.as_ptr() as usize - input.as_ptr() as usize;
    let http11 = req.version == Some(1);
    let mut keep_alive = http11;
    let mut body_len = None;
    let mut hosts = 0;
    let mut conditional = false;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    keep_alive = false;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    keep_alive = true;
                }
            }
        } else if h.name.eq_ignore_ascii_case("content-length") {
            // RFC 9112 §6.3: one Content-Length of digits only. A second one (even equal), a
            // sign, a space inside or a list is refused: two parsers reading such a request
            // differently is how requests are smuggled past a proxy.
            let Some(n) = content_length(h.value) else {
                return Parsed::Reject(Status::BadRequest);
            };
            if body_len.replace(n).is_some() {
                return Parsed::Reject(Status::BadRequest);
            }
            if n > limits.max_body_bytes {
                return Parsed::Reject(Status::PayloadTooLarge);
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            // No chunked request bodies here; never read as "no body" (the body would be
            // parsed as the next request).
            return Parsed::Reject(Status::NotImplemented);
        } else if h.name.eq_ignore_ascii_case("host") {
            hosts += 1;
        } else if !conditional {
            conditional = is_file_header(h.name);
        }
    }
    // RFC 9112 §3.2: an HTTP/1.1 request carries exactly one Host; more than one is refused
    // at any version.
    if (http11 && hosts == 0) || hosts > 1 {
        return Parsed::Reject(Status::BadRequest);
    }
    Parsed::Request(Request {
        method,
        target: start..start + target.len(),
        keep_alive,
        head_len,
        body_len: body_len.unwrap_or(0),
        conditional,
    })
}

/// The origin-form part (`/path?query`) of a request target: the target itself, or the path
/// of an absolute-form target (`http://host/path`, RFC 9112 §3.2.2; `/` when it has none).
/// Authority-form and asterisk-form are for CONNECT and OPTIONS, which this server refuses.
fn origin_form(target: &str) -> Option<&str> {
    if target.starts_with('/') {
        return Some(target);
    }
    let scheme_len = target.find("://")?;
    if !target[..scheme_len].eq_ignore_ascii_case("http")
        && !target[..scheme_len].eq_ignore_ascii_case("https")
    {
        return None;
    }
    let rest = &target[scheme_len + 3..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    if authority_end == 0 {
        return None;
    }
    let path = &rest[authority_end..];
    // A bare query after the authority (`http://h?q`) is the path `/` with that query; its
    // slice cannot include a `/`, so it is served as `/`.
    Some(if path.starts_with('/') { path } else { &target[target.len()..] })
}

/// A Content-Length value: 1 to 19 ASCII digits (any u64 of up to 19 digits fits).
fn content_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// Whether the bytes received so far are a HEAD request's: its responses, errors included,
/// carry no body (a body would be read as the next response by a keep-alive client).
pub fn is_head(input: &[u8]) -> bool {
    input.starts_with(b"HEAD ")
}

/// The Date header's value, formatted at most once a second.
#[derive(Debug)]
pub struct DateCache {
    value: String,
    at: Instant,
}

impl Default for DateCache {
    fn default() -> Self {
        Self { value: httpdate::fmt_http_date(SystemTime::now()), at: Instant::now() }
    }
}

impl DateCache {
    pub fn get(&mut self, now: Instant) -> &str {
        if now.duration_since(self.at) >= Duration::from_secs(1) {
            self.value = httpdate::fmt_http_date(SystemTime::now());
            self.at = now;
        }
        &self.value
    }
}

/// Appends a response head to `out`.
pub fn write_head(
    out: &mut Vec<u8>,
    status: Status,
    content_type: &str,
    content_length: u64,
    keep_alive: bool,
    date: &str,
) {
    let head =
        Head { status, content_type: Some(content_type), content_length: Some(content_length) };
    head.write(out, keep_alive, date, &[]);
}

/// A response head's fixed part; other fields go in [`Head::write`]'s `fields`.
#[derive(Debug, Clone, Copy)]
pub struct Head<'a> {
    pub status: Status,
    /// Left out of a 304, which describes no body.
    pub content_type: Option<&'a str>,
    pub content_length: Option<u64>,
}

impl Head<'_> {
    /// Appends the head with `fields` (name, value) after the fixed ones.
    pub fn write(
        &self,
        out: &mut Vec<u8>,
        keep_alive: bool,
        date: &str,
        fields: &[(&str, &dyn std::fmt::Display)],
    ) {
        use std::io::Write;
        let status = self.status;
        let connection = if keep_alive { "keep-alive" } else { "close" };
        // Writing into a Vec cannot fail.
        let _ = write!(
            out,
            "HTTP/1.1 {} {}\r\nServer: corelane\r\nDate: {date}\r\n",
            status.code(),
            status.reason()
        );
        if let Some(content_type) = self.content_type {
            let _ = write!(out, "Content-Type: {content_type}\r\n");
        }
        if let Some(len) = self.content_length {
            let _ = write!(out, "Content-Length: {len}\r\n");
        }
        let _ = write!(out, "Connection: {connection}\r\n");
        if status == Status::MethodNotAllowed {
            out.extend_from_slice(b"Allow: GET, HEAD\r\n");
        }
        for (name, value) in fields {
            let _ = write!(out, "{name}: {value}\r\n");
        }
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends a complete error response (a one-line text body, left out for HEAD) to `out`.
pub fn write_error(out: &mut Vec<u8>, status: Status, keep_alive: bool, head: bool, date: &str) {
    write_error_with(out, status, keep_alive, head, date, &[]);
}

/// [`write_error`] with more fields in the head (a 416's Content-Range, a 301's Location).
pub fn write_error_with(
    out: &mut Vec<u8>,
    status: Status,
    keep_alive: bool,
    head: bool,
    date: &str,
    fields: &[(&str, &dyn std::fmt::Display)],
) {
    let body = format!("{} {}\n", status.code(), status.reason());
    let fixed =
        Head { status, content_type: Some("text/plain"), content_length: Some(body.len() as u64) };
    fixed.write(out, keep_alive, date, fields);
    if !head {
        out.extend_from_slice(body.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse(text: &str) -> Parsed {
        parse_request(text.as_bytes(), &Limits::default())
    }

    #[test]
    fn http11_keeps_alive_unless_told_to_close() {
        let raw = "GET /a?b=1 HTTP/1.1\r\nHost: x\r\n\r\nGET";
        let Parsed::Request(r) = parse(raw) else { panic!() };
        assert!(r.keep_alive);
        assert_eq!(&raw[r.target.clone()], "/a?b=1");
        assert_eq!(r.head_len, raw.len() - 3);
        let Parsed::Request(r) = parse("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        else {
            panic!()
        };
        assert!(!r.keep_alive);
    }

    #[test]
    fn http10_closes_unless_told_to_keep_alive() {
        let Parsed::Request(r) = parse("GET / HTTP/1.0\r\n\r\n") else { panic!() };
        assert!(!r.keep_alive);
        let Parsed::Request(r) = parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n") else {
            panic!()
        };
        assert!(r.keep_alive);
    }

    #[test]
    fn limits_give_the_right_status() {
        let small = Limits { max_header_bytes: 64, ..Limits::default() };
        let long_line = format!("GET /{} HTTP/1.1", "a".repeat(100));
        assert_eq!(parse_request(long_line.as_bytes(), &small), Parsed::Reject(Status::UriTooLong));
        let long_head = format!("GET / HTTP/1.1\r\nHost: x\r\nX: {}", "a".repeat(100));
        assert_eq!(
            parse_request(long_head.as_bytes(), &small),
            Parsed::Reject(Status::HeaderFieldsTooLarge)
        );
        assert_eq!(parse("GET / HTTP/1.1\r\nHost"), Parsed::Partial);
        assert_eq!(parse("GARBAGE\r\n\r\n"), Parsed::Reject(Status::BadRequest));
        assert_eq!(
            parse("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n"),
            Parsed::Reject(Status::PayloadTooLarge)
        );
        assert_eq!(
            parse("GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Parsed::Reject(Status::NotImplemented)
        );
        let many: String = (0..70).map(|i| format!("H{i}: v\r\n")).collect();
        assert_eq!(
            parse(&format!("GET / HTTP/1.1\r\nHost: x\r\n{many}\r\n")),
            Parsed::Reject(Status::HeaderFieldsTooLarge)
        );
    }

    #[test]
    fn heads_name_length_and_connection() {
        let mut out = Vec::new();
        write_head(&mut out, Status::Ok, "text/plain", 13, true, "D");
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(text.contains("Content-Length: 13\r\n") && text.contains("Connection: keep-alive"));
        assert!(text.ends_with("\r\n\r\n"));
    }

    proptest! {
        // Whatever arrives, the parser answers without panicking, and a request it accepts
        // lies inside the input.
        #[test]
        fn any_input_is_answered(input in proptest::collection::vec(any::<u8>(), 0..600)) {
            match parse_request(&input, &Limits::default()) {
                Parsed::Request(r) => {
                    prop_assert!(r.head_len <= input.len());
                    prop_assert!(r.target.end <= r.head_len);
                }
                Parsed::Partial | Parsed::Reject(_) => {}
            }
        }

        // A well-formed request split anywhere parses as partial before the split is healed.
        #[test]
        fn split_requests_are_partial_then_complete(path in "/[a-z0-9/]{0,40}", cut in 0usize..40) {
            let raw = format!("GET {path} HTTP/1.1\r\nHost: h\r\n\r\n");
            let cut = cut.min(raw.len() - 1);
            prop_assert_eq!(parse_request(&raw.as_bytes()[..cut], &Limits::default()), Parsed::Partial);
            match parse_request(raw.as_bytes(), &Limits::default()) {
                Parsed::Request(r) => prop_assert_eq!(&raw[r.target], path.as_str()),
                other => prop_assert!(false, "{:?}", other),
            }
        }
    }
}
