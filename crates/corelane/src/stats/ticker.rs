//! The clock behind every once-a-second report (`lane::Monitor`'s, for udp recv, echo, send
//! and ping, serve and load http): ticks on a fixed schedule from the start (no drift), a short poll between
//! them so the caller's stop conditions are seen promptly, and never past a deadline.

use std::time::{Duration, Instant};

/// How often a waiting caller wakes to check its stop conditions between ticks.
const POLL: Duration = Duration::from_millis(20);

/// One tick: its number (from 1) and the time since the previous tick and since the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tick {
    pub index: u64,
    pub since_last: Duration,
    pub since_start: Duration,
}

#[derive(Debug, Clone)]
pub struct Ticker {
    period: Duration,
    start: Instant,
    last: Instant,
    next: Instant,
    index: u64,
}

impl Ticker {
    /// A ticker that starts now and ticks every `period`.
    pub fn every(period: Duration) -> Self {
        Self::starting_at(Instant::now(), period)
    }

    /// A ticker whose first tick is one `period` after `start` (which may be ahead: ticks
    /// that begin once a warm-up is over).
    pub fn starting_at(start: Instant, period: Duration) -> Self {
        Self { period, start, last: start, next: start + period, index: 0 }
    }

    /// When the ticker started.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Waits until the next tick, at most a short poll interval and never past `deadline`;
    /// returns the tick if one is due.
    pub fn wait(&mut self, deadline: Option<Instant>) -> Option<Tick> {
        let now = Instant::now();
        if now < self.next {
            let mut wake = self.next.min(now + POLL);
            if let Some(d) = deadline {
                wake = wake.min(d);
            }
            std::thread::sleep(wake.saturating_duration_since(now));
        }
        let now = Instant::now();
        (now >= self.next).then(|| self.fire(now))
    }

    fn fire(&mut self, now: Instant) -> Tick {
        self.index += 1;
        let tick = Tick {
            index: self.index,
            since_last: now.duration_since(self.last),
            since_start: now.duration_since(self.start),
        };
        self.last = now;
        self.next += self.period;
        // A caller that fell behind (a stalled machine) gets one tick, not a burst of them.
        if self.next <= now {
            self.next = now + self.period;
        }
        tick
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_on_schedule_and_never_past_the_deadline() {
        let mut t = Ticker::every(Duration::from_millis(50));
        let mut ticks = Vec::new();
        while t.start().elapsed() < Duration::from_millis(230) {
            if let Some(tick) = t.wait(None) {
                ticks.push(tick);
            }
        }
        // Numbered in order; a stalled machine may give fewer (one tick per stall), and no
        // more than the periods that passed (a last wait may overrun the 230 ms).
        let periods = t.start().elapsed().as_millis() / 50;
        assert!(!ticks.is_empty() && ticks.len() as u128 <= periods, "{ticks:?}");
        for (i, tick) in ticks.iter().enumerate() {
            assert_eq!(tick.index, i as u64 + 1, "{ticks:?}");
        }
        // Tick i is due i periods after the start, or later after a stall: never earlier.
        for tick in &ticks {
            let due = Duration::from_millis(50 * tick.index);
            assert!(tick.since_start >= due, "{ticks:?}");
        }

        let mut t = Ticker::every(Duration::from_secs(10));
        let deadline = Instant::now() + Duration::from_millis(5);
        let before = Instant::now();
        assert_eq!(t.wait(Some(deadline)), None);
        // The deadline, not the 10 s period, ends the wait (a loaded machine may add a stall).
        assert!(before.elapsed() < Duration::from_millis(500));
    }
}
