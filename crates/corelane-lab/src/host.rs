//! Where one side of an experiment runs. Every process the lab starts, every file it writes
//! for a side (RPS masks, sysctls) and every kernel counter it reads (CPU time, /proc/stat,
//! a namespace's UDP counters, listening sockets) goes through the side's `Host`, so the
//! experiments never build `ip netns exec` command lines themselves, and a remote machine
//! can become one more kind of host without touching them.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use corelane::stats::{ProcStat, UdpCounters};

use crate::process::{on_path, ChildProcess};
use crate::remote::Remote;
use crate::LabError;

/// A place processes run and counters are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// This machine, in the lab's own network namespace.
    Local,
    /// A network namespace on this machine, entered with `ip netns exec NAME`.
    Namespace(String),
    /// Another machine, over SSH; its processes run under `corelane guard`.
    Remote(Arc<Remote>),
}

impl Host {
    /// The command prefix that runs a program on this host (empty for `Local`).
    fn prefix(&self) -> Vec<String> {
        match self {
            Host::Local => Vec::new(),
            Host::Namespace(name) => ["ip", "netns", "exec", name].map(String::from).to_vec(),
            Host::Remote(_) => unreachable!("remote commands go through the ssh session"),
        }
    }

    /// How reports and errors name this host.
    pub fn name(&self) -> String {
        match self {
            Host::Local => "this machine".into(),
            Host::Namespace(name) => format!("namespace {name}"),
            Host::Remote(remote) => remote.target().to_string(),
        }
    }

    /// The corelane binary to run on this host.
    pub fn corelane(&self) -> Result<String, LabError> {
        match self {
            Host::Local | Host::Namespace(_) => Ok(crate::corelane_exe()?.display().to_string()),
            Host::Remote(remote) => Ok(remote.corelane().to_string()),
        }
    }

    /// Starts `program args…` here; the child is interrupted and reaped when dropped.
    pub fn spawn(
        &self,
        name: &str,
        program: &str,
        args: &[String],
    ) -> Result<ChildProcess, LabError> {
        match self {
            Host::Remote(remote) => {
                ChildProcess::spawn_guarded(name, &self.name(), &remote.guarded_argv(program, args))
            }
            _ => ChildProcess::spawn(name, &self.prefix(), program, args),
        }
    }

    /// Starts `program args…` pinned to `cpu` (through taskset, like a user would).
    pub fn spawn_pinned(
        &self,
        name: &str,
        cpu: usize,
        program: &str,
        args: &[String],
    ) -> Result<ChildProcess, LabError> {
        let mut argv = vec!["-c".to_string(), cpu.to_string(), program.to_string()];
        argv.extend_from_slice(args);
        self.spawn(name, "taskset", &argv)
    }

    /// Runs `program args…` here to completion and returns its stdout; a failure names the
    /// command and what it printed on stderr.
    pub fn run(&self, program: &str, args: &[&str]) -> Result<String, LabError> {
        if let Host::Remote(remote) = self {
            return remote.run(program, args);
        }
        let mut argv = self.prefix();
        argv.push(program.into());
        argv.extend(args.iter().map(|a| a.to_string()));
        let shown = argv.join(" ");
        let out = Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .map_err(|e| LabError::io(format!("cannot run `{shown}`"), e))?;
        if !out.status.success() {
            return Err(LabError::Command {
                command: shown,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Writes `contents` to `path` as this host sees it (a namespace sees its own
    /// /sys/class/net).
    pub fn write_file(&self, path: &str, contents: &str) -> Result<(), LabError> {
        match self {
            Host::Local => write_local(Path::new(path), contents)
                .map_err(|e| LabError::io(format!("cannot write {path}"), e)),
            Host::Namespace(_) | Host::Remote(_) => self
                .run("sh", &["-c", "printf '%s' \"$1\" > \"$2\"", "sh", contents, path])
                .map(drop),
        }
    }

    /// Reads `path` as this host sees it.
    pub fn read_file(&self, path: &str) -> Result<String, LabError> {
        match self {
            Host::Local => std::fs::read_to_string(path)
                .map_err(|e| LabError::io(format!("cannot read {path}"), e)),
            Host::Namespace(_) | Host::Remote(_) => self.run("cat", &[path]),
        }
    }

    /// The CPUs online here.
    pub fn online_cpus(&self) -> Result<corelane::topology::CpuList, LabError> {
        let text = self.read_file("/sys/devices/system/cpu/online")?;
        text.trim().parse().map_err(|e| {
            LabError::Topology(format!(
                "{}: /sys/devices/system/cpu/online reads {text:?}: {e}",
                self.name()
            ))
        })
    }

    /// Every CPU's time counters (/proc/stat), for the tick-sampled user/sys/softirq view.
    pub fn proc_stat(&self) -> Result<ProcStat, LabError> {
        Ok(ProcStat::parse(&self.read_file("/proc/stat")?))
    }

    /// Exact CPU time of process `pid` (schedstat runtime of its threads); `None` once it
    /// is gone.
    pub fn cpu_time(&self, pid: u32) -> Option<Duration> {
        match self {
            Host::Local | Host::Namespace(_) => corelane::stats::runtime_of(pid),
            Host::Remote(_) => self.remote_lines(TASKS_SCHEDSTAT, pid).map(sum_runtime),
        }
    }

    /// Exact CPU time of process `pid` and all its descendants (nginx's workers).
    pub fn tree_cpu_time(&self, pid: u32) -> Option<Duration> {
        match self {
            Host::Local | Host::Namespace(_) => corelane::stats::tree_runtime_of(pid),
            Host::Remote(_) => self.remote_lines(TREE_SCHEDSTAT, pid).map(sum_runtime),
        }
    }

    /// User and system CPU time of process `pid` and its descendants, from /proc/PID/stat:
    /// tick-sampled (4 ms at HZ=250), so a split to label as such, not a total to divide by.
    pub fn tree_cpu_split(&self, pid: u32) -> (Duration, Duration) {
        match self {
            Host::Local | Host::Namespace(_) => tree_cpu_split(pid),
            Host::Remote(_) => {
                let stats = self.remote_lines(TREE_STAT, pid).unwrap_or_default();
                stats
                    .iter()
                    .filter_map(|s| cpu_split_in(s))
                    .fold((Duration::ZERO, Duration::ZERO), |(u, s), (du, ds)| (u + du, s + ds))
            }
        }
    }

    /// The UDP counters of the network namespace process `pid` lives in.
    pub fn udp_counters_of(&self, pid: u32) -> Option<UdpCounters> {
        match self {
            Host::Local | Host::Namespace(_) => UdpCounters::read_for_process(pid).ok(),
            Host::Remote(_) => {
                UdpCounters::parse(&self.read_file(&format!("/proc/{pid}/net/snmp")).ok()?)
            }
        }
    }

    /// Whether a TCP socket listens on `port` here.
    pub fn tcp_listening(&self, port: u16) -> Result<bool, LabError> {
        let filter = format!("sport = :{port}");
        Ok(!self.run("ss", &["-Hltn", &filter])?.trim().is_empty())
    }

    /// Whether `program` can be run here: on PATH, or in /usr/sbin where nginx and lighttpd
    /// live (off a user's PATH). Returns the path to run it by.
    pub fn find_program(&self, program: &str) -> Option<String> {
        match self {
            Host::Local | Host::Namespace(_) => {
                if on_path(program) {
                    Some(program.to_string())
                } else {
                    let sbin = std::path::Path::new("/usr/sbin").join(program);
                    sbin.is_file().then(|| sbin.display().to_string())
                }
            }
            Host::Remote(_) => {
                let script =
                    "command -v \"$1\" || { [ -x \"/usr/sbin/$1\" ] && echo \"/usr/sbin/$1\"; }";
                let found = self.run("sh", &["-c", script, "sh", program]).ok()?;
                Some(found.trim().to_string()).filter(|f| !f.is_empty())
            }
        }
    }

    /// The lines a remote shell `script` prints for `pid` (`$1`); `None` if it fails.
    fn remote_lines(&self, script: &str, pid: u32) -> Option<Vec<String>> {
        let out = self.run("sh", &["-c", script, "sh", &pid.to_string()]).ok()?;
        Some(out.lines().map(str::to_owned).collect())
    }
}

/// Every thread's schedstat line of process `$1`.
const TASKS_SCHEDSTAT: &str = "cat /proc/$1/task/*/schedstat";
/// Every thread's schedstat line of process `$1` and of all its descendants. (POSIX sh has
/// no `local`, but each `for` list is expanded before the loop recurses, so the recursion is
/// safe.)
const TREE_SCHEDSTAT: &str = "t() { for d in /proc/$1/task/*; do cat $d/schedstat; \
    for c in $(cat $d/children); do t $c; done; done; }; t $1 2>/dev/null";
/// /proc/PID/stat of process `$1` and of all its descendants.
const TREE_STAT: &str = "t() { cat /proc/$1/stat; for d in /proc/$1/task/*; do \
    for c in $(cat $d/children); do t $c; done; done; }; t $1 2>/dev/null";

/// The sum of the first field (runtime, ns) of schedstat lines.
fn sum_runtime(lines: Vec<String>) -> Duration {
    let ns: u64 =
        lines.iter().filter_map(|l| l.split_ascii_whitespace().next()?.parse::<u64>().ok()).sum();
    Duration::from_nanos(ns)
}

fn tree_cpu_split(pid: u32) -> (Duration, Duration) {
    let (mut user, mut system) = cpu_split_of(pid).unwrap_or_default();
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
    for task in tasks {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for child in children.split_ascii_whitespace().filter_map(|c| c.parse().ok()) {
            let (u, s) = tree_cpu_split(child);
            user += u;
            system += s;
        }
    }
    (user, system)
}

fn cpu_split_of(pid: u32) -> Option<(Duration, Duration)> {
    cpu_split_in(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// User and system time from the text of a /proc/PID/stat.
fn cpu_split_in(stat: &str) -> Option<(Duration, Duration)> {
    // Fields after the parenthesised command name: state is the first, utime the 12th.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let hz = rustix::param::clock_ticks_per_second().max(1);
    let at = |i: usize| -> Option<Duration> {
        let ticks: u64 = fields.get(i)?.parse().ok()?;
        Some(Duration::from_nanos(ticks * 1_000_000_000 / hz))
    };
    Some((at(11)?, at(12)?))
}

/// Writes a kernel setting that exists (truncated, never created, a symlink at the last
/// component refused), or else creates a new file (O_EXCL|O_NOFOLLOW): no path is opened in
/// a way that follows a planted symlink.
fn write_local(path: &Path, contents: &str) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    use std::io::Write;
    let flags = OFlags::WRONLY | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut file = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => std::fs::File::from(fd),
        Err(rustix::io::Errno::NOENT) => corelane::fs::create_new(path)?,
        Err(e) => return Err(e.into()),
    };
    file.write_all(contents.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_runs_reads_and_reports_failures() {
        let host = Host::Local;
        assert_eq!(host.run("echo", &["hi"]).unwrap(), "hi\n");
        let err = host.run("sh", &["-c", "echo nope >&2; exit 2"]).unwrap_err().to_string();
        assert!(err.contains("sh -c") && err.contains("nope"), "{err}");
        assert!(host.proc_stat().is_ok());
        assert!(host.cpu_time(std::process::id()).is_some());
        assert!(host.find_program("sh").is_some());
        assert!(host.find_program("surely-not-a-program-corelane").is_none());
    }

    #[test]
    fn local_write_and_read_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let path = path.to_str().unwrap();
        Host::Local.write_file(path, "0f").unwrap();
        assert_eq!(Host::Local.read_file(path).unwrap(), "0f");
    }
}
