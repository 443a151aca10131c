//! How long one HTTP peer can hold a connection slot, on both backends over real loopback
//! sockets: a connection that never sends a byte, a body trickled a byte at a time and a
//! closing connection whose peer never reads are each dropped at their deadline.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::http::{connect, stop_and_wait, BACKENDS};
use corelane::lane::StopSignal;
use corelane::tcp::{Backend, Content, Limits, Server};

const DEADLINE: Duration = Duration::from_millis(400);

/// A server of `body` whose header, request and linger deadlines are `DEADLINE`-sized.
fn start(backend: Backend, body: Vec<u8>) -> (Server, StopSignal) {
    common::http::start(backend, Content::Body(body), |c| {
        c.limits = Limits {
            header_timeout: DEADLINE,
            request_timeout: DEADLINE * 2,
            linger_timeout: DEADLINE,
            ..Limits::default()
        }
    })
}

/// Reads until the server closes; returns when that was, from `since`.
fn closed_after(s: &mut TcpStream, since: Instant) -> Duration {
    let mut sink = Vec::new();
    let _ = s.read_to_end(&mut sink);
    since.elapsed()
}

/// A connection that never sent a byte was held for the idle timeout (60 s); the header
/// deadline now runs from accept.
#[test]
fn a_silent_connection_is_closed_at_the_header_deadline() {
    for backend in BACKENDS {
        let (server, stop) = start(backend, b"ok".to_vec());
        let started = Instant::now();
        let mut silent = connect(server.local_addr());
        let held = closed_after(&mut silent, started);
        assert!(held >= DEADLINE - Duration::from_millis(50), "{backend:?}: {held:?}");
        assert!(held < DEADLINE * 4, "{backend:?}: held {held:?}");
        stop_and_wait(server, &stop);
    }
}

/// A body trickled one byte at a time reset the idle clock with every byte and was never
/// timed: the whole request, body included, now has a deadline.
#[test]
fn a_trickled_body_is_cut_at_the_request_deadline() {
    for backend in BACKENDS {
        let (server, stop) = start(backend, b"ok".to_vec());
        let started = Instant::now();
        let mut s = connect(server.local_addr());
        s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n").unwrap();
        // One byte every 50 ms for at most 4 s (80 bytes), while the server keeps it open.
        let mut trickled = 0;
        while started.elapsed() < Duration::from_secs(4) {
            if s.write_all(b"x").is_err() {
                break;
            }
            trickled += 1;
            std::thread::sleep(Duration::from_millis(50));
            s.set_nonblocking(true).unwrap();
            let mut probe = [0u8; 4096];
            let closed = loop {
                match s.read(&mut probe) {
                    Ok(0) => break true,
                    Ok(_) => continue,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break false,
                    Err(_) => break true,
                }
            };
            s.set_nonblocking(false).unwrap();
            if closed {
                break;
            }
        }
        let held = started.elapsed();
        assert!(
            held < DEADLINE * 2 + Duration::from_secs(1),
            "{backend:?}: held {held:?} ({trickled} bytes)"
        );
        assert!(held >= DEADLINE * 2 - Duration::from_millis(50), "{backend:?}: {held:?}");
        stop_and_wait(server, &stop);
    }
}

/// A client that asks for a large response, says `Connection: close` and then never reads
/// kept the connection (and the response's memory) for the idle timeout; it is now dropped
/// once it has made no progress for the linger deadline.
#[test]
fn a_closing_connection_whose_peer_never_reads_is_dropped() {
    for backend in BACKENDS {
        let (server, stop) = start(backend, vec![b'x'; 16 << 20]);
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.set_recv_buffer_size(4096).unwrap();
        s.connect(&server.local_addr().into()).unwrap();
        let mut s: TcpStream = s.into();
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let started = Instant::now();
        let mut dropped = None;
        while started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(50));
            if server.totals().open == 0 {
                dropped = Some(started.elapsed());
                break;
            }
        }
        let dropped = dropped.unwrap_or_else(|| panic!("{backend:?}: still open after 5 s"));
        assert!(dropped < DEADLINE * 4, "{backend:?}: dropped after {dropped:?}");
        drop(s);
        stop_and_wait(server, &stop);
    }
}
