//! What a whole run moved and the CPU time it used, as the UDP receiver's and sender's
//! summaries report them (each flattened into its summary, so the JSON keys stay top level).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::meter::LaneCounters;
use super::rate::{median, Rate};

/// The run's length, the datagrams and payload bytes it moved, the median of its busy
/// seconds' rates and its mean rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    pub elapsed_secs: f64,
    pub datagrams: u64,
    pub bytes: u64,
    /// Median of the per-second rates over the seconds that carried traffic.
    pub median_pps: f64,
    pub mean: Rate,
}

impl Throughput {
    /// The lanes' counters summed over `elapsed`; `busy_pps` are the rates of the seconds
    /// that carried traffic.
    pub fn of(counters: &[LaneCounters], busy_pps: &[f64], elapsed: Duration) -> Self {
        let datagrams = counters.iter().map(LaneCounters::datagrams).sum();
        let bytes = counters.iter().map(LaneCounters::bytes).sum();
        Self {
            elapsed_secs: elapsed.as_secs_f64(),
            datagrams,
            bytes,
            median_pps: median(busy_pps).unwrap_or(0.0),
            mean: Rate::over(datagrams, bytes, elapsed),
        }
    }
}

/// User and system CPU time, in seconds (`cpu_user_secs` and `cpu_sys_secs` in JSON).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSecs {
    #[serde(rename = "cpu_user_secs")]
    pub user: f64,
    #[serde(rename = "cpu_sys_secs")]
    pub system: f64,
}

impl CpuSecs {
    pub fn of(user: Duration, system: Duration) -> Self {
        Self { user: user.as_secs_f64(), system: system.as_secs_f64() }
    }
}
