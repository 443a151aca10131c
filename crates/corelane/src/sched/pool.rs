//! Worker lanes behind lock-free SPSC rings (rtrb): one ring to each worker, one back from
//! it, both moved in bursts (one index update per burst, not per event). A worker serves its
//! ring in FIFO order, honouring an event's `not_before_ns` and spinning for its cost, so the
//! events of one worker come back in the order they went.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::dispatch::{Assignment, Event};
use crate::lane::{self, LaneSet, StopSignal};

/// Events a ring hands over at once.
pub const BURST: usize = 64;

#[derive(Debug, Default)]
#[repr(align(128))]
struct WorkerStats {
    busy_ns: AtomicU64,
}

/// A running set of workers.
#[derive(Debug)]
pub struct WorkerPool {
    to: Vec<rtrb::Producer<Event>>,
    from: Vec<rtrb::Consumer<Event>>,
    outbox: Vec<Vec<Event>>,
    lanes: LaneSet<()>,
    stop: Arc<AtomicBool>,
    stats: Arc<Vec<WorkerStats>>,
    last_busy: Vec<u64>,
    clock: Instant,
}

impl WorkerPool {
    /// Starts `workers` lanes, pinned round-robin over `cpus` (unpinned when empty), with
    /// rings of `ring` events; `spin`: workers spin for each event's cost.
    pub fn start(workers: usize, ring: usize, cpus: &[usize], spin: bool) -> io::Result<Self> {
        let signal = StopSignal::new();
        let stop = signal.flag();
        let stats: Arc<Vec<WorkerStats>> = lane::per_lane(workers);
        let clock = Instant::now();
        let mut pool = Self {
            to: Vec::with_capacity(workers),
            from: Vec::with_capacity(workers),
            outbox: (0..workers).map(|_| Vec::with_capacity(4 * BURST)).collect(),
            lanes: LaneSet::new("sched-worker", signal),
            stop: Arc::clone(&stop),
            stats: Arc::clone(&stats),
            last_busy: vec![0; workers],
            clock,
        };
        for w in 0..workers {
            let (tx, rx) = rtrb::RingBuffer::<Event>::new(ring.max(2));
            let (done_tx, done_rx) = rtrb::RingBuffer::<Event>::new(ring.max(2) * 4);
            pool.to.push(tx);
            pool.from.push(done_rx);
            let (stop, stats) = (Arc::clone(&stop), Arc::clone(&stats));
            let cpu = (!cpus.is_empty()).then(|| cpus[w % cpus.len()]);
            // On an error, dropping `pool` stops and joins the workers already started.
            pool.lanes.spawn(cpu, move || {
                serve(rx, done_tx, &stop, &stats[w], clock, spin);
                Ok(())
            })?;
        }
        Ok(pool)
    }

    /// The clock `not_before_ns` times are read on.
    pub fn now_ns(&self) -> u64 {
        self.clock.elapsed().as_nanos() as u64
    }

    pub fn workers(&self) -> usize {
        self.to.len()
    }

    /// Whether every worker's outbox has room for a burst (back-pressure).
    pub fn has_room(&self) -> bool {
        self.outbox.iter().all(|o| o.len() < BURST)
    }

    /// Queues a placed event for its worker (sent by the next `flush`).
    pub fn send(&mut self, placed: Assignment) {
        self.outbox[placed.worker].push(placed.event);
    }

    /// Moves what the rings have room for, in order.
    pub fn flush(&mut self) {
        for (ring, out) in self.to.iter_mut().zip(self.outbox.iter_mut()) {
            let room = ring.slots().min(out.len());
            if room > 0 {
                if let Ok(chunk) = ring.write_chunk_uninit(room) {
                    chunk.fill_from_iter(out.drain(..room));
                }
            }
        }
    }

    /// Hands every completed event, with its worker, to `f`, each worker's in its order.
    pub fn drain(&mut self, mut f: impl FnMut(Event, usize)) {
        for (w, rx) in self.from.iter_mut().enumerate() {
            let n = rx.slots();
            let Ok(chunk) = rx.read_chunk(n) else { continue };
            for ev in chunk {
                f(ev, w);
            }
        }
    }

    /// Each worker's busy fraction since the previous call, over `window_ns`.
    pub fn busy_fractions(&mut self, window_ns: u64) -> Vec<f64> {
        self.stats
            .iter()
            .zip(self.last_busy.iter_mut())
            .map(|(s, last)| {
                let b = s.busy_ns.load(Ordering::Relaxed);
                let f = b.saturating_sub(*last) as f64 / window_ns.max(1) as f64;
                *last = b;
                f.min(1.0)
            })
            .collect()
    }

    /// Each worker's busy time so far, in ns.
    pub fn busy_totals(&self) -> Vec<f64> {
        self.stats.iter().map(|s| s.busy_ns.load(Ordering::Relaxed) as f64).collect()
    }

    /// Stops the workers and waits for them.
    pub fn stop(self) -> io::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        self.lanes.join().map(drop)
    }
}

/// A worker: a burst in, each event served in order, the burst back out.
fn serve(
    mut rx: rtrb::Consumer<Event>,
    mut done_tx: rtrb::Producer<Event>,
    stop: &AtomicBool,
    stats: &WorkerStats,
    clock: Instant,
    spin: bool,
) {
    let mut busy = 0u64;
    let mut done: Vec<Event> = Vec::with_capacity(BURST);
    let mut idle = 0u32;
    while !stop.load(Ordering::Relaxed) {
        let n = rx.slots().min(BURST);
        if n == 0 {
            // Poll, then yield, then nap: a worker with nothing to do leaves its CPU to others.
            idle = idle.saturating_add(1);
            match idle {
                0..1_000 => std::hint::spin_loop(),
                1_000..100_000 => std::thread::yield_now(),
                _ => std::thread::sleep(std::time::Duration::from_micros(50)),
            }
            continue;
        }
        idle = 0;
        let Ok(chunk) = rx.read_chunk(n) else { continue };
        for ev in chunk {
            if ev.not_before_ns > 0 {
                while (clock.elapsed().as_nanos() as u64) < ev.not_before_ns {
                    std::hint::spin_loop();
                }
            }
            if spin && ev.cost_ns > 0 {
                let start = Instant::now();
                while (start.elapsed().as_nanos() as u64) < ev.cost_ns as u64 {
                    std::hint::spin_loop();
                }
                busy += start.elapsed().as_nanos() as u64;
            }
            done.push(ev);
        }
        stats.busy_ns.store(busy, Ordering::Relaxed);
        let mut sent = 0;
        while sent < done.len() {
            let room = done_tx.slots().min(done.len() - sent);
            if room == 0 {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                std::hint::spin_loop();
                continue;
            }
            if let Ok(chunk) = done_tx.write_chunk_uninit(room) {
                sent += chunk.fill_from_iter(done[sent..sent + room].iter().copied());
            }
        }
        done.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ev(flow: u32, seq: u64) -> Event {
        Event::new(flow, seq, 0, 0, 1)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        // Whatever goes to which worker, every event comes back exactly once, and each
        // worker's events come back in the order they were sent.
        #[test]
        fn every_event_returns_once_in_its_workers_order(
            plan in proptest::collection::vec(0usize..3, 1..2000),
        ) {
            let mut pool = WorkerPool::start(3, 8, &[], false).unwrap();
            let mut sent = vec![Vec::new(); 3];
            let mut back = vec![Vec::new(); 3];
            for (seq, &w) in plan.iter().enumerate() {
                while !pool.has_room() {
                    pool.flush();
                    pool.drain(|e, w| back[w].push(e.seq));
                }
                pool.send(Assignment { worker: w, event: ev(w as u32, seq as u64) });
                sent[w].push(seq as u64);
            }
            let deadline = Instant::now() + std::time::Duration::from_secs(5);
            while back.iter().map(Vec::len).sum::<usize>() < plan.len() && Instant::now() < deadline {
                pool.flush();
                pool.drain(|e, w| back[w].push(e.seq));
            }
            pool.stop().unwrap();
            prop_assert_eq!(back, sent);
        }
    }
}
