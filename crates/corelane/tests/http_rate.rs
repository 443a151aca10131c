//! `load http --rate` against real servers: wrk2's correction shows a server's stall that the
//! closed-loop figure hides, the rate is kept (loose bounds), rate 0 is refused.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use corelane::lane::StopSignal;
use corelane::tcp::load::{run, LoadConfig};
use corelane::tcp::TcpError;

const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

/// A keep-alive HTTP server (a thread per connection) that, at its `stall_at`-th request,
/// stops answering every connection for `stall`: one lock held across the pause.
fn stalling_server(stall_at: u64, stall: Duration) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let gate = Arc::new(Mutex::new(()));
    let count = Arc::new(AtomicU64::new(0));
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let (gate, count) = (Arc::clone(&gate), Arc::clone(&count));
            thread::spawn(move || {
                let _ = stream.set_nodelay(true);
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        let _held = gate.lock().unwrap();
                        if count.fetch_add(1, Ordering::Relaxed) + 1 == stall_at {
                            thread::sleep(stall);
                        }
                        if stream.write_all(RESPONSE).is_err() {
                            return;
                        }
                    }
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    addr
}

fn config(addr: SocketAddr, rate: Option<u64>, seconds: f64) -> LoadConfig {
    let mut c = LoadConfig::new(addr);
    c.connections = 4;
    c.rate = rate;
    c.duration = Duration::from_secs_f64(seconds);
    c
}

/// A 300 ms stall at 1000 requests/s holds back ~300 requests of ~2000: the corrected p99 is
/// most of the stall; from the moment requests were written only the 4 in flight saw it,
/// so the uncorrected p99 does not show it.
#[test]
fn the_correction_charges_a_stall_to_every_request_it_held_back() {
    let stall = Duration::from_millis(300);
    let addr = stalling_server(500, stall);
    let s = run(&config(addr, Some(1000), 2.0), &StopSignal::new(), |_| {}).unwrap();
    let corrected = s.latency.p99_us;
    let uncorrected = s.latency_uncorrected.expect("a rate keeps the uncorrected figure").p99_us;
    assert!(corrected > 150_000.0, "corrected p99 {corrected} us shows the 300 ms stall: {s:?}");
    assert!(uncorrected < 50_000.0, "uncorrected p99 {uncorrected} us hides it: {s:?}");
    assert!(s.latency.max_us >= 250_000.0, "{s:?}");
    assert_eq!(s.errors, 0, "{s:?}");
}

/// The closed loop has no schedule: its latency is the uncorrected kind, and it is offered
/// less while the server stalls.
#[test]
fn the_closed_loop_hides_the_stall() {
    let addr = stalling_server(200, Duration::from_millis(300));
    let s = run(&config(addr, None, 1.5), &StopSignal::new(), |_| {}).unwrap();
    assert!(s.latency_uncorrected.is_none() && s.rate.is_none());
    assert!(s.latency.p99_us < 250_000.0, "{s:?}");
}

/// Loose bounds on a shared machine: the rate is kept within 10 % where the server is idle.
#[test]
fn the_rate_is_kept() {
    let addr = stalling_server(u64::MAX, Duration::ZERO);
    let s = run(&config(addr, Some(2000), 1.5), &StopSignal::new(), |_| {}).unwrap();
    assert!((1800.0..=2100.0).contains(&s.requests_per_sec), "{s:?}");
    assert_eq!(s.rate, Some(2000));
}

#[test]
fn rate_zero_is_refused() {
    let addr = stalling_server(u64::MAX, Duration::ZERO);
    let err = run(&config(addr, Some(0), 1.0), &StopSignal::new(), |_| {}).unwrap_err();
    assert!(matches!(err, TcpError::ZeroRate), "{err}");
    assert!(err.to_string().contains("--rate must be above 0"));
}
