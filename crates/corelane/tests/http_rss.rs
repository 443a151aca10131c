//! What one pipelining client that never reads can make the server hold: before the cap on
//! pending output, 2.2 GiB of RSS in 10 s. This binary holds this one test so the process's
//! RSS is the server's (the clients here hold a few KiB).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::http::{stop_and_wait, BACKENDS};
use common::rss_kib;
use corelane::tcp::Content;

const PIPELINE_FOR: Duration = Duration::from_secs(10);
const GROWTH_LIMIT_KIB: u64 = 64 << 10;

/// Writes pipelined requests for `PIPELINE_FOR`, never reading; bounded in time (writes
/// time out once the server stops reading and the socket buffers are full).
fn pipeline_without_reading(addr: SocketAddr, done: Arc<AtomicBool>) -> u64 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_write_timeout(Some(Duration::from_millis(200))).unwrap();
    let batch = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".repeat(256);
    let started = Instant::now();
    let mut sent = 0u64;
    while started.elapsed() < PIPELINE_FOR {
        match s.write(&batch) {
            Ok(n) => sent += n as u64,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    done.store(true, Ordering::Relaxed);
    sent
}

fn get_ok(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").is_err() {
        return false;
    }
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text.starts_with("HTTP/1.1 200")
}

#[test]
fn a_client_that_pipelines_and_never_reads_cannot_grow_the_server() {
    for backend in BACKENDS {
        let body = Content::Body(b"Hello, World!".to_vec());
        let (server, stop) = common::http::start(backend, body, |c| c.lanes = 1);
        let addr = server.local_addr();
        assert!(get_ok(addr));
        let before = rss_kib();
        let done = Arc::new(AtomicBool::new(false));
        let pipeliner = {
            let done = Arc::clone(&done);
            std::thread::spawn(move || pipeline_without_reading(addr, done))
        };
        let (mut peak, mut served, mut asked) = (before, 0, 0);
        while !done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(250));
            asked += 1;
            served += u32::from(get_ok(addr));
            peak = peak.max(rss_kib());
        }
        let sent = pipeliner.join().unwrap();
        let grown = peak.saturating_sub(before);
        eprintln!(
            "{backend:?}: pipelined {} MiB of requests; RSS {before} KiB -> peak {peak} KiB (+{} MiB); {served}/{asked} parallel GETs answered 200",
            sent >> 20,
            grown >> 10
        );
        assert!(grown < GROWTH_LIMIT_KIB, "{backend:?}: the server grew by {} MiB", grown >> 10);
        assert!(served == asked && asked >= 10, "{backend:?}: {served}/{asked} answered");
        stop_and_wait(server, &stop);
    }
}
