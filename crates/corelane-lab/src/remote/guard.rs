//! The far end of every process the lab starts on a remote host: `corelane guard --life SECS
//! -- PROGRAM ARGS…` starts the program, tells the lab its PID, and ends it (SIGINT, then
//! SIGKILL two seconds later) when the lab closes the guard's stdin — which is also what
//! happens when the lab, its ssh client or the network between them dies — or when `--life`
//! runs out. So no remote process outlives its run, whatever happens to the controller.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use rustix::process::{kill_process, Pid, Signal};

pub use crate::process::PID_LINE;

/// How long a program has to end after SIGINT before it is killed.
const GRACE: Duration = Duration::from_secs(2);

/// Why the guard ended its program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exited by itself.
    Exited,
    /// The lab closed stdin (asked for the end, or went away).
    StdinClosed,
    /// `--life` ran out.
    LifeOver,
    /// The guard itself got SIGINT/SIGTERM/SIGHUP.
    Signalled,
}

/// Holds changes made on this host until the lab lets go: prints [`PID_LINE`] (its own PID),
/// waits for stdin to close, `life` to run out or a signal, then restores the settings saved
/// in `revert_file` by `corelane apply --yes --revert FILE` (if it exists) and removes it.
/// This is how a NIC change made for one row is undone even when the controller vanishes.
pub fn keep(revert_file: &Path, life: Duration, out: &mut dyn Write) -> std::io::Result<Ending> {
    let signalled = Arc::new(AtomicBool::new(false));
    for signal in
        [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP]
    {
        signal_hook::flag::register(signal, Arc::clone(&signalled))?;
    }
    writeln!(out, "{PID_LINE}{}", std::process::id())?;
    out.flush()?;
    let closed = watch_stdin();
    // A life too long to add to the clock (a library caller's Duration::MAX) is no deadline.
    let deadline = Instant::now().checked_add(life);
    let ending = loop {
        if closed.load(Ordering::Relaxed) {
            break Ending::StdinClosed;
        }
        if signalled.load(Ordering::Relaxed) {
            break Ending::Signalled;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break Ending::LifeOver;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if revert_file.exists() {
        let root = Path::new("/");
        let changes = corelane::tune::read_revert_file(revert_file, root)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        corelane::tune::revert(&changes, root).map_err(|e| std::io::Error::other(e.to_string()))?;
        std::fs::remove_file(revert_file)?;
    }
    // The lab's private directory for this NIC (plan, revert file), or the directory of the
    // files it serves, if that is where it was.
    let ours = |d: &str| is_nic_dir(d) || is_served_dir(d);
    if let Some(dir) = revert_file.parent().filter(|d| d.to_str().is_some_and(ours)) {
        let _ = std::fs::remove_dir_all(dir);
    }
    Ok(ending)
}

/// A flag raised once stdin reaches its end (or fails): the lab closed it or went away.
fn watch_stdin() -> Arc<AtomicBool> {
    let closed = Arc::new(AtomicBool::new(false));
    let seen = Arc::clone(&closed);
    std::thread::spawn(move || {
        // Anything the lab writes is ignored; end of input (or an error) is the signal.
        let mut sink = [0u8; 64];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
        seen.store(true, Ordering::Relaxed);
    });
    closed
}

/// Runs `program args` under the guard; returns its exit status and why it ended.
/// Writes [`PID_LINE`] to `out` first (stdout in the CLI), then forwards the program's
/// output to stdout, so the PID line always comes before anything the program prints.
///
/// With `start_at` (this host's wall clock), the program starts then, not now: the lab
/// agrees one start time for several hosts and gives each its own clock's reading of it.
/// The lab closing stdin (or a signal) before then ends the guard without starting anything.
pub fn run(
    program: &str,
    args: &[String],
    life: Duration,
    start_at: Option<SystemTime>,
    out: &mut dyn Write,
) -> std::io::Result<(ExitStatus, Ending)> {
    let signalled = Arc::new(AtomicBool::new(false));
    for signal in
        [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP]
    {
        signal_hook::flag::register(signal, Arc::clone(&signalled))?;
    }
    let closed = watch_stdin();
    if let Some(at) = start_at {
        wait_until(at, &closed, &signalled)?;
    }
    // The program's output goes through the guard, so the PID line is always the first.
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot start {program}: {e}")))?;
    writeln!(out, "{PID_LINE}{}", child.id())?;
    out.flush()?;
    let mut from = child.stdout.take().expect("stdout is piped");
    let (done, forwarded) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut to = std::io::stdout();
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.flush();
        let _ = done.send(());
    });
    // A life too long to add to the clock (a library caller's Duration::MAX) is no deadline.
    let deadline = Instant::now().checked_add(life);
    let pid = Pid::from_raw(child.id() as i32);
    let result = supervise(&mut child, pid, deadline, &closed, &signalled);
    // Everything the program printed reaches the lab before the guard ends (a descendant
    // still holding the pipe is given two seconds, not forever).
    let _ = forwarded.recv_timeout(GRACE);
    result
}

/// The furthest ahead a start time may lie: the lab agrees one a few seconds out, so
/// anything beyond this is a wrong clock or a wrong number, refused rather than waited for.
pub const MAX_START_AHEAD: Duration = Duration::from_secs(60);

/// Sleeps until `at` on this host's wall clock (at once if it has passed); an error if the
/// lab lets go first or `at` lies more than [`MAX_START_AHEAD`] ahead.
fn wait_until(at: SystemTime, closed: &AtomicBool, signalled: &AtomicBool) -> std::io::Result<()> {
    let ahead = at.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO);
    if ahead > MAX_START_AHEAD {
        return Err(std::io::Error::other(format!(
            "the start time lies {ahead:?} ahead on this host's clock, more than {MAX_START_AHEAD:?}: check this host's clock"
        )));
    }
    while SystemTime::now() < at {
        if closed.load(Ordering::Relaxed) || signalled.load(Ordering::Relaxed) {
            return Err(std::io::Error::other("the lab let go before the start time"));
        }
        let left = at.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO);
        std::thread::sleep(left.min(Duration::from_millis(5)));
    }
    Ok(())
}

/// Waits for the program, ending it when the lab closes stdin, life runs out or a signal comes.
fn supervise(
    child: &mut std::process::Child,
    pid: Option<Pid>,
    deadline: Option<Instant>,
    closed: &AtomicBool,
    signalled: &AtomicBool,
) -> std::io::Result<(ExitStatus, Ending)> {
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok((status, Ending::Exited));
        }
        let ending = if closed.load(Ordering::Relaxed) {
            Some(Ending::StdinClosed)
        } else if signalled.load(Ordering::Relaxed) {
            Some(Ending::Signalled)
        } else if deadline.is_some_and(|d| Instant::now() >= d) {
            Some(Ending::LifeOver)
        } else {
            None
        };
        if let Some(ending) = ending {
            // The child is ours and not yet reaped, so its PID cannot have been reused.
            if let Some(pid) = pid {
                let _ = kill_process(pid, Signal::INT);
            }
            let end = Instant::now() + GRACE;
            while Instant::now() < end {
                if let Some(status) = child.try_wait()? {
                    return Ok((status, ending));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            child.kill()?;
            return Ok((child.wait()?, ending));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The directories the lab makes on a remote host: `mktemp -d /tmp/PREFIX.XXXXXXXX`.
pub const NIC_DIR: &str = "/tmp/corelane-nic.";
pub const DEPLOY_DIR: &str = "/tmp/corelane-deploy.";
/// What `lab tcp`'s file servers serve on a remote rx host (readable by all, nothing else).
pub const SERVED_DIR: &str = "/tmp/corelane-served.";

/// Whether `dir` is exactly what `mktemp -d {prefix}XXXXXXXX` prints (so a removal can only
/// ever remove such a directory, never a path with `/`, `..` or anything else in it).
pub fn is_mktemp_dir(dir: &str, prefix: &str) -> bool {
    dir.strip_prefix(prefix)
        .is_some_and(|s| s.len() == 8 && s.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// A NIC directory: a kind the keeper removes.
pub fn is_nic_dir(dir: &str) -> bool {
    is_mktemp_dir(dir, NIC_DIR)
}

/// A served files' directory: the other kind the keeper removes.
pub fn is_served_dir(dir: &str) -> bool {
    is_mktemp_dir(dir, SERVED_DIR)
}
