//! Static files as browsers and curl use them, over real loopback sockets on both backends:
//! ranges, validators and conditional requests, the directory redirect, hostile Range and
//! If-* headers, a file changed while it is sent, and the bytes an idle connection holds.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::http::{serve_root, stop_and_wait, BACKENDS};
use corelane::tcp::Limits;

/// One response: status, head text and body (Content-Length bytes, none for 304 or HEAD).
#[derive(Debug)]
struct Response {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// Reads one response from a keep-alive connection; `head_only`: a HEAD's (no body).
fn read_response(s: &mut TcpStream, pending: &mut Vec<u8>, head_only: bool) -> Response {
    let mut buf = vec![0u8; 1 << 16];
    let end = loop {
        if let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut buf).expect("a response arrives");
        assert!(n > 0, "closed before a head: {:?}", String::from_utf8_lossy(pending));
        pending.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8(pending[..end].to_vec()).unwrap();
    pending.drain(..end);
    let status = head[9..12].parse().unwrap();
    let mut r = Response { status, head, body: Vec::new() };
    let len: usize = r.header("content-length").map_or(0, |v| v.parse().unwrap());
    let len = if head_only || status == 304 { 0 } else { len };
    while pending.len() < len {
        let n = s.read(&mut buf).expect("the body arrives");
        assert!(n > 0, "closed inside a body");
        pending.extend_from_slice(&buf[..n]);
    }
    r.body = pending.drain(..len).collect();
    r
}

fn get(addr: SocketAddr, path: &str, extra: &str) -> Response {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: h\r\n{extra}\r\n").unwrap();
    read_response(&mut s, &mut Vec::new(), false)
}

fn content(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[test]
fn ranges_validators_and_conditions_on_both_backends() {
    let dir = tempfile::tempdir().unwrap();
    let data = content(10_000);
    std::fs::write(dir.path().join("f.bin"), &data).unwrap();
    let big = content(3 << 20);
    std::fs::write(dir.path().join("big.bin"), &big).unwrap();
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    std::fs::write(dir.path().join("docs/index.html"), "<a href=x.html>x</a>").unwrap();
    for backend in BACKENDS {
        let (server, stop) = serve_root(dir.path(), backend, |_| {});
        let addr = server.local_addr();
        let whole = get(addr, "/f.bin", "");
        assert_eq!((whole.status, whole.body.len()), (200, 10_000), "{backend}");
        assert_eq!(whole.body, data);
        assert_eq!(whole.header("accept-ranges"), Some("bytes"));
        let etag = whole.header("etag").expect("an ETag").to_owned();
        let modified = whole.header("last-modified").expect("a Last-Modified").to_owned();
        assert!(etag.starts_with('"') && etag.ends_with('"'), "strong: {etag}");

        let part = get(addr, "/f.bin", "Range: bytes=1000-1999\r\n");
        assert_eq!(part.status, 206, "{backend}: {}", part.head);
        assert_eq!(part.header("content-range"), Some("bytes 1000-1999/10000"));
        assert_eq!(part.body, &data[1000..2000]);
        let tail = get(addr, "/f.bin", "Range: bytes=-10\r\n");
        assert_eq!((tail.status, &tail.body[..]), (206, &data[9990..]));
        let many = get(addr, "/f.bin", "Range: bytes=0-0,5-9\r\n");
        assert_eq!((many.status, many.body.len()), (200, 10_000), "several ranges: the whole file");
        let past = get(addr, "/f.bin", "Range: bytes=10000-\r\n");
        assert_eq!(past.status, 416);
        assert_eq!(past.header("content-range"), Some("bytes */10000"));

        let same = get(addr, "/f.bin", &format!("If-None-Match: {etag}\r\n"));
        assert_eq!((same.status, same.header("etag")), (304, Some(etag.as_str())));
        assert!(same.header("content-length").is_none(), "{}", same.head);
        let since = get(addr, "/f.bin", &format!("If-Modified-Since: {modified}\r\n"));
        assert_eq!(since.status, 304);
        let old = get(addr, "/f.bin", "If-Range: \"old\"\r\nRange: bytes=0-9\r\n");
        assert_eq!((old.status, old.body.len()), (200, 10_000), "another version: all of it");
        let current = get(addr, "/f.bin", &format!("If-Range: {etag}\r\nRange: bytes=0-9\r\n"));
        assert_eq!((current.status, &current.body[..]), (206, &data[..10]));
        let changed = get(addr, "/f.bin", "If-Match: \"other\"\r\n");
        assert_eq!(changed.status, 412);

        // Requests pipelined behind a file body are answered after it; a 304 and a HEAD carry
        // no body: the next response on the connection follows at once, and HEAD has GET's
        // validators.
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "GET /f.bin HTTP/1.1\r\nHost: h\r\n\r\n\
             GET /f.bin HTTP/1.1\r\nHost: h\r\nIf-None-Match: {etag}\r\n\r\n\
             HEAD /f.bin HTTP/1.1\r\nHost: h\r\n\r\nGET /f.bin HTTP/1.1\r\nHost: h\r\nRange: bytes=0-4\r\n\r\n"
        )
        .unwrap();
        let mut pending = Vec::new();
        assert_eq!(read_response(&mut s, &mut pending, false).body, data, "{backend}");
        assert_eq!(read_response(&mut s, &mut pending, false).status, 304);
        let head = read_response(&mut s, &mut pending, true);
        assert_eq!((head.status, head.header("etag")), (200, Some(etag.as_str())));
        assert_eq!(head.header("content-length"), Some("10000"));
        let after = read_response(&mut s, &mut pending, false);
        assert_eq!((after.status, &after.body[..]), (206, &data[..5]));

        // Large bodies pipelined: each whole, in order, on either backend.
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let get_big = "GET /big.bin HTTP/1.1\r\nHost: h\r\n\r\n";
        let ranged = "GET /big.bin HTTP/1.1\r\nHost: h\r\nRange: bytes=-3\r\n\r\n";
        write!(s, "{get_big}{get_big}{ranged}").unwrap();
        let mut pending = Vec::new();
        for _ in 0..2 {
            assert!(read_response(&mut s, &mut pending, false).body == big, "{backend}");
        }
        assert_eq!(read_response(&mut s, &mut pending, false).body, &big[big.len() - 3..]);

        let redirect = get(addr, "/docs?q=1", "");
        assert_eq!((redirect.status, redirect.header("location")), (301, Some("/docs/")));
        let open_redirect = get(addr, "//docs", "");
        assert_eq!(open_redirect.header("location"), Some("/docs/"), "never another site");
        assert_eq!(get(addr, "/docs/", "").status, 200);
        stop_and_wait(server, &stop);
    }
}

/// Range and If-* headers built to hurt: thousands of ranges, overlapping and reversed ones,
/// numbers past u64, an If-None-Match of a megabyte. Each is answered as the RFC says, and
/// promptly.
#[test]
fn hostile_range_and_condition_headers_are_answered_by_the_rfc() {
    let dir = tempfile::tempdir().unwrap();
    let data = content(5000);
    std::fs::write(dir.path().join("f"), &data).unwrap();
    let limits = Limits { max_header_bytes: 2 << 20, ..Limits::default() };
    for backend in BACKENDS {
        let (server, stop) = serve_root(dir.path(), backend, |c| c.limits = limits);
        let addr = server.local_addr();
        let started = Instant::now();
        let thousands = format!("Range: bytes={}\r\n", vec!["0-1,1-0,3-2"; 20_000].join(","));
        assert_eq!(get(addr, "/f", &thousands).status, 200, "{backend}");
        let overlapping = get(addr, "/f", "Range: bytes=0-100,50-150\r\n");
        assert_eq!((overlapping.status, overlapping.body.len()), (200, 5000));
        let reversed = get(addr, "/f", "Range: bytes=100-50\r\n");
        assert_eq!((reversed.status, reversed.body.len()), (200, 5000));
        let huge = "9".repeat(100);
        let past = get(addr, "/f", &format!("Range: bytes={huge}-\r\n"));
        assert_eq!(past.status, 416);
        let clamped = get(addr, "/f", &format!("Range: bytes=4990-{huge}\r\n"));
        assert_eq!((clamped.status, &clamped.body[..]), (206, &data[4990..]));
        let tags = format!("If-None-Match: {}\r\n", vec!["\"x\""; 300_000].join(","));
        assert_eq!(get(addr, "/f", &tags).status, 200);
        let star = format!("If-Match: {}*\r\n", "W/\"y\", ".repeat(100_000));
        assert_eq!(get(addr, "/f", &star).status, 200);
        let dates =
            format!("If-Modified-Since: {}\r\n", "Sun, 06 Nov 1994 08:49:37 GMT".repeat(30_000));
        assert_eq!(get(addr, "/f", &dates).status, 200);
        assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
        stop_and_wait(server, &stop);
    }
}

/// Starts a GET of `name` whose client reads only the head; returns the head, the stream and
/// what of the body came with the head.
fn start_slow_get(addr: SocketAddr, name: &str) -> (Response, TcpStream, Vec<u8>) {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    s.connect(&addr.into()).unwrap();
    let mut s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET /{name} HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
    let mut pending = Vec::new();
    let mut buf = [0u8; 512];
    let end = loop {
        if let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0);
        pending.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8(pending[..end].to_vec()).unwrap();
    let status = head[9..12].parse().unwrap();
    let rest = pending.split_off(end);
    (Response { status, head, body: Vec::new() }, s, rest)
}

/// Starts a slow GET of `dir/big`, lets `change` write the file once the head is in, then
/// reads to the close; returns the body that came.
fn change_while_sent(addr: SocketAddr, dir: &Path, change: impl FnOnce(std::fs::File)) -> Vec<u8> {
    let (head, mut s, mut body) = start_slow_get(addr, "big");
    assert_eq!(head.header("content-length"), Some("16777216"));
    std::thread::sleep(Duration::from_millis(100));
    change(std::fs::OpenOptions::new().write(true).open(dir.join("big")).unwrap());
    let ended = s.read_to_end(&mut body);
    let stalled = |e: &std::io::Error| {
        matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
    };
    assert!(!matches!(&ended, Err(e) if stalled(e)), "closed, not left hanging");
    body
}

/// A file replaced (renamed over) while it is sent is sent whole as the version its head
/// named; a file truncated while it is sent ends the connection short, never padded or mixed.
#[test]
fn a_file_changed_while_it_is_sent_is_never_a_mix_of_versions() {
    let dir = tempfile::tempdir().unwrap();
    let old = content(16 << 20);
    for backend in BACKENDS {
        std::fs::write(dir.path().join("big"), &old).unwrap();
        let (server, stop) = serve_root(dir.path(), backend, |_| {});
        let addr = server.local_addr();

        let (head, mut s, mut body) = start_slow_get(addr, "big");
        assert_eq!(head.status, 200);
        let etag = head.header("etag").unwrap().to_owned();
        std::thread::sleep(Duration::from_millis(100));
        let next = dir.path().join("big.new");
        std::fs::write(&next, vec![0xEE; 16 << 20]).unwrap();
        std::fs::rename(&next, dir.path().join("big")).unwrap();
        let mut buf = vec![0u8; 1 << 16];
        while body.len() < old.len() {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "{backend}: closed at {}", body.len());
            body.extend_from_slice(&buf[..n]);
        }
        assert!(body == old, "{backend}: the old version, whole");
        let fresh = get(addr, "/big", "Range: bytes=0-0\r\n");
        assert_ne!(fresh.header("etag"), Some(etag.as_str()), "a new version, a new ETag");
        assert_eq!(fresh.body, [0xEE]);

        // Truncated while sent: the connection ends short. Bytes before the cut are the
        // file's; after it, either backend's zero-copy send (epoll's sendfile, io_uring's
        // splice) may already have queued page-cache pages the truncation zeroed (a send
        // cannot be recalled): the response is incomplete, which a client discards.
        let cut = 1 << 20;
        std::fs::write(dir.path().join("big"), &old).unwrap();
        let body = change_while_sent(addr, dir.path(), |file| file.set_len(cut as u64).unwrap());
        assert!(body.len() < old.len(), "{backend}: the connection ends short");
        let checked = body.len().min(cut);
        let first_wrong = body[..checked].iter().zip(&old).position(|(a, b)| a != b);
        assert_eq!(first_wrong, None, "{backend}: {} bytes came", body.len());

        // Rewritten in place (the same length, other bytes): never completed as a mix.
        std::fs::write(dir.path().join("big"), &old).unwrap();
        let body = change_while_sent(addr, dir.path(), |mut file| {
            file.write_all(&vec![0xEE; 16 << 20]).unwrap();
        });
        assert!(body.len() < old.len(), "{backend}: a rewritten file ends the response short");
        stop_and_wait(server, &stop);
    }
}

/// A file whose time no HTTP-date can name (before 1970, after 9999) is served with its ETag
/// and no Last-Modified, rather than stopping the lane.
#[test]
fn files_dated_outside_http_dates_are_served() {
    let dir = tempfile::tempdir().unwrap();
    for (name, secs) in [("old", -86_400i64 * 400), ("far", 300_000_000_000)] {
        let path = dir.path().join(name);
        std::fs::write(&path, "x").unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let at = rustix::fs::Timespec { tv_sec: secs, tv_nsec: 0 };
        rustix::fs::futimens(
            &file,
            &rustix::fs::Timestamps { last_access: at, last_modification: at },
        )
        .unwrap();
    }
    for backend in BACKENDS {
        let (server, stop) = serve_root(dir.path(), backend, |_| {});
        for name in ["old", "far"] {
            let r = get(
                server.local_addr(),
                &format!("/{name}"),
                "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n",
            );
            assert_eq!((r.status, &r.body[..]), (200, &b"x"[..]), "{backend} {name}");
            assert!(r.header("etag").is_some(), "{}", r.head);
            let mtime = std::fs::metadata(dir.path().join(name)).unwrap();
            let secs = std::os::unix::fs::MetadataExt::mtime(&mtime);
            if !(0..=253_402_300_799).contains(&secs) {
                assert!(r.header("last-modified").is_none(), "{}", r.head);
            }
        }
        stop_and_wait(server, &stop);
    }
}

/// 9,000 keep-alive connections idle after one request each hold only their state (no
/// buffers: those are the lane's, lent while bytes are in flight), and a new request is
/// still answered.
#[test]
fn idle_keep_alive_connections_hold_no_buffers() {
    const IDLE: usize = 9_000;
    if !common::fds_or_skip(2 * IDLE as u64 + 1000) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), content(4096)).unwrap();
    for backend in BACKENDS {
        let limits = Limits { max_connections: 2 * IDLE, ..Limits::default() };
        let (server, stop) = serve_root(dir.path(), backend, |c| c.limits = limits);
        let addr = server.local_addr();
        let mut idle = Vec::with_capacity(IDLE);
        for _ in 0..IDLE {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /f HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
            idle.push(s);
        }
        for s in &mut idle {
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let r = read_response(s, &mut Vec::new(), false);
            assert_eq!((r.status, r.body.len()), (200, 4096));
        }
        // A sweep (every 50 ms) counts what the connections hold.
        std::thread::sleep(Duration::from_millis(300));
        let totals = server.totals();
        assert_eq!(totals.open, IDLE as u64, "{backend}");
        let per_connection = totals.bytes_per_connection().unwrap();
        assert!(per_connection < 512.0, "{backend}: {per_connection:.0} B per idle connection");
        let fresh = get(addr, "/f", "");
        assert_eq!(fresh.status, 200, "{backend}: a new request is answered");
        drop(idle);
        stop_and_wait(server, &stop);
    }
}

/// curl, as users run it: a range (-r), a resumed download (-C -), a time condition (-z) and
/// an ETag condition (--etag-save / --etag-compare).
#[test]
fn curl_ranges_resumes_and_conditions() {
    if Command::new("curl").arg("--version").output().is_err() {
        eprintln!("skipped: curl is not installed (apt-get install curl)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = content(300_000);
    std::fs::write(dir.path().join("f.bin"), &data).unwrap();
    let out = tempfile::tempdir().unwrap();
    for backend in BACKENDS {
        let (server, stop) = serve_root(dir.path(), backend, |_| {});
        let url = format!("http://{}/f.bin", server.local_addr());
        let curl = |args: &[&str]| {
            let o = Command::new("curl")
                .args(["-sS", "--max-time", "20"])
                .args(args)
                .arg(&url)
                .output()
                .unwrap();
            assert!(o.status.success(), "curl {args:?}: {}", String::from_utf8_lossy(&o.stderr));
            o.stdout
        };
        assert_eq!(curl(&["-r", "1000-1999"]), &data[1000..2000], "{backend}");

        let partial = out.path().join("resume");
        std::fs::write(&partial, &data[..123_456]).unwrap();
        curl(&["-C", "-", "-o", partial.to_str().unwrap()]);
        assert!(std::fs::read(&partial).unwrap() == data, "{backend}: resumed whole");

        let local = out.path().join("local");
        std::fs::write(&local, "newer").unwrap();
        let code = curl(&["-z", local.to_str().unwrap(), "-o", "/dev/null", "-w", "%{http_code}"]);
        assert_eq!(code, b"304", "{backend}: not modified since a newer local file");

        let etag = out.path().join("etag");
        curl(&["--etag-save", etag.to_str().unwrap(), "-o", "/dev/null"]);
        let code = curl(&[
            "--etag-compare",
            etag.to_str().unwrap(),
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ]);
        assert_eq!(code, b"304", "{backend}: same ETag");
        stop_and_wait(server, &stop);
    }
}

/// Headless Chromium opens `/docs` (no slash): after the 301, the page's relative script loads
/// from `/docs/`, and its range fetch gets 206 with the asked bytes.
#[test]
fn chromium_follows_the_directory_redirect_and_fetches_a_range() {
    let Some(chromium) = common::chromium::find() else { return };
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    std::fs::write(
        dir.path().join("docs/index.html"),
        "<!doctype html><p id=out>not run</p><script src=\"app.js\"></script>",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("docs/app.js"),
        "document.getElementById('out').textContent = 'relative script ran';\n\
         fetch('data.txt', { headers: { Range: 'bytes=4-8' } }).then(async r => {\n\
           const p = document.createElement('p'); p.id = 'range';\n\
           p.textContent = r.status + ' ' + r.headers.get('content-range') + ' ' + await r.text();\n\
           document.body.appendChild(p);\n\
         });\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("docs/data.txt"), "0123456789abcdef").unwrap();
    for backend in BACKENDS {
        let (server, stop) = serve_root(dir.path(), backend, |_| {});
        let page = format!("http://{}/docs", server.local_addr());
        let out =
            common::chromium::run(&chromium, &["--virtual-time-budget=5000", "--dump-dom"], page);
        let dom = String::from_utf8_lossy(&out.stdout);
        assert!(dom.contains("relative script ran"), "{backend}: {dom}");
        assert!(dom.contains("206 bytes 4-8/16 45678"), "{backend}: {dom}");
        stop_and_wait(server, &stop);
    }
}

/// Sends every request at once on one connection and reads the answers in order.
fn pipelined(addr: SocketAddr, requests: &[(&str, &str, &str)]) -> Vec<Response> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut all = String::new();
    for (method, path, extra) in requests {
        all.push_str(&format!("{method} {path} HTTP/1.1\r\nHost: h\r\n{extra}\r\n"));
    }
    s.write_all(all.as_bytes()).unwrap();
    let mut pending = Vec::new();
    requests.iter().map(|(m, ..)| read_response(&mut s, &mut pending, *m == "HEAD")).collect()
}

/// Large bodies (sent by sendfile on both backends, the io_uring lane through the descriptor
/// it installs: more than a socket buffer holds, a range, a suffix and an open range), a
/// 0-byte file and a HEAD, pipelined on one keep-alive connection: each answer whole, exact
/// and in order on both backends, and every large body by sendfile.
#[test]
fn large_bodies_and_their_ranges_go_whole_and_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let big = content((3 << 20) + 5);
    let mid = content(1 << 20);
    std::fs::write(dir.path().join("big"), &big).unwrap();
    std::fs::write(dir.path().join("mid"), &mid).unwrap();
    std::fs::write(dir.path().join("empty"), b"").unwrap();
    for backend in BACKENDS {
        let (server, stop) = serve_root(dir.path(), backend, |_| {});
        let addr = server.local_addr();
        let answers = pipelined(
            addr,
            &[
                ("GET", "/big", ""),
                ("GET", "/big", "Range: bytes=100000-2500000\r\n"),
                ("GET", "/big", "Range: bytes=-2000000\r\n"),
                ("GET", "/big", "Range: bytes=1048000-\r\n"),
                ("HEAD", "/big", ""),
                ("GET", "/empty", ""),
                ("GET", "/empty", "Range: bytes=0-\r\n"),
                ("GET", "/mid", ""),
            ],
        );
        let n = big.len();
        let want: [(u16, &[u8]); 8] = [
            (200, &big),
            (206, &big[100_000..=2_500_000]),
            (206, &big[n - 2_000_000..]),
            (206, &big[1_048_000..]),
            (200, b""),
            (200, b""),
            (416, b""),
            (200, &mid),
        ];
        for (i, (got, (status, body))) in answers.iter().zip(want).enumerate() {
            assert_eq!(got.status, status, "{backend} #{i}: {}", got.head);
            // A 416's body is its error text.
            let body_ok = status == 416 || got.body == body;
            assert!(body_ok, "{backend} #{i}: {} bytes, wrong", got.body.len());
        }
        assert_eq!(answers[4].header("content-length"), Some(n.to_string().as_str()));
        // Every large body went by sendfile (the 0-byte and HEAD ones have none).
        let large = (n + 2_400_001 + 2_000_000 + (n - 1_048_000) + mid.len()) as u64;
        assert_eq!(server.totals().sendfile_bytes, large, "{backend}: sendfile bytes");
        stop.stop();
        server.wait().unwrap();
    }
}

/// Clients that leave in the middle of a large file (more of them than an io_uring lane
/// installs descriptors for: the rest go by read and send) leave nothing held: every
/// connection closes, the lane's descriptors come back (the next large file still goes by
/// sendfile), and a client that stops reading is closed at the idle timeout, not kept.
#[test]
fn clients_that_leave_mid_file_leave_nothing_held() {
    const LEAVING: usize = 300;
    if !common::fds_or_skip(4 * LEAVING as u64 + 1000) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let big = content(16 << 20);
    std::fs::write(dir.path().join("big"), &big).unwrap();
    for backend in BACKENDS {
        let idle_timeout = Duration::from_secs(4);
        let limits = Limits { idle_timeout, ..Limits::default() };
        let (server, stop) = serve_root(dir.path(), backend, |c| c.limits = limits);
        let addr = server.local_addr();
        let (_, mut stalled, _) = start_slow_get(addr, "big");
        let stalled_at = Instant::now();
        let leaving: Vec<_> = (0..LEAVING).map(|_| start_slow_get(addr, "big").1).collect();
        std::thread::sleep(Duration::from_millis(200));
        drop(leaving); // unread bytes: each close is a reset
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.totals().open > 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        // Only the stalled client is left (or it too, had the idle timeout passed already).
        let open = server.totals().open;
        assert!(open <= 1, "{backend}: {open} open after {:?}", stalled_at.elapsed());
        let before = server.totals().sendfile_bytes;
        let whole = get(addr, "/big", "");
        assert!(whole.status == 200 && whole.body == big, "{backend}: served whole after");
        let sent = server.totals().sendfile_bytes - before;
        assert_eq!(sent, big.len() as u64, "{backend}: by sendfile after");
        // The client that stopped reading: closed by the idle timeout (plus a sweep), the
        // rest of the file never sent.
        std::thread::sleep((stalled_at + idle_timeout + Duration::from_secs(1)) - Instant::now());
        assert_eq!(server.totals().open, 0, "{backend}: the stalled client is closed");
        stalled.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut sink = Vec::new();
        let ended = stalled.read_to_end(&mut sink);
        let closed = match &ended {
            Ok(_) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
        };
        assert!(closed, "{backend}: {ended:?}");
        assert!(sink.len() < big.len(), "{backend}: the stalled client got it all?");
        stop.stop();
        server.wait().unwrap();
    }
}
