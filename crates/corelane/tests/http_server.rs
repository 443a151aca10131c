//! The HTTP server and load generator over real loopback sockets: answers, limits, slow and
//! malformed clients while others are served, static files, drain on stop, many idle
//! connections and no fd leak across a million requests.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::http::{connect, read_to_close, serve_root, stop_and_wait, BACKENDS};
use corelane::lane::{Placement, StopSignal};
use corelane::tcp::{
    load, Backend, Content, Limits, Listen, LoadConfig, LoadSummary, Recycle, Server, ServerConfig,
};

/// A server of the fixed body "Hello, World!" (the files test serves a root instead).
fn start(backend: Backend, configure: impl FnOnce(&mut ServerConfig)) -> (Server, StopSignal) {
    common::http::start(backend, Content::Body(b"Hello, World!".to_vec()), configure)
}

/// Reads exactly `n` complete responses of the fixed body from a keep-alive connection.
fn read_responses(s: &mut TcpStream, n: usize) -> String {
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    while String::from_utf8_lossy(&all).matches("Hello, World!").count() < n {
        let got = s.read(&mut buf).expect("response arrives");
        assert!(got > 0, "server closed early: {}", String::from_utf8_lossy(&all));
        all.extend_from_slice(&buf[..got]);
    }
    String::from_utf8_lossy(&all).into_owned()
}

fn quick_load(addr: SocketAddr, requests: u64, close: bool) -> LoadSummary {
    let mut config = LoadConfig::new(addr);
    config.connections = 8;
    config.duration = Duration::from_secs(30);
    config.requests = Some(requests);
    config.close = close;
    load::run(&config, &StopSignal::new(), |_| {}).expect("load runs")
}

#[test]
fn keep_alive_and_pipelined_requests_are_answered_in_order() {
    for backend in BACKENDS {
        let (server, stop) = start(backend, |_| {});
        let mut s = connect(server.local_addr());
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nHEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET /again HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let text = read_responses(&mut s, 2);
        assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 3, "{text}");
        assert!(text.contains("Content-Length: 13"));
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let last = read_to_close(&mut s);
        assert!(last.contains("Connection: close") && last.ends_with("Hello, World!"), "{last}");
        let totals = stop_and_wait(server, &stop);
        assert_eq!(totals.requests, 4);
    }
}

#[test]
fn every_listen_mode_and_recycling_choice_serves_correctly() {
    for backend in BACKENDS {
        // Both CPUs where there are two: lane i on CPU i % 2 (the library's round-robin).
        let cpus: corelane::topology::CpuList =
            if corelane::topology::Topology::read().unwrap().cpus.len() > 1 { "0-1" } else { "0" }
                .parse()
                .unwrap();
        for listen in [Listen::Shared, Listen::Reuseport, Listen::ReuseportCpu] {
            for recycle in [Recycle::NONE, Recycle::ALL, "fd".parse().unwrap()] {
                let (server, stop) = start(backend, |c| {
                    c.lanes = 2;
                    c.placement = Placement::RoundRobin(cpus.clone());
                    c.listen = listen;
                    c.recycle = recycle;
                });
                let keep = quick_load(server.local_addr(), 3000, false);
                let close = quick_load(server.local_addr(), 300, true);
                for s in [&keep, &close] {
                    assert_eq!((s.non_2xx, s.errors), (0, 0), "{listen} {recycle}: {s:?}");
                }
                assert!(keep.responses >= 3000 && close.responses >= 300, "{listen} {recycle}");
                stop.stop();
                let totals = server.wait().unwrap();
                assert!(totals.requests >= 3300, "{totals:?}");
            }
        }
    }
}

#[test]
fn malformed_oversized_and_slow_requests_are_refused_while_others_are_served() {
    for backend in BACKENDS {
        let (server, stop) = start(backend, |c| {
            c.limits = Limits {
                max_header_bytes: 1024,
                header_timeout: Duration::from_millis(300),
                ..Limits::default()
            };
        });
        let addr = server.local_addr();
        let others = std::thread::spawn(move || quick_load(addr, 30_000, false));

        let mut bad = connect(addr);
        bad.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nno colon in this header\r\n\r\n").unwrap();
        let text = read_to_close(&mut bad);
        assert!(text.starts_with("HTTP/1.1 400 Bad Request"), "{text}");

        let mut long_uri = connect(addr);
        long_uri.write_all(format!("GET /{}", "a".repeat(2000)).as_bytes()).unwrap();
        assert!(read_to_close(&mut long_uri).starts_with("HTTP/1.1 414 URI Too Long"));

        let mut big_head = connect(addr);
        let head = format!("GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "b".repeat(2000));
        let _ = big_head.write_all(head.as_bytes());
        assert!(read_to_close(&mut big_head).starts_with("HTTP/1.1 431"));

        let mut slow = connect(addr);
        let began = Instant::now();
        slow.write_all(b"GET / HTTP/1.1\r\nHost: sl").unwrap();
        let answer = read_to_close(&mut slow);
        assert!(answer.starts_with("HTTP/1.1 408 Request Timeout"), "{answer}");
        assert!(began.elapsed() < Duration::from_secs(3), "closed after {:?}", began.elapsed());

        let mut post = connect(addr);
        post.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let text = read_responses(&mut post, 1);
        assert!(text.starts_with("HTTP/1.1 405") && text.contains("Allow: GET, HEAD"), "{text}");

        let served = others.join().unwrap();
        assert_eq!((served.non_2xx, served.errors), (0, 0), "{served:?}");
        let totals = stop_and_wait(server, &stop);
        assert!(totals.client_errors >= 5 && totals.timeouts == 1, "{totals:?}");
    }
}

#[test]
fn connections_over_the_limit_get_503() {
    for backend in BACKENDS {
        let (server, stop) =
            start(backend, |c| c.limits = Limits { max_connections: 2, ..Limits::default() });
        let addr = server.local_addr();
        let mut held: Vec<TcpStream> = (0..2).map(|_| connect(addr)).collect();
        for s in &mut held {
            s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            read_responses(s, 1);
        }
        let mut third = connect(addr);
        assert!(read_to_close(&mut third).starts_with("HTTP/1.1 503"));
        assert_eq!(stop_and_wait(server, &stop).refused, 1);
    }
}

#[test]
fn static_files_are_served_whole_and_nothing_outside_the_root() {
    let scratch = tempfile::Builder::new().prefix("corelane-static-").tempdir().unwrap();
    let dir = scratch.path();
    std::fs::create_dir(dir.join("docs")).unwrap();
    let big: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8).collect();
    std::fs::write(dir.join("docs/big.bin"), &big).unwrap();
    std::fs::write(dir.join("index.html"), "<h1>hi</h1>").unwrap();
    std::os::unix::fs::symlink("/etc", dir.join("escape")).unwrap();
    let (server, stop) = serve_root(dir, Backend::Epoll, |_| {});
    let addr = server.local_addr();

    let mut s = connect(addr);
    s.write_all(b"GET /docs/big.bin HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let head_end = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&all[..head_end]);
    assert!(head.contains(&format!("Content-Length: {}", big.len())), "{head}");
    assert!(head.contains("application/octet-stream"));
    assert!(all[head_end..head_end + big.len()] == big[..], "the file arrived intact");
    let second = String::from_utf8_lossy(&all[head_end + big.len()..]);
    assert!(second.contains("text/html") && second.ends_with("<h1>hi</h1>"), "{second}");

    for (target, status) in [
        ("/../../etc/passwd", "403"),
        ("/docs/%2e%2e/%2e%2e/etc/passwd", "403"),
        ("/escape/passwd", "403"),
        ("/nope", "404"),
    ] {
        let mut s = connect(addr);
        s.write_all(
            format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .unwrap();
        let text = read_to_close(&mut s);
        assert!(text.starts_with(&format!("HTTP/1.1 {status}")), "{target}: {text}");
    }
    let mut s = connect(addr);
    s.write_all(b"HEAD /docs/big.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let text = read_to_close(&mut s);
    assert!(text.ends_with("\r\n\r\n") && text.contains("Content-Length: 3145728"), "{text}");
    stop_and_wait(server, &stop);
}

#[test]
fn stop_closes_idle_connections_and_finishes_requests_in_flight() {
    for backend in BACKENDS {
        let (server, stop) = start(backend, |_| {});
        let addr = server.local_addr();
        let mut idle = connect(addr);
        idle.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        read_responses(&mut idle, 1);
        let mut in_flight = connect(addr);
        in_flight.write_all(b"GET / HTTP/1.1\r\nHo").unwrap();
        std::thread::sleep(Duration::from_millis(200));
        stop.stop();
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(read_to_close(&mut idle), "", "the idle connection is closed without a word");
        in_flight.write_all(b"st: x\r\n\r\n").unwrap();
        let text = read_to_close(&mut in_flight);
        assert!(text.contains("200 OK") && text.contains("Connection: close"), "{text}");
        server.wait().unwrap();
        assert!(
            TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err(),
            "no longer listening"
        );
    }
}

#[test]
fn ten_thousand_idle_connections_are_held_while_others_are_served() {
    for backend in BACKENDS {
        if !common::fds_or_skip(65536) {
            return;
        }
        let (server, stop) = start(backend, |c| c.lanes = 2);
        let addr = server.local_addr();
        let idle: Vec<TcpStream> = (0..10_000).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.totals().open < 10_000 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(server.totals().open, 10_000);
        let served = quick_load(addr, 20_000, false);
        assert_eq!((served.non_2xx, served.errors), (0, 0));
        assert!(server.totals().open >= 10_000, "the idle ones are still open");
        drop(idle);
        stop_and_wait(server, &stop);
    }
}

#[test]
fn bad_configurations_are_clear_errors() {
    let (server, stop) = start(Backend::Epoll, |_| {});
    let taken = server.local_addr();
    let mut config = ServerConfig::new(taken, Content::Body(Vec::new()));
    config.listen = Listen::Shared;
    let err = Server::start(config.clone(), StopSignal::new()).unwrap_err();
    assert!(err.to_string().contains("already in use"), "{err}");
    config.addr = "127.0.0.1:0".parse().unwrap();
    config.placement = Placement::RoundRobin("999".parse().unwrap());
    let err = Server::start(config.clone(), StopSignal::new()).unwrap_err();
    assert!(err.to_string().contains("999"), "{err}");
    config.placement = Placement::Unpinned;
    config.listen = Listen::ReuseportCpu;
    assert!(Server::start(config.clone(), StopSignal::new())
        .unwrap_err()
        .to_string()
        .contains("--pin"));
    config.listen = Listen::Reuseport;
    config.backend = Backend::Uring { sqpoll_cpu: Some(999) };
    let err = Server::start(config.clone(), StopSignal::new()).unwrap_err();
    assert!(err.to_string().contains("999"), "an absent SQPOLL CPU is named: {err}");
    stop_and_wait(server, &stop);
    let free = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let mut load_config = LoadConfig::new(free);
    load_config.duration = Duration::from_millis(300);
    let err = load::run(&load_config, &StopSignal::new(), |_| {}).unwrap_err();
    assert!(err.to_string().contains("is an HTTP server listening"), "{err}");
}

#[test]
fn an_sqpoll_thread_submits_for_the_lane_or_the_server_says_why_not() {
    let (server, stop) = start(Backend::Uring { sqpoll_cpu: Some(0) }, |_| {});
    let summary = quick_load(server.local_addr(), 2000, false);
    assert_eq!((summary.responses, summary.errors), (2000, 0));
    for note in server.notes() {
        assert!(note.contains("SQPOLL"), "a fallback names its reason: {note}");
    }
    stop_and_wait(server, &stop);
}

/// `Server::run` is the whole serving loop the CLI used to write itself: intervals once a
/// second, a stop at the duration, a summary with exact CPU per request.
#[test]
fn run_reports_each_second_and_a_summary() {
    let (server, _stop) = start(Backend::Epoll, |_| {});
    let addr = server.local_addr();
    let load = std::thread::spawn(move || quick_load(addr, 20_000, false));
    let mut intervals = Vec::new();
    let summary = server.run(Some(Duration::from_millis(2500)), |i| intervals.push(*i)).unwrap();
    let loaded = load.join().unwrap();
    assert_eq!(intervals.iter().map(|i| i.index).collect::<Vec<_>>(), [1, 2]);
    assert!(summary.seconds >= 2.4 && summary.seconds < 5.0, "{summary:?}");
    assert_eq!(summary.totals.requests, loaded.responses);
    assert!(summary.cpu_us_per_request > 0.0, "{summary:?}");
}
