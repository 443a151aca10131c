//! What several of these integration tests share: who runs them, this process's memory,
//! private directories on tmpfs, copies without progress or stop, an HTTP server on loopback
//! with its clients, and a UDP receiver on its own thread.
//! Each test binary includes this module and uses its own part of it.
#![allow(dead_code)]

pub mod copy;
pub mod http;
pub mod udp;

/// Whether the tests run as root.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Whether the tests run as root; if not, says that the test skips and what it needs root
/// for (`needs`: "to mount a tmpfs", say).
pub fn root_or_skip(needs: &str) -> bool {
    let root = is_root();
    if !root {
        eprintln!("skipped: needs root {needs}");
    }
    root
}

/// This process's resident memory (VmRSS of /proc/self/status), in KiB.
pub fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}
