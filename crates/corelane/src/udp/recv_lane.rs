//! One receive lane: what it owns (its backend's receiver and its checks), its run on its
//! own thread, and what the lanes found, summed for the summary.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::backend::{self, ReceiveBatch};
use super::check::{Anomalies, LaneTally};
use super::dispatch::{DispatchConfig, DispatchReport};
use super::recv_report::LaneSummary;
use super::sequence::{FlowGroup, FlowGroupReport, SequenceReport, SequenceTracker};
use crate::lane::StopSignal;
use crate::stats::{self, CpuSecs, CpuUsage, LaneCounters};

/// What a lane owns.
pub(super) struct LaneWork {
    pub receiver: Box<dyn ReceiveBatch>,
    pub tally: LaneTally,
    pub coalesce: Option<Duration>,
    pub dispatch: Option<DispatchConfig>,
    pub worker_cpus: Vec<usize>,
    pub stop: StopSignal,
    /// Lanes in their receive loop: each adds one right before its first batch.
    pub entered: Arc<AtomicUsize>,
}

/// What a lane found.
pub(super) struct LaneResult {
    tally: LaneTally,
    cpu: CpuUsage,
    dispatch: Option<DispatchReport>,
}

impl LaneWork {
    pub fn run(mut self) -> std::io::Result<LaneResult> {
        let cpu_start = stats::thread_cpu();
        if let Some(config) = self.dispatch {
            self.tally.start_dispatch(config, &self.worker_cpus)?;
        }
        let entered = &self.entered;
        backend::receive_until(self.receiver, &mut self.tally, &self.stop, self.coalesce, || {
            entered.fetch_add(1, Ordering::Release);
        })?;
        let dispatch = self.tally.finish_dispatch()?;
        let cpu_end = stats::thread_cpu();
        Ok(LaneResult {
            tally: self.tally,
            cpu: CpuUsage {
                user: cpu_end.user.saturating_sub(cpu_start.user),
                system: cpu_end.system.saturating_sub(cpu_start.system),
            },
            dispatch,
        })
    }
}

/// The lanes' findings, summed.
pub(super) struct Totals {
    pub sequence: SequenceReport,
    pub flow_groups: Vec<FlowGroupReport>,
    pub anomalies: Anomalies,
    pub dispatch: Option<DispatchReport>,
    pub lanes: Vec<LaneSummary>,
}

impl Totals {
    pub fn of(
        results: Vec<(usize, Option<usize>, LaneResult)>,
        counters: &[LaneCounters],
        groups: &[FlowGroup],
    ) -> Self {
        let trackers: Vec<&SequenceTracker> =
            results.iter().map(|(_, _, r)| &r.tally.tracker).collect();
        let mut totals = Self {
            sequence: SequenceTracker::report(&trackers),
            flow_groups: groups
                .iter()
                .map(|&group| FlowGroupReport {
                    group,
                    sequence: SequenceTracker::report_group(&trackers, group),
                })
                .collect(),
            anomalies: Anomalies::default(),
            dispatch: None,
            lanes: Vec::new(),
        };
        for (index, cpu, r) in results {
            totals.lanes.push(LaneSummary {
                lane: index,
                cpu,
                datagrams: counters[index].datagrams(),
                batches: counters[index].batches().iter().sum(),
                syscalls: r.tally.syscalls,
                cpu_secs: CpuSecs::of(r.cpu.user, r.cpu.system),
            });
            totals.anomalies.add(&r.tally.anomalies);
            totals.dispatch = totals.dispatch.or(r.dispatch);
        }
        totals
    }
}
