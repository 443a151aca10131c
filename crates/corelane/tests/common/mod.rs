//! What several of these integration tests share: who runs them, private directories on
//! tmpfs, copies without progress or stop, and an HTTP server on loopback with its clients.
//! Each test binary includes this module and uses its own part of it.
#![allow(dead_code)]

pub mod copy;
pub mod http;

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
