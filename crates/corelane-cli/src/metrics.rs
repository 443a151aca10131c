//! `--metrics ADDR` for the long-running commands (serve http, udp recv, udp echo, run): the
//! library's endpoint started on its own thread, placed away from the lanes' CPUs.

use std::net::SocketAddr;

use anyhow::Context;
use clap::Args;
use corelane::metrics::{Endpoint, EndpointLimits};
use corelane::topology::CpuList;
use prometheus_client::collector::Collector;

#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// Serve live Prometheus/OpenMetrics metrics at http://ADDR/metrics (e.g.
    /// 127.0.0.1:9464; off by default). Only GET and HEAD of /metrics are answered.
    #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
    pub metrics: Option<SocketAddr>,
}

fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| {
        format!("{text:?} is not an address:port; give one of this host, e.g. 127.0.0.1:9464 or [::1]:9464")
    })
}

/// Starts the endpoint when `--metrics` was given, on `cpus` (the CPUs no lane is pinned
/// to, or the application's) when there are any; says where it listens on stderr.
pub fn start(
    args: &MetricsArgs,
    collector: impl Collector,
    cpus: Option<Vec<usize>>,
) -> anyhow::Result<Option<Endpoint>> {
    let Some(addr) = args.metrics else { return Ok(None) };
    let mut registry = corelane::metrics::registry();
    registry.register_collector(Box::new(collector));
    let cpus = cpus.filter(|c| !c.is_empty());
    let endpoint = Endpoint::start(addr, registry, EndpointLimits::default(), cpus.as_deref())?;
    eprintln!("metrics on http://{}/metrics", endpoint.local_addr());
    Ok(Some(endpoint))
}

/// The CPUs this process may use that no lane is pinned to; `None` when the lanes are not
/// pinned or take them all.
pub fn away_from(pins: Option<&CpuList>) -> anyhow::Result<Option<Vec<usize>>> {
    let Some(pins) = pins else { return Ok(None) };
    let set = rustix::thread::sched_getaffinity(None).context("cannot read the CPU affinity")?;
    let free: Vec<usize> = (0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&c| set.is_set(c) && !pins.contains(c))
        .collect();
    Ok((!free.is_empty()).then_some(free))
}
