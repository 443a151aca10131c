//! What a child process prints, read with a cap on its bytes and on its time. Another
//! program's output is input — a remote host's above all, reached through an `ssh` child —
//! so a program that answers without end costs a bounded amount of memory and time: past a
//! cap it is killed and the caller gets an error saying which cap, never the bytes.
//!
//! Our own code rather than a crate: std's `Command::output` has no cap, and the capped
//! readers on crates.io cover one stream, not two pipes and a deadline at once (poll does).

use std::io::{self, BufRead, Read, Write};
use std::os::fd::AsFd;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};

/// How much a child may print, and for how long it may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of stdout kept; one more and the child is killed.
    pub stdout: usize,
    /// Bytes of stderr read in all; one more and the child is killed.
    pub stderr: usize,
    /// Bytes of stderr kept for the error message (the rest is read and dropped).
    pub stderr_kept: usize,
    /// Wall-clock time from start to exit; past it the child is killed.
    pub time: Duration,
}

impl Limits {
    /// For a command's reply: 8 MiB is a hundred times `corelane topo --json` of a
    /// 256-CPU machine, and five minutes is far more than any setup command takes.
    pub const REPLY: Self = Self {
        stdout: 8 << 20,
        stderr: 8 << 20,
        stderr_kept: 16 << 10,
        time: Duration::from_secs(300),
    };
}

/// A finished child's status and what it printed.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    /// The first [`Limits::stderr_kept`] bytes of stderr.
    pub stderr: Vec<u8>,
    /// Why the bytes given for stdin were not all written, if they were not.
    pub stdin_error: Option<io::Error>,
}

/// Why a child's output was not read; the child has been killed and reaped.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("cannot start it: {0}")]
    Spawn(io::Error),
    #[error("it printed more than {} on {stream}, so it was ended", size(*.limit))]
    TooMuch { stream: &'static str, limit: usize },
    #[error("it did not finish within {0:?}, so it was ended")]
    TooSlow(Duration),
    #[error("cannot read what it printed: {0}")]
    Read(io::Error),
}

fn size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// Runs `cmd` to its exit with `stdin` as its input (none: /dev/null), reading stdout and
/// stderr within `limits`.
pub fn run(
    cmd: &mut Command,
    stdin: Option<Vec<u8>>,
    limits: &Limits,
) -> Result<Output, OutputError> {
    let stdin_kind = if stdin.is_some() { Stdio::piped() } else { Stdio::null() };
    cmd.stdin(stdin_kind).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(OutputError::Spawn)?;
    // A writer of its own: a child that prints before it reads its input cannot deadlock us.
    let writer = match (stdin, child.stdin.take()) {
        (Some(bytes), Some(mut pipe)) => Some(std::thread::spawn(move || pipe.write_all(&bytes))),
        _ => None,
    };
    let deadline = Instant::now() + limits.time;
    let read = read_both(&mut child, limits, deadline).and_then(|(stdout, stderr)| {
        let status = wait_until(&mut child, deadline, limits.time)?;
        Ok((status, stdout, stderr))
    });
    if read.is_err() {
        let _ = child.kill();
        let _ = child.wait();
    }
    // The child is gone (or has closed its stdin), so the writer ends.
    let stdin_error = writer.and_then(|w| w.join().ok()).and_then(Result::err);
    let (status, stdout, stderr) = read?;
    Ok(Output { status, stdout, stderr, stdin_error })
}

/// Reads the child's stdout and stderr to their ends, within the caps and the deadline.
fn read_both(
    child: &mut Child,
    limits: &Limits,
    deadline: Instant,
) -> Result<(Vec<u8>, Vec<u8>), OutputError> {
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let (mut stdout, mut stderr, mut stderr_total) = (Vec::new(), Vec::new(), 0usize);
    let mut buf = vec![0u8; 64 << 10];
    while out.is_some() || err.is_some() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(OutputError::TooSlow(limits.time));
        }
        let (out_ready, err_ready) = ready(out.as_ref(), err.as_ref(), left)?;
        if let (true, Some(pipe)) = (out_ready, out.as_mut()) {
            match pipe.read(&mut buf).map_err(OutputError::Read)? {
                0 => out = None,
                n => stdout.extend_from_slice(&buf[..n]),
            }
            if stdout.len() > limits.stdout {
                return Err(OutputError::TooMuch { stream: "stdout", limit: limits.stdout });
            }
        }
        if let (true, Some(pipe)) = (err_ready, err.as_mut()) {
            let n = pipe.read(&mut buf).map_err(OutputError::Read)?;
            if n == 0 {
                err = None;
            }
            let room = limits.stderr_kept.saturating_sub(stderr.len()).min(n);
            stderr.extend_from_slice(&buf[..room]);
            stderr_total = stderr_total.saturating_add(n);
            if stderr_total > limits.stderr {
                return Err(OutputError::TooMuch { stream: "stderr", limit: limits.stderr });
            }
        }
    }
    Ok((stdout, stderr))
}

/// Which of the two pipes can be read without blocking (data or end), waiting at most `left`.
fn ready(
    out: Option<&impl AsFd>,
    err: Option<&impl AsFd>,
    left: Duration,
) -> Result<(bool, bool), OutputError> {
    let events = PollFlags::IN;
    let mut fds = Vec::with_capacity(2);
    if let Some(out) = out {
        fds.push(PollFd::new(out, events));
    }
    if let Some(err) = err {
        fds.push(PollFd::new(err, events));
    }
    let timeout = Timespec {
        tv_sec: left.as_secs().min(i64::MAX as u64) as i64,
        tv_nsec: i64::from(left.subsec_nanos()),
    };
    match poll(&mut fds, Some(&timeout)) {
        Ok(_) | Err(rustix::io::Errno::INTR) => {}
        Err(e) => return Err(OutputError::Read(e.into())),
    }
    let is_ready = |fd: &PollFd<'_>| !fd.revents().is_empty();
    let out_ready = out.is_some() && is_ready(&fds[0]);
    let err_ready = err.is_some() && is_ready(&fds[fds.len() - 1]);
    Ok((out_ready, err_ready))
}

/// Waits for the child's exit until `deadline` (it may close its pipes before it exits).
fn wait_until(
    child: &mut Child,
    deadline: Instant,
    limit: Duration,
) -> Result<ExitStatus, OutputError> {
    loop {
        if let Some(status) = child.try_wait().map_err(OutputError::Read)? {
            return Ok(status);
        }
        if Instant::now() >= deadline {
            return Err(OutputError::TooSlow(limit));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One line read by [`read_line`].
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A line, without its newline, non-UTF-8 bytes replaced.
    Text(String),
    /// The line went on past the cap; what was read of it is dropped.
    TooLong,
    /// The end of the stream.
    End,
}

/// The next line of `reader`, reading at most `max` bytes of it (a last line without a
/// newline counts as a line, as [`BufRead::lines`] has it).
pub fn read_line(reader: &mut impl BufRead, max: usize) -> io::Result<Line> {
    let mut bytes = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let n = Read::take(&mut *reader, limit).read_until(b'\n', &mut bytes)?;
    if n == 0 {
        return Ok(Line::End);
    }
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
    } else if bytes.len() > max {
        return Ok(Line::TooLong);
    }
    Ok(Line::Text(String::from_utf8_lossy(&bytes).into_owned()))
}

/// `text` as one line fit for an error message: trimmed, cut at `max` bytes (on a character
/// boundary, marked `…`), and every control character escaped, newlines too, so a hostile
/// program can neither send escape sequences to the terminal nor add lines of its own.
pub fn printable(text: &str, max: usize) -> String {
    let text = text.trim();
    let cut = (0..=max.min(text.len())).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
    let mut shown: String = text[..cut]
        .chars()
        .flat_map(|c| {
            // A newline too: what a child or a remote host printed never starts a line of ours.
            let plain = !c.is_control();
            let escaped: Vec<char> = if plain { vec![c] } else { c.escape_default().collect() };
            escaped
        })
        .collect();
    if cut < text.len() {
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        cmd
    }

    #[test]
    fn a_normal_reply_is_read_whole_with_its_status() {
        let out = run(&mut sh("echo hi; echo oops >&2; exit 3"), None, &Limits::REPLY).unwrap();
        assert_eq!((out.stdout.as_slice(), out.stderr.as_slice()), (&b"hi\n"[..], &b"oops\n"[..]));
        assert_eq!(out.status.code(), Some(3));
        let echoed = run(&mut Command::new("cat"), Some(b"abc".to_vec()), &Limits::REPLY).unwrap();
        assert_eq!(echoed.stdout, b"abc");
    }

    /// Endless stdout, endless stderr, or silence: each is ended within its cap and time.
    #[test]
    fn endless_output_and_silence_are_ended_at_the_caps() {
        let small = Limits {
            stdout: 1 << 20,
            stderr: 1 << 20,
            stderr_kept: 64,
            time: Duration::from_secs(2),
        };
        let started = Instant::now();
        let err = run(&mut Command::new("yes"), None, &small).unwrap_err();
        assert!(matches!(err, OutputError::TooMuch { stream: "stdout", .. }), "{err}");
        assert_eq!(err.to_string(), "it printed more than 1 MiB on stdout, so it was ended");
        let err = run(&mut sh("yes >&2"), None, &small).unwrap_err();
        assert!(matches!(err, OutputError::TooMuch { stream: "stderr", .. }), "{err}");
        let err = run(&mut sh("exec sleep 30"), None, &small).unwrap_err();
        assert!(matches!(err, OutputError::TooSlow(_)), "{err}");
        // A child that closes its pipes and lives on is also ended at the deadline.
        let err = run(&mut sh("exec >&- 2>&-; exec sleep 30"), None, &small).unwrap_err();
        assert!(matches!(err, OutputError::TooSlow(_)), "{err}");
        assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
    }

    /// A child that never reads its input but prints without end does not deadlock us.
    #[test]
    fn a_child_ignoring_its_input_is_still_ended() {
        let small = Limits { stdout: 1 << 20, ..Limits::REPLY };
        let err = run(&mut Command::new("yes"), Some(vec![0; 8 << 20]), &small).unwrap_err();
        assert!(matches!(err, OutputError::TooMuch { .. }), "{err}");
    }

    #[test]
    fn lines_are_cut_at_the_cap() {
        let mut input = io::Cursor::new(b"short\r\nabcdefghij\nlast".to_vec());
        assert_eq!(read_line(&mut input, 8).unwrap(), Line::Text("short".into()));
        assert_eq!(read_line(&mut input, 8).unwrap(), Line::TooLong);
        // The rest of a cut line is the next read: callers stop at TooLong.
        assert_eq!(read_line(&mut input, 8).unwrap(), Line::Text("j".into()));
        assert_eq!(read_line(&mut input, 8).unwrap(), Line::Text("last".into()));
        assert_eq!(read_line(&mut input, 8).unwrap(), Line::End);
        let mut bad = io::Cursor::new(b"a\xffb\n".to_vec());
        assert_eq!(read_line(&mut bad, 8).unwrap(), Line::Text("a\u{fffd}b".into()));
    }

    #[test]
    fn printable_text_has_no_escape_sequences_and_a_bound() {
        assert_eq!(printable("  \x1b[31mred\x07 ok\n", 100), "\\u{1b}[31mred\\u{7} ok");
        assert_eq!(printable("ééé", 3), "é…");
        assert_eq!(printable("failed\ncorelane: all good", 100), "failed\\ncorelane: all good");
        assert_eq!(printable(&"x".repeat(10_000), 10).len(), 10 + '…'.len_utf8());
    }
}
