//! A load host's clock against the controller's, measured over its control connection the
//! way NTP does: the controller notes its time before and after asking the host's corelane
//! for its own (one `corelane guard --clock` session answering each line), takes the host's reading to belong to the middle
//! of that round trip, and keeps the sample with the shortest round trip (the least room
//! for error). The lab then gives every load host the agreed start time in its own clock,
//! and refuses a host whose clock is further off than the trial can absorb.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::Remote;
use crate::LabError;

/// Round trips measured per host; the shortest one's offset is kept.
pub const SAMPLES: usize = 5;

/// One host's clock as measured: how far it is ahead of the controller's (negative: behind)
/// and the round trip of the sample that says so (the offset is known to within half of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ClockOffset {
    pub offset_ns: i64,
    pub rtt_ns: u64,
}

/// This machine's wall clock in nanoseconds since the epoch.
pub fn now_ns() -> i128 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

/// Measures `remote`'s clock against this machine's: one session of `corelane guard
/// --clock` there, asked for the time [`SAMPLES`] times after a first, discarded round trip
/// (which includes the program's start), so each round trip is the connection's alone.
pub fn measure(remote: &Remote) -> Result<ClockOffset, LabError> {
    let host = remote.target().to_string();
    let refused = |problem: String| LabError::Remote { host: host.clone(), problem };
    let argv = remote.session_argv(remote.corelane(), &["guard".into(), "--clock".into()]);
    let mut child = crate::process::with_parent_death_signal(&argv)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| LabError::io("cannot run ssh", e))?;
    let (mut ask, replies) = (child.stdin.take(), lines_of(child.stdout.take()));
    let mut best: Option<ClockOffset> = None;
    for round in 0..=SAMPLES {
        let before = now_ns();
        let asked =
            ask.as_mut().is_some_and(|a| a.write_all(b"?\n").and_then(|_| a.flush()).is_ok());
        let reply = replies.recv_timeout(REPLY_TIME).ok().filter(|_| asked);
        let after = now_ns();
        let Some(reply) = reply else {
            end(child, ask);
            return Err(refused(format!(
                "`corelane guard --clock` there gave no time within {REPLY_TIME:?}: check the connection"
            )));
        };
        let Some(theirs) = parse_reply(&reply) else {
            end(child, ask);
            return Err(refused(format!(
                "`corelane guard --clock` printed {:?}, not nanoseconds since the epoch: is the corelane there a real one?",
                corelane::child_output::printable(&reply, 100)
            )));
        };
        match sample(before, theirs, after) {
            Some(s) if round > 0 && best.is_none_or(|b| s.rtt_ns < b.rtt_ns) => best = Some(s),
            _ => {}
        }
    }
    end(child, ask);
    best.ok_or_else(|| {
        refused(
            "this machine's clock went backwards while measuring that host's: measure again".into(),
        )
    })
}

/// How long one round trip may take before the host is named.
const REPLY_TIME: Duration = Duration::from_secs(10);

/// The lines `out` carries, read on a thread of their own; at most a few bytes in all (the
/// replies of one measurement), so a host that floods is cut off, not buffered.
fn lines_of(out: Option<std::process::ChildStdout>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    if let Some(out) = out {
        std::thread::spawn(move || {
            let mut out = BufReader::new(out.take((SAMPLES as u64 + 1) * 64));
            let mut line = String::new();
            while matches!(out.read_line(&mut line), Ok(n) if n > 0) {
                if tx.send(std::mem::take(&mut line)).is_err() {
                    break;
                }
            }
        });
    }
    rx
}

/// Ends the measuring session: stdin closed, so the guard there ends and with it the ssh
/// session (waited for, so nothing of it is left on the host when the lab goes on); the ssh
/// client is killed only if that takes longer than [`REPLY_TIME`].
fn end(mut child: std::process::Child, ask: Option<std::process::ChildStdin>) {
    drop(ask);
    let deadline = std::time::Instant::now() + REPLY_TIME;
    while std::time::Instant::now() < deadline {
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// `corelane guard --clock`: for each line read (its content ignored), one line with this
/// host's wall clock in nanoseconds since the epoch; ends when input does.
pub fn answer(input: &mut dyn BufRead, out: &mut dyn Write) -> std::io::Result<()> {
    let mut buf = Vec::new();
    // Lines are read in bounded pieces: a line without end is many pieces, not a large buffer.
    while (&mut *input).take(64).read_until(b'\n', &mut buf)? > 0 {
        if buf.ends_with(b"\n") {
            writeln!(out, "{}", now_ns().max(0))?;
            out.flush()?;
        }
        buf.clear();
    }
    Ok(())
}

/// The host's reading: one line of decimal digits, nanoseconds since the epoch.
pub fn parse_reply(reply: &str) -> Option<i128> {
    let text = reply.trim();
    (!text.is_empty() && text.len() <= 20 && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse::<u64>().ok())
        .flatten()
        .map(i128::from)
}

/// One sample: `theirs` read between our `before` and `after` (`None` if our clock stepped
/// back, or the figures do not fit the report's integers).
fn sample(before: i128, theirs: i128, after: i128) -> Option<ClockOffset> {
    let rtt = after.checked_sub(before).filter(|r| *r >= 0)?;
    let offset = theirs - (before + rtt / 2);
    Some(ClockOffset { offset_ns: i64::try_from(offset).ok()?, rtt_ns: u64::try_from(rtt).ok()? })
}

/// How far a load host's clock may be off for a trial of `trial`: a twentieth of it (150 ms
/// for the shortest, 3 s trial). The start is corrected by the measured offset, but a clock
/// further off than that is not kept in step with the others, so the correction measured
/// before the trial need not hold through it.
pub fn tolerance(trial: Duration) -> Duration {
    trial / 20
}

/// Refuses `host` when its offset, or the uncertainty of it (half the round trip), exceeds
/// what `trial` tolerates: one line naming the host, the offset and the limit.
pub fn check(host: &str, clock: &ClockOffset, trial: Duration) -> Result<(), LabError> {
    let limit = tolerance(trial);
    let beyond = format!("beyond the {} a {} s trial tolerates", ms(limit), trial.as_secs());
    let off = Duration::from_nanos(clock.offset_ns.unsigned_abs());
    let side = if clock.offset_ns >= 0 { "ahead of" } else { "behind" };
    let unsure = Duration::from_nanos(clock.rtt_ns / 2);
    let problem = if off > limit {
        format!(
            "its clock is {} {side} this machine's, {beyond}: synchronise the clocks (chrony, ntpd) or lengthen --duration",
            ms(off)
        )
    } else if unsure > limit {
        format!(
            "its clock can only be measured to within {} (control round trip {}), {beyond}: use a faster management network or lengthen --duration",
            ms(unsure),
            ms(Duration::from_nanos(clock.rtt_ns))
        )
    } else {
        return Ok(());
    };
    Err(LabError::Remote { host: host.into(), problem })
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_is_taken_at_the_middle_of_the_round_trip() {
        let s = sample(1_000, 5_050, 1_100).unwrap();
        assert_eq!(s, ClockOffset { offset_ns: 4_000, rtt_ns: 100 });
        let s = sample(10_000, 9_000, 10_200).unwrap();
        assert_eq!(s.offset_ns, -1_100);
        assert!(sample(2_000, 1, 1_000).is_none(), "our clock went backwards");
        assert!(sample(0, i128::from(u64::MAX) * 4, 10).is_none(), "too far for an i64");
    }

    /// A host's reply is hostile input: anything but one line of digits is refused, and
    /// nothing in it can panic or overflow.
    #[test]
    fn clock_replies_other_than_digits_are_refused() {
        assert_eq!(parse_reply("1700000000123456789\n"), Some(1_700_000_000_123_456_789));
        for bad in ["", "-5", "1.5", "12 34", "99999999999999999999999", "0x10", "١٢", "\u{1b}[2J"]
        {
            assert_eq!(parse_reply(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn an_offset_beyond_the_trials_tolerance_is_refused_in_one_line() {
        let trial = Duration::from_secs(3);
        assert_eq!(tolerance(trial), Duration::from_millis(150));
        let ok = ClockOffset { offset_ns: -149_000_000, rtt_ns: 2_000_000 };
        assert!(check("h1", &ok, trial).is_ok());
        let far = ClockOffset { offset_ns: -151_000_000, rtt_ns: 2_000_000 };
        let e = check("root@h1", &far, trial).unwrap_err().to_string();
        assert!(e.starts_with("root@h1: its clock is 151.0 ms behind"), "{e}");
        assert!(e.contains("150.0 ms a 3 s trial") && !e.contains('\n'), "{e}");
        let slow = ClockOffset { offset_ns: 0, rtt_ns: 400_000_000 };
        let e = check("h2", &slow, trial).unwrap_err().to_string();
        assert!(e.starts_with("h2: its clock can only be measured to within 200.0 ms"), "{e}");
        let extreme = ClockOffset { offset_ns: i64::MIN, rtt_ns: u64::MAX };
        assert!(check("h3", &extreme, trial).is_err());
    }

    #[test]
    fn the_clock_answers_each_line_and_ends_with_its_input() {
        let mut out = Vec::new();
        let long = "x".repeat(1000);
        let input = format!("?\n{long}\n?");
        answer(&mut input.as_bytes(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let replies: Vec<i128> = text.lines().map(|l| parse_reply(l).unwrap()).collect();
        assert_eq!(replies.len(), 2, "one reply per whole line: {text}");
        assert!(replies[0] <= replies[1] && replies[0] > 1_600_000_000_000_000_000);
    }

    proptest::proptest! {
        #[test]
        fn any_reply_and_timing_never_panics(
            reply in "[0-9 \\-\\n.a-z]{0,30}",
            before in proptest::prelude::any::<i64>(),
            rtt in proptest::prelude::any::<u32>(),
        ) {
            if let Some(theirs) = parse_reply(&reply) {
                let before = i128::from(before);
                if let Some(s) = sample(before, theirs, before + i128::from(rtt)) {
                    let _ = check("h", &s, Duration::from_secs(3));
                }
            }
        }
    }
}
