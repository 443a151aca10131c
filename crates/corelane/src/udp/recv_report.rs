//! What a receive run reports: one second ([`RecvInterval`]), each lane's totals and the run's
//! ([`RecvSummary`]), as the CLI prints them and the lab reads them back.

use std::net::SocketAddr;

use serde::Serialize;

use super::backend::{BackendReport, BackendSecond};
use super::check::Anomalies;
use super::dispatch::DispatchReport;
use super::sequence::{FlowGroupReport, SequenceReport};
use super::socket::{OffloadState, SocketMode, Steering};
use crate::stats::{CpuSecs, Interval, Throughput};

/// One second of receiving.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct RecvInterval {
    #[serde(flatten)]
    pub interval: Interval,
    /// Datagrams the kernel dropped for a full receive buffer this interval (RcvbufErrors of
    /// the whole network namespace: other sockets' drops count too); `null` when the kernel's
    /// counters (/proc/net/snmp) could not be read.
    pub kernel_drops: Option<u64>,
    /// The receiver process's user+system CPU time per datagram read this interval.
    pub cpu_ns_per_datagram: f64,
    /// The backend's own counters this interval, if it keeps any.
    #[serde(flatten)]
    pub backend: BackendSecond,
}

/// One lane's totals.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct LaneSummary {
    pub lane: usize,
    pub cpu: Option<usize>,
    pub datagrams: u64,
    /// Receive calls that brought datagrams (a batch-size histogram's count).
    #[serde(default)]
    pub batches: u64,
    pub syscalls: u64,
    #[serde(flatten)]
    pub cpu_secs: CpuSecs,
}

/// Everything a receive run measured.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct RecvSummary {
    pub addrs: Vec<SocketAddr>,
    pub sockets: SocketMode,
    pub steering: Steering,
    pub threads: usize,
    pub batch: usize,
    #[serde(flatten)]
    pub throughput: Throughput,
    /// Receive-buffer drops over the run, as each second's; `null` when unreadable.
    pub kernel_drops: Option<u64>,
    /// Datagrams truncated, corrupt or foreign (`truncated`, `corrupt`, `foreign` in JSON).
    #[serde(flatten)]
    pub anomalies: Anomalies,
    pub sequence: SequenceReport,
    /// What arrived of each group of flows asked for (`--flow-groups`; absent without).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flow_groups: Vec<FlowGroupReport>,
    #[serde(flatten)]
    pub cpu_secs: CpuSecs,
    pub cpu_ns_per_datagram: f64,
    pub gro: OffloadState,
    pub rcvbuf_bytes: Option<usize>,
    /// Bytes per receive buffer; longer datagrams were truncated.
    pub slot_bytes: usize,
    /// The backend that ran, by name (`RecvBackend::name`).
    pub backend: String,
    /// Why the backend asked for was not the one that ran, if so.
    pub backend_note: Option<String>,
    /// What dispatching to worker lanes did (with `dispatch`).
    pub dispatch: Option<DispatchReport>,
    /// The backend's report of its own counters, if it keeps any.
    #[serde(flatten)]
    pub backend_report: BackendReport,
    pub lanes: Vec<LaneSummary>,
}
