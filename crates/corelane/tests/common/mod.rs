//! What several of these integration tests share: who runs them, this process's memory,
//! private directories on tmpfs, copies without progress or stop, an HTTP server on loopback
//! with its clients, a UDP receiver on its own thread, headless Chromium, and fixture trees'
//! files.
//! Each test binary includes this module and uses its own part of it.
#![allow(dead_code)]

pub mod chromium;
pub mod copy;
pub mod http;
pub mod udp;

/// Writes `text` at `path` in a fixture tree, making the directories on the way.
pub fn write(path: std::path::PathBuf, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

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

/// Raises RLIMIT_NOFILE to at least `need` descriptors (root raises the hard limit too,
/// others up to it); if it stays below, says that the test skips and returns false.
pub fn fds_or_skip(need: u64) -> bool {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let now = getrlimit(Resource::Nofile);
    if now.current.is_some_and(|c| c >= need) {
        return true;
    }
    let hard = now.maximum.unwrap_or(u64::MAX);
    let target = if is_root() { hard.max(need) } else { hard };
    let _ = setrlimit(Resource::Nofile, Rlimit { current: Some(target), maximum: Some(target) });
    let got = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    if got < need {
        eprintln!("skipped: RLIMIT_NOFILE is {got}, below the {need} this test needs; run as root");
    }
    got >= need
}

/// This process's resident memory (VmRSS of /proc/self/status), in KiB.
pub fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}
