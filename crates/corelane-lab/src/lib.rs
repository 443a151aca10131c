//! corelane's experiments. Each one builds its own testbed (network namespaces joined by a
//! veth pair, RPS masks standing in for RSS and IRQ affinity), runs every configuration of its
//! seed's table for several trials through the one runner ([`experiment::run`]), runs the
//! peers people use today on the same testbed in the same run, and returns a report the CLI
//! prints as a table, JSON or CSV. Every process, file and counter of a side goes through its
//! [`host::Host`].
#![deny(unsafe_code)]

pub mod affinity;
pub mod apps;
pub mod copy;
pub mod experiment;
pub mod host;
pub mod latency;
pub mod output;
pub mod process;
pub mod remote;
pub mod report;
pub mod rx_nic;
pub mod sched;
pub mod tcp;
pub mod testbed;
pub mod udp;
pub mod workdir;

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

/// Checks `--configs` names against the experiment's ids (`none` runs only the peers).
pub(crate) fn check_ids(names: &[String], ids: &[&str]) -> Result<(), LabError> {
    match names.iter().find(|n| *n != "none" && !ids.contains(&n.as_str())) {
        Some(bad) => Err(LabError::Options(format!(
            "unknown configuration `{bad}`: choose from {}, or none",
            ids.join(", ")
        ))),
        None => Ok(()),
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

/// What can stop an experiment.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("interrupted (Ctrl-C); the testbed was removed")]
    Interrupted,
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    /// A command the lab runs to set something up (ip, ss, sysctl) failed.
    #[error("`{command}` failed: {stderr}")]
    Command { command: String, stderr: String },
    /// A child process (corelane, a peer) exited with an error.
    #[error("{child} failed ({status}): {stderr}")]
    ChildFailed { child: String, status: String, stderr: String },
    /// A child process did not get somewhere in time.
    #[error("{child} {what} within {waited:?}{}", stderr_suffix(.stderr))]
    ChildTimeout { child: String, what: &'static str, waited: std::time::Duration, stderr: String },
    /// A child's output lacks what the lab reads from it.
    #[error("{child} {problem}")]
    ChildOutput { child: String, problem: String },
    /// A line of a child's JSON output is not what the lab's types say it prints.
    #[error("{child} printed a line the lab cannot read ({source}): {line}")]
    ChildJson { child: String, line: String, source: serde_json::Error },
    #[error("cannot read this machine's CPUs: {0}")]
    Topology(String),
    /// An option value the experiment cannot run with.
    #[error("{0}")]
    Options(String),
    /// A configuration that needs the namespace testbed ran on loopback.
    #[error("{what} needs the namespace testbed (run as root)")]
    NeedsNamespaces { what: &'static str },
    #[error("cannot format CSV: {0}")]
    Csv(#[from] csv::Error),
    #[error("cannot format JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A report file that cannot be written where asked.
    #[error("cannot write {path}: {problem}")]
    Report { path: std::path::PathBuf, problem: String },
    #[error(transparent)]
    Copy(corelane::copy::CopyError),
    /// A remote host cannot be used: unreachable, authentication refused, corelane missing
    /// or of another version, connection lost.
    #[error("{host}: {problem}")]
    Remote { host: String, problem: String },
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(": {stderr}")
    }
}

impl LabError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io { what: what.into(), source }
    }
}
