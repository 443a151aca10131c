//! The stages several experiments share, so that no experiment reaches into another's
//! internals: the HTTP servers and load generators (`servers`: `lab tcp`, `affinity`,
//! `latency`), one UDP trial with its receiver, paced sender and steady seconds (`udp`:
//! `lab udp`, `affinity`), the NAPI threads of the AF_XDP rows (`napi`), wrk on the load
//! hosts (`wrk`), the CPU a trial
//! charges beyond its receiver (`charged`), and the ports and
//! readiness every started side needs.

mod charged;
pub use charged::ChargedNs;
pub mod load;
mod napi;
pub mod servers;
pub mod udp;
pub mod wrk;

use std::net::{TcpListener, UdpSocket};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::output::{self, Line};
use crate::process::ChildProcess;
use crate::testbed::{Network, Testbed};
use crate::LabError;

/// The HTTP servers' port inside the namespaces (private to them, so a fixed one is safe).
pub const TCP_NAMESPACE_PORT: u16 = 8080;
/// The UDP receivers' port inside the namespaces and on remote hosts.
pub const UDP_NAMESPACE_PORT: u16 = 4321;

/// This machine's threads whose name (comm) starts with `prefix`, by PID: kernel threads such
/// as `ksoftirqd/N` or `napi/DEV-N`.
fn local_threads_named<C: FromIterator<u32>>(prefix: &str) -> C {
    let Ok(dir) = std::fs::read_dir("/proc") else { return std::iter::empty().collect() };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim_end().starts_with(prefix))
        })
        .collect()
}

/// A free TCP port on this machine's loopback.
pub fn free_tcp_port() -> Result<u16, LabError> {
    let found = TcpListener::bind("127.0.0.1:0").and_then(|probe| probe.local_addr());
    found.map(|a| a.port()).map_err(|e| LabError::io("cannot find a free TCP port", e))
}

/// A free UDP port on this machine's loopback.
pub fn free_udp_port() -> Result<u16, LabError> {
    let found = UdpSocket::bind("127.0.0.1:0").and_then(|probe| probe.local_addr());
    found.map(|a| a.port()).map_err(|e| LabError::io("cannot find a free UDP port", e))
}

/// The HTTP servers' port on `testbed`: fixed inside namespaces and on remote hosts, a free
/// one on a shared loopback.
pub fn tcp_port(testbed: &Testbed) -> Result<u16, LabError> {
    match testbed.network {
        Network::Loopback { .. } => free_tcp_port(),
        _ => Ok(TCP_NAMESPACE_PORT),
    }
}

/// The UDP receivers' port on `testbed`, chosen as [`tcp_port`] chooses.
pub fn udp_port(testbed: &Testbed) -> Result<u16, LabError> {
    match testbed.network {
        Network::Loopback { .. } => free_udp_port(),
        _ => Ok(UDP_NAMESPACE_PORT),
    }
}

/// Waits for the child's `{"type":"ready"}` line (or the C loop's bare `ready`).
pub fn wait_ready(child: &mut ChildProcess, what: &str) -> Result<(), LabError> {
    let waited = Duration::from_secs(10);
    let end = Instant::now() + waited;
    while Instant::now() < end {
        match child.next_line(Duration::from_millis(100)) {
            Some(line) if line == "ready" => return Ok(()),
            Some(line) => {
                if let Line::Ready {} = output::parse::<Value, Value>(what, &line)? {
                    return Ok(());
                }
            }
            None => {
                if let Some(status) = child.wait_timeout(Duration::ZERO) {
                    return Err(child.failed(status));
                }
            }
        }
    }
    Err(child.timed_out("did not report ready", waited))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every CPU has a `ksoftirqd/N` thread, and only threads of that name are listed; a name
    /// no thread has lists none.
    #[test]
    fn threads_are_found_by_their_name_only() {
        let found: Vec<u32> = local_threads_named("ksoftirqd/");
        assert!(!found.is_empty(), "no ksoftirqd thread found");
        for pid in &found {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            assert!(comm.is_empty() || comm.starts_with("ksoftirqd/"), "{pid}: {comm}");
        }
        let none: Vec<u32> = local_threads_named("corelane-no-such-thread/");
        assert!(none.is_empty());
    }
}
