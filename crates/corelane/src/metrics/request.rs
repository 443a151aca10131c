//! One request head to its answer: `GET` or `HEAD` of `/metrics` is the exposition; another
//! path is 404, another method 405 with `Allow`, a malformed head 400, an oversized one 431.
//! A request with a body is answered and its connection closed (the endpoint never reads
//! bodies, so it could not find the next request).

use prometheus_client::registry::Registry;

use super::exposition::{encode, Format};

/// Headers looked at, at most; more is 431.
const MAX_HEADERS: usize = 32;
/// Requests on one connection, at most; the last is answered with `Connection: close`.
pub(super) const MAX_REQUESTS_PER_CONNECTION: u32 = 1000;

/// A response, whole, and whether the connection ends after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub bytes: Vec<u8>,
    pub close: bool,
}

/// The answer to the request at the start of `buf` and the bytes it took, or `None` while
/// its head is incomplete and under `max_head` bytes. `served` is how many requests the
/// connection had answered before.
pub fn answer(
    buf: &[u8],
    max_head: usize,
    served: u32,
    registry: &Registry,
) -> Option<(Answer, usize)> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let length = match request.parse(buf) {
        Ok(httparse::Status::Complete(n)) if n <= max_head => n,
        Ok(httparse::Status::Partial) if buf.len() < max_head => return None,
        Ok(_) | Err(httparse::Error::TooManyHeaders) => {
            return Some((plain(431, "Request Header Fields Too Large", &[], true), buf.len()));
        }
        Err(_) => return Some((plain(400, "Bad Request", &[], true), buf.len())),
    };
    let header = |name: &str| {
        request
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .and_then(|h| std::str::from_utf8(h.value).ok())
    };
    let has_body = header("transfer-encoding").is_some()
        || header("content-length").is_some_and(|v| v.trim() != "0");
    let wants_close = request.version == Some(0)
        || header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
    let close = has_body || wants_close || served + 1 >= MAX_REQUESTS_PER_CONNECTION;
    let path = request.path.unwrap_or("");
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    let method = request.method.unwrap_or("");
    let answer = match (path, method) {
        ("/metrics", "GET" | "HEAD") => {
            let format = Format::from_accept(header("accept"));
            let body = encode(registry, format);
            let mut bytes = head(200, "OK", format.content_type(), body.len(), &[], close);
            if method == "GET" {
                bytes.extend_from_slice(body.as_bytes());
            }
            Answer { status: 200, bytes, close }
        }
        ("/metrics", _) => plain(405, "Method Not Allowed", &[("Allow", "GET, HEAD")], close),
        _ => plain(404, "Not Found", &[], close),
    };
    Some((answer, length))
}

/// A short text/plain answer: the reason as its body.
fn plain(status: u16, reason: &str, extra: &[(&str, &str)], close: bool) -> Answer {
    let body = format!("{reason}\n");
    let mut bytes = head(status, reason, "text/plain; charset=utf-8", body.len(), extra, close);
    bytes.extend_from_slice(body.as_bytes());
    Answer { status, bytes, close }
}

fn head(
    status: u16,
    reason: &str,
    content_type: &str,
    length: usize,
    extra: &[(&str, &str)],
    close: bool,
) -> Vec<u8> {
    let mut text = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {length}\r\n"
    );
    for (name, value) in extra {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    if close {
        text.push_str("Connection: close\r\n");
    }
    text.push_str("\r\n");
    text.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(request: &str) -> (u16, String, bool) {
        let registry = super::super::registry();
        let (answer, used) = answer(request.as_bytes(), 8192, 0, &registry).expect("complete");
        assert!(used <= request.len());
        (answer.status, String::from_utf8(answer.bytes).unwrap(), answer.close)
    }

    #[test]
    fn only_get_and_head_of_metrics_are_served() {
        let (status, text, close) = ask("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!((status, close), (200, false));
        assert!(text.contains("Content-Type: text/plain; version=0.0.4"), "{text}");
        let (status, text, _) =
            ask("GET /metrics?x=1 HTTP/1.1\r\nAccept: application/openmetrics-text\r\n\r\n");
        assert_eq!(status, 200);
        assert!(text.contains("application/openmetrics-text; version=1.0.0"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
        let (status, text, _) = ask("HEAD /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(status, 200);
        assert!(text.ends_with("\r\n\r\n"), "HEAD has no body: {text}");
        let (status, text, _) = ask("POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(status, 405);
        assert!(text.contains("Allow: GET, HEAD\r\n"), "{text}");
        assert_eq!(ask("GET / HTTP/1.1\r\n\r\n").0, 404);
        assert_eq!(ask("GET /metricsx HTTP/1.1\r\n\r\n").0, 404);
    }

    #[test]
    fn malformed_oversized_and_bodied_requests_close() {
        let (status, _, close) = ask("GET /metrics HTTP/1.1\r\nBad Header\r\n\r\n");
        assert_eq!((status, close), (400, true));
        let (status, _, close) = ask("PUT /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
        assert_eq!((status, close), (405, true));
        assert!(ask("GET /metrics HTTP/1.0\r\n\r\n").2, "HTTP/1.0 closes");
        assert!(ask("GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n").2);
        let registry = super::super::registry();
        let partial = b"GET /metrics HTTP/1.1\r\nHost: x\r\n";
        assert!(answer(partial, 8192, 0, &registry).is_none(), "a partial head waits");
        let long = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n", "a".repeat(9000));
        let (big, _) = answer(long.as_bytes(), 8192, 0, &registry).unwrap();
        assert_eq!((big.status, big.close), (431, true));
        let many: String = (0..40).map(|i| format!("X{i}: y\r\n")).collect();
        let (too_many, _) =
            answer(format!("GET /metrics HTTP/1.1\r\n{many}\r\n").as_bytes(), 8192, 0, &registry)
                .unwrap();
        assert_eq!(too_many.status, 431);
        let (last, _) = answer(b"GET /metrics HTTP/1.1\r\n\r\n", 8192, 999, &registry).unwrap();
        assert!(last.close, "the 1000th request on a connection is its last");
    }
}
