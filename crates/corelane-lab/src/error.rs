//! What can stop an experiment: one error type for the whole lab, each variant a one-line
//! message naming the thing that failed.

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
