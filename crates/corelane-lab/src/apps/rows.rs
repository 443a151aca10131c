//! The rows of `lab apps`: one per program, placement and lane, and one per lane of the
//! side-effect check.

use std::collections::BTreeMap;

use serde::Serialize;

use super::placement::{CoreKind, Lane};
use super::programs::App;
use crate::summary::{P50Us, Rps, Secs, Trials};

/// One program under one placement and lane, over all trials.
#[derive(Debug, Clone, Serialize)]
pub struct AppRow {
    pub app: App,
    /// `NS`, `NC` or `NZ`.
    pub placement: CoreKind,
    /// `none`, `threads` or `uring`, as asked.
    pub lane: Lane,
    /// The lane `corelane run` reported running (it may fall back, with `lane_notes`).
    pub lane_ran: Option<String>,
    pub lane_notes: Vec<String>,
    pub app_cpus: String,
    pub syscall_cpus: Option<String>,
    pub load_cpu: usize,
    pub load_generator: String,
    /// Per trial and their median.
    #[serde(flatten)]
    pub rps: Trials<Rps>,
    /// Median over trials of the load generator's p99, in µs (memcaslap reports none).
    pub p99_us: Option<f64>,
    /// Exact server CPU per request (schedstat, every thread of its process tree), µs.
    pub cpu_us_per_request: f64,
    /// Of which the program's own threads.
    pub program_us_per_request: f64,
    /// Of which the syscall lane's threads (`cl-sys-N`, io_uring's).
    pub lane_us_per_request: f64,
    /// Against the same program and placement without a lane, in %.
    pub rps_change_pct: Option<f64>,
    pub cpu_change_pct: Option<f64>,
    /// Syscall threads found in the program's processes (most in one trial).
    pub lane_threads: usize,
    /// What was checked, every trial (each distinct text once).
    pub checked: Vec<String>,
    /// Calls the lane carried, by kind, summed over trials (`corelane run`'s summary).
    pub delegated: Option<BTreeMap<String, u64>>,
    /// Calls the threads lane left to the program's own threads because several processes'
    /// syscall threads contended for the syscall CPU, summed over trials.
    pub in_place_calls: u64,
    /// The MapReduce row's own figures (its "requests" are records, its rate records per
    /// second of job time).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<JobRow>,
}

/// What a MapReduce row measured beyond the common figures, over all trials.
#[derive(Debug, Clone, Serialize)]
pub struct JobRow {
    pub records: u64,
    /// The measured job's time per trial (as the driver timed it), and their median.
    #[serde(flatten)]
    pub job_secs: Trials<Secs>,
    /// A lane row's median job time against its placement's without a lane, in percent
    /// (positive: slower), the measure the table and the findings compare by.
    pub median_secs_change_pct: Option<f64>,
    /// Medians over trials of the bytes the job's stages wrote to and read from the shuffle.
    pub shuffle_write_bytes: f64,
    pub shuffle_read_bytes: f64,
    /// JVMs whose threads were read and checked (master, workers, executors; most in one
    /// trial).
    pub jvms: usize,
}

/// The side-effect check under one lane.
#[derive(Debug, Clone, Serialize)]
pub struct PingRow {
    pub lane: Lane,
    pub lane_ran: Option<String>,
    /// The round trip's p50 per trial, and their median.
    #[serde(flatten)]
    pub p50_us: Trials<P50Us>,
    pub p99_us: f64,
    /// The echo's exact CPU per round trip (program and lane threads), µs.
    pub cpu_us_per_round_trip: f64,
    pub lane_us_per_round_trip: f64,
    /// Round-trip time (p50) and CPU per round trip against no lane, in %.
    pub p50_change_pct: Option<f64>,
    pub cpu_change_pct: Option<f64>,
    pub round_trips: u64,
    pub delegated: Option<BTreeMap<String, u64>>,
}
