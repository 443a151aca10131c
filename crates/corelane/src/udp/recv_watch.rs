//! `udp recv`'s seconds: each second's rates and kernel drops from the lanes' counters and
//! the kernel's, the backend's own counters, and the count target.

use super::backend::BackendRun;
use super::recv_report::RecvInterval;
use crate::lane::{Second, Watch};
use crate::stats::{LaneCounters, Meter, UdpCounters};

/// [`super::Receiver::run`]'s seconds and count target, from the lanes' counters and the kernel's.
pub(super) struct RecvWatch<'a, F> {
    counters: &'a [LaneCounters],
    until: Option<u64>,
    meter: Meter,
    /// The kernel's UDP counters when the run started, and at the last second (`None`: they
    /// could not be read then, so no drops are counted across that reading).
    pub snmp_start: Option<UdpCounters>,
    snmp_last: Option<UdpCounters>,
    last_total: u64,
    /// What the backend keeps: its own counters, read each second.
    backend: &'a mut dyn BackendRun,
    /// Each second's rate, when any arrived.
    pub busy_pps: Vec<f64>,
    on_interval: F,
}

impl<'a, F> RecvWatch<'a, F> {
    pub fn new(
        counters: &'a [LaneCounters],
        until: Option<u64>,
        backend: &'a mut dyn BackendRun,
        on_interval: F,
    ) -> Self {
        let snmp_start = UdpCounters::read().ok();
        Self {
            counters,
            until,
            meter: Meter::new(counters.len()),
            snmp_start,
            snmp_last: snmp_start,
            last_total: 0,
            backend,
            busy_pps: Vec::new(),
            on_interval,
        }
    }
}

impl<F: FnMut(&RecvInterval)> Watch for RecvWatch<'_, F> {
    fn reached(&mut self) -> bool {
        self.until
            .is_some_and(|n| self.counters.iter().map(LaneCounters::datagrams).sum::<u64>() >= n)
    }

    fn second(&mut self, second: &Second) {
        let refs: Vec<&LaneCounters> = self.counters.iter().collect();
        let interval = self.meter.tick(&refs);
        let snmp = UdpCounters::read().ok();
        let got = interval.datagrams - self.last_total;
        self.last_total = interval.datagrams;
        if interval.rate.pps > 0.0 {
            self.busy_pps.push(interval.rate.pps);
        }
        let report = RecvInterval {
            kernel_drops: drops_between(self.snmp_last, snmp),
            cpu_ns_per_datagram: second.cpu_ns_per(got),
            interval,
            backend: self.backend.second(),
        };
        self.snmp_last = snmp;
        (self.on_interval)(&report);
    }
}

/// The receive-buffer drops between two readings of the kernel's UDP counters; `None` when
/// either could not be read (never a count since boot, nor a made-up 0).
pub(super) fn drops_between(start: Option<UdpCounters>, end: Option<UdpCounters>) -> Option<u64> {
    start.zip(end).map(|(start, end)| end.since(&start).rcvbuf_errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_are_counted_only_between_two_readings() {
        let at = |rcvbuf_errors| UdpCounters { rcvbuf_errors, ..UdpCounters::default() };
        assert_eq!(drops_between(Some(at(1_000)), Some(at(1_007))), Some(7));
        assert_eq!(drops_between(None, Some(at(1_007))), None, "not the drops since boot");
        assert_eq!(drops_between(Some(at(1_000)), None), None, "not a made-up 0");
    }
}
