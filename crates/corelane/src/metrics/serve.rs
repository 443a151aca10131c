//! `serve http`'s families, read at the scrape from the lanes' counters (relaxed loads),
//! the request-duration histogram among them (each lane counts a request into its bucket when
//! the answer's last byte is handed to the kernel: a load and store, no lock).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Unit;

use super::cpu::{self, LaneThreads};
use super::exposition::{Family, Histogram, Value};
use crate::tcp::counters::DURATION_BOUNDS_NS;
use crate::tcp::ServerCounters;

/// What `serve http` exports.
#[derive(Debug)]
pub struct ServeMetrics {
    counters: Vec<Arc<ServerCounters>>,
    threads: LaneThreads,
}

impl ServeMetrics {
    /// The families of a server's lanes (`Server::counters`).
    pub fn new(counters: &[Arc<ServerCounters>]) -> Self {
        let threads = LaneThreads::new(crate::tcp::LANE_NAME, counters.len());
        Self { counters: counters.to_vec(), threads }
    }

    fn per_lane(
        &self,
        encoder: &mut DescriptorEncoder<'_>,
        family: Family<'_>,
        field: impl Fn(&ServerCounters) -> &AtomicU64,
    ) -> std::fmt::Result {
        let values = self.counters.iter().map(|c| Value::Count(field(c).load(Ordering::Relaxed)));
        family.per_lane(encoder, values)
    }
}

impl Collector for ServeMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let e = &mut encoder;
        let counter = Family::counter;
        self.per_lane(e, counter("http_requests", "Requests answered, any status"), |c| {
            &c.requests
        })?;
        let rows = self.counters.iter().enumerate().flat_map(|(lane, c)| {
            let lane = lane.to_string();
            [
                (
                    [("lane", lane.clone()), ("class", "4xx".to_owned())],
                    Value::Count(c.client_errors.load(Ordering::Relaxed)),
                ),
                (
                    [("lane", lane), ("class", "5xx".to_owned())],
                    Value::Count(c.server_errors.load(Ordering::Relaxed)),
                ),
            ]
        });
        counter(
            "http_error_responses",
            "Responses by status class: 4xx (malformed, oversized, not found, 408 on a timeout) and 5xx (refusals at the connection limit apart)",
        )
        .write(e, rows)?;
        self.per_lane(
            e,
            counter("http_response", "Response bytes sent, heads and bodies").unit(&Unit::Bytes),
            |c| &c.bytes_out,
        )?;
        self.per_lane(e, counter("http_connections_accepted", "Connections accepted"), |c| {
            &c.accepted
        })?;
        self.per_lane(
            e,
            counter(
                "http_connections_refused",
                "Connections refused with 503 at --max-connections",
            ),
            |c| &c.refused,
        )?;
        self.per_lane(
            e,
            counter("http_timeouts", "Connections closed by a header or request timeout (408)"),
            |c| &c.timeouts,
        )?;
        self.per_lane(e, Family::gauge("http_connections_open", "Connections open now"), |c| {
            &c.open
        })?;
        self.per_lane(
            e,
            Family::gauge("http_held", "What the open connections hold (state and lent buffers), as the lane last counted it (every 50 ms)")
                .unit(&Unit::Bytes),
            |c| &c.held_bytes,
        )?;
        Family::histogram(
            "http_request_duration",
            "Requests by how long from their parsing (the lane's clock at that wake-up) to their answer's last byte handed to the kernel",
        )
        .unit(&Unit::Seconds)
        .histogram_per_lane(e, self.counters.iter().map(|c| duration_histogram(c)))?;
        self.threads.write(e)?;
        cpu::write_process(e)
    }
}

/// One lane's request durations as a histogram in seconds.
fn duration_histogram(counters: &ServerCounters) -> Histogram {
    let (counts, sum_ns) = counters.durations();
    let bounds = DURATION_BOUNDS_NS.iter().map(|&ns| ns as f64 / 1e9).chain([f64::INFINITY]);
    Histogram { sum: sum_ns as f64 / 1e9, buckets: bounds.zip(counts).collect() }
}
