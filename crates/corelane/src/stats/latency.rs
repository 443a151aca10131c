//! Latency as people who tune servers read it: an HDR histogram of nanoseconds, its
//! percentiles in microseconds under the names sockperf and wrk2 print (`p50` … `p99.99`,
//! `max`), and HdrHistogram's interval log (one compressed histogram per second) for its
//! plotting tools (HistogramLogAnalyzer, hdr-plot).

use std::io::{self, Write};
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The largest latency a histogram holds; longer ones are recorded as this.
pub const MAX_LATENCY_NS: u64 = 60_000_000_000;

/// An empty histogram of 1 ns to 60 s at three significant digits.
pub fn new_histogram() -> Histogram<u64> {
    // The bounds are constants the crate accepts (low >= 1, high >= 2 * low, sigfig <= 5).
    Histogram::new_with_bounds(1, MAX_LATENCY_NS, 3).unwrap_or_else(|_| unreachable_bounds())
}

#[cold]
fn unreachable_bounds() -> Histogram<u64> {
    Histogram::new(3).expect("an auto-resizing 3-digit histogram is always valid")
}

/// Records `ns` (clamped to the histogram's range).
#[inline]
pub fn record(h: &mut Histogram<u64>, ns: u64) {
    let _ = h.record(ns.clamp(1, MAX_LATENCY_NS));
}

/// Percentiles of one histogram, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// How many latencies the histogram holds.
    pub samples: u64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    #[serde(rename = "p99.9")]
    pub p99_9: f64,
    #[serde(rename = "p99.99")]
    pub p99_99: f64,
    pub max: f64,
    pub mean: f64,
}

impl Percentiles {
    /// The percentiles of `h` (all zero when it is empty).
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Self {
            samples: h.len(),
            p50: us(h.value_at_quantile(0.50)),
            p90: us(h.value_at_quantile(0.90)),
            p99: us(h.value_at_quantile(0.99)),
            p99_9: us(h.value_at_quantile(0.999)),
            p99_99: us(h.value_at_quantile(0.9999)),
            max: us(h.max()),
            mean: h.mean() / 1000.0,
        }
    }
}

/// Writes HdrHistogram's interval log (`#[StartTime: …]`, a legend, then one line per
/// interval: start, length, max and the base64 of a compressed V2 histogram), values in ns.
pub struct IntervalLog<W: Write> {
    out: W,
    serializer: V2DeflateSerializer,
    started: Duration,
}

impl<W: Write> std::fmt::Debug for IntervalLog<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IntervalLog").field("started", &self.started).finish_non_exhaustive()
    }
}

impl<W: Write> IntervalLog<W> {
    /// A log whose intervals are measured from `start` (wall clock).
    pub fn new(mut out: W, start: SystemTime) -> io::Result<Self> {
        let started = start.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        {
            let mut serializer = V2DeflateSerializer::new();
            let writer = IntervalLogWriterBuilder::new()
                .add_comment("corelane latency log: round-trip (or request) times in nanoseconds")
                .with_start_time(start)
                .with_base_time(start)
                .add_comment(
                    "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"",
                )
                .begin_log_with(&mut out, &mut serializer)
                .map_err(io::Error::other)?;
            drop(writer);
        }
        Ok(Self { out, serializer: V2DeflateSerializer::new(), started })
    }

    /// Appends one interval: `h` covering `length` from `offset` after the start.
    pub fn interval(
        &mut self,
        h: &Histogram<u64>,
        offset: Duration,
        length: Duration,
    ) -> io::Result<()> {
        // A builder with no headers set writes none: only the interval line.
        let mut writer = IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.out, &mut self.serializer)
            .map_err(io::Error::other)?;
        writer.write_histogram(h, offset, length, None).map_err(io::Error::other)
    }

    /// Flushes and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

    #[test]
    fn percentiles_use_the_names_people_read() {
        let mut h = new_histogram();
        for ns in 1..=10_000u64 {
            record(&mut h, ns * 1000);
        }
        let p = Percentiles::of(&h);
        assert_eq!(p.samples, 10_000);
        assert!((p.p50 - 5000.0).abs() < 10.0, "{p:?}");
        assert!((p.p99_99 - 9999.0).abs() < 10.0, "{p:?}");
        let json = serde_json::to_value(p).unwrap();
        for key in ["p50", "p90", "p99", "p99.9", "p99.99", "max"] {
            assert!(json.get(key).is_some(), "{key} missing from {json}");
        }
        assert_eq!(Percentiles::of(&new_histogram()), Percentiles::default());
        record(&mut h, u64::MAX); // clamped, not an error
        assert!(Percentiles::of(&h).max >= 59_000_000.0);
    }

    #[test]
    fn the_interval_log_reads_back() {
        let start = SystemTime::now();
        let mut log = IntervalLog::new(Vec::new(), start).unwrap();
        let mut h = new_histogram();
        record(&mut h, 12_345);
        log.interval(&h, Duration::from_secs(0), Duration::from_secs(1)).unwrap();
        record(&mut h, 99_000);
        log.interval(&h, Duration::from_secs(1), Duration::from_secs(1)).unwrap();
        let bytes = log.finish().unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.contains("#[StartTime: "), "{text}");
        let intervals = IntervalLogIterator::new(&bytes)
            .filter_map(|e| match e {
                Ok(LogEntry::Interval(i)) => Some(i),
                _ => None,
            })
            .count();
        assert_eq!(intervals, 2, "{text}");
        assert_eq!(text.matches("#[BaseTime").count(), 1, "headers once: {text}");
    }
}
