//! Pacing a sender to a rate: one rule for the socket and the AF_XDP senders.

use std::time::{Duration, Instant};

/// Paces a sender at `rate` datagrams/s (none: unpaced): datagram `sent` is due at
/// `start + sent/rate`; if that is later than `now`, sleeps toward it (at most 50 ms, so the
/// caller sees its stop conditions) and returns true: the caller checks again before sending.
pub(super) fn wait_for_pace(start: Instant, sent: u64, rate: Option<u64>, now: Instant) -> bool {
    let Some(rate) = rate else { return false };
    let due = start + Duration::from_secs_f64(sent as f64 / rate as f64);
    if due <= now {
        return false;
    }
    std::thread::sleep((due - now).min(Duration::from_millis(50)));
    true
}
