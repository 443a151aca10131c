//! No fd leaks across a million requests. Alone in its test binary, so no other test opens or
//! closes fds while /proc/self/fd is counted.

use std::time::Duration;

use corelane::lane::StopSignal;
use corelane::tcp::{load, Content, LoadConfig, Server, ServerConfig};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn a_million_requests_leak_no_fd() {
    let before = open_fds();
    let mut server_config =
        ServerConfig::new("127.0.0.1:0".parse().unwrap(), Content::Body(b"ok".to_vec()));
    server_config.lanes = 2;
    let stop = StopSignal::new();
    let server = Server::start(server_config, stop.clone()).unwrap();
    let addr = server.local_addr();
    let run = |requests: u64, close: bool| {
        let mut config = LoadConfig::new(addr);
        config.connections = 32;
        config.duration = Duration::from_secs(120);
        config.requests = Some(requests);
        config.close = close;
        load::run(&config, &StopSignal::new(), |_| {}).unwrap()
    };
    let keep = run(980_000, false);
    let close = run(20_000, true);
    assert_eq!(keep.responses + close.responses, 1_000_000);
    assert_eq!((keep.errors, close.errors, keep.non_2xx, close.non_2xx), (0, 0, 0, 0));
    stop.stop();
    let totals = server.wait().unwrap();
    assert_eq!(totals.requests, 1_000_000);
    assert_eq!(totals.open, 0);
    assert_eq!(open_fds(), before, "every socket and epoll fd was closed");
}
