//! Live metrics for long runs: one small HTTP/1.1 endpoint (`--metrics ADDR`) answering
//! `GET /metrics` in the Prometheus text format (0.0.4), or OpenMetrics 1.0 when the scraper
//! asks for it, on a thread of its own that is never a lane's. What it exports is read at the
//! scrape from what the lanes already count (relaxed loads of their atomics, the kernel's
//! counters, schedstat): a scrape never takes a lock a lane takes, and a lane never sees it.
//!
//! ```text
//! endpoint.rs   the listener thread: poll over at most 64 connections, bounded heads, deadlines
//! request.rs    one request head (httparse) → the answer: 200, 400, 404, 405, 431
//! exposition.rs the registry encoded (prometheus-client), the format by Accept, family helpers
//! serve.rs      `serve http`'s families   udp.rs  `udp recv` and `udp echo`'s
//! run.rs        `corelane run`'s          cpu.rs  exact CPU time, of the process and per lane
//! ```

mod cpu;
mod endpoint;
mod exposition;
mod request;
mod run;
mod serve;
mod udp;

pub use cpu::LaneThreads;
pub use endpoint::{Endpoint, EndpointLimits};
pub use exposition::{encode, Format};
pub use prometheus_client::registry::Registry;
pub use request::{answer, Answer};
pub use run::RunMetrics;
pub use serve::ServeMetrics;
pub use udp::{EchoMetrics, RecvMetrics};

/// A registry whose families all begin `corelane_`.
pub fn registry() -> Registry {
    Registry::with_prefix("corelane")
}

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("--metrics {addr}: cannot listen there ({source}); give a free address:port of this host, e.g. 127.0.0.1:9464")]
    Bind { addr: std::net::SocketAddr, source: std::io::Error },
    #[error("--metrics: cannot start the endpoint's thread: {0}")]
    Thread(std::io::Error),
    #[error("--metrics: cannot place the endpoint's thread on CPUs {cpus:?}: {source}")]
    Pin { cpus: Vec<usize>, source: std::io::Error },
}
