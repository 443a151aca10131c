//! The latency client (`udp ping`): sockperf's ping-pong (one message in flight) and
//! under-load (a fixed message rate) on one pinned lane, measuring round-trip times into HDR
//! histograms.
//!
//! Under load the client is open loop: message `n` is due at `n / rate` seconds, and it is
//! sent then whatever the replies do. Its latency is taken from that scheduled time, so a
//! stall anywhere — the server, the network, this client's own thread — is charged to every
//! message it delayed (free of coordinated omission, as wrk2); the figure from the moment
//! the message actually left is kept beside it (`uncorrected`). The two differ exactly by how
//! late the client sent.
//!
//! Every message goes out marked as a request (corelane's request magic, or sockperf's client
//! and answer-me flags) and every reply is checked before it is believed: it must be marked as
//! a reply (corelane's reply magic, or sockperf's client bit cleared), of the size sent, on
//! the flow (socket) it was sent on, for a message sent and not yet answered. Anything else is counted (invalid, duplicate, late), never trusted and never a panic.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use socket2::{Domain, Protocol, Socket, Type};

use super::payload;
use super::socket::{apply_busy_poll, BusyPollState};
use super::{sockperf, UdpError, Wire, MAX_PAYLOAD};
use crate::lane::{LaneSet, LanesEnd, Monitor, Placement, Second, SecondDue, StopSignal, Watch};
use crate::stats::latency::{new_histogram, record};
use crate::stats::{self, Percentiles};
use crate::sys::mmsg::MmsgRecv;

/// How messages are paced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PingMode {
    /// One message in flight: the next leaves when the reply to the last arrived (or it
    /// timed out). Closed loop: the scheduled and the actual send time are the same.
    PingPong,
    /// Open loop at `rate` messages per second over all flows.
    UnderLoad { rate: u64 },
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct PingConfig {
    pub target: SocketAddr,
    pub mode: PingMode,
    /// Payload bytes per message (16 … 65507).
    pub size: usize,
    /// Sockets (source ports), used round-robin.
    pub flows: usize,
    /// Where the client's lane runs (its first CPU).
    pub placement: Placement,
    /// How long to measure, after the warm-up.
    pub duration: Duration,
    /// Messages sent in this first stretch are answered but not measured.
    pub warmup: Duration,
    /// A reply later than this counts as lost.
    pub timeout: Duration,
    /// Stop after this many measured messages.
    pub count: Option<u64>,
    /// SO_BUSY_POLL microseconds on the client's sockets.
    pub busy_poll_us: Option<u32>,
    /// corelane's payload, or sockperf's header (to measure `sockperf sr`).
    pub wire: Wire,
}

impl PingConfig {
    pub fn new(target: SocketAddr, mode: PingMode) -> Self {
        Self {
            target,
            mode,
            size: 64,
            flows: 1,
            placement: Placement::Unpinned,
            duration: Duration::from_secs(10),
            warmup: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            count: None,
            busy_poll_us: None,
            wire: Wire::Corelane,
        }
    }
}

/// One second of measuring.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PingInterval {
    pub index: u64,
    pub at_secs: f64,
    /// Messages sent and replies taken this second.
    pub sent: u64,
    pub received: u64,
    /// Round trips this second, µs, from the scheduled send time.
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// Everything a ping run measured. Latencies are round-trip times in µs (sockperf prints
/// half of this: its "latency" is RTT/2).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PingSummary {
    pub target: SocketAddr,
    /// `ping-pong` or `under-load`.
    pub mode: String,
    /// Messages per second asked for (under load).
    pub rate: Option<u64>,
    /// Messages per second sent over the measured stretch.
    pub achieved_rate: f64,
    pub size: usize,
    pub flows: usize,
    /// Always `round_trip`: the figures are whole round trips, not halves.
    pub measure: String,
    pub elapsed_secs: f64,
    /// Measured messages sent (warm-up excluded).
    pub sent: u64,
    /// Measured messages answered once, in time.
    pub received: u64,
    /// Measured messages never answered within the timeout.
    pub lost: u64,
    /// Replies to a message already answered.
    pub duplicates: u64,
    /// Replies that came after a reply to a later message.
    pub reordered: u64,
    /// Replies after their message was given up as lost.
    pub late: u64,
    /// Replies that were not an answer to anything sent: too short, not corelane's, damaged,
    /// the wrong size or flow, or a sequence number never sent.
    pub invalid: u64,
    /// ICMP port unreachable reported on the client's sockets (nobody listening).
    pub refused: u64,
    /// Sends the kernel refused (full buffers); those messages never left.
    pub send_errors: u64,
    /// Round trips from the scheduled send time (corrected for coordinated omission).
    #[serde(flatten)]
    pub latency: Percentiles,
    /// Round trips from the moment each message actually left.
    pub uncorrected: Percentiles,
    /// The client lane's exact CPU time per message sent and answered.
    pub client_cpu_ns_per_message: f64,
    pub busy_poll: BusyPollState,
}

/// What the lane hands the caller each second: the line and that second's histogram (for
/// an interval log).
type Report = (PingInterval, Histogram<u64>);

/// Connected sockets, ready to measure.
#[derive(Debug)]
pub struct Ping {
    config: PingConfig,
    sockets: Vec<UdpSocket>,
    busy_poll: BusyPollState,
}

impl Ping {
    /// Validates the configuration and connects every flow's socket.
    pub fn connect(config: PingConfig) -> Result<Self, UdpError> {
        if !(payload::HEADER_LEN..=MAX_PAYLOAD).contains(&config.size) {
            return Err(UdpError::Size {
                size: config.size,
                min: payload::HEADER_LEN,
                max: MAX_PAYLOAD,
            });
        }
        if !(1..=1024).contains(&config.flows) {
            return Err(UdpError::Flows(config.flows));
        }
        if config.mode == (PingMode::UnderLoad { rate: 0 }) {
            return Err(UdpError::ZeroRate);
        }
        config.placement.check()?;
        let mut raw = Vec::with_capacity(config.flows);
        for _ in 0..config.flows {
            let s =
                Socket::new(Domain::for_address(config.target), Type::DGRAM, Some(Protocol::UDP))
                    .map_err(|e| UdpError::io("cannot create a UDP socket", e))?;
            s.connect(&config.target.into())
                .map_err(|e| UdpError::io(format!("cannot reach {}", config.target), e))?;
            raw.push(s);
        }
        let busy_poll = apply_busy_poll(raw.iter(), config.busy_poll_us);
        let sockets = raw.into_iter().map(UdpSocket::from).collect();
        Ok(Self { config, sockets, busy_poll })
    }

    /// Measures, calling `on_interval` each second (after the warm-up) from the calling
    /// thread with the line and that second's histogram of corrected round trips (ns).
    pub fn run(
        self,
        stop: &StopSignal,
        on_interval: impl FnMut(&PingInterval, &Histogram<u64>),
    ) -> Result<PingSummary, UdpError> {
        let (tx, rx) = mpsc::channel::<Report>();
        let cpu = self.config.placement.cpu_of(0);
        let lane_stop = StopSignal::new();
        let second_due = SecondDue::default();
        let mut lanes = LaneSet::new("corelane-ping", lane_stop.clone());
        let Ping { config, sockets, busy_poll } = self;
        let warmup = config.warmup;
        let lane = PingLane::new(config, sockets, lane_stop.clone(), second_due.clone(), tx)
            .map_err(|e| UdpError::io("cannot set up the client", e))?;
        lanes
            .spawn(cpu, move || lane.run())
            .map_err(|e| UdpError::io("cannot start the client lane", e))?;
        // The lane ends by itself (its duration or count, then the stragglers' timeout); on
        // Ctrl-C it stops sending and still waits for the stragglers.
        let mut monitor = Monitor::new(stop, LanesEnd::AllFinished).first_tick_after(warmup);
        let mut watch = PingWatch { second_due, lines: rx, on_interval };
        monitor.watch(&[&lanes], &mut watch);
        let joined = monitor.join(lanes);
        // The last lines, the partial second's included, before any error of the lane.
        watch.between();
        let (mut joined, _) = joined.map_err(|e| UdpError::io("the client lane failed", e))?;
        let mut summary = joined.remove(0).value;
        summary.busy_poll = busy_poll;
        Ok(summary)
    }
}

/// [`Ping::run`]'s seconds: the lane keeps each second's histogram and hands it over when
/// the monitor says the second is due.
struct PingWatch<F> {
    second_due: SecondDue,
    lines: mpsc::Receiver<Report>,
    on_interval: F,
}

impl<F: FnMut(&PingInterval, &Histogram<u64>)> Watch for PingWatch<F> {
    fn between(&mut self) {
        for (line, h) in self.lines.try_iter() {
            (self.on_interval)(&line, &h);
        }
    }

    fn second(&mut self, _: &Second) {
        self.second_due.raise();
    }
}

const EMPTY: u8 = 0;
const WAITING: u8 = 1;
const WAITING_WARMUP: u8 = 2;
const ANSWERED: u8 = 3;

/// Messages in flight, by sequence number modulo a power of two: when was each due and
/// when did it leave, and is it still waiting. Bounded memory whatever the peer does.
#[derive(Debug)]
struct Flights {
    mask: u64,
    scheduled: Vec<u64>,
    sent: Vec<u64>,
    state: Vec<u8>,
    /// The next sequence number to send.
    next: u64,
    highest_answered: Option<u64>,
}

/// What a reply turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Corrected and uncorrected round trips, ns.
    Measured(u64, u64),
    Warmup,
    Duplicate,
    Late,
    Invalid,
}

impl Flights {
    fn new(capacity: usize) -> Self {
        let capacity = capacity.clamp(1024, 1 << 21).next_power_of_two();
        Self {
            mask: capacity as u64 - 1,
            scheduled: vec![0; capacity],
            sent: vec![0; capacity],
            state: vec![EMPTY; capacity],
            next: 0,
            highest_answered: None,
        }
    }

    /// Takes the next sequence number; returns it and whether it evicted a message still
    /// waiting in a measured stretch (that one is lost).
    fn take(&mut self) -> (u64, bool) {
        let seq = self.next;
        self.next += 1;
        let i = (seq & self.mask) as usize;
        let evicted = self.state[i] == WAITING;
        self.state[i] = EMPTY;
        (seq, evicted)
    }

    fn sent(&mut self, seq: u64, scheduled: u64, sent: u64, measured: bool) {
        let i = (seq & self.mask) as usize;
        self.scheduled[i] = scheduled;
        self.sent[i] = sent;
        self.state[i] = if measured { WAITING } else { WAITING_WARMUP };
    }

    /// Judges a reply that arrived on flow `flow` at `now` (ns since start), as its header
    /// read (`None`: not a well-formed answer).
    fn judge(&mut self, header: Option<(usize, u64)>, flow: usize, now: u64) -> (Verdict, bool) {
        let Some((from, seq)) = header else { return (Verdict::Invalid, false) };
        if from != flow || seq >= self.next {
            return (Verdict::Invalid, false);
        }
        if seq + self.mask < self.next {
            return (Verdict::Late, false); // its slot holds a later message now
        }
        let i = (seq & self.mask) as usize;
        let verdict = match self.state[i] {
            WAITING => Verdict::Measured(
                now.saturating_sub(self.scheduled[i]),
                now.saturating_sub(self.sent[i]),
            ),
            WAITING_WARMUP => Verdict::Warmup,
            ANSWERED => Verdict::Duplicate,
            _ => Verdict::Late, // given up, or a send that failed
        };
        let mut reordered = false;
        if matches!(verdict, Verdict::Measured(..) | Verdict::Warmup) {
            self.state[i] = ANSWERED;
            reordered = self.highest_answered.is_some_and(|top| seq < top);
            self.highest_answered = Some(self.highest_answered.map_or(seq, |t| t.max(seq)));
        }
        (verdict, reordered)
    }

    /// Messages still waiting in a measured stretch.
    fn waiting(&self) -> u64 {
        self.state.iter().filter(|&&s| s == WAITING).count() as u64
    }

    /// Gives up on `seq`: true when it was a measured message still waiting (now lost).
    fn give_up(&mut self, seq: u64) -> bool {
        let i = (seq & self.mask) as usize;
        let lost = self.state[i] == WAITING;
        if matches!(self.state[i], WAITING | WAITING_WARMUP) {
            self.state[i] = EMPTY;
        }
        lost
    }

    fn is_answered(&self, seq: u64) -> bool {
        self.state[(seq & self.mask) as usize] == ANSWERED
    }

    fn any_waiting(&self) -> bool {
        self.state.iter().any(|&s| s == WAITING || s == WAITING_WARMUP)
    }
}

/// The flow and sequence number a reply of `size` bytes carries, if it is a well-formed
/// answer of the whole size sent.
fn read_header(wire: Wire, datagram: &[u8], size: usize, flows: usize) -> Option<(usize, u64)> {
    if datagram.len() != size {
        return None;
    }
    match wire {
        Wire::Corelane => payload::read_reply(datagram).ok().map(|h| (h.flow as usize, h.seq)),
        Wire::Sockperf => {
            sockperf::read_answer(datagram).map(|seq| ((seq % flows as u64) as usize, seq))
        }
    }
}

/// Counters of one run.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    sent: u64,
    received: u64,
    lost: u64,
    duplicates: u64,
    reordered: u64,
    late: u64,
    invalid: u64,
    refused: u64,
    send_errors: u64,
}

/// The client lane.
struct PingLane {
    config: PingConfig,
    sockets: Vec<UdpSocket>,
    stop: StopSignal,
    /// Raised by the monitor each second (after the warm-up): hand the second's line over.
    second_due: SecondDue,
    out: mpsc::Sender<Report>,
    flights: Flights,
    message: Vec<u8>,
    batch: MmsgRecv,
    counts: Counts,
    corrected: Histogram<u64>,
    uncorrected: Histogram<u64>,
    second: Histogram<u64>,
    second_counts: (u64, u64),
    start: Instant,
    /// Warm-up end, measurement end (ns since start).
    measure_from: u64,
    measure_to: u64,
    ticks: u64,
    /// When the last message was sent (ns since start): the measured stretch ends there.
    sending_ended: Option<u64>,
}

impl PingLane {
    fn new(
        config: PingConfig,
        sockets: Vec<UdpSocket>,
        stop: StopSignal,
        second_due: SecondDue,
        out: mpsc::Sender<Report>,
    ) -> io::Result<Self> {
        let capacity = match config.mode {
            PingMode::PingPong => 1024,
            PingMode::UnderLoad { rate } => {
                let window = config.timeout.as_secs_f64() + 1.0;
                (rate as f64 * window).min((1u64 << 21) as f64) as usize
            }
        };
        let mut message = vec![0u8; config.size];
        payload::prefill(&mut message);
        let measure_from = config.warmup.as_nanos() as u64;
        let measure_to = measure_from + config.duration.as_nanos() as u64;
        let timeout = config.timeout.max(Duration::from_millis(1));
        for s in &sockets {
            match config.mode {
                PingMode::PingPong => s.set_read_timeout(Some(timeout))?,
                PingMode::UnderLoad { .. } => s.set_nonblocking(true)?,
            }
        }
        Ok(Self {
            sockets,
            stop,
            second_due,
            out,
            flights: Flights::new(capacity),
            // One byte more than sent: a longer reply shows as the wrong size.
            batch: MmsgRecv::new(64, config.size + 1),
            message,
            counts: Counts::default(),
            corrected: new_histogram(),
            uncorrected: new_histogram(),
            second: new_histogram(),
            second_counts: (0, 0),
            start: Instant::now(),
            measure_from,
            measure_to,
            ticks: 0,
            sending_ended: None,
            config,
        })
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn done_sending(&self, now: u64) -> bool {
        let counted = self.config.count.is_some_and(|c| self.counts.sent >= c);
        self.stop.is_stopped() || now >= self.measure_to || counted
    }

    fn run(mut self) -> io::Result<PingSummary> {
        // Wake-ups to the nanosecond rather than the default 50 µs timer slack.
        let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
        self.start = Instant::now();
        let mut cpu_at_measure: Option<Duration> = None;
        match self.config.mode {
            PingMode::PingPong => self.ping_pong(&mut cpu_at_measure)?,
            PingMode::UnderLoad { rate } => self.under_load(rate, &mut cpu_at_measure)?,
        }
        let cpu_end = stats::thread_runtime();
        let end = self.sending_ended.unwrap_or_else(|| self.now());
        // Lost: measured messages still unanswered once the stragglers' time is up.
        self.counts.lost += self.flights.waiting();
        let end = end.min(self.measure_to).max(self.measure_from);
        let elapsed = (end - self.measure_from) as f64 / 1e9;
        self.flush_second(true);
        let c = self.counts;
        let cpu = cpu_end.saturating_sub(cpu_at_measure.unwrap_or(cpu_end));
        Ok(PingSummary {
            target: self.config.target,
            mode: match self.config.mode {
                PingMode::PingPong => "ping-pong".into(),
                PingMode::UnderLoad { .. } => "under-load".into(),
            },
            rate: match self.config.mode {
                PingMode::PingPong => None,
                PingMode::UnderLoad { rate } => Some(rate),
            },
            achieved_rate: if elapsed > 0.0 { c.sent as f64 / elapsed } else { 0.0 },
            size: self.config.size,
            flows: self.config.flows,
            measure: "round_trip".into(),
            elapsed_secs: elapsed,
            sent: c.sent,
            received: c.received,
            lost: c.lost,
            duplicates: c.duplicates,
            reordered: c.reordered,
            late: c.late,
            invalid: c.invalid,
            refused: c.refused,
            send_errors: c.send_errors,
            latency: Percentiles::of(&self.corrected),
            uncorrected: Percentiles::of(&self.uncorrected),
            client_cpu_ns_per_message: if c.sent > 0 {
                cpu.as_nanos() as f64 / c.sent as f64
            } else {
                0.0
            },
            busy_poll: BusyPollState::default(),
        })
    }

    /// Sends the next message, due at `scheduled` (now, when `None`: closed loop) on its flow.
    fn send(&mut self, scheduled: Option<u64>) -> bool {
        let (seq, evicted) = self.flights.take();
        self.counts.lost += u64::from(evicted);
        let flow = (seq % self.sockets.len() as u64) as usize;
        match self.config.wire {
            Wire::Corelane => payload::write_header(&mut self.message, flow as u32, seq),
            Wire::Sockperf => sockperf::write_request(&mut self.message, seq),
        }
        // Stamped before the call, as sockperf does: on loopback and veth the send itself
        // runs the receive path up to the server's socket.
        let sent = self.now();
        let scheduled = scheduled.unwrap_or(sent);
        let measured = scheduled >= self.measure_from;
        loop {
            match self.sockets[flow].send(&self.message) {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
                    // An ICMP error from an earlier message surfaced here; this one is not
                    // sent (the kernel reports the error instead of sending).
                    self.counts.refused += 1;
                    continue;
                }
                Err(_) => {
                    self.counts.send_errors += u64::from(measured);
                    return false;
                }
            }
        }
        self.flights.sent(seq, scheduled, sent, measured);
        if measured {
            self.counts.sent += 1;
            self.second_counts.0 += 1;
        }
        true
    }

    /// The start of each round of both loops: the time now, the CPU clock read once the
    /// measured part begins, and `None` (the end of sending noted) once nothing is left to send.
    fn next_round(&mut self, cpu_at: &mut Option<Duration>) -> Option<u64> {
        let now = self.now();
        if cpu_at.is_none() && now >= self.measure_from {
            *cpu_at = Some(stats::thread_runtime());
        }
        if self.done_sending(now) {
            self.sending_ended = Some(now);
            return None;
        }
        Some(now)
    }

    /// One message in flight: send, wait for its reply or the timeout, repeat.
    fn ping_pong(&mut self, cpu_at: &mut Option<Duration>) -> io::Result<()> {
        let timeout = self.config.timeout.as_nanos() as u64;
        // One byte more than sent, so that a longer reply is seen as the wrong size.
        let mut buf = vec![0u8; self.config.size + 1];
        loop {
            if self.next_round(cpu_at).is_none() {
                return Ok(());
            }
            self.tick();
            if !self.send(None) {
                // The kernel refused the send (full buffer): give it a moment, do not spin.
                std::thread::sleep(Duration::from_micros(100));
                continue;
            }
            let seq = self.flights.next - 1;
            let flow = (seq % self.sockets.len() as u64) as usize;
            let deadline = self.now() + timeout;
            loop {
                match self.sockets[flow].recv(&mut buf) {
                    Ok(len) => {
                        let now = self.now();
                        let header = read_header(
                            self.config.wire,
                            &buf[..len],
                            self.config.size,
                            self.sockets.len(),
                        );
                        let (v, r) = self.flights.judge(header, flow, now);
                        self.judge(v, r);
                        if self.flights.is_answered(seq) {
                            break;
                        }
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
                        self.counts.refused += 1;
                    }
                    Err(e) => return Err(e),
                }
                if self.now() >= deadline || self.stop.is_stopped() {
                    self.counts.lost += u64::from(self.flights.give_up(seq));
                    break;
                }
            }
        }
    }

    /// Open loop: message `n` leaves at `n / rate`, whatever the replies do.
    fn under_load(&mut self, rate: u64, cpu_at: &mut Option<Duration>) -> io::Result<()> {
        let due = |n: u64| (u128::from(n) * 1_000_000_000 / u128::from(rate)) as u64;
        let mut n = 0u64;
        while let Some(now) = self.next_round(cpu_at) {
            // Every message due by now leaves now: a late client catches up, and each late
            // message is charged from when it was due.
            while due(n) <= now && !self.done_sending(due(n)) {
                self.send(Some(due(n)));
                n += 1;
            }
            self.drain()?;
            self.tick();
            let (next, now) = (due(n), self.now());
            if next > now {
                self.wait(next - now)?;
            }
        }
        // The stragglers: replies to the last messages, for at most the timeout.
        let until = self.now() + self.config.timeout.as_nanos() as u64;
        while self.flights.any_waiting() {
            let now = self.now();
            if now >= until {
                break;
            }
            self.wait((until - now).min(10_000_000))?;
            self.drain()?;
        }
        Ok(())
    }

    /// Waits up to `ns` for a reply on any socket. A sleeping thread wakes late — tens of
    /// µs on a busy virtual machine — and every µs of it is charged to the next message, so
    /// the last `SPIN_NS` before a send are spent in the caller's loop reading the sockets
    /// without blocking (as sockperf's paced client spins).
    fn wait(&self, ns: u64) -> io::Result<()> {
        const SPIN_NS: u64 = 50_000;
        if ns <= SPIN_NS {
            return Ok(());
        }
        let ns = ns - SPIN_NS;
        let timeout = rustix::event::Timespec {
            tv_sec: (ns / 1_000_000_000) as i64,
            tv_nsec: (ns % 1_000_000_000) as i64,
        };
        let mut fds: Vec<rustix::event::PollFd<'_>> = self
            .sockets
            .iter()
            .map(|s| rustix::event::PollFd::new(s, rustix::event::PollFlags::IN))
            .collect();
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn judge(&mut self, verdict: Verdict, reordered: bool) {
        self.counts.reordered += u64::from(reordered);
        match verdict {
            Verdict::Measured(corrected, uncorrected) => {
                self.counts.received += 1;
                self.second_counts.1 += 1;
                record(&mut self.corrected, corrected);
                record(&mut self.uncorrected, uncorrected);
                record(&mut self.second, corrected);
            }
            Verdict::Warmup => {}
            Verdict::Duplicate => self.counts.duplicates += 1,
            Verdict::Late => self.counts.late += 1,
            Verdict::Invalid => self.counts.invalid += 1,
        }
    }

    /// Reads whatever replies are waiting on every socket, without blocking.
    fn drain(&mut self) -> io::Result<()> {
        for flow in 0..self.sockets.len() {
            loop {
                let n = match self.batch.recv(self.sockets[flow].as_fd(), libc::MSG_DONTWAIT) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
                        self.counts.refused += 1;
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let now = self.now();
                for i in 0..n {
                    let (meta, data) = self.batch.message(i);
                    let size = if meta.truncated { usize::MAX } else { self.config.size };
                    let header = read_header(self.config.wire, data, size, self.sockets.len());
                    let (verdict, reordered) = self.flights.judge(header, flow, now);
                    self.judge(verdict, reordered);
                }
                if n < self.batch.batch() {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Sends the second's line once the monitor says it is due.
    fn tick(&mut self) {
        if self.second_due.take() {
            self.flush_second(false);
        }
    }

    fn flush_second(&mut self, last: bool) {
        if last && self.second_counts == (0, 0) {
            return;
        }
        self.ticks += 1;
        let at = self.now().saturating_sub(self.measure_from) as f64 / 1e9;
        let p = Percentiles::of(&self.second);
        let line = PingInterval {
            index: self.ticks,
            at_secs: at,
            sent: self.second_counts.0,
            received: self.second_counts.1,
            p50: p.p50,
            p99: p.p99,
            max: p.max,
        };
        let h = std::mem::replace(&mut self.second, new_histogram());
        self.second_counts = (0, 0);
        let _ = self.out.send((line, h));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lane's seconds come when the monitor's tick says so (`SecondDue`): one line a
    /// second after the warm-up, numbered from 1, the last partial one too, and together they
    /// hold every measured message and round trip.
    #[test]
    fn each_second_is_handed_over_and_the_lines_add_up() {
        let any_port = "127.0.0.1:0".parse().unwrap();
        let echo = crate::udp::Echo::bind(crate::udp::EchoConfig::new(any_port)).unwrap();
        let addr = echo.local_addr();
        let (stop, echo_stop) = (StopSignal::new(), StopSignal::new());
        let stop_echo = echo_stop.clone();
        let server = std::thread::spawn(move || echo.run(&stop_echo, |_| {}).map(|_| ()));
        let mut config = PingConfig::new(addr, PingMode::UnderLoad { rate: 2000 });
        config.warmup = Duration::from_millis(300);
        config.duration = Duration::from_millis(2500);
        let mut lines = Vec::new();
        let ping = Ping::connect(config).unwrap();
        let summary = ping.run(&stop, |line, h| lines.push((line.clone(), h.len()))).unwrap();
        echo_stop.stop();
        server.join().unwrap().unwrap();
        assert!((2..=4).contains(&lines.len()), "{lines:?}");
        let indices: Vec<u64> = lines.iter().map(|(line, _)| line.index).collect();
        assert_eq!(indices, (1..=lines.len() as u64).collect::<Vec<_>>());
        assert_eq!(lines.iter().map(|(line, _)| line.sent).sum::<u64>(), summary.sent);
        assert_eq!(lines.iter().map(|(_, n)| n).sum::<u64>(), summary.latency.samples);
        // The first is a whole second: about a second in, about 2000 messages.
        let first = &lines[0].0;
        assert!((0.9..1.6).contains(&first.at_secs), "{first:?}");
        assert!((1500..=2500).contains(&first.sent), "{first:?}");
    }
    use crate::udp::answer;
    use proptest::prelude::*;

    fn wires() -> impl Strategy<Value = Wire> {
        prop_oneof![Just(Wire::Corelane), Just(Wire::Sockperf)]
    }

    /// The message `udp ping` sends for `seq` on `flow`, `size` bytes.
    fn request(wire: Wire, flow: usize, seq: u64, size: usize) -> Vec<u8> {
        let mut m = vec![0u8; size];
        payload::prefill(&mut m);
        match wire {
            Wire::Corelane => payload::write_header(&mut m, flow as u32, seq),
            Wire::Sockperf => sockperf::write_request(&mut m, seq),
        }
        m
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Any bytes as a reply: no panic, and what is believed names a flow and a sequence
        /// number the bytes carry.
        #[test]
        fn any_reply_bytes_are_judged_without_panic(
            d in proptest::collection::vec(any::<u8>(), 0..80),
            wire in wires(),
            size in 0usize..80,
            flows in 1usize..1024,
        ) {
            if let Some((flow, _)) = read_header(wire, &d, size, flows) {
                prop_assert_eq!(d.len(), size);
                if wire == Wire::Sockperf {
                    prop_assert!(flow < flows);
                }
            }
        }

        /// A request comes back as the echo answers it and reads as the answer to that
        /// message; the request itself (a reflector's answer) is never believed.
        #[test]
        fn the_echos_answer_round_trips_and_a_reflection_does_not(
            wire in wires(),
            flows in 1usize..64,
            seq in 0u64..u64::MAX / 2,
            size in payload::HEADER_LEN..300,
        ) {
            let flow = (seq % flows as u64) as usize; // sockperf's flow is the sequence's

            let mut m = request(wire, flow, seq, size);
            prop_assert_eq!(read_header(wire, &m, size, flows), None);
            prop_assert_eq!(answer::answer_in_place(&mut m, None), answer::Verdict::Answer);
            prop_assert_eq!(read_header(wire, &m, size, flows), Some((flow, seq)));
            prop_assert_eq!(read_header(wire, &m, size + 1, flows), None);
        }

        /// Flights judge any header, sent or forged, without panic and answer each message once.
        #[test]
        fn flights_judge_anything_once(
            sends in 0u64..3000,
            replies in proptest::collection::vec((0usize..3, 0u64..4000), 0..200),
        ) {
            let mut f = Flights::new(1024);
            for n in 0..sends {
                let (seq, _) = f.take();
                f.sent(seq, n, n, true);
            }
            let mut measured = std::collections::HashSet::new();
            for (flow, seq) in replies {
                let (verdict, _) = f.judge(Some((flow, seq)), 0, 5000);
                if let Verdict::Measured(..) = verdict {
                    prop_assert!(flow == 0 && seq < sends && seq + 1024 > sends);
                    prop_assert!(measured.insert(seq), "measured twice: {}", seq);
                }
            }
            prop_assert_eq!(f.judge(None, 0, 0).0, Verdict::Invalid);
        }
    }
}
