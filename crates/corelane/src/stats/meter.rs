//! Per-lane counters written by one lane and read by a meter once a second.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::Rate;

/// Counters of one lane, alone on their cache lines so lanes never false-share.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct LaneCounters {
    datagrams: AtomicU64,
    bytes: AtomicU64,
}

impl LaneCounters {
    /// Adds a batch. Only the owning lane writes, so load+store is enough (no locked RMW).
    pub fn add(&self, datagrams: u64, bytes: u64) {
        let d = self.datagrams.load(Ordering::Relaxed);
        self.datagrams.store(d + datagrams, Ordering::Relaxed);
        let b = self.bytes.load(Ordering::Relaxed);
        self.bytes.store(b + bytes, Ordering::Relaxed);
    }

    pub fn datagrams(&self) -> u64 {
        self.datagrams.load(Ordering::Relaxed)
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// One meter reading: totals and per-lane rates since the previous reading.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Interval {
    /// 1 for the first interval.
    pub index: u64,
    /// Seconds since the meter started.
    pub at_secs: f64,
    #[serde(flatten)]
    pub rate: Rate,
    pub lane_pps: Vec<f64>,
    pub datagrams: u64,
    pub bytes: u64,
}

/// Turns cumulative lane counters into per-interval rates.
#[derive(Debug)]
pub struct Meter {
    start: Instant,
    last_at: Instant,
    last: Vec<(u64, u64)>,
    index: u64,
}

impl Meter {
    pub fn new(lanes: usize) -> Self {
        let now = Instant::now();
        Self { start: now, last_at: now, last: vec![(0, 0); lanes], index: 0 }
    }

    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Reads every lane and returns the interval since the previous call.
    pub fn tick(&mut self, lanes: &[&LaneCounters]) -> Interval {
        let now = Instant::now();
        let dt = now - self.last_at;
        let mut lane_pps = Vec::with_capacity(lanes.len());
        let (mut dd, mut db, mut td, mut tb) = (0, 0, 0, 0);
        for (lane, last) in lanes.iter().zip(self.last.iter_mut()) {
            let (d, b) = (lane.datagrams(), lane.bytes());
            lane_pps.push(Rate::over(d - last.0, 0, dt).pps);
            dd += d - last.0;
            db += b - last.1;
            td += d;
            tb += b;
            *last = (d, b);
        }
        self.last_at = now;
        self.index += 1;
        Interval {
            index: self.index,
            at_secs: (now - self.start).as_secs_f64(),
            rate: Rate::over(dd, db, dt),
            lane_pps,
            datagrams: td,
            bytes: tb,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_report_deltas_per_lane() {
        let (a, b) = (LaneCounters::default(), LaneCounters::default());
        let mut meter = Meter::new(2);
        a.add(10, 320);
        b.add(5, 160);
        std::thread::sleep(Duration::from_millis(20));
        let first = meter.tick(&[&a, &b]);
        assert_eq!((first.index, first.datagrams, first.bytes), (1, 15, 480));
        a.add(1, 32);
        let second = meter.tick(&[&a, &b]);
        assert_eq!((second.index, second.datagrams), (2, 16));
        assert!(second.lane_pps[0] > 0.0 && second.lane_pps[1] == 0.0);
    }
}
