//! No fd leaks across a million requests (epoll) and 200,000 (io_uring). Alone in its test binary, so no other test opens or
//! closes fds while /proc/self/fd is counted.

mod common;

use std::time::Duration;

use corelane::lane::StopSignal;
use corelane::tcp::{load, Backend, Content, LoadConfig};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn a_million_requests_leak_no_fd() {
    let before = open_fds();
    serve_and_count(Backend::Epoll, 980_000, 20_000);
    assert_eq!(open_fds(), before, "every socket and epoll fd was closed");
    serve_and_count(Backend::Uring { sqpoll_cpu: None }, 180_000, 20_000);
    assert_eq!(open_fds(), before, "every socket and ring fd was closed");
}

/// Serves `keep` keep-alive requests and `close` one-per-connection requests, then stops.
fn serve_and_count(backend: Backend, keep: u64, close: u64) {
    let (server, stop) =
        common::http::start(backend, Content::Body(b"ok".to_vec()), |c| c.lanes = 2);
    let addr = server.local_addr();
    let run = |requests: u64, close: bool| {
        let mut config = LoadConfig::new(addr);
        config.connections = 32;
        config.duration = Duration::from_secs(120);
        config.requests = Some(requests);
        config.close = close;
        load::run(&config, &StopSignal::new(), |_| {}).unwrap()
    };
    let keep_summary = run(keep, false);
    let close_summary = run(close, true);
    assert_eq!(keep_summary.responses + close_summary.responses, keep + close);
    let errors = (keep_summary.errors, close_summary.errors, keep_summary.non_2xx);
    assert_eq!(errors, (0, 0, 0), "{backend}");
    let totals = common::http::stop_and_wait(server, &stop);
    assert_eq!(totals.requests, keep + close);
    assert_eq!(totals.open, 0);
}
