//! A syscall CPU contended by several processes' carriers: while it is, the threads lane
//! leaves every call to its caller.
//!
//! A carrier is a thread of its process (it must share its descriptor table), so a
//! pre-forking server with eight processes has eight carriers on the syscall CPU, and each
//! carried call makes its caller wait: it leaves the program's CPU (a process switch there) or
//! spins for the round trip, which must first bring that process's carrier onto the syscall
//! CPU. Measured under Apache prefork with the client beside it (docs/RESULTS.md, "a
//! contended syscall CPU"): every carried call cost the program's CPU more than the call
//! itself (1.3 more process switches per call; the calls carried hold 2.1 µs of kernel work
//! each), whatever the syscall CPU's policy — taking turns, a directed hand-off, spinning —
//! and carrying nothing kept 0.92x where carrying kept 0.60x.
//!
//! So a process whose callers keep posting while another process's carrier is awake on the
//! same CPU (the run's count there above one: `stats::awake_on`) marks the CPU contended for
//! [`WINDOW_MS`], and meanwhile the callers whose carriers run there make their calls
//! themselves (counted: `corelane run` shows them). Their carriers drain and sleep; when the
//! window ends unrenewed, calls are carried again, and if the contention comes back with
//! them, so does the mark. A single process's lane never sees two processes' carriers on one
//! CPU and is never affected.
//!
//! The mark lives in the run's shared area, which every program of the run can write: a
//! wrong mark only makes calls go uncarried for at most one window, and one further than a
//! window ahead is ignored.

use core::sync::atomic::AtomicU32;
use core::sync::atomic::Ordering::Relaxed;

use crate::stats;
use crate::sys::{clock_ns, CLOCK_MONOTONIC_COARSE};

/// How long a CPU stays contended after two processes' carriers were last seen awake on it
/// together (each end of a window costs one round of wake-ups, one per process).
const WINDOW_MS: u32 = 100;
/// How many posts crowded by another process's carrier, within how long, make a CPU contended.
const CROWDED_POSTS: u32 = 4;
const CROWDED_SPAN_MS: u32 = 10;
/// A mark is moved on at most this often (it shares a cache line every caller reads).
const RENEW_MS: u32 = 10;

/// CLOCK_MONOTONIC_COARSE in ms (wrapping): a vDSO read of a few ns, exact to a tick.
fn now_ms() -> u32 {
    (clock_ns(CLOCK_MONOTONIC_COARSE).unwrap_or(0) / 1_000_000) as u32
}

/// Whether the mark `until` (0: none) holds at `now`: ahead of it, by at most a window.
fn holds(until: u32, now: u32) -> bool {
    let ahead = until.wrapping_sub(now);
    until != 0 && ahead != 0 && ahead <= WINDOW_MS
}

/// The mark to store at `now` over `until`, if it should move (0 is kept for "none").
fn renewed(until: u32, now: u32) -> Option<u32> {
    let next = now.wrapping_add(WINDOW_MS).max(1);
    (!holds(until, now) || next.wrapping_sub(until) >= RENEW_MS).then_some(next)
}

/// A caller of this process posted while another process's carrier was awake on `cpu` too.
/// [`CROWDED_POSTS`] such posts within [`CROWDED_SPAN_MS`] make the CPU contended: one
/// process's occasional call (a server's parent waking once a second) does not.
pub fn crowded_post(cpu: usize) {
    // This process's span and its count (a race between its threads only miscounts a post).
    static SINCE: AtomicU32 = AtomicU32::new(0);
    static POSTS: AtomicU32 = AtomicU32::new(0);
    let (since, posts, contended) = count_post(SINCE.load(Relaxed), POSTS.load(Relaxed), now_ms());
    SINCE.store(since, Relaxed);
    POSTS.store(posts, Relaxed);
    if contended {
        note(cpu);
    }
}

/// One crowded post at `now`, over a span begun at `since` holding `posts`: the span and
/// count after it, and whether they make the CPU contended.
fn count_post(since: u32, posts: u32, now: u32) -> (u32, u32, bool) {
    let (since, posts) = if now.wrapping_sub(since) > CROWDED_SPAN_MS {
        (now, 1)
    } else {
        (since, posts.saturating_add(1))
    };
    (since, posts, posts >= CROWDED_POSTS)
}

/// Marks `cpu` contended for [`WINDOW_MS`] from now.
fn note(cpu: usize) {
    let Some(word) = stats::contended_until(cpu) else { return };
    if let Some(next) = renewed(word.load(Relaxed), now_ms()) {
        word.store(next, Relaxed);
    }
}

/// Whether `cpu` counts as contended now. Asked before every carried call: the clock is read
/// only when there is a mark (a single process's never has one).
pub fn contended(cpu: usize) -> bool {
    let until = stats::contended_until(cpu).map_or(0, |word| word.load(Relaxed));
    until != 0 && holds(until, now_ms())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_holds_for_one_window_across_the_clock_wrapping() {
        for now in [5u32, 1_000_000, u32::MAX - 3] {
            let until = renewed(0, now).unwrap();
            assert!(holds(until, now));
            assert!(holds(until, now.wrapping_add(WINDOW_MS - 1)));
            assert!(!holds(until, now.wrapping_add(WINDOW_MS)), "ends after one window");
        }
        assert!(!holds(0, 0) && !holds(0, 7), "0 is no mark");
    }

    #[test]
    fn a_mark_far_ahead_or_behind_is_none() {
        let now = 1_000_000;
        assert!(!holds(now + WINDOW_MS + 1, now), "a hostile mark far ahead is ignored");
        assert!(!holds(now - 1, now), "a past mark is over");
    }

    #[test]
    fn only_posts_crowded_in_quick_succession_make_a_cpu_contended() {
        let run = |gap: u32| {
            let (mut since, mut posts, mut now) = (0, 0, 1_000_000u32);
            (0..CROWDED_POSTS)
                .map(|_| {
                    let contended;
                    (since, posts, contended) = count_post(since, posts, now);
                    now = now.wrapping_add(gap);
                    contended
                })
                .collect::<Vec<_>>()
        };
        let mut quick = vec![false; CROWDED_POSTS as usize - 1];
        quick.push(true);
        assert_eq!(run(1), quick, "the last of a quick run marks it");
        assert!(!run(CROWDED_SPAN_MS + 1).contains(&true), "a parent's post a second never does");
    }

    #[test]
    fn a_mark_moves_at_most_every_renew_interval() {
        let now = 1_000_000;
        let until = renewed(0, now).unwrap();
        assert_eq!(renewed(until, now + RENEW_MS - 1), None);
        assert_eq!(renewed(until, now + RENEW_MS), Some(now + RENEW_MS + WINDOW_MS));
        assert_eq!(renewed(now - 1, now), Some(now + WINDOW_MS), "an expired mark moves at once");
    }
}
