//! The counters each server lane writes and anyone reads, and their totals. A leaf: the
//! lanes, the exchange and the server share it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Counters one lane writes and anyone reads; alone on their cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct ServerCounters {
    pub(crate) requests: AtomicU64,
    pub(crate) accepted: AtomicU64,
    pub(crate) open: AtomicU64,
    pub(crate) client_errors: AtomicU64,
    pub(crate) server_errors: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) timeouts: AtomicU64,
    pub(crate) bytes_out: AtomicU64,
    /// Of `bytes_out`, file bytes sent by sendfile.
    pub(crate) sendfile_bytes: AtomicU64,
    /// What the open connections hold, state and lent buffers, at the lane's last sweep.
    pub(crate) held_bytes: AtomicU64,
    /// Requests by how long from their parsing to their answer's last byte handed to the
    /// kernel, in the buckets of [`DURATION_BOUNDS_NS`] (not cumulative), and those times' sum.
    durations: [AtomicU64; DURATION_BUCKETS],
    durations_ns: AtomicU64,
}

/// The request-duration buckets' upper bounds in ns: 10 µs to 10 s, then the rest.
pub const DURATION_BOUNDS_NS: [u64; DURATION_BUCKETS - 1] = [
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];
/// Buckets, the last (beyond 10 s) included.
pub const DURATION_BUCKETS: usize = 20;

impl ServerCounters {
    /// Counts `requests` answered `ns` after they were parsed: a bucket and the sum, each a
    /// relaxed load and store (only the owning lane writes).
    pub(crate) fn observe(&self, ns: u64, requests: u64) {
        let bucket = DURATION_BOUNDS_NS.partition_point(|&bound| bound < ns);
        bump(&self.durations[bucket], requests);
        bump(&self.durations_ns, ns.saturating_mul(requests));
    }

    /// Requests by duration bucket (not cumulative), and the sum of their durations in ns.
    pub fn durations(&self) -> ([u64; DURATION_BUCKETS], u64) {
        let buckets = std::array::from_fn(|i| self.durations[i].load(Ordering::Relaxed));
        (buckets, self.durations_ns.load(Ordering::Relaxed))
    }
}

/// Only the owning lane writes, so a load and a store are enough (no locked read-modify-write).
pub(crate) fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Ordering::Relaxed).wrapping_add(by), Ordering::Relaxed);
}

/// Totals over every lane.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServerTotals {
    /// Requests answered (any status).
    pub requests: u64,
    pub connections: u64,
    pub open: u64,
    /// 4xx responses (malformed, oversized, slow or not found).
    pub client_errors: u64,
    /// 5xx responses other than refusals.
    pub server_errors: u64,
    /// Connections refused with 503 at the connection limit.
    pub refused: u64,
    /// Connections closed by the header timeout (408).
    pub timeouts: u64,
    pub bytes_out: u64,
    /// Of `bytes_out`, file bytes sent by sendfile, from the page cache to the socket with no
    /// copy through user space (every body on epoll; bodies over 64 KiB on io_uring).
    #[serde(default)]
    pub sendfile_bytes: u64,
    /// Bytes the open connections hold (their state and the buffers lent to them), as the
    /// lanes last counted them (every sweep, 50 ms).
    pub held_bytes: u64,
}

impl ServerTotals {
    /// Bytes held per open connection, when any is open.
    pub fn bytes_per_connection(&self) -> Option<f64> {
        (self.open > 0).then(|| self.held_bytes as f64 / self.open as f64)
    }

    pub fn of(counters: &[Arc<ServerCounters>]) -> Self {
        let mut t = Self::default();
        for c in counters {
            let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
            t.requests += get(&c.requests);
            t.connections += get(&c.accepted);
            t.open += get(&c.open);
            t.client_errors += get(&c.client_errors);
            t.server_errors += get(&c.server_errors);
            t.refused += get(&c.refused);
            t.timeouts += get(&c.timeouts);
            t.bytes_out += get(&c.bytes_out);
            t.sendfile_bytes += get(&c.sendfile_bytes);
            t.held_bytes += get(&c.held_bytes);
        }
        t
    }
}
