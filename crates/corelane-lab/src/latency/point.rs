//! A point of a latency curve: one offered load and what the clients measured there, with
//! each load host's part when they ran on several.

use serde::Serialize;

use crate::stage::load::HostClock;

/// One offered load and what the client measured there. Round trips in µs.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Messages or requests per second offered; `None`: ping-pong (one in flight).
    pub rate: Option<u64>,
    pub achieved: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// From the actual send (corelane's clients under load; sockperf's only figure).
    pub p99_uncorrected_us: Option<f64>,
    pub lost: u64,
    pub sent: u64,
    /// Each load host's part when the clients ran on remote hosts: the ping-pong host first
    /// (whose round trips are the point's), then the hosts that add their share of the
    /// offered load (the point's `achieved`, `lost` and `sent` are the totals).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostPoint>,
}

/// One load host's part of a point.
#[derive(Debug, Clone, Serialize)]
pub struct HostPoint {
    pub host: String,
    /// `ping-pong` for the host whose round trips are the point's, `load` for the others.
    pub role: &'static str,
    /// Messages (requests) per second it was asked to offer; `None`: ping-pong.
    pub offered: Option<u64>,
    /// What it achieved (per second).
    pub achieved: f64,
    /// Its own client's round trips, µs.
    pub p50_us: f64,
    pub p99_us: f64,
    pub lost: u64,
    pub sent: u64,
    #[serde(flatten)]
    pub clock: HostClock,
}
