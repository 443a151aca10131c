//! What several of these integration tests share: who runs them, private directories on
//! tmpfs, copies without progress or stop, and an HTTP server on loopback with its clients.
//! Each test binary includes this module and uses its own part of it.
#![allow(dead_code)]

pub mod copy;
pub mod http;

/// Whether the tests run as root (a test that needs it says so and skips otherwise).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}
