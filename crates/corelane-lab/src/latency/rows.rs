//! What `lab latency` reports: a row per pair and offered load, the knees, and the whole
//! report (read by its table and its figures).

use serde::Serialize;

use super::point::Point;
use crate::summary::{Header, Outcome};

/// One pair at one offered load; round trips in µs, medians over trials.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyRow {
    /// `udp` or `http`.
    pub protocol: String,
    pub server: String,
    pub client: String,
    /// `ping-pong`, or the offered messages (requests) per second.
    pub load: String,
    /// Each figure's median over the trials (lost and sent: their sums).
    #[serde(flatten)]
    pub point: Point,
}

/// Where a pair's p99 passes twice its value at the lowest offered load.
#[derive(Debug, Clone, Serialize)]
pub struct Knee {
    pub pair: String,
    pub idle_rate: u64,
    pub idle_p99_us: f64,
    /// The first offered load whose p99 is above twice the idle p99 (`None`: not reached).
    pub knee_rate: Option<u64>,
    /// The highest load below it (the knee lies between the two).
    pub last_below: Option<u64>,
    /// The highest load measured.
    pub highest_rate: u64,
}

/// Everything `corelane lab latency` measured.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyReport {
    /// Where it ran and how it measured.
    #[serde(flatten)]
    pub header: Header,
    pub server_cpu: usize,
    pub client_cpu: usize,
    /// Always `round_trip`: sockperf ran with --full-rtt.
    pub measure: String,
    pub rows: Vec<LatencyRow>,
    pub knees: Vec<Knee>,
    /// What could not run here, and what the figures say.
    #[serde(flatten)]
    pub outcome: Outcome,
}
