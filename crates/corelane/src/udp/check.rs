//! What a receive lane does with each datagram, whatever brought it: count it, check its header
//! into the lane's [`SequenceTracker`] (loss, duplicates, order, corruption) and, with
//! `--dispatch`, offer it to the `sched` workers. One batch's counts go to the lane's counters
//! at its end, so the meter sees them once a second.

use std::io;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::dispatch::{DispatchConfig, DispatchLane, DispatchReport};
use super::payload::{self, PayloadError};
use super::sequence::{SequenceTracker, MAX_TRACKED_FLOWS};
use crate::stats::LaneCounters;

/// Datagrams the checks could not count as a whole, well-formed corelane datagram: cut short
/// by the receive buffer, with a damaged header, or not corelane's at all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anomalies {
    pub truncated: u64,
    pub corrupt: u64,
    pub foreign: u64,
}

impl Anomalies {
    /// Adds another lane's counts.
    pub fn add(&mut self, o: &Self) {
        self.truncated += o.truncated;
        self.corrupt += o.corrupt;
        self.foreign += o.foreign;
    }
}

/// One receive lane's checks and counts.
#[derive(Debug)]
pub(super) struct LaneTally {
    /// Check every datagram's header (`--no-check` turns it off).
    check: bool,
    pub tracker: SequenceTracker,
    pub anomalies: Anomalies,
    /// Calls into the kernel (receives and waits).
    pub syscalls: u64,
    dispatch: Option<DispatchLane>,
    counters: Arc<Vec<LaneCounters>>,
    index: usize,
    /// The batch so far, added to the lane's counters at its end.
    datagrams: u64,
    bytes: u64,
}

impl LaneTally {
    pub fn new(check: bool, counters: Arc<Vec<LaneCounters>>, index: usize) -> Self {
        Self {
            check,
            tracker: SequenceTracker::new(),
            anomalies: Anomalies::default(),
            syscalls: 0,
            dispatch: None,
            counters,
            index,
            datagrams: 0,
            bytes: 0,
        }
    }

    /// Starts the dispatcher and its workers (in the lane's thread, so they start from its CPU).
    pub fn start_dispatch(
        &mut self,
        config: DispatchConfig,
        worker_cpus: &[usize],
    ) -> io::Result<()> {
        self.dispatch = Some(DispatchLane::start(config, worker_cpus)?);
        Ok(())
    }

    /// One datagram: counted, checked and, with dispatch, offered to a worker.
    #[inline]
    pub fn datagram(&mut self, datagram: &[u8]) {
        self.datagrams += 1;
        self.bytes += datagram.len() as u64;
        // Dispatch needs the check (bind refuses it without), and reuses its header.
        let header = self.check_header(datagram);
        if let (Some(lane), Some(h)) = (&mut self.dispatch, header) {
            lane.offer(h.flow, h.seq);
        }
    }

    /// An empty datagram (io_uring reports it as a receive of 0 bytes): counted, and foreign.
    pub fn empty(&mut self) {
        self.datagrams += 1;
        self.anomalies.foreign += u64::from(self.check);
    }

    /// Datagrams seen only as a count (the XDP_DROP ceiling's), neither bytes nor headers.
    pub fn count_only(&mut self, datagrams: u64) {
        self.datagrams += datagrams;
    }

    /// The end of a batch: the dispatcher's egress is served, the counts published.
    #[inline]
    pub fn end_batch(&mut self) {
        if let Some(lane) = &mut self.dispatch {
            lane.egress();
        }
        let lane = &self.counters[self.index];
        lane.add(self.datagrams, self.bytes);
        if self.datagrams > 0 {
            lane.add_batch(self.datagrams);
            if self.check {
                lane.set_sequence(self.tracker.counts());
            }
        }
        (self.datagrams, self.bytes) = (0, 0);
    }

    /// After the last batch: what dispatching did.
    pub fn finish_dispatch(&mut self) -> io::Result<Option<DispatchReport>> {
        self.dispatch.take().map(DispatchLane::finish).transpose()
    }

    /// Checks one datagram's header into the tracker; returns the header when it is valid.
    #[inline]
    fn check_header(&mut self, datagram: &[u8]) -> Option<payload::Header> {
        if !self.check {
            return None;
        }
        match payload::read(datagram) {
            // Flow ids come from the network: beyond the tracked range they would grow the
            // dispatch and reorder maps at a peer's will, so they count as foreign.
            Ok(h) if h.flow as usize >= MAX_TRACKED_FLOWS => {
                self.anomalies.foreign += 1;
                None
            }
            Ok(h) => {
                self.tracker.record(h.flow, h.seq);
                Some(h)
            }
            Err(PayloadError::Corrupt) => {
                self.anomalies.corrupt += 1;
                None
            }
            Err(PayloadError::Foreign | PayloadError::Short) => {
                self.anomalies.foreign += 1;
                None
            }
        }
    }
}
