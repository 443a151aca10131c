//! Where one side of an experiment runs. Every process the lab starts, every file it writes
//! for a side (RPS masks, sysctls) and every kernel counter it reads (CPU time, /proc/stat,
//! a namespace's UDP counters, listening sockets) goes through the side's `Host`, so the
//! experiments never build `ip netns exec` command lines themselves, and a remote machine
//! can become one more kind of host without touching them.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use corelane::child_output::{self, printable, Limits};
use corelane::stats::{ProcStat, UdpCounters};

use crate::process::{on_path, ChildProcess};
use crate::remote::Remote;
use crate::LabError;

/// The caps on what a command on this machine or in one of its namespaces prints: a reply's
/// bytes, and hours (not minutes) of time, for the copy lab's `cp -a` of a large tree.
const LOCAL_LIMITS: Limits = Limits { time: Duration::from_secs(6 * 3600), ..Limits::REPLY };

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

    /// Starts `program args…` on a remote host at `start_at_ns` (nanoseconds since the epoch
    /// on that host's clock): the guard there waits for it. Returns at once, the guard
    /// started; `ChildProcess::await_guard_pid` then waits for the program to run.
    pub fn spawn_at(
        &self,
        name: &str,
        program: &str,
        args: &[String],
        start_at_ns: u64,
    ) -> Result<ChildProcess, LabError> {
        match self {
            Host::Remote(remote) => ChildProcess::start_guarded(
                name,
                &self.name(),
                &remote.guarded_argv_at(program, args, Some(start_at_ns)),
            ),
            _ => Err(LabError::Options(format!(
                "{}: a start time is agreed with remote hosts only",
                self.name()
            ))),
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
        let out = child_output::run(Command::new(&argv[0]).args(&argv[1..]), None, &LOCAL_LIMITS)
            .map_err(|e| match e {
            child_output::OutputError::Spawn(e) => LabError::io(format!("cannot run `{shown}`"), e),
            e => LabError::Command { command: shown.clone(), stderr: e.to_string() },
        })?;
        if !out.status.success() {
            return Err(LabError::Command {
                command: shown,
                stderr: printable(&String::from_utf8_lossy(&out.stderr), 2000),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Writes `contents` to `path` as this host sees it (a namespace sees its own
    /// /sys/class/net).
    pub fn write_file(&self, path: &str, contents: &str) -> Result<(), LabError> {
        match self {
            Host::Local => corelane::fs::write_in_place(Path::new(path), contents.as_bytes())
                .map_err(|e| LabError::io(format!("cannot write {path}"), e)),
            // A namespace is this machine: the same write through its dd, inside the namespace
            // (its own /sys/class/net and /proc/sys/net).
            Host::Namespace(_) => {
                self.run("sh", &["-c", NAMESPACE_WRITE, "sh", contents, path]).map(drop)
            }
            // A remote host's may be any dd: the write made there by corelane itself.
            Host::Remote(remote) => {
                self.run(remote.corelane(), &["write-file", "--", path, contents]).map(drop)
            }
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

    /// Resident memory (VmRSS) of process `pid` and all its descendants (nginx's workers), in
    /// bytes; `None` once it is gone.
    pub fn tree_rss(&self, pid: u32) -> Option<u64> {
        match self {
            Host::Local | Host::Namespace(_) => local_tree_rss(pid),
            Host::Remote(_) => sum_rss(&self.remote_lines(TREE_RSS, pid)?),
        }
    }

    /// User and system CPU time of process `pid` and its descendants, from /proc/PID/stat:
    /// tick-sampled (4 ms at HZ=250), so a split to label as such, not a total to divide by.
    pub fn tree_cpu_split(&self, pid: u32) -> (Duration, Duration) {
        match self {
            Host::Local | Host::Namespace(_) => tree_cpu_split(pid),
            Host::Remote(_) => {
                sum_cpu_split(&self.remote_lines(TREE_STAT, pid).unwrap_or_default())
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

    /// Whether a UDP socket is bound to `port` here.
    pub fn udp_bound(&self, port: u16) -> Result<bool, LabError> {
        let filter = format!("sport = :{port}");
        Ok(!self.run("ss", &["-Huln", &filter])?.trim().is_empty())
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
                program_path_in(&self.run("sh", &["-c", script, "sh", program]).ok()?, program)
            }
        }
    }

    /// The lines a remote shell `script` prints for `pid` (`$1`); `None` if it fails.
    fn remote_lines(&self, script: &str, pid: u32) -> Option<Vec<String>> {
        let out = self.run("sh", &["-c", script, "sh", &pid.to_string()]).ok()?;
        Some(out.lines().map(str::to_owned).collect())
    }
}

/// The path a remote `command -v PROGRAM` printed: one absolute path, or the name itself (a
/// builtin), at most 4 KiB without control characters; anything else is not an answer.
fn program_path_in(reply: &str, program: &str) -> Option<String> {
    let found = reply.trim();
    let plain = found.len() <= 4096 && !found.chars().any(char::is_control);
    (plain && (found.starts_with('/') || found == program)).then(|| found.to_string())
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

/// The VmRSS line of process `$1` and of all its descendants.
const TREE_RSS: &str = "t() { grep '^VmRSS:' /proc/$1/status; for d in /proc/$1/task/*; do \
    for c in $(cat $d/children); do t $c; done; done; }; t $1 2>/dev/null";

/// The bytes of `VmRSS:  N kB` lines added up (saturating); `None` without any such line
/// (the process is gone, or the reply is not one).
fn sum_rss(lines: &[String]) -> Option<u64> {
    let kib = lines.iter().filter_map(|l| {
        let value = l.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?;
        value.trim().parse::<u64>().ok()
    });
    let kib: Vec<u64> = kib.collect();
    (!kib.is_empty()).then(|| kib.into_iter().fold(0u64, u64::saturating_add).saturating_mul(1024))
}

/// [`sum_rss`] of this machine's process `pid` and its descendants.
fn local_tree_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let mut lines: Vec<String> =
        status.lines().filter(|l| l.starts_with("VmRSS:")).map(str::to_owned).collect();
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
    for task in tasks {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for child in children.split_ascii_whitespace().filter_map(|c| c.parse().ok()) {
            if let Some(bytes) = local_tree_rss(child) {
                lines.push(format!("VmRSS: {} kB", bytes / 1024));
            }
        }
    }
    sum_rss(&lines)
}

/// The sum of the first field (runtime, ns) of schedstat lines.
fn sum_runtime(lines: Vec<String>) -> Duration {
    let ns = lines
        .iter()
        .filter_map(|l| corelane::stats::schedstat_runtime(l))
        .fold(0u64, u64::saturating_add);
    Duration::from_nanos(ns)
}

/// The user and system time of /proc/PID/stat lines, added up.
fn sum_cpu_split(stats: &[String]) -> (Duration, Duration) {
    stats
        .iter()
        .filter_map(|s| cpu_split_in(s))
        .fold((Duration::ZERO, Duration::ZERO), |(u, s), (du, ds)| {
            (u.saturating_add(du), s.saturating_add(ds))
        })
}

fn tree_cpu_split(pid: u32) -> (Duration, Duration) {
    let (mut user, mut system) = cpu_split_of(pid).unwrap_or_default();
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
    for task in tasks {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for child in children.split_ascii_whitespace().filter_map(|c| c.parse().ok()) {
            let (u, s) = tree_cpu_split(child);
            user = user.saturating_add(u);
            system = system.saturating_add(s);
        }
    }
    (user, system)
}

fn cpu_split_of(pid: u32) -> Option<(Duration, Duration)> {
    cpu_split_in(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// User and system time from the text of a /proc/PID/stat (`None` for text that is not one).
fn cpu_split_in(stat: &str) -> Option<(Duration, Duration)> {
    let (user, system) = corelane::stats::stat_cpu_ticks(stat)?;
    let hz = rustix::param::clock_ticks_per_second().max(1);
    let time = |ticks: u64| {
        let ns = u128::from(ticks) * 1_000_000_000 / u128::from(hz);
        Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    };
    Some((time(user), time(system)))
}

/// Writes a kernel setting that exists (truncated, never created, a symlink at the last
/// component refused), or else creates a new file (O_EXCL|O_NOFOLLOW): no path is opened in
/// a way that follows a planted symlink.
/// [`Host::write_file`] in a namespace, as `corelane::fs::write_in_place` does here, with this
/// machine's GNU dd: a file that is there (or a symlink) is opened as it is, never created or
/// followed (`conv=nocreat oflag=nofollow`); a missing one only ever created new
/// (`conv=excl`: `O_EXCL`).
const NAMESPACE_WRITE: &str =
    "if [ -e \"$2\" ] || [ -L \"$2\" ]; then how=nocreat; else how=excl; fi; \
     printf '%s' \"$1\" | dd of=\"$2\" conv=$how oflag=nofollow iflag=fullblock bs=1M status=none";

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A command that answers with far more than any real reply is cut off at the cap and
    /// named, within bounded time and memory, instead of being read whole.
    #[test]
    fn a_reply_without_end_is_cut_off_and_named() {
        let started = std::time::Instant::now();
        match Host::Local.run("sh", &["-c", "head -c 256M /dev/zero"]) {
            Ok(out) => panic!("read a reply of {} bytes whole", out.len()),
            Err(e) => {
                let e = e.to_string();
                assert!(e.contains("more than") && e.contains("head -c"), "{e}");
                assert!(e.len() < 400 && !e.contains('\n'), "{e}");
            }
        }
        assert!(started.elapsed() < Duration::from_secs(30));
    }

    /// /proc/PID/stat lines a hostile host (or a hostile comm) can write never panic.
    #[test]
    fn crafted_proc_pid_stat_lines_never_panic() {
        let big = " 18446744073709551615".repeat(20);
        for text in [
            "",
            ")",
            "1 (x)",
            "1 (x)\u{e9}",
            "1 (a) b) S",
            "1 (x) S 1 2 3",
            &format!("1 (x) S{big}"),
        ] {
            let _ = cpu_split_in(text);
        }
        let lines = vec![format!("1 (x) S{big}"), format!("2 (y) S{big}")];
        let _ = sum_cpu_split(&lines);
    }

    /// What a remote host answers to `command -v` is run as a program there only if it is
    /// one plain path: no second line, no escape sequence, no relative path, no flood.
    #[test]
    fn a_program_path_from_a_remote_is_one_plain_path_or_nothing() {
        assert_eq!(
            program_path_in("/usr/bin/iperf3\n", "iperf3").as_deref(),
            Some("/usr/bin/iperf3")
        );
        assert_eq!(program_path_in("cc\n", "cc").as_deref(), Some("cc"));
        let long = format!("/{}", "a".repeat(5000));
        for bad in ["", "iperf", "bin/iperf3", "/usr/bin/iperf3\n/tmp/x", "/a\x1b[2J", "-oX", &long]
        {
            assert_eq!(program_path_in(bad, "iperf3"), None, "{bad:?}");
        }
    }

    /// VmRSS lines a hostile host prints are summed without overflow; anything else is no
    /// answer rather than a zero; this process's own tree has a resident size.
    #[test]
    fn rss_lines_sum_saturating_and_only_real_ones_count() {
        let lines = |v: &[&str]| v.iter().map(|l| l.to_string()).collect::<Vec<_>>();
        assert_eq!(sum_rss(&lines(&["VmRSS:\t  100 kB", "VmRSS: 28 kB"])), Some(128 * 1024));
        assert_eq!(
            sum_rss(&lines(&["VmRSS: 18446744073709551615 kB", "VmRSS: 5 kB"])),
            Some(u64::MAX)
        );
        assert_eq!(sum_rss(&lines(&["VmRSS: -1 kB", "VmRSS: 5 MB", "nope", ""])), None);
        assert!(Host::Local.tree_rss(std::process::id()).is_some_and(|b| b > 0));
        assert_eq!(Host::Local.tree_rss(u32::MAX), None);
    }

    /// schedstat runtimes that add up past u64 saturate instead of panicking.
    #[test]
    fn schedstat_sums_saturate() {
        let lines = vec!["18446744073709551615 1 1".to_string(), "5 1 1".into()];
        assert_eq!(sum_runtime(lines), Duration::from_nanos(u64::MAX));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn any_proc_pid_stat_bytes_parse_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let text = String::from_utf8_lossy(&bytes);
            let _ = cpu_split_in(&text);
        }

        #[test]
        fn stat_lines_with_hostile_comms_parse_without_panic(
            comm in "[ -~\u{80}-\u{10ffff}]{0,20}",
            fields in proptest::collection::vec(any::<u64>(), 0..20),
            cut in 0usize..400,
        ) {
            let mut line = format!("42 ({comm}) S");
            for f in fields {
                line.push_str(&format!(" {f}"));
            }
            let cut = (0..=cut.min(line.len())).rev().find(|&i| line.is_char_boundary(i)).unwrap_or(0);
            let _ = cpu_split_in(&line[..cut]);
            let _ = sum_cpu_split(&[line.clone(), line]);
        }

        #[test]
        fn any_schedstat_reply_sums_without_panic(lines in proptest::collection::vec("[0-9 a-z]{0,40}", 0..20)) {
            let _ = sum_runtime(lines);
        }
    }

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

    /// The namespace write: an existing file rewritten whole, a missing one created, a
    /// symlink (dangling or not) never followed.
    #[test]
    fn the_namespace_write_never_follows_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
        let write = |path: &str, text: &str| {
            Host::Local.run("sh", &["-c", NAMESPACE_WRITE, "sh", text, path]).map(drop)
        };
        write(&at("new"), "fresh").unwrap();
        write(&at("new"), "0f").unwrap();
        assert_eq!(std::fs::read_to_string(at("new")).unwrap(), "0f");
        std::fs::write(at("victim"), "precious").unwrap();
        std::os::unix::fs::symlink(at("victim"), at("link")).unwrap();
        std::os::unix::fs::symlink(at("absent"), at("dangling")).unwrap();
        assert!(write(&at("link"), "0f").is_err());
        assert!(write(&at("dangling"), "0f").is_err());
        assert_eq!(std::fs::read_to_string(at("victim")).unwrap(), "precious");
        assert!(!dir.path().join("absent").exists());
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
