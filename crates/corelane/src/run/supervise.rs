//! Starting the program and staying with it to the end: its own process group on the
//! application CPUs, killed by the kernel if corelane dies (`PR_SET_PDEATHSIG`), corelane the
//! subreaper of everything it leaves, signals forwarded only to its processes, every
//! descendant reaped, and a [`Watch`] sampled while it runs.
//!
//! What `PR_SET_PDEATHSIG` does not cover: the program's own children get no signal when
//! corelane dies (they are in its process group, but the kernel signals only the process that
//! asked), and a set-user-ID or set-group-ID exec, or a file-capability one, clears it.

use std::ffi::{OsStr, OsString};
use std::io;
use std::process::Command;
use std::sync::{mpsc, Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, WaitOptions};
use rustix::thread::CpuSet;

use crate::topology::CpuList;

/// How often a [`Watch`] is sampled while the program runs.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Something to look at while the program runs: every [`SAMPLE_EVERY`], right before a signal
/// is forwarded, and each time a child is seen ended (before it is reaped).
pub trait Watch: Send + Sync {
    fn sample(&self);
}

/// A watch that looks at nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoWatch;

impl Watch for NoWatch {
    fn sample(&self) {}
}

/// The program to run.
#[derive(Debug)]
pub struct Program<'a> {
    /// The program and its arguments.
    pub command: &'a [OsString],
    /// Its whole environment (nothing else is inherited).
    pub env: Vec<(OsString, OsString)>,
    /// The CPUs it (and everything it starts) may run on; `None`: as inherited.
    pub app_cpus: Option<&'a CpuList>,
}

/// How the program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// Its exit status, or a shell's 128+N when signal N killed it.
    pub exit_status: i32,
    /// The signal that killed it.
    pub signal: Option<i32>,
    /// Processes reaped: the program and every descendant left to corelane.
    pub reaped: u64,
    /// CLOCK_MONOTONIC nanoseconds right before the program was started.
    pub started_ns: u64,
    /// From the start to the last descendant's end.
    pub wall: Duration,
}

/// Why the program did not run.
#[derive(Debug, thiserror::Error)]
pub enum SuperviseError {
    /// No such program (a shell's and env's status 127).
    #[error("{program}: not found{looked}")]
    NotFound { program: String, looked: String },
    /// The program exists but cannot be executed (status 126).
    #[error("{program}: cannot be executed: {source}")]
    NotExecutable { program: String, source: io::Error },
    #[error("{0}")]
    Setup(String),
}

impl SuperviseError {
    /// The exit status a shell gives for this.
    pub fn exit_status(&self) -> u8 {
        match self {
            SuperviseError::NotFound { .. } => 127,
            SuperviseError::NotExecutable { .. } => 126,
            SuperviseError::Setup(_) => 1,
        }
    }
}

/// Runs `program` to its end and the end of every process it leaves, forwarding the signals a
/// server is driven by (`FORWARDED`) to it (see `Targets`). Call it from the thread that lives
/// through the whole run (the main thread): the program's death signal follows that thread,
/// and only its children are waited for (`__WNOTHREAD`), so a process another thread of
/// corelane starts (a NIC keeper) is not.
pub fn supervise(program: Program<'_>, watch: Arc<dyn Watch>) -> Result<Ended, SuperviseError> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
        .map_err(|e| SuperviseError::Setup(format!("cannot become the child subreaper: {e}")))?;
    let targets = Arc::new(Mutex::new(Targets::default()));
    let forwarder = Forwarder::start(targets.clone(), watch.clone())
        .map_err(|e| SuperviseError::Setup(format!("cannot install the signal handlers: {e}")))?;
    let started_ns = monotonic_ns();
    let started = Instant::now();
    let child = match spawn(&program) {
        Ok(child) => child,
        Err(e) => {
            forwarder.stop();
            return Err(e);
        }
    };
    let ticker = Ticker::start(watch.clone());
    if let Some(leader) = Pid::from_raw(child.id() as i32) {
        lock(&targets).started(leader);
    }
    let (exit_status, signal, reaped) = reap(child.id(), &targets, watch.as_ref());
    let wall = started.elapsed();
    ticker.stop();
    forwarder.stop();
    Ok(Ended { exit_status, signal, reaped, started_ns, wall })
}

/// CLOCK_MONOTONIC now, in nanoseconds (the clock the library stamps its events with).
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64)
}

fn cpu_set(list: &CpuList) -> CpuSet {
    let mut set = CpuSet::new();
    for &cpu in list.cpus() {
        set.set(cpu);
    }
    set
}

/// Starts the program on the application CPUs, in its own process group, to die with us.
fn spawn(program: &Program<'_>) -> Result<std::process::Child, SuperviseError> {
    use std::os::unix::process::CommandExt;
    let (name, rest) = program
        .command
        .split_first()
        .ok_or_else(|| SuperviseError::Setup("no program given".into()))?;
    let mut cmd = Command::new(name);
    cmd.args(rest).env_clear().envs(program.env.iter().cloned()).process_group(0);
    crate::sys::spawn::die_with_parent(&mut cmd);
    // The child inherits the spawning thread's affinity: set it for the spawn, then restore.
    let saved = rustix::thread::sched_getaffinity(None)
        .map_err(|e| SuperviseError::Setup(format!("cannot read the CPU affinity: {e}")))?;
    if let Some(app) = program.app_cpus {
        rustix::thread::sched_setaffinity(None, &cpu_set(app)).map_err(|e| {
            SuperviseError::Setup(format!("cannot place on application CPUs {app}: {e}"))
        })?;
    }
    let child = cmd.spawn();
    let _ = rustix::thread::sched_setaffinity(None, &saved);
    child.map_err(|e| spawn_error(name, &program.env, e))
}

/// A failed exec in the words of a shell: 127 for a missing program, 126 for one that
/// cannot be executed.
fn spawn_error(name: &OsStr, env: &[(OsString, OsString)], e: io::Error) -> SuperviseError {
    let program = name.to_string_lossy().into_owned();
    let searched = !program.contains('/');
    match e.raw_os_error() {
        Some(libc::ENOENT) => {
            // std searches the program's PATH when it has one, else corelane's.
            let path = env
                .iter()
                .find(|(n, _)| n == "PATH")
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var_os("PATH"))
                .unwrap_or_default();
            let looked = if searched {
                format!(" (looked in PATH={})", path.to_string_lossy())
            } else {
                String::new()
            };
            SuperviseError::NotFound { program, looked }
        }
        Some(
            libc::EACCES
            | libc::ENOEXEC
            | libc::EISDIR
            | libc::ETXTBSY
            | libc::ENOTDIR
            | libc::ELOOP
            | libc::EPERM,
        ) => SuperviseError::NotExecutable { program, source: e },
        _ => SuperviseError::Setup(format!("cannot run {program}: {e}")),
    }
}

/// Where forwarded signals go. While the program (its process group's leader) is unreaped,
/// its group: the zombie holds the PID, so no other group can have that number. Once it is
/// reaped, the number is free for reuse unless a member of the group is left: a signal goes
/// to each child corelane has left (the daemons reparented to it), through a pidfd, and to
/// the whole group too when one of those children is still in it (an unreaped child keeps
/// its group, so the number is still that group's). The reaper holds the lock while it
/// reaps, the forwarder while it signals, so no target's PID is freed in between. A signal
/// that comes before the program's PID is known (while it is being started, even after it
/// runs: `spawn` returns after the exec) is kept and sent as soon as it is.
#[derive(Debug, Default)]
struct Targets {
    leader: Option<Pid>,
    leader_reaped: bool,
    /// Signals received before the leader was known, in their order (each at most once, as
    /// the kernel keeps a pending signal).
    early: Vec<Signal>,
}

impl Targets {
    fn forward(&mut self, sig: Signal) {
        match self.leader {
            Some(leader) if !self.leader_reaped => {
                let _ = rustix::process::kill_process_group(leader, sig);
            }
            Some(leader) => signal_children(sig, leader),
            None if !self.early.contains(&sig) => self.early.push(sig),
            None => {}
        }
    }

    /// The program started as `leader`: the signals that came meanwhile go to it now.
    fn started(&mut self, leader: Pid) {
        self.leader = Some(leader);
        for sig in std::mem::take(&mut self.early) {
            self.forward(sig);
        }
    }
}

/// Signals each child of corelane's main thread (the one that reaps) through a pidfd, and
/// the program's group `leader` when one of them is still in it. With the reaper locked out,
/// each PID listed is still that child's when its pidfd is opened.
fn signal_children(sig: Signal, leader: Pid) {
    let me = rustix::process::getpid().as_raw_nonzero();
    let list = format!("/proc/self/task/{me}/children");
    let text = match std::fs::read_to_string(&list) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("corelane run: cannot forward signal {sig:?} to the program's remaining processes ({list}: {e})");
            return;
        }
    };
    let children: Vec<Pid> =
        text.split_whitespace().filter_map(|p| p.parse().ok()).filter_map(Pid::from_raw).collect();
    let (in_group, apart): (Vec<Pid>, Vec<Pid>) =
        children.into_iter().partition(|&pid| rustix::process::getpgid(Some(pid)) == Ok(leader));
    if !in_group.is_empty() {
        let _ = rustix::process::kill_process_group(leader, sig);
    }
    for pid in apart {
        if let Ok(pidfd) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) {
            let _ = rustix::process::pidfd_send_signal(&pidfd, sig);
        }
    }
}

fn lock(targets: &Mutex<Targets>) -> MutexGuard<'_, Targets> {
    targets.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The signals forwarded to the program: the ones that end it, and the ones servers are driven
/// by (memcached's and Apache's USR1 graceful stop, nginx's USR1 log reopen and USR2 binary
/// upgrade, a terminal's WINCH). Not forwarding one would let it end `corelane run` instead,
/// and the program with it (its parent-death signal).
const FORWARDED: [i32; 7] = {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH};
    [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH]
};

/// Forwards [`FORWARDED`] to the program (see `Targets`), sampling the watch first (the
/// signal may end the program).
struct Forwarder {
    handle: signal_hook::iterator::Handle,
    thread: std::thread::JoinHandle<()>,
}

impl Forwarder {
    fn start(targets: Arc<Mutex<Targets>>, watch: Arc<dyn Watch>) -> io::Result<Self> {
        let mut signals = signal_hook::iterator::Signals::new(FORWARDED)?;
        let handle = signals.handle();
        let thread = std::thread::spawn(move || {
            for sig in signals.forever() {
                if let Some(sig) = Signal::from_named_raw(sig) {
                    watch.sample();
                    lock(&targets).forward(sig);
                }
            }
        });
        Ok(Self { handle, thread })
    }

    fn stop(self) {
        self.handle.close();
        let _ = self.thread.join();
    }
}

/// Samples the watch every [`SAMPLE_EVERY`] until stopped.
struct Ticker {
    stop: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Ticker {
    fn start(watch: Arc<dyn Watch>) -> Self {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(SAMPLE_EVERY) {
                watch.sample();
            }
        });
        Self { stop, thread }
    }

    fn stop(self) {
        drop(self.stop);
        let _ = self.thread.join();
    }
}

/// `__WNOTHREAD`: wait only for the main thread's children (the program and the orphans
/// reparented to us), not the NIC keeper a thread of ours started.
const WAIT_MAIN_THREAD_CHILDREN: u32 = 0x2000_0000;

/// Waits for the program and every descendant left to us (we are their subreaper); returns
/// the program's status (a shell's: 128+N when killed by signal N), the signal, and how many
/// processes we reaped. Each ended child is seen first without being reaped (its PID still
/// held), the watch sampled, then it is reaped with the forwarder locked out, the program
/// marked reaped at once.
fn reap(child: u32, targets: &Mutex<Targets>, watch: &dyn Watch) -> (i32, Option<i32>, u64) {
    let peek = WaitIdOptions::EXITED
        | WaitIdOptions::NOWAIT
        | WaitIdOptions::from_bits_retain(WAIT_MAIN_THREAD_CHILDREN);
    let now = WaitOptions::NOHANG | WaitOptions::from_bits_retain(WAIT_MAIN_THREAD_CHILDREN);
    let mut status = (1, None);
    let mut reaped = 0;
    loop {
        match rustix::process::waitid(WaitId::All, peek) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => break,
        }
        watch.sample();
        let mut targets = lock(targets);
        match rustix::process::wait(now) {
            Ok(Some((pid, st))) => {
                reaped += 1;
                if pid.as_raw_nonzero().get() as u32 == child {
                    targets.leader_reaped = true;
                    status = match (st.exit_status(), st.terminating_signal()) {
                        (Some(code), _) => (code, None),
                        (None, Some(sig)) => (128 + sig, Some(sig)),
                        _ => (1, None),
                    };
                }
            }
            Ok(None) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => break,
        }
    }
    (status.0, status.1, reaped)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    #[derive(Default)]
    struct Count(AtomicU64);

    impl Watch for Count {
        fn sample(&self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn words(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    fn path_env() -> Vec<(OsString, OsString)> {
        vec![("PATH".into(), "/usr/bin:/bin".into())]
    }

    fn run(command: &[&str], watch: Arc<dyn Watch>) -> Result<Ended, SuperviseError> {
        let command = words(command);
        supervise(Program { command: &command, env: path_env(), app_cpus: None }, watch)
    }

    #[test]
    fn the_status_and_the_killing_signal_are_a_shells() {
        let ended = run(&["sh", "-c", "exit 7"], Arc::new(NoWatch)).unwrap();
        assert_eq!((ended.exit_status, ended.signal, ended.reaped), (7, None, 1));
        let ended = run(&["sh", "-c", "kill -TERM $$"], Arc::new(NoWatch)).unwrap();
        assert_eq!((ended.exit_status, ended.signal), (128 + 15, Some(15)));
        assert!(ended.started_ns > 0 && ended.started_ns <= monotonic_ns());
    }

    /// A signal that comes while the program is being started (before `spawn` returns, which
    /// is after the exec: the program may be running already) reaches it once it is known.
    #[test]
    fn a_signal_before_the_program_is_known_reaches_it_when_it_is() {
        use std::os::unix::process::{CommandExt, ExitStatusExt};
        let mut targets = Targets::default();
        for sig in [Signal::USR1, Signal::USR2, Signal::USR1] {
            targets.forward(sig);
        }
        assert_eq!(targets.early, [Signal::USR1, Signal::USR2], "kept once each, in order");
        let mut child = Command::new("sleep").arg("10").process_group(0).spawn().unwrap();
        targets.started(Pid::from_raw(child.id() as i32).unwrap());
        assert!(targets.early.is_empty());
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGUSR1), "{status:?}");
    }

    #[test]
    fn a_missing_program_is_127_and_one_that_cannot_run_126() {
        let err = run(&["corelane-no-such-program"], Arc::new(NoWatch)).unwrap_err();
        assert_eq!(err.exit_status(), 127, "{err}");
        assert_eq!(
            err.to_string(),
            "corelane-no-such-program: not found (looked in PATH=/usr/bin:/bin)"
        );
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("data");
        std::fs::write(&plain, "not a program").unwrap();
        let err = run(&[plain.to_str().unwrap()], Arc::new(NoWatch)).unwrap_err();
        assert_eq!(err.exit_status(), 126, "{err}");
        assert!(err.to_string().contains("cannot be executed"), "{err}");
        let err = run(&[dir.path().to_str().unwrap()], Arc::new(NoWatch)).unwrap_err();
        assert_eq!(err.exit_status(), 126, "a directory: {err}");
    }

    /// Sampled while the program runs (every 100 ms) and once more as it ends.
    #[test]
    fn the_watch_is_sampled_while_the_program_runs_and_at_its_end() {
        let count = Arc::new(Count::default());
        let ended = run(&["sleep", "0.45"], count.clone()).unwrap();
        assert_eq!(ended.exit_status, 0);
        let samples = count.0.load(Ordering::Relaxed);
        assert!((4..=8).contains(&samples), "{samples} samples in {:?}", ended.wall);
    }
}
