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
    /// Receive calls that brought datagrams, by how many (see [`BATCH_BOUNDS`]).
    batches: [AtomicU64; BATCH_BUCKETS],
    /// The lane's sequence accounting so far (its own flows: missing, duplicates, late).
    missing: AtomicU64,
    duplicates: AtomicU64,
    late: AtomicU64,
}

/// The upper bounds of the batch-size buckets: 1, 2, 4 … 1024 datagrams a call, then the
/// rest (a GRO buffer holds up to 64 datagrams, so a call may bring more than its batch).
pub const BATCH_BOUNDS: [u64; BATCH_BUCKETS - 1] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
/// Buckets, the last (beyond 1024) included.
pub const BATCH_BUCKETS: usize = 12;

/// A lane's sequence figures, as [`LaneCounters::set_sequence`] publishes them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SequenceCounts {
    pub missing: u64,
    pub duplicates: u64,
    pub late: u64,
}

impl LaneCounters {
    /// Adds a batch. Only the owning lane writes, so load+store is enough (no locked RMW).
    pub fn add(&self, datagrams: u64, bytes: u64) {
        let d = self.datagrams.load(Ordering::Relaxed);
        self.datagrams.store(d + datagrams, Ordering::Relaxed);
        let b = self.bytes.load(Ordering::Relaxed);
        self.bytes.store(b + bytes, Ordering::Relaxed);
    }

    /// Counts one receive call that brought `datagrams` (at least one) into its bucket. Only
    /// the owning lane writes: one relaxed load and store.
    #[inline]
    pub fn add_batch(&self, datagrams: u64) {
        let bucket = &self.batches[batch_bucket(datagrams)];
        bucket.store(bucket.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// Publishes the lane's sequence figures so far (relaxed stores; only the lane writes).
    #[inline]
    pub fn set_sequence(&self, counts: SequenceCounts) {
        self.missing.store(counts.missing, Ordering::Relaxed);
        self.duplicates.store(counts.duplicates, Ordering::Relaxed);
        self.late.store(counts.late, Ordering::Relaxed);
    }

    /// Receive calls by bucket (not cumulative), as last published.
    pub fn batches(&self) -> [u64; BATCH_BUCKETS] {
        std::array::from_fn(|i| self.batches[i].load(Ordering::Relaxed))
    }

    pub fn sequence(&self) -> SequenceCounts {
        SequenceCounts {
            missing: self.missing.load(Ordering::Relaxed),
            duplicates: self.duplicates.load(Ordering::Relaxed),
            late: self.late.load(Ordering::Relaxed),
        }
    }

    pub fn datagrams(&self) -> u64 {
        self.datagrams.load(Ordering::Relaxed)
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// The bucket of a call that brought `datagrams`: the first bound at or above it.
fn batch_bucket(datagrams: u64) -> usize {
    // ceil(log2(n)) for n >= 1: 1 → 0, 2 → 1, 3..=4 → 2 … 1024 → 10, beyond → 11.
    let bits = 64 - datagrams.saturating_sub(1).leading_zeros() as usize;
    bits.min(BATCH_BUCKETS - 1)
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
    fn batches_fall_in_the_first_bucket_that_holds_them() {
        for (n, bucket) in [(1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (64, 6), (65, 7)] {
            assert_eq!(batch_bucket(n), bucket, "{n}");
        }
        assert_eq!(batch_bucket(1024), 10);
        assert_eq!(batch_bucket(1025), 11);
        assert_eq!(batch_bucket(u64::MAX), 11);
        for (i, &bound) in BATCH_BOUNDS.iter().enumerate() {
            assert_eq!(batch_bucket(bound), i, "a bound falls in its own bucket");
            assert_eq!(batch_bucket(bound + 1), i + 1);
        }
        let lane = LaneCounters::default();
        lane.add_batch(32);
        lane.add_batch(32);
        lane.add_batch(1);
        let batches = lane.batches();
        assert_eq!((batches[0], batches[5], batches.iter().sum::<u64>()), (1, 2, 3));
    }

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
