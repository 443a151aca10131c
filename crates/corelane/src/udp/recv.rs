//! The receiver: its configuration, the binding of every socket before any thread starts,
//! and the run — a `LaneSet` of receive lanes, each one backend's batches (`backend/`) through
//! the lane's checks (`check.rs`), a meter that reports every second, and a summary.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::backend::{self, BackendRun, BindRequest, Bound, ReceiveBatch, RecvBackend};
use super::check::LaneTally;
use super::dispatch::DispatchConfig;
use super::lanes::{Lanes, ReceivePath};
use super::recv_lane::{LaneResult, LaneWork, Totals};
use super::recv_report::{RecvInterval, RecvSummary};
use super::recv_watch::RecvWatch;
use super::sequence::FlowGroup;
use super::socket::{OffloadState, SocketMode, Steering};
use super::UdpError;
use crate::lane::{self, LaneSet, LanesEnd, Monitor, Placement, StopSignal};
use crate::stats::{CpuSecs, LaneCounters, Throughput, UdpCounters};

/// What to receive and how.
#[derive(Debug, Clone)]
pub struct ReceiverConfig {
    pub addrs: Vec<SocketAddr>,
    pub lanes: Lanes,
    /// The sockets' buffer and GRO, receive coalescing and the backend.
    pub receive: ReceivePath,
    pub sockets: SocketMode,
    /// Reuseport only: how the group picks a socket.
    pub steering: Steering,
    /// Bytes per receive buffer; default 2048, or 64 KiB with GRO (room for 64 segments).
    pub slot: Option<usize>,
    /// Check every datagram's header (loss, duplicates, order, corruption).
    pub check: bool,
    pub duration: Option<Duration>,
    /// Stop once this many datagrams arrived.
    pub until_datagrams: Option<u64>,
    /// Groups of flows (one per sender) whose arrivals the summary reports apart.
    pub flow_groups: Vec<FlowGroup>,
    /// Flow scheduling: one receive lane dispatching datagrams to worker lanes.
    pub dispatch: Option<DispatchConfig>,
    /// For a backend that attaches to an interface: the one to attach to (default: the one
    /// holding the address).
    pub interface: Option<String>,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        Self {
            addrs: Vec::new(),
            lanes: Lanes::default(),
            receive: ReceivePath::default(),
            sockets: SocketMode::Reuseport,
            steering: Steering::Hash,
            slot: None,
            check: true,
            duration: None,
            until_datagrams: None,
            flow_groups: Vec::new(),
            dispatch: None,
            interface: None,
        }
    }
}

/// The receive lanes' threads are named `corelane-rx-INDEX`.
pub const LANE_NAME: &str = "corelane-rx";

/// Bound sockets, ready to run.
#[derive(Debug)]
pub struct Receiver {
    config: ReceiverConfig,
    /// One receiver per lane, each its backend's (they hold the sockets they read).
    lanes: Vec<Box<dyn ReceiveBatch>>,
    bound: Vec<SocketAddr>,
    gro: OffloadState,
    rcvbuf_bytes: Option<usize>,
    /// Bytes per receive buffer.
    slot: usize,
    backend_note: Option<String>,
    /// What the backend keeps while the lanes run (its own counters, what it attached).
    run: Box<dyn BackendRun>,
    /// What each lane counts (made at the bind, so a scrape may read them from the start).
    counters: Arc<Vec<LaneCounters>>,
}

impl Receiver {
    /// Validates the configuration and binds every socket, so that a busy port or a wrong
    /// address is reported before any thread starts.
    pub fn bind(config: ReceiverConfig) -> Result<Self, UdpError> {
        validate(&config)?;
        let mut config = config;
        let settled = backend::settle(
            &mut config.receive.backend,
            config.receive.gro,
            "receiving with recvmmsg",
        )?;
        let unit = config.receive.backend.unit();
        let Bound { lanes, addrs, gro, rcvbuf_bytes, slot, note, run } =
            unit.bind(&BindRequest {
                addrs: &config.addrs,
                threads: config.lanes.threads,
                batch: config.lanes.batch,
                placement: &config.lanes.placement,
                rcvbuf: config.receive.rcvbuf,
                gro: config.receive.gro,
                sockets: config.sockets,
                steering: config.steering,
                slot: config.slot,
                dispatch: config.dispatch.is_some(),
                interface: config.interface.as_deref(),
            })?;
        config.lanes.threads = lanes.len();
        config.check &= unit.reads_headers();
        let notes: Vec<String> = settled.into_iter().chain(note).collect();
        Ok(Self {
            counters: lane::per_lane(lanes.len()),
            config,
            lanes,
            bound: addrs,
            gro,
            rcvbuf_bytes,
            slot,
            backend_note: (!notes.is_empty()).then(|| notes.join("; ")),
            run,
        })
    }

    /// What each lane counts, read by a scrape while the receive runs.
    pub(crate) fn lane_counters(&self) -> Arc<Vec<LaneCounters>> {
        Arc::clone(&self.counters)
    }

    /// `None` when the lanes read no header (no sequence figures); else whether every flow
    /// stays on one lane, so that each lane's missing count is the run's for its flows: one
    /// lane, a socket per lane chosen by the 4-tuple's hash, or a lane per RX queue (RSS
    /// hashes the headers). A shared socket or CPU steering may split a flow over lanes.
    pub(crate) fn flows_stay_on_one_lane(&self) -> Option<bool> {
        let cfg = &self.config;
        let hashed = cfg.sockets == SocketMode::Reuseport && cfg.steering == Steering::Hash;
        let per_queue = cfg.receive.backend.unit().lane_per_queue();
        cfg.check.then_some(cfg.lanes.threads == 1 || hashed || per_queue)
    }

    /// How the backend runs: why the one asked for will not run as asked (io_uring or SQPOLL
    /// refused), what it attached, if so.
    pub fn backend_note(&self) -> Option<&str> {
        self.backend_note.as_deref()
    }

    /// The backend the lanes will run (io_uring and SQPOLL fall back where refused).
    pub fn backend(&self) -> RecvBackend {
        self.config.receive.backend
    }

    /// The addresses actually bound (port 0 resolved).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.bound
    }

    /// Starts one lane per receiver, each with its own checks.
    fn spawn_lanes(
        &mut self,
        counters: &Arc<Vec<LaneCounters>>,
        stop: &StopSignal,
        entered: &Arc<AtomicUsize>,
    ) -> Result<LaneSet<LaneResult>, UdpError> {
        let cfg = &self.config;
        let mut lanes = LaneSet::new(LANE_NAME, stop.clone());
        for (index, receiver) in std::mem::take(&mut self.lanes).into_iter().enumerate() {
            let work = LaneWork {
                receiver,
                tally: LaneTally::new(cfg.check, Arc::clone(counters), index),
                coalesce: cfg.receive.coalesce,
                dispatch: cfg.dispatch,
                worker_cpus: match &cfg.lanes.placement {
                    Placement::RoundRobin(list) => list.cpus().iter().skip(1).copied().collect(),
                    Placement::Unpinned => Vec::new(),
                },
                stop: stop.clone(),
                entered: Arc::clone(entered),
            };
            lanes
                .spawn(cfg.lanes.placement.cpu_of(index), move || work.run())
                .map_err(|e| UdpError::io("cannot start a receiver lane", e))?;
        }
        Ok(lanes)
    }

    /// Receives until `stop`, the configured duration or datagram count, calling
    /// `on_interval` once a second from the calling thread.
    pub fn run(
        self,
        stop: &StopSignal,
        on_interval: impl FnMut(&RecvInterval),
    ) -> Result<RecvSummary, UdpError> {
        self.run_announced(stop, || {}, on_interval)
    }

    /// As [`Receiver::run`], calling `on_ready` once every lane is in its receive loop (its
    /// receiver started, its first batch next), so that a peer told "ready" then finds the
    /// lanes reading: a kernel-bypass ring fills from the moment it is handed its first frame,
    /// and nothing pushes back on it.
    pub fn run_announced(
        mut self,
        stop: &StopSignal,
        on_ready: impl FnOnce(),
        on_interval: impl FnMut(&RecvInterval),
    ) -> Result<RecvSummary, UdpError> {
        let counters = Arc::clone(&self.counters);
        let lane_stop = StopSignal::new();
        let entered = Arc::new(AtomicUsize::new(0));
        let lanes = self.spawn_lanes(&counters, &lane_stop, &entered)?;
        if wait_entered(&lanes, &entered, stop) {
            on_ready();
        }
        let cfg = &self.config;
        let mut watch = RecvWatch::new(&counters, cfg.until_datagrams, &mut *self.run, on_interval);
        let mut monitor = Monitor::new(stop, LanesEnd::AnyFinished).until(cfg.duration);
        let (_, stopped) = monitor.watch(&[&lanes], &mut watch);
        let snmp_end = UdpCounters::read().ok();
        let (joined, _) =
            monitor.join(lanes).map_err(|e| UdpError::io("a receiver lane failed", e))?;
        let results: Vec<(usize, Option<usize>, LaneResult)> =
            joined.into_iter().map(|j| (j.index, j.cpu, j.value)).collect();
        let totals = Totals::of(results, &counters, &cfg.flow_groups);
        let (snmp_start, busy_pps) = (watch.snmp_start, watch.busy_pps);
        let throughput = Throughput::of(&counters, &busy_pps, stopped.elapsed);
        // After the lanes joined: what the backend attached is let go with its report.
        let backend_report = self.run.finish();
        Ok(RecvSummary {
            addrs: self.bound.clone(),
            sockets: cfg.sockets,
            steering: cfg.steering,
            threads: cfg.lanes.threads,
            batch: cfg.lanes.batch,
            throughput,
            kernel_drops: super::recv_watch::drops_between(snmp_start, snmp_end),
            anomalies: totals.anomalies,
            sequence: totals.sequence,
            flow_groups: totals.flow_groups,
            cpu_secs: CpuSecs::of(stopped.user, stopped.system),
            cpu_ns_per_datagram: stopped.cpu_ns_per(throughput.datagrams),
            gro: self.gro.clone(),
            rcvbuf_bytes: self.rcvbuf_bytes,
            slot_bytes: self.slot,
            backend: cfg.receive.backend.to_string(),
            backend_note: self.backend_note.clone(),
            dispatch: totals.dispatch,
            backend_report,
            lanes: totals.lanes,
        })
    }
}

/// Waits until every lane of `lanes` is in its receive loop; false (no lane will report
/// ready) when one ended first (its error is the run's) or `stop` came.
fn wait_entered(lanes: &LaneSet<LaneResult>, entered: &AtomicUsize, stop: &StopSignal) -> bool {
    while entered.load(Ordering::Acquire) < lanes.len() {
        if lanes.any_finished() || stop.is_stopped() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// Flow groups a receive can count ([`FlowGroup::check_all`]) with a backend that reads every
/// datagram's header (and not `--no-check`).
fn check_flow_groups(config: &ReceiverConfig) -> Result<(), UdpError> {
    if config.flow_groups.is_empty() {
        return Ok(());
    }
    if !config.check || !config.receive.backend.reads_headers() {
        return Err(UdpError::FlowGroupsUnchecked);
    }
    FlowGroup::check_all(&config.flow_groups)
}

/// The options no receive can run with, refused before anything is bound.
fn validate(config: &ReceiverConfig) -> Result<(), UdpError> {
    if config.addrs.is_empty() {
        return Err(UdpError::NoAddress);
    }
    config.lanes.check()?;
    if config.dispatch.is_some()
        && (config.lanes.threads != 1
            || config.receive.backend != RecvBackend::Mmsg
            || !config.check)
    {
        return Err(UdpError::Dispatch);
    }
    if config.steering == Steering::Cpu
        && (!config.lanes.placement.is_pinned() || config.sockets != SocketMode::Reuseport)
    {
        return Err(UdpError::Steering);
    }
    check_flow_groups(config)?;
    Ok(())
}
