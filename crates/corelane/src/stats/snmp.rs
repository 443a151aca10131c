//! The kernel's UDP counters from /proc/net/snmp, per network namespace: RcvbufErrors counts
//! datagrams dropped because a socket's receive buffer was full.

use std::fs;
use std::io;

/// UDP counters of the caller's network namespace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct UdpCounters {
    pub in_datagrams: u64,
    pub no_ports: u64,
    pub in_errors: u64,
    pub rcvbuf_errors: u64,
}

impl UdpCounters {
    pub fn read() -> io::Result<Self> {
        Self::read_path("/proc/net/snmp")
    }

    /// The counters of the network namespace process `pid` lives in (/proc/PID/net/snmp), so
    /// a process outside a namespace can watch the receivers inside it.
    pub fn read_for_process(pid: u32) -> io::Result<Self> {
        Self::read_path(&format!("/proc/{pid}/net/snmp"))
    }

    fn read_path(path: &str) -> io::Result<Self> {
        Self::parse(&fs::read_to_string(path)?)
            .ok_or_else(|| io::Error::other(format!("{path} has no Udp: lines")))
    }

    /// Parses the pair of `Udp:` lines (names, then values).
    pub fn parse(text: &str) -> Option<Self> {
        let mut lines = text.lines().filter(|l| l.starts_with("Udp:"));
        let names: Vec<&str> = lines.next()?.split_ascii_whitespace().collect();
        let values: Vec<&str> = lines.next()?.split_ascii_whitespace().collect();
        let get = |name: &str| -> u64 {
            names
                .iter()
                .position(|n| *n == name)
                .and_then(|i| values.get(i)?.parse().ok())
                .unwrap_or(0)
        };
        Some(Self {
            in_datagrams: get("InDatagrams"),
            no_ports: get("NoPorts"),
            in_errors: get("InErrors"),
            rcvbuf_errors: get("RcvbufErrors"),
        })
    }

    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            in_datagrams: self.in_datagrams.saturating_sub(earlier.in_datagrams),
            no_ports: self.no_ports.saturating_sub(earlier.no_ports),
            in_errors: self.in_errors.saturating_sub(earlier.in_errors),
            rcvbuf_errors: self.rcvbuf_errors.saturating_sub(earlier.rcvbuf_errors),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_named_columns() {
        let text = "Ip: a b\nIp: 1 2\nUdp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors\nUdp: 17 1 3 18 2\n";
        let c = UdpCounters::parse(text).unwrap();
        assert_eq!((c.in_datagrams, c.no_ports, c.in_errors, c.rcvbuf_errors), (17, 1, 3, 2));
    }

    #[test]
    fn reads_this_namespace_and_a_process_s() {
        assert!(UdpCounters::read().is_ok());
        assert!(UdpCounters::read_for_process(std::process::id()).is_ok());
        assert!(UdpCounters::read_for_process(u32::MAX).is_err());
    }
}
