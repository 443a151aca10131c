//! corelane's experiments. Each one builds its own testbed (network namespaces joined by a
//! veth pair, RPS masks standing in for RSS and IRQ affinity), runs every configuration of its
//! seed's table for several trials, runs the peers people use today on the same testbed in
//! the same run, and returns rows the CLI prints as a table, JSON or CSV.
#![deny(unsafe_code)]

pub mod process;
pub mod report;
pub mod testbed;
pub mod udp;

/// An experiment `corelane lab NAME` runs.
#[derive(Debug, Clone, Copy)]
pub struct Experiment {
    pub name: &'static str,
    pub seed: &'static str,
    pub about: &'static str,
}

/// Every experiment built so far, in the order `corelane lab all` runs them.
pub const EXPERIMENTS: &[Experiment] = &[Experiment {
    name: "udp",
    seed: "000",
    about: "UDP receive scaling: default, placement, multiple IPs, shared socket, reuseport, GSO/GRO; vs a C recvmmsg loop, sockperf, iperf3",
}];

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
}

impl LabError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io { what: what.into(), source }
    }
}
