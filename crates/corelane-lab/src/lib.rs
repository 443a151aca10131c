//! corelane's experiments. Each one builds its own testbed (network namespaces joined by a
//! veth pair, RPS masks standing in for RSS and IRQ affinity), runs every configuration of its
//! seed's table for several trials through the one runner ([`experiment::run`]), runs the
//! peers people use today on the same testbed in the same run, and returns a report the CLI
//! prints as a table, JSON or CSV. Every process, file and counter of a side goes through its
//! [`host::Host`].
#![deny(unsafe_code)]
#![warn(clippy::too_many_lines)]

pub mod affinity;
pub mod apps;
pub mod copy;
pub mod error;
pub mod experiment;
pub mod host;
pub mod latency;
pub mod output;
pub mod process;
pub mod remote;
pub mod report;
pub mod rx_nic;
pub mod sched;
pub mod stage;
pub mod summary;
pub mod tcp;
pub mod testbed;
pub mod topo;
pub mod udp;
pub mod workdir;

pub use error::LabError;
pub use experiment::Entry;

/// Every experiment, in the order `corelane lab all` runs them: the CLI's `lab`
/// subcommands, `lab all` and CI's quick runs are all derived from this list, so adding an
/// experiment is its module and one line here.
pub const EXPERIMENTS: &[Entry] = &[
    udp::ENTRY,
    tcp::ENTRY,
    affinity::ENTRY,
    sched::ENTRY,
    copy::ENTRY,
    latency::ENTRY,
    apps::ENTRY,
];

/// The corelane binary the lab runs as receiver, sender, server and load generator: the
/// one running now.
pub(crate) fn corelane_exe() -> Result<std::path::PathBuf, LabError> {
    std::env::current_exe()
        .map_err(|e| LabError::io("cannot find the corelane binary to run as each side", e))
}

/// The median of `values`, 0 when there are none (a configuration with no trials).
pub(crate) fn median_of(values: impl IntoIterator<Item = f64>) -> f64 {
    corelane::stats::median(&values.into_iter().collect::<Vec<_>>()).unwrap_or(0.0)
}

/// Names given to an option (`--vs`, say) looked up in `known` (name, value): every value
/// when absent, none for `none`, an unknown name refused with the choices.
pub(crate) fn parse_names<T: Copy>(
    names: Option<&[String]>,
    known: &[(&str, T)],
    what: &str,
) -> Result<Vec<T>, LabError> {
    let Some(names) = names else { return Ok(known.iter().map(|k| k.1).collect()) };
    if names.iter().any(|n| n == "none") {
        return Ok(Vec::new());
    }
    let lookup = |n: &String| {
        known.iter().find(|k| k.0 == n).map(|k| k.1).ok_or_else(|| {
            let choices: Vec<&str> = known.iter().map(|k| k.0).collect();
            LabError::Options(format!(
                "unknown {what} `{n}`: choose from {}, none",
                choices.join(", ")
            ))
        })
    };
    names.iter().map(lookup).collect()
}

/// `--configs` checked against the experiment's ids (`none` runs only the peers): the
/// configurations to run, all when `None`.
pub(crate) fn only_configs(
    names: Option<Vec<String>>,
    ids: &[&str],
) -> Result<Option<Vec<String>>, LabError> {
    let Some(names) = names else { return Ok(None) };
    match names.iter().find(|n| *n != "none" && !ids.contains(&n.as_str())) {
        Some(bad) => Err(LabError::Options(format!(
            "unknown configuration `{bad}`: choose from {}, or none",
            ids.join(", ")
        ))),
        None => Ok(Some(names)),
    }
}

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
