//! Child processes the lab starts (receivers, senders, peers), possibly inside a network
//! namespace. A child is interrupted and reaped when dropped, so an error or Ctrl-C in the lab
//! never leaves one behind; only processes the lab started are ever signalled, by PID.

use std::io::{BufReader, Read};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use corelane::child_output::{printable, read_line, Line};
use rustix::process::{kill_process, Pid, Signal};

use crate::LabError;

/// Owned copies of `words`, as a child's command line takes them.
pub(crate) fn strings(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// The first line `corelane guard` prints: this prefix and its program's PID on its host.
pub const PID_LINE: &str = "corelane-guard pid ";

/// A running child with its stdout as a channel of lines.
#[derive(Debug)]
pub struct ChildProcess {
    name: String,
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: Arc<Mutex<String>>,
    /// What the child printed past the caps on its stdout, if it did: the lab stopped
    /// reading it there.
    overflow: Arc<Mutex<Option<String>>>,
    /// A remote child runs under `corelane guard` behind ssh.
    remote: Option<RemoteChild>,
}

/// A child on another host: its PID there, the guard's stdin (closing it ends the child) and
/// the host's name for errors.
#[derive(Debug)]
struct RemoteChild {
    pid: u32,
    stdin: Option<ChildStdin>,
    host: String,
}

/// The longest stdout line the lab reads from a child (its JSON lines are a few KiB).
const MAX_LINE: usize = 4 << 20;
/// The most stdout the lab reads from a child over its life, in bytes and in lines.
const MAX_OUTPUT: usize = 64 << 20;
const MAX_LINES: usize = 1 << 20;
/// The most stderr the lab keeps of a child, for its error messages (the rest is dropped).
const STDERR_KEPT: usize = 16 << 10;

/// ssh's own exit status for an error of its own (the connection, not the command).
const SSH_FAILED: i32 = 255;

impl ChildProcess {
    /// Starts `prefix… program args…` (the prefix enters a host, as `ip netns exec NS` does:
    /// it execs the program, so the child's PID is the program's own). Experiments start
    /// children through `Host::spawn`.
    pub(crate) fn spawn(
        name: &str,
        prefix: &[String],
        program: &str,
        args: &[String],
    ) -> Result<Self, LabError> {
        let mut argv: Vec<&str> = prefix.iter().map(String::as_str).collect();
        // setpriv execs the program with a parent-death signal: if the lab itself is killed
        // (SIGKILL, a crash), its children end too instead of running on in a removed
        // namespace. Like `ip netns exec` it execs, so the PID stays the program's own.
        if on_path("setpriv") {
            argv.extend(["setpriv", "--pdeathsig", "TERM"]);
        }
        argv.push(program);
        let mut cmd = Command::new(argv[0]);
        cmd.args(&argv[1..]).args(args).stdin(Stdio::null());
        Self::start(name, program, cmd)
    }

    /// Starts `argv` (an ssh command running `corelane guard -- PROGRAM…` on a remote host)
    /// and reads the guard's first line, the program's PID there.
    pub(crate) fn spawn_guarded(name: &str, host: &str, argv: &[String]) -> Result<Self, LabError> {
        let mut child = Self::start_guarded(name, host, argv)?;
        child.await_guard_pid()?;
        Ok(child)
    }

    /// Starts `argv` as [`spawn_guarded`](Self::spawn_guarded) does, without waiting for the
    /// PID line: several hosts' guards are started from this (the lab's main) thread — the
    /// parent-death signal follows the thread that started a child — and then awaited.
    pub(crate) fn start_guarded(name: &str, host: &str, argv: &[String]) -> Result<Self, LabError> {
        let mut cmd = with_parent_death_signal(argv);
        cmd.stdin(Stdio::piped());
        let mut child = Self::start(name, &argv[0], cmd)?;
        let stdin = child.child.stdin.take();
        // Remote from the start, so a connection lost before the PID line is named as such.
        child.remote = Some(RemoteChild { pid: 0, stdin, host: host.into() });
        Ok(child)
    }

    /// Reads a guarded child's first line, the program's PID on its host (or says why not).
    pub(crate) fn await_guard_pid(&mut self) -> Result<(), LabError> {
        let name = self.name.clone();
        let child = self;
        let host = child.remote.as_ref().map(|r| r.host.clone()).unwrap_or_default();
        let host = host.as_str();
        let name = name.as_str();
        let waited = Duration::from_secs(20);
        let first = child.next_line(waited);
        let pid = first
            .as_deref()
            .and_then(|l| l.strip_prefix(PID_LINE))
            .and_then(|p| p.trim().parse().ok());
        if let (Some(pid), Some(remote)) = (pid, child.remote.as_mut()) {
            remote.pid = pid;
            return Ok(());
        }
        if let Some(status) = child.wait_timeout(Duration::from_secs(2)) {
            return Err(child.failed(status));
        }
        if let Some(error) = child.overflowed() {
            return Err(error);
        }
        match first {
            Some(line) => Err(LabError::Remote {
                host: host.into(),
                problem: format!(
                    "{name} printed {:?} where its guard's PID line belongs: is the corelane there a real one?",
                    printable(&line, 200)
                ),
            }),
            None => Err(child.timed_out("did not start on its host", waited)),
        }
    }

    fn start(name: &str, program: &str, mut cmd: Command) -> Result<Self, LabError> {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child =
            cmd.spawn().map_err(|e| LabError::io(format!("cannot start {name} ({program})"), e))?;
        let (tx, lines) = mpsc::channel();
        let overflow = Arc::new(Mutex::new(None));
        let stdout = child.stdout.take().expect("stdout is piped");
        let flag = Arc::clone(&overflow);
        std::thread::spawn(move || forward_lines(stdout, &tx, &flag));
        let stderr = Arc::new(Mutex::new(String::new()));
        let err_pipe = child.stderr.take().expect("stderr is piped");
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || keep_stderr(err_pipe, &sink));
        Ok(Self { name: name.into(), child, lines, stderr, overflow, remote: None })
    }

    /// The program's PID on its host (for a remote child: there, not ssh's here).
    pub fn pid(&self) -> u32 {
        match &self.remote {
            Some(remote) => remote.pid,
            None => self.child.id(),
        }
    }

    /// The next stdout line, waiting at most `timeout`; `None` on timeout or end of output.
    pub fn next_line(&self, timeout: Duration) -> Option<String> {
        self.lines.recv_timeout(timeout).ok()
    }

    /// Waits up to `timeout` for the child to exit.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let end = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// What the child wrote to stderr (complete once it exited).
    pub fn stderr_text(&self) -> String {
        std::thread::sleep(Duration::from_millis(20));
        self.stderr.lock().map(|s| s.trim().to_owned()).unwrap_or_default()
    }

    /// Asks the child to stop (SIGINT), as Ctrl-C would; a remote child's guard sends it
    /// when its stdin closes.
    pub fn interrupt(&mut self) {
        match &mut self.remote {
            Some(remote) => drop(remote.stdin.take()),
            None => {
                if let Some(pid) = Pid::from_raw(self.child.id() as i32) {
                    let _ = kill_process(pid, Signal::INT);
                }
            }
        }
    }

    /// Waits up to `timeout` for the child to end (after `interrupt`, say) and returns all it
    /// printed, whatever its exit status.
    pub fn output_after(mut self, timeout: Duration) -> Vec<String> {
        let _ = self.wait_timeout(timeout);
        self.remaining_lines()
    }

    /// Every line not yet read: once the child has exited, its stdout reader forwards what
    /// is left and hangs up, so this waits for the hang-up (2 s at most), not a guessed delay.
    fn remaining_lines(&self) -> Vec<String> {
        let end = Instant::now() + Duration::from_secs(2);
        let mut lines = Vec::new();
        while let Ok(line) = self.lines.recv_timeout(end.saturating_duration_since(Instant::now()))
        {
            lines.push(line);
        }
        lines
    }

    /// The error for this child having exited with `status` (for a remote child whose ssh
    /// failed, the lost connection, named with its host).
    pub fn failed(&self, status: ExitStatus) -> LabError {
        if let Some(error) = self.overflowed() {
            return error;
        }
        if let Some(remote) = self.remote.as_ref().filter(|_| status.code() == Some(SSH_FAILED)) {
            return self.connection_lost(&remote.host);
        }
        LabError::ChildFailed {
            child: self.named(),
            status: status.to_string(),
            stderr: self.stderr_text(),
        }
    }

    /// The child as an error names it: with its host when it runs on another machine (one of
    /// several load hosts runs the same program as the others).
    fn named(&self) -> String {
        match &self.remote {
            Some(remote) => format!("{} on {}", self.name, remote.host),
            None => self.name.clone(),
        }
    }

    /// The error for a child whose stdout went past the caps (the lab stopped reading it).
    fn overflowed(&self) -> Option<LabError> {
        let problem = self.overflow.lock().ok()?.clone()?;
        let problem = format!("{problem}, so the lab stopped reading it");
        Some(match &self.remote {
            Some(remote) => LabError::Remote {
                host: remote.host.clone(),
                problem: format!("{} {problem}: is the corelane there a real one?", self.name),
            },
            None => LabError::ChildOutput { child: self.name.clone(), problem },
        })
    }

    fn connection_lost(&self, host: &str) -> LabError {
        LabError::Remote {
            host: host.into(),
            problem: format!(
                "the connection was lost while {} ran ({}); the host restores what the lab changed there when its sessions end: check the network and sshd",
                self.name,
                self.stderr_text()
            ),
        }
    }

    /// The error for this child not reaching `what` within `waited`.
    pub fn timed_out(&mut self, what: &'static str, waited: Duration) -> LabError {
        if let Some(error) = self.overflowed() {
            return error;
        }
        if let Ok(Some(status)) = self.child.try_wait() {
            if self.remote.is_some() && status.code() == Some(SSH_FAILED) {
                return self.failed(status);
            }
        }
        LabError::ChildTimeout { child: self.named(), what, waited, stderr: self.stderr_text() }
    }

    /// Waits for a clean exit within `timeout`, or fails naming the child and its stderr.
    pub fn finish(mut self, timeout: Duration) -> Result<Vec<String>, LabError> {
        let status = self.wait_timeout(timeout);
        let lines = if status.is_some() { self.remaining_lines() } else { Vec::new() };
        if let Some(error) = self.overflowed() {
            return Err(error);
        }
        match status {
            Some(s) if s.success() => Ok(lines),
            Some(s) => Err(self.failed(s)),
            None => Err(LabError::ChildTimeout {
                child: self.named(),
                what: "did not finish",
                waited: timeout,
                stderr: String::new(),
            }),
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.interrupt();
            // A remote guard gives its program 2 s after SIGINT before it kills it.
            let grace = Duration::from_secs(if self.remote.is_some() { 5 } else { 2 });
            if self.wait_timeout(grace).is_none() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }
}

/// Sends each stdout line of a child to `tx`, until its end or a cap: past [`MAX_LINE`] in
/// one line or [`MAX_OUTPUT`] in all, `overflow` says so and the pipe is closed (the child's
/// next write fails), so a child printing without end costs bounded memory.
fn forward_lines(stdout: ChildStdout, tx: &mpsc::Sender<String>, overflow: &Mutex<Option<String>>) {
    let mut reader = BufReader::new(stdout);
    let (mut total, mut count) = (0usize, 0usize);
    let problem = loop {
        match read_line(&mut reader, MAX_LINE) {
            Ok(Line::Text(line)) => {
                total = total.saturating_add(line.len() + 1);
                count += 1;
                if total > MAX_OUTPUT || count > MAX_LINES {
                    break format!(
                        "printed more than {} MiB or {} lines on stdout",
                        MAX_OUTPUT >> 20,
                        MAX_LINES
                    );
                }
                if tx.send(line).is_err() {
                    return;
                }
            }
            Ok(Line::TooLong) => {
                break format!("printed a line longer than {} MiB on stdout", MAX_LINE >> 20)
            }
            Ok(Line::End) | Err(_) => return,
        }
    };
    if let Ok(mut slot) = overflow.lock() {
        *slot = Some(problem);
    }
}

/// Keeps the first [`STDERR_KEPT`] bytes of a child's stderr in `sink` (once it closes),
/// reading and dropping the rest so the child never blocks on it.
fn keep_stderr(pipe: impl Read, sink: &Mutex<String>) {
    let mut kept = Vec::new();
    let mut pipe = pipe;
    let _ = (&mut pipe).take(STDERR_KEPT as u64).read_to_end(&mut kept);
    let _ = std::io::copy(&mut pipe, &mut std::io::sink());
    if let Ok(mut s) = sink.lock() {
        *s = printable(&String::from_utf8_lossy(&kept), STDERR_KEPT);
    }
}

/// `argv` as a command that is sent SIGTERM if the lab dies (setpriv, where installed): an
/// ssh client so ended closes its session, and the remote guard ends its program.
pub(crate) fn with_parent_death_signal(argv: &[String]) -> Command {
    if on_path("setpriv") {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--pdeathsig", "TERM"]).args(argv);
        cmd
    } else {
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        cmd
    }
}

/// Whether `program` is on this process's PATH.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A remote child whose ssh fails (exit 255) is a lost connection named with its host.
    #[test]
    fn a_remote_childs_ssh_failure_is_a_lost_connection() {
        let argv: Vec<String> = ["sh", "-c", "echo 'corelane-guard pid 7'; sleep 0.2; exit 255"]
            .map(String::from)
            .to_vec();
        let mut child = ChildProcess::spawn_guarded("the receiver", "root@h2", &argv).unwrap();
        assert_eq!(child.pid(), 7);
        let status = child.wait_timeout(Duration::from_secs(5)).unwrap();
        let err = child.failed(status).to_string();
        assert!(
            err.starts_with("root@h2: the connection was lost while the receiver ran"),
            "{err}"
        );
    }

    fn argv(script: &str) -> Vec<String> {
        ["sh", "-c", script].map(String::from).to_vec()
    }

    /// Several load hosts run the same program: a remote one that fails, or does not finish
    /// in time, is named with its host (and a local one without any).
    #[test]
    fn a_remote_childs_failure_and_timeout_name_its_host() {
        let failing = argv("echo 'corelane-guard pid 7'; echo 'no load here' >&2; exit 3");
        let child = ChildProcess::spawn_guarded("corelane load", "root@gen2", &failing).unwrap();
        let err = child.finish(Duration::from_secs(5)).unwrap_err().to_string();
        assert!(err.starts_with("corelane load on root@gen2 failed"), "{err}");
        assert!(err.contains("no load here"), "{err}");
        let slow = argv("echo 'corelane-guard pid 7'; sleep 5");
        let child = ChildProcess::spawn_guarded("corelane load", "root@gen2", &slow).unwrap();
        let err = child.finish(Duration::from_millis(100)).unwrap_err().to_string();
        assert!(err.starts_with("corelane load on root@gen2 did not finish"), "{err}");
        let local = ChildProcess::spawn("corelane load", &[], "sh", &argv("exit 3")[1..]).unwrap();
        let err = local.finish(Duration::from_secs(5)).unwrap_err().to_string();
        assert!(err.starts_with("corelane load failed"), "{err}");
    }

    /// A remote child that prints one endless line is cut off at the line cap: the lab never
    /// holds the line, and says so in one line naming the host.
    #[test]
    fn a_remote_childs_endless_line_is_cut_off_and_named() {
        let script = "echo 'corelane-guard pid 7'; head -c 256M /dev/zero; exit 0";
        let mut child =
            ChildProcess::spawn_guarded("the receiver", "root@h2", &argv(script)).unwrap();
        let line = child.next_line(Duration::from_secs(30)).map(|l| l.len());
        assert!(line.is_none(), "a line of {line:?} bytes was read whole");
        let err = child.timed_out("did not get ready", Duration::from_secs(1)).to_string();
        assert!(err.starts_with("root@h2: the receiver printed a line longer than"), "{err}");
        assert!(err.len() < 400 && !err.contains('\n'), "{err}");
    }

    /// Endless short lines are cut off at the byte cap over the child's life.
    #[test]
    fn a_remote_childs_endless_lines_are_cut_off_and_named() {
        let script = "echo 'corelane-guard pid 7'; head -c 256M /dev/zero | tr '\\0' '\\n'; exit 0";
        let mut child =
            ChildProcess::spawn_guarded("the receiver", "root@h2", &argv(script)).unwrap();
        let mut count = 0usize;
        while child.next_line(Duration::from_secs(30)).is_some() {
            count += 1;
        }
        assert!(count < 100 << 20, "{count} lines were read");
        let err = child.timed_out("did not get ready", Duration::from_secs(1)).to_string();
        assert!(err.starts_with("root@h2: the receiver printed more than"), "{err}");
    }

    /// A first line of gigabytes where the guard's PID line belongs: one short line.
    #[test]
    fn an_endless_answer_for_the_pid_line_is_one_short_line() {
        let err =
            ChildProcess::spawn_guarded("the receiver", "root@h2", &argv("head -c 64M /dev/zero"))
                .map(|_| ())
                .unwrap_err()
                .to_string();
        assert!(err.len() < 400, "an error of {} bytes", err.len());
        assert!(err.starts_with("root@h2: "), "{err}");
    }

    #[test]
    fn reads_output_and_status() {
        let child =
            ChildProcess::spawn("echo", &[], "sh", &["-c".into(), "echo hi".into()]).unwrap();
        assert_eq!(child.finish(Duration::from_secs(5)).unwrap(), vec!["hi".to_string()]);
    }

    #[test]
    fn a_failing_child_reports_its_stderr() {
        let args = ["-c".to_string(), "echo broken >&2; exit 3".into()];
        let child = ChildProcess::spawn("bad", &[], "sh", &args).unwrap();
        let err = child.finish(Duration::from_secs(5)).unwrap_err().to_string();
        assert!(err.contains("bad failed") && err.contains("broken"), "{err}");
    }

    #[test]
    fn dropping_a_running_child_ends_it() {
        let child = ChildProcess::spawn("sleep", &[], "sleep", &["30".into()]).unwrap();
        let pid = child.pid();
        assert!(corelane::stats::runtime_of(pid).is_some());
        drop(child);
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    }
}
