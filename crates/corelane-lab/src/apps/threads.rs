//! The threads of a placed program's process tree, read from /proc: their exact CPU time
//! (schedstat), split into the program's own threads and the syscall lane's (`cl-sys-N`
//! syscall threads, io_uring's `iou-sqp-*`/`iou-wrk-*` kernel threads, which the kernel lists
//! among the process's tasks); where each may run (`Cpus_allowed_list`), to check the
//! placement; and every process of the tree, to end any the program left behind.
//!
//! The lab's processes share this machine's /proc whatever network namespace they run in,
//! so this reads local files only (apps does not run on remote hosts).

use std::path::Path;
use std::time::Duration;

use corelane::topology::CpuList;

/// Whose work a thread does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Program,
    /// A `cl-sys-N` syscall thread or an io_uring SQPOLL thread.
    SyscallThread,
    /// An io_uring worker (`iou-wrk-*`): the lane's blocking work, placed by the kernel.
    UringWorker,
}

/// A thread's role from its name (`/proc/…/comm`).
pub fn role_of(comm: &str) -> Role {
    if comm.starts_with("cl-sys-") || comm.starts_with("iou-sqp-") {
        Role::SyscallThread
    } else if comm.starts_with("iou-wrk-") {
        Role::UringWorker
    } else {
        Role::Program
    }
}

/// Exact CPU time of a process tree, by role.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Times {
    pub program: Duration,
    /// Syscall threads and io_uring workers.
    pub lane: Duration,
}

impl Times {
    pub fn since(&self, earlier: &Times) -> Times {
        Times {
            program: self.program.saturating_sub(earlier.program),
            lane: self.lane.saturating_sub(earlier.lane),
        }
    }
}

/// One thread: its process, name and the files it was read from.
#[derive(Debug, Clone)]
pub struct Thread {
    pub pid: u32,
    pub comm: String,
    pub runtime: Duration,
    pub allowed: Option<CpuList>,
}

/// Every thread of `root`'s process tree; `skip_root`: not `root`'s own threads (`corelane
/// run`, the supervisor, whose threads are neither the program's nor the lane's).
pub fn threads_of(root: u32, skip_root: bool) -> Vec<Thread> {
    let mut out = Vec::new();
    walk(root, skip_root, &mut out, 0);
    out
}

/// Processes deeper than this are not followed (a fork bomb cannot make the lab recurse
/// without end).
const MAX_DEPTH: usize = 16;

fn walk(pid: u32, skip: bool, out: &mut Vec<Thread>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return };
    for task in tasks.flatten() {
        let dir = task.path();
        if !skip {
            if let Some(thread) = read_thread(pid, &dir) {
                out.push(thread);
            }
        }
        let children = std::fs::read_to_string(dir.join("children")).unwrap_or_default();
        for child in children.split_ascii_whitespace().filter_map(|c| c.parse().ok()) {
            walk(child, false, out, depth + 1);
        }
    }
}

fn read_thread(pid: u32, dir: &Path) -> Option<Thread> {
    let comm = std::fs::read_to_string(dir.join("comm")).ok()?.trim_end().to_string();
    let schedstat = std::fs::read_to_string(dir.join("schedstat")).ok()?;
    let ns: u64 = schedstat.split_ascii_whitespace().next()?.parse().ok()?;
    let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(|v| v.trim().parse().ok());
    Some(Thread { pid, comm, runtime: Duration::from_nanos(ns), allowed })
}

/// The tree's CPU time by role.
pub fn times(threads: &[Thread]) -> Times {
    threads.iter().fold(Times::default(), |mut t, th| {
        match role_of(&th.comm) {
            Role::Program => t.program += th.runtime,
            Role::SyscallThread | Role::UringWorker => t.lane += th.runtime,
        }
        t
    })
}

/// Checks that the program's threads may run only on `app` and the syscall threads only
/// on `syscall`; returns the syscall threads counted, or what was placed wrong.
pub fn check_placement(
    threads: &[Thread],
    app: &CpuList,
    syscall: &CpuList,
) -> Result<usize, String> {
    let within = |allowed: &Option<CpuList>, cpus: &CpuList| {
        allowed.as_ref().is_some_and(|a| a.cpus().iter().all(|c| cpus.contains(*c)))
    };
    let mut lane_threads = 0;
    for t in threads {
        let (ok, wanted) = match role_of(&t.comm) {
            Role::Program => (within(&t.allowed, app), app),
            Role::SyscallThread => {
                lane_threads += 1;
                (within(&t.allowed, syscall), syscall)
            }
            Role::UringWorker => continue,
        };
        if !ok {
            let allowed = t.allowed.as_ref().map_or("unknown".into(), |a| a.to_string());
            return Err(format!(
                "thread {:?} of process {} may run on CPUs {allowed}, not only on {wanted}",
                t.comm, t.pid
            ));
        }
    }
    Ok(lane_threads)
}

/// A process of the tree: its PID and start time (field 22 of /proc/PID/stat), so a PID
/// the kernel has since reused for another process is never signalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    start: u64,
}

/// The state letter and start time of process `pid` now (see
/// `corelane::stats::stat_state_and_start`).
fn state_and_start(pid: u32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    corelane::stats::stat_state_and_start(&stat)
}

fn start_time(pid: u32) -> Option<u64> {
    state_and_start(pid).map(|(_, start)| start)
}

/// Every process of `root`'s tree, `root` included.
pub fn processes_of(root: u32) -> Vec<Process> {
    let mut pids = vec![root];
    let mut i = 0;
    while i < pids.len() && pids.len() < 4096 {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", pids[i])).into_iter().flatten();
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            pids.extend(children.split_ascii_whitespace().filter_map(|c| c.parse::<u32>().ok()));
        }
        i += 1;
    }
    pids.into_iter().filter_map(|pid| Some(Process { pid, start: start_time(pid)? })).collect()
}

impl Process {
    /// Whether this process (not a later one with its PID) still runs; a zombie has ended.
    pub fn alive(&self) -> bool {
        matches!(state_and_start(self.pid), Some((state, start)) if start == self.start && state != 'Z')
    }

    /// Ends it with SIGKILL, by PID, if it is still this process.
    pub fn kill(&self) {
        if self.alive() {
            if let Some(pid) = rustix::process::Pid::from_raw(self.pid as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_are_told_apart_by_name() {
        assert_eq!(role_of("nginx"), Role::Program);
        assert_eq!(role_of("cl-sys-0"), Role::SyscallThread);
        assert_eq!(role_of("iou-sqp-4242"), Role::SyscallThread);
        assert_eq!(role_of("iou-wrk-4242"), Role::UringWorker);
    }

    fn thread(comm: &str, allowed: &str, ms: u64) -> Thread {
        Thread {
            pid: 7,
            comm: comm.into(),
            runtime: Duration::from_millis(ms),
            allowed: allowed.parse().ok(),
        }
    }

    #[test]
    fn placement_is_checked_per_role_and_times_are_split() {
        let (app, sys) = (CpuList::new(vec![0]), CpuList::new(vec![1]));
        let good = [thread("redis-server", "0", 5), thread("cl-sys-0", "1", 3)];
        assert_eq!(check_placement(&good, &app, &sys), Ok(1));
        assert_eq!(
            times(&good),
            Times { program: Duration::from_millis(5), lane: Duration::from_millis(3) }
        );
        let stray = [thread("redis-server", "0-1", 5)];
        let err = check_placement(&stray, &app, &sys).unwrap_err();
        assert!(err.contains("\"redis-server\"") && err.contains("0-1"), "{err}");
        let lane_on_app = [thread("cl-sys-1", "0", 1)];
        assert!(check_placement(&lane_on_app, &app, &sys).is_err());
        let unknown = [thread("memcached", "garbage", 1)];
        assert!(check_placement(&unknown, &app, &sys).is_err(), "an unreadable mask is not a pass");
    }

    /// This test's own process: its threads are found with their CPU time and mask; a child
    /// is in its tree and, once killed, no longer alive.
    #[test]
    fn a_real_process_tree_is_read_and_its_processes_ended_by_pid() {
        let me = std::process::id();
        let mine = threads_of(me, false);
        assert!(!mine.is_empty() && mine.iter().all(|t| t.allowed.is_some()));
        assert!(times(&mine).program > Duration::ZERO);
        assert!(threads_of(me, true).iter().all(|t| t.pid != me));
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let found = processes_of(me).into_iter().find(|p| p.pid == child.id()).expect("the child");
        assert!(found.alive());
        found.kill();
        child.wait().unwrap();
        assert!(!found.alive());
        assert!(processes_of(u32::MAX).is_empty());
    }
}
