//! HTTP as a hostile client or a proxy in front would speak it: the request parser checked
//! against an independent one (Python's h11) over a corpus of normal, malformed and
//! smuggling-shaped requests, and the server's answers to HEAD, conflicting lengths, files
//! that lead out of the root and FIFOs under it, over real loopback sockets.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::http::{exchange, serve_root, stop_and_wait, BACKENDS};
use corelane::tcp::http::{parse_request, Limits, Parsed};
use corelane::tcp::Backend;

const PYTHON: &str = "/usr/bin/python3";

/// Whether Python's h11 can be imported; if not, says the test skips and what to install.
fn h11_installed() -> bool {
    let probe = Command::new(PYTHON).args(["-c", "import h11"]).output();
    let found = probe.is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("skipped: {PYTHON} cannot import h11 (apt-get install python3-h11)");
    }
    found
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/http-corpus")
}

fn corpus() -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "http"))
        .map(|p| {
            (p.file_stem().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// Every request h11 rejects, corelane rejects too (stricter is fine, looser is a bug); every
/// `ok-` request both accept, so the corpus also catches a parser grown too strict.
#[test]
fn the_parser_rejects_everything_h11_rejects() {
    if !h11_installed() {
        return;
    }
    let files = corpus();
    assert!(files.len() >= 40, "the corpus holds {} requests", files.len());
    let paths: Vec<PathBuf> =
        files.iter().map(|(name, _)| corpus_dir().join(format!("{name}.http"))).collect();
    let out = Command::new(PYTHON)
        .arg(corpus_dir().join("h11_verdict.py"))
        .args(&paths)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let verdicts = String::from_utf8(out.stdout).unwrap();
    let mut looser = Vec::new();
    for ((name, bytes), line) in files.iter().zip(verdicts.lines()) {
        let (h11_name, h11) = line.split_once(' ').unwrap();
        assert_eq!(h11_name, name);
        let ours = match parse_request(bytes, &Limits::default()) {
            Parsed::Request(_) => "accept",
            Parsed::Partial => "incomplete",
            Parsed::Reject(_) => "reject",
        };
        if name.starts_with("ok-") {
            assert_eq!((ours, h11), ("accept", "accept"), "{name}");
        }
        if h11 != "accept" && ours == "accept" {
            looser.push(format!("{name}: h11 {h11}, corelane accept"));
        }
    }
    assert!(looser.is_empty(), "corelane accepts what h11 refuses:\n{}", looser.join("\n"));
}

/// An error answer to HEAD carried a body: a keep-alive client or a proxy reads it as the
/// start of the next response. Now no body, and the next pipelined request is answered.
#[test]
fn head_gets_no_body_even_for_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("here.txt"), "here").unwrap();
    let (server, stop) = serve_root(dir.path(), Backend::Epoll, |_| {});
    let text = exchange(
        server.local_addr(),
        b"HEAD /missing HTTP/1.1\r\nHost: x\r\n\r\nGET /here.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    let (first, rest) = text.split_once("\r\n\r\n").unwrap();
    assert!(first.starts_with("HTTP/1.1 404"), "{text}");
    assert!(rest.starts_with("HTTP/1.1 200"), "no body after the HEAD answer: {text}");
    assert!(rest.ends_with("here"), "{text}");
    // A HEAD refused by the parser (here: no Host) has no body either.
    let text = exchange(server.local_addr(), b"HEAD / HTTP/1.1\r\n\r\n");
    assert!(text.starts_with("HTTP/1.1 400") && text.ends_with("\r\n\r\n"), "{text:?}");
    stop_and_wait(server, &stop);
}

/// Two Content-Lengths that differ (last one won) and `+0` (parsed) are request smuggling
/// behind any proxy that reads them the other way: 400 and close.
#[test]
fn conflicting_or_signed_lengths_and_missing_host_are_400() {
    let dir = tempfile::tempdir().unwrap();
    let (server, stop) = serve_root(dir.path(), Backend::Epoll, |_| {});
    for request in [
        &b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"[..],
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +0\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    ] {
        let text = exchange(server.local_addr(), request);
        assert!(text.starts_with("HTTP/1.1 400"), "{}: {text}", String::from_utf8_lossy(request));
        assert!(text.contains("Connection: close"));
    }
    // Absolute-form is served (RFC 9112 §3.2.2).
    std::fs::write(dir.path().join("a.txt"), "A").unwrap();
    let text = exchange(
        server.local_addr(),
        b"GET http://x/a.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(text.starts_with("HTTP/1.1 200") && text.ends_with("A"), "{text}");
    stop_and_wait(server, &stop);
}

/// `index.html` was appended after the root check and followed out of the root through a
/// symlink; any symlink out of the root is now refused by the open itself.
#[test]
fn symlinks_out_of_the_root_are_403_index_html_included() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "secret").unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("sub/index.html"))
        .unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
    std::os::unix::fs::symlink("/proc/self/root/etc/hostname", dir.path().join("magic")).unwrap();
    let (server, stop) = serve_root(dir.path(), Backend::Epoll, |_| {});
    for target in ["/sub/", "/sub", "/out/secret", "/magic"] {
        let request = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let text = exchange(server.local_addr(), request.as_bytes());
        // A directory named without its slash is redirected to it (then refused, above).
        let want = if target == "/sub" { "HTTP/1.1 301" } else { "HTTP/1.1 403" };
        assert!(text.starts_with(want), "{target}: {text}");
        assert!(!text.contains("secret"), "{target}: {text}");
    }
    stop_and_wait(server, &stop);
}

/// A FIFO under the root was opened blocking: the lane stopped for good, and with it every
/// client of the lane. Now it is answered at once and others are served.
#[test]
fn a_fifo_under_the_root_does_not_stall_the_lane() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ok.txt"), "ok").unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        dir.path().join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let (server, stop) = serve_root(dir.path(), Backend::Epoll, |_| {});
    let started = Instant::now();
    let text = exchange(
        server.local_addr(),
        b"GET /fifo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(text.starts_with("HTTP/1.1 404"), "{text}");
    let text = exchange(
        server.local_addr(),
        b"GET /ok.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    stop_and_wait(server, &stop);
}

mod parser_properties {
    use super::*;
    use proptest::prelude::*;

    /// Request-shaped inputs: a real request with bytes flipped, cut or inserted.
    fn mangled() -> impl Strategy<Value = Vec<u8>> {
        let base = b"POST /a?b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\nabc".to_vec();
        (proptest::collection::vec((0usize..80, any::<u8>()), 0..6), 0usize..90).prop_map(
            move |(edits, cut)| {
                let mut b = base.clone();
                for (at, byte) in edits {
                    let at = at % b.len();
                    b[at] = byte;
                }
                b.truncate(cut.min(b.len()));
                b
            },
        )
    }

    proptest! {
        /// Any bytes: an answer, never a panic; the target lies inside the input; nothing
        /// beyond the header limit is ever asked for (the parser allocates nothing itself:
        /// its header table is a fixed array, so what a peer can make it hold is the input).
        #[test]
        fn any_bytes_get_an_answer_within_the_limits(
            input in prop_oneof![proptest::collection::vec(any::<u8>(), 0..3000), mangled()],
        ) {
            let limits = Limits { max_header_bytes: 1024, ..Limits::default() };
            match parse_request(&input, &limits) {
                Parsed::Request(r) => {
                    prop_assert!(r.head_len <= limits.max_header_bytes);
                    prop_assert!(r.target.end <= r.head_len);
                    prop_assert!(r.body_len <= limits.max_body_bytes);
                }
                Parsed::Partial => prop_assert!(input.len() < limits.max_header_bytes),
                Parsed::Reject(_) => {}
            }
        }
    }
}

/// The static-file answers (206, 416, 304, 412, 301, HEAD) as h11 reads them as a client, one
/// after another on a keep-alive connection: a body where none belongs (a 304's, a HEAD's) or a
/// length that is not the body's would throw every later answer off.
#[test]
fn h11_reads_every_file_answer_on_one_connection() {
    if !h11_installed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), vec![b'x'; 5000]).unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    for backend in BACKENDS {
        let (server, stop) = serve_root(dir.path(), backend, |_| {});
        let addr = server.local_addr();
        let head = exchange(addr, b"HEAD /f HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let etag = head.lines().find_map(|l| l.strip_prefix("ETag: ")).expect("an ETag").to_owned();
        let requests = [
            ("GET|/f|Range: bytes=10-19", "206 10"),
            ("GET|/f|Range: bytes=9000-", "416 26"),
            (&format!("GET|/f|If-None-Match: {etag}") as &str, "304 0"),
            ("HEAD|/f", "200 0"),
            ("GET|/f|If-Match: \"no\"", "412 24"),
            ("GET|/d", "301 22"),
            ("HEAD|/d", "301 0"),
            ("GET|/f|Range: bytes=0-1,3-4", "200 5000"),
            ("GET|/f", "200 5000"),
        ];
        let out = Command::new(PYTHON)
            .arg(corpus_dir().join("h11_client.py"))
            .arg(addr.ip().to_string())
            .arg(addr.port().to_string())
            .args(requests.iter().map(|(r, _)| *r))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let got: Vec<&str> = text.lines().collect();
        let want: Vec<&str> = requests.iter().map(|(_, w)| *w).collect();
        assert_eq!(got, want, "{backend}: {}", String::from_utf8_lossy(&out.stderr));
        stop_and_wait(server, &stop);
    }
}
