//! corelane's experiments. Each one builds its own testbed (network namespaces joined by a
//! veth pair, RPS masks standing in for RSS and IRQ affinity), runs every configuration of its
//! seed's table for several trials, runs the peers people use today on the same testbed in
//! the same run, and returns rows the CLI prints as a table, JSON or CSV.
#![deny(unsafe_code)]

pub mod affinity;
pub mod copy;
pub mod process;
pub mod report;
pub mod sched;
pub mod tcp;
pub mod testbed;
pub mod udp;
pub mod workdir;

/// An experiment `corelane lab NAME` runs.
#[derive(Debug, Clone, Copy)]
pub struct Experiment {
    pub name: &'static str,
    pub seed: &'static str,
    pub about: &'static str,
}

/// Every experiment built so far, in the order `corelane lab all` runs them.
pub const EXPERIMENTS: &[Experiment] = &[
    Experiment {
        name: "udp",
        seed: "000",
        about: "UDP receive scaling: default, placement, multiple IPs, shared socket, reuseport, GSO/GRO; vs a C recvmmsg loop, sockperf, iperf3",
    },
    Experiment {
        name: "tcp",
        seed: "001",
        about: "HTTP serving: baseline, flow-to-core, buffer/fd/epoll_event recycling, all; keep-alive and close; vs nginx, lighttpd, wrk",
    },
    Experiment {
        name: "affinity",
        seed: "003",
        about: "core partitioning: application on the softirq CPU (NS), off it (NC), unpinned (NZ), io_uring with and without a syscall lane; a cost model for two packages",
    },
    Experiment {
        name: "sched",
        seed: "004",
        about: "flow-aware dispatch: rss, spray, DSW (atomic, parallel), Diffuser on 5 workloads; simulated 4-64 workers and real threads; reordering (RFC 4737), balance, latency",
    },
    Experiment {
        name: "copy",
        seed: "002",
        about: "file duplication: buffer sizes, creat vs open, O_DIRECT, kernel-side methods, huge pages, trees over lanes; vs cp, cp -r, dd and memcpy",
    },
];

/// The machine a report was measured on: CPUs, model, kernel.
pub(crate) fn machine() -> String {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_default();
    let cpus = corelane::topology::Topology::read().map(|t| t.cpus.len()).unwrap_or(0);
    format!("{cpus} CPUs ({model}), Linux {}", kernel.trim())
}

/// What can stop an experiment.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("interrupted (Ctrl-C); the testbed was removed")]
    Interrupted,
    #[error("{0}")]
    Testbed(String),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("{0}")]
    Child(String),
    #[error("{0}")]
    Options(String),
}

impl LabError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io { what: what.into(), source }
    }
}
