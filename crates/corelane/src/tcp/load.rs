//! An HTTP/1.1 load generator: each lane keeps its connections busy with one request in flight
//! apiece, over its own epoll instance, and records every response's latency in an HDR
//! histogram.
//!
//! Closed loop by default (as wrk): a connection sends its next request when the last answer
//! came, so a slow server is offered less load and its stall hides (coordinated omission).
//! With `rate` it is wrk2's constant throughput: request `n` of a lane is due at `n / rate`
//! (the lane's share), the next free connection takes it, and its latency is counted from
//! when it was due — a stall is charged to every request it held back; the latency from the
//! moment each request was written is kept beside it (`latency_uncorrected`).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rustix::event::epoll::{self, Event, EventData, EventFlags};
use rustix::io::Errno;
use socket2::{Domain, Socket, Type};

use super::counters::bump;
use super::response::{ResponseReader, Taken};
use super::TcpError;
use crate::lane::{LaneSet, LanesEnd, Monitor, Placement, Second, StopSignal, Watch};
use crate::stats::latency::{new_histogram, record};
use crate::stats::Percentiles;

const EVENTS: usize = 256;

#[derive(Debug, Clone)]
pub struct LoadConfig {
    pub target: SocketAddr,
    /// The Host header.
    pub host: String,
    /// Path and query of every request.
    pub path: String,
    pub connections: usize,
    pub lanes: usize,
    /// Which CPU each lane runs on.
    pub placement: Placement,
    pub duration: Duration,
    /// Stop after this many responses (over all lanes), if sooner than `duration`.
    pub requests: Option<u64>,
    /// `Connection: close`: a new connection per request.
    pub close: bool,
    /// A request unanswered this long counts as an error and its connection is replaced.
    pub timeout: Duration,
    /// Requests per second over all lanes (constant throughput, wrk2); `None`: closed loop.
    pub rate: Option<u64>,
}

impl LoadConfig {
    pub fn new(target: SocketAddr) -> Self {
        Self {
            target,
            host: target.to_string(),
            path: "/".into(),
            connections: 50,
            lanes: 1,
            placement: Placement::Unpinned,
            duration: Duration::from_secs(10),
            requests: None,
            close: false,
            timeout: Duration::from_secs(5),
            rate: None,
        }
    }

    fn request_bytes(&self) -> Vec<u8> {
        let close = if self.close { "Connection: close\r\n" } else { "" };
        format!("GET {} HTTP/1.1\r\nHost: {}\r\n{close}\r\n", self.path, self.host).into_bytes()
    }
}

/// Counters one lane writes and the meter reads.
#[derive(Debug, Default)]
#[repr(align(128))]
struct LoadCounters {
    responses: AtomicU64,
    non_2xx: AtomicU64,
    errors: AtomicU64,
    connects: AtomicU64,
    bytes_in: AtomicU64,
}

/// One second of load.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoadInterval {
    pub index: u64,
    pub at_secs: f64,
    pub requests_per_sec: f64,
    pub responses: u64,
    pub errors: u64,
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Latency {
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
    #[serde(default)]
    pub p9999_us: f64,
}

impl Latency {
    /// The percentiles of `h` under wrk's names.
    fn of(h: &Histogram<u64>) -> Self {
        let p = Percentiles::of(h);
        Self {
            p50_us: p.p50,
            p90_us: p.p90,
            p99_us: p.p99,
            p999_us: p.p99_9,
            max_us: p.max,
            mean_us: p.mean,
            p9999_us: p.p99_99,
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LoadSummary {
    pub seconds: f64,
    /// Complete responses, any status.
    pub responses: u64,
    pub requests_per_sec: f64,
    pub non_2xx: u64,
    /// Connect failures, resets, timeouts and unparseable responses.
    pub errors: u64,
    pub connects: u64,
    pub bytes_in: u64,
    /// With a rate: from when each request was due (wrk2's correction); closed loop: from
    /// when it was written.
    pub latency: Latency,
    /// Requests per second asked for (`None`: closed loop).
    #[serde(default)]
    pub rate: Option<u64>,
    /// With a rate: from when each request was actually written, which hides a stall.
    #[serde(default)]
    pub latency_uncorrected: Option<Latency>,
}

/// Runs the load until `config.duration`, `config.requests` or `stop`, calling `each_second`
/// with every second's rate.
pub fn run(
    config: &LoadConfig,
    stop: &StopSignal,
    each_second: impl FnMut(&LoadInterval),
) -> Result<LoadSummary, TcpError> {
    if config.lanes == 0 {
        return Err(TcpError::NoLanes);
    }
    if config.connections < config.lanes {
        return Err(TcpError::TooFewConnections {
            connections: config.connections,
            lanes: config.lanes,
        });
    }
    if config.rate == Some(0) {
        return Err(TcpError::ZeroRate);
    }
    config.placement.check()?;
    let lane_stop = StopSignal::new();
    let request = Arc::new(config.request_bytes());
    // Lanes end by themselves once their share of `requests` is answered.
    let mut monitor = Monitor::new(stop, LanesEnd::AllFinished).until(Some(config.duration));
    let mut lanes = LaneSet::new("load", lane_stop.clone());
    let mut counters = Vec::with_capacity(config.lanes);
    for index in 0..config.lanes {
        let share = |total: u64| {
            total / config.lanes as u64 + u64::from((index as u64) < total % config.lanes as u64)
        };
        let lane_counters = Arc::new(LoadCounters::default());
        counters.push(Arc::clone(&lane_counters));
        let mut client = LaneClients::new(
            config,
            share(config.connections as u64) as usize,
            config.requests.map(share),
            config.rate.map(share).map(|r| r.max(1)),
            Arc::clone(&request),
            lane_counters,
        )
        .map_err(|e| TcpError::io("cannot create an epoll instance", e))?;
        let stop = lane_stop.clone();
        let cpu = config.placement.cpu_of(index);
        lanes
            .spawn(cpu, move || client.run(&stop))
            .map_err(|e| TcpError::io("cannot start a load lane", e))?;
    }
    let (_, stopped) =
        monitor.watch(&[&lanes], &mut LoadWatch { counters: &counters, last: 0, each_second });
    let seconds = stopped.elapsed.as_secs_f64();
    let mut merged = new_histogram();
    let mut uncorrected = new_histogram();
    let (joined, _) = monitor.join(lanes).map_err(|e| TcpError::io("a load lane failed", e))?;
    for lane in joined {
        let _ = merged.add(&lane.value.0);
        let _ = uncorrected.add(&lane.value.1);
    }
    let sum = |f: fn(&LoadCounters) -> &AtomicU64| -> u64 {
        counters.iter().map(|c| f(c).load(Ordering::Relaxed)).sum()
    };
    let responses = sum(|c| &c.responses);
    let summary = LoadSummary {
        seconds,
        responses,
        requests_per_sec: responses as f64 / seconds.max(1e-9),
        non_2xx: sum(|c| &c.non_2xx),
        errors: sum(|c| &c.errors),
        connects: sum(|c| &c.connects),
        bytes_in: sum(|c| &c.bytes_in),
        latency: Latency::of(&merged),
        rate: config.rate,
        latency_uncorrected: config.rate.map(|_| Latency::of(&uncorrected)),
    };
    if summary.responses == 0 && summary.errors > 0 {
        return Err(TcpError::NoResponses { target: config.target, errors: summary.errors });
    }
    Ok(summary)
}

/// [`run`]'s seconds: the responses and errors the lanes counted.
struct LoadWatch<'a, F> {
    counters: &'a [Arc<LoadCounters>],
    last: u64,
    each_second: F,
}

impl<F: FnMut(&LoadInterval)> Watch for LoadWatch<'_, F> {
    fn second(&mut self, second: &Second) {
        let (total, errors) = self.counters.iter().fold((0, 0), |(r, e), c| {
            (r + c.responses.load(Ordering::Relaxed), e + c.errors.load(Ordering::Relaxed))
        });
        (self.each_second)(&LoadInterval {
            index: second.tick.index,
            at_secs: second.tick.since_start.as_secs_f64(),
            requests_per_sec: (total - self.last) as f64 / second.tick.since_last.as_secs_f64(),
            responses: total,
            errors,
        });
        self.last = total;
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for a reconnect (after an error) until the instant.
    Idle(Instant),
    Connecting,
    /// Connected, waiting for the next request to fall due (with a rate).
    Ready,
    Sending,
    Receiving,
    /// The response is complete and the server announced it closes: wait for its FIN, so
    /// TIME_WAIT stays on the server's side and client ports stay free.
    Closing,
}

#[derive(Debug)]
struct Client {
    stream: Option<TcpStream>,
    phase: Phase,
    sent: usize,
    /// The response under way: its head, then its body counted (a bounded buffer).
    response: ResponseReader,
    sent_at: Instant,
    /// When the request in flight was due (with a rate; else when it was written).
    due_at: Instant,
}

/// One lane's connections.
#[derive(Debug)]
struct LaneClients {
    epoll: OwnedFd,
    target: SocketAddr,
    close: bool,
    timeout: Duration,
    request: Arc<Vec<u8>>,
    clients: Vec<Client>,
    /// Requests this lane may still start (None: no limit).
    quota: Option<u64>,
    counters: Arc<LoadCounters>,
    latency: Histogram<u64>,
    uncorrected: Histogram<u64>,
    pace: Option<Pace>,
}

/// A lane's schedule: request `next` is due `next / rate` seconds after `start`.
#[derive(Debug)]
struct Pace {
    rate: u64,
    start: Instant,
    next: u64,
    /// Connections waiting for a request to fall due.
    ready: Vec<usize>,
}

impl Pace {
    fn due(&self, n: u64) -> Instant {
        self.start
            + Duration::from_nanos((u128::from(n) * 1_000_000_000 / u128::from(self.rate)) as u64)
    }
}

impl LaneClients {
    fn new(
        config: &LoadConfig,
        connections: usize,
        quota: Option<u64>,
        rate: Option<u64>,
        request: Arc<Vec<u8>>,
        counters: Arc<LoadCounters>,
    ) -> io::Result<Self> {
        let now = Instant::now();
        let clients = (0..connections)
            .map(|_| Client {
                stream: None,
                phase: Phase::Idle(now),
                sent: 0,
                response: ResponseReader::default(),
                sent_at: now,
                due_at: now,
            })
            .collect();
        let latency = new_histogram();
        Ok(Self {
            epoll: epoll::create(epoll::CreateFlags::CLOEXEC)?,
            target: config.target,
            close: config.close,
            timeout: config.timeout,
            request,
            clients,
            quota,
            counters,
            latency,
            uncorrected: new_histogram(),
            pace: rate.map(|rate| Pace { rate, start: now, next: 0, ready: Vec::new() }),
        })
    }

    fn run(&mut self, stop: &StopSignal) -> io::Result<(Histogram<u64>, Histogram<u64>)> {
        // Wake-ups to the nanosecond rather than the default 50 µs timer slack.
        let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
        if let Some(pace) = &mut self.pace {
            pace.start = Instant::now();
        }
        let tick = Duration::from_millis(10);
        let blank = Event { flags: EventFlags::empty(), data: EventData::new_u64(0) };
        let mut events = vec![blank; EVENTS];
        let mut last_sweep = Instant::now() - Duration::from_secs(1);
        while !stop.is_stopped() {
            let now = Instant::now();
            if now.duration_since(last_sweep) >= Duration::from_millis(10) {
                last_sweep = now;
                self.sweep(now);
                if self.quota == Some(0)
                    && self.clients.iter().all(|c| matches!(c.phase, Phase::Idle(_) | Phase::Ready))
                {
                    break;
                }
            }
            let wait = self
                .dispatch_due(now)
                .map_or(tick, |due| due.saturating_duration_since(Instant::now()).min(tick));
            let timeout = rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: wait.as_nanos().min(999_999_999) as i64,
            };
            let n = match epoll::wait(&self.epoll, &mut events[..], Some(&timeout)) {
                Ok(n) => n,
                Err(Errno::INTR) => 0,
                Err(e) => return Err(e.into()),
            };
            let now = Instant::now();
            for event in &events[..n] {
                self.on_event(event.data.u64() as usize, event.flags, now);
            }
        }
        Ok((
            std::mem::replace(&mut self.latency, new_histogram()),
            std::mem::replace(&mut self.uncorrected, new_histogram()),
        ))
    }

    /// With a rate: hands every request due by `now` to a ready connection (those that find
    /// none wait, and their wait is charged to them); returns when the next one falls due.
    fn dispatch_due(&mut self, now: Instant) -> Option<Instant> {
        loop {
            let pace = self.pace.as_mut()?;
            let due = pace.due(pace.next);
            if due > now {
                return Some(due);
            }
            let i = loop {
                let i = pace.ready.pop()?;
                if self.clients.get(i).is_some_and(|c| c.phase == Phase::Ready) {
                    break i;
                }
            };
            if !self.take_request() {
                return None;
            }
            let pace = self.pace.as_mut()?;
            pace.next += 1;
            let c = &mut self.clients[i];
            c.phase = Phase::Sending;
            c.due_at = due;
            c.sent_at = now;
            self.send(i, now);
        }
    }

    /// A connection with nothing in flight: with a rate it waits for the next request to
    /// fall due; closed loop, it sends at once.
    fn idle_or_send(&mut self, i: usize, now: Instant) {
        if let Some(pace) = &mut self.pace {
            self.clients[i].phase = Phase::Ready;
            pace.ready.push(i);
            self.dispatch_due(now);
            return;
        }
        if self.take_request() {
            let c = &mut self.clients[i];
            c.phase = Phase::Sending;
            c.sent_at = now;
            c.due_at = now;
            self.send(i, now);
        } else {
            let c = &mut self.clients[i];
            c.stream = None;
            c.phase = Phase::Idle(now + Duration::from_secs(3600));
        }
    }

    /// Starts idle clients whose back-off ended and replaces those that timed out.
    fn sweep(&mut self, now: Instant) {
        for i in 0..self.clients.len() {
            let c = &self.clients[i];
            match c.phase {
                Phase::Idle(at) if now >= at => self.connect(i, now),
                Phase::Connecting | Phase::Sending | Phase::Receiving | Phase::Closing
                    if now.duration_since(c.sent_at) >= self.timeout =>
                {
                    self.fail(i, now);
                }
                _ => {}
            }
        }
    }

    fn take_request(&mut self) -> bool {
        match &mut self.quota {
            None => true,
            Some(0) => false,
            Some(q) => {
                *q -= 1;
                true
            }
        }
    }

    fn connect(&mut self, i: usize, now: Instant) {
        // Closed loop, a connection is made for a request; with a rate it waits, connected,
        // for one to fall due.
        if self.pace.is_none() && !self.take_request() {
            self.clients[i].phase = Phase::Idle(now + Duration::from_secs(3600));
            return;
        }
        let socket = match Socket::new(
            Domain::for_address(self.target),
            Type::STREAM.nonblocking().cloexec(),
            None,
        ) {
            Ok(s) => s,
            Err(_) => return self.fail(i, now),
        };
        let _ = socket.set_tcp_nodelay(true);
        match socket.connect(&self.target.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(_) => return self.fail(i, now),
        }
        let stream = TcpStream::from(socket);
        let flags = EventFlags::IN | EventFlags::OUT | EventFlags::RDHUP | EventFlags::ET;
        if epoll::add(&self.epoll, &stream, EventData::new_u64(i as u64), flags).is_err() {
            return self.fail(i, now);
        }
        bump(&self.counters.connects, 1);
        let c = &mut self.clients[i];
        c.stream = Some(stream);
        c.phase = Phase::Connecting;
        c.sent = 0;
        c.response.reset();
        c.sent_at = now;
        c.due_at = now;
    }

    /// Replaces a connection the server closed after a complete response.
    fn reconnect(&mut self, i: usize, now: Instant) {
        self.clients[i].stream = None;
        self.connect(i, now);
    }

    /// Counts an error, drops the connection and reconnects after a short back-off (so a
    /// refused target is not hammered in a tight loop).
    fn fail(&mut self, i: usize, now: Instant) {
        bump(&self.counters.errors, 1);
        let c = &mut self.clients[i];
        let carried = !matches!(c.phase, Phase::Ready | Phase::Idle(_))
            && (self.pace.is_none() || c.phase != Phase::Connecting);
        c.stream = None;
        c.phase = Phase::Idle(now + Duration::from_millis(10));
        // The request that failed is given back to the quota.
        if let (Some(q), true) = (&mut self.quota, carried) {
            *q += 1;
        }
    }

    fn on_event(&mut self, i: usize, flags: EventFlags, now: Instant) {
        if i >= self.clients.len() {
            return;
        }
        if self.clients[i].phase == Phase::Connecting {
            if !flags.intersects(EventFlags::OUT | EventFlags::ERR | EventFlags::HUP) {
                return;
            }
            let failed = match &self.clients[i].stream {
                Some(s) => !matches!(s.take_error(), Ok(None)) || flags.contains(EventFlags::ERR),
                None => true,
            };
            if failed {
                return self.fail(i, now);
            }
            if self.pace.is_some() {
                return self.idle_or_send(i, now);
            }
            self.clients[i].phase = Phase::Sending;
        }
        if self.clients[i].phase == Phase::Sending && !self.send(i, now) {
            return;
        }
        if matches!(self.clients[i].phase, Phase::Receiving | Phase::Closing) {
            self.receive(i, now);
        }
    }

    /// Writes the request; false when the connection failed.
    fn send(&mut self, i: usize, now: Instant) -> bool {
        // Disjoint borrows of the request and the client: no reference count touched per request.
        let (request, c) = (&self.request, &mut self.clients[i]);
        let Some(stream) = &c.stream else { return false };
        while c.sent < request.len() {
            match (&*stream).write(&request[c.sent..]) {
                Ok(n) => c.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.fail(i, now);
                    return false;
                }
            }
        }
        c.phase = Phase::Receiving;
        true
    }

    fn receive(&mut self, i: usize, now: Instant) {
        loop {
            let c = &mut self.clients[i];
            let Some(stream) = &c.stream else { return };
            if c.phase == Phase::Closing {
                let mut sink = [0u8; 512];
                match (&*stream).read(&mut sink) {
                    Ok(0) => return self.reconnect(i, now),
                    Ok(_) => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => return self.reconnect(i, now),
                }
            }
            let space = c.response.space();
            let room = space.len();
            let n = match (&*stream).read(space) {
                Ok(0) => return self.fail(i, now),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return self.fail(i, now),
            };
            bump(&self.counters.bytes_in, n as u64);
            match c.response.took(n) {
                Taken::Whole { ok, server_closes } => {
                    self.answered(i, now, ok, server_closes);
                    if self.clients[i].phase != Phase::Closing {
                        return; // the next request went out, or the lane stopped
                    }
                }
                Taken::Bad(_) => return self.fail(i, now),
                Taken::More if n < room => return, // drained (edge-triggered): wait for more
                Taken::More => {}
            }
        }
    }

    /// A whole response came on connection `i`: its latency recorded, then the next request
    /// (or, when either side closes, the wait for the server's FIN).
    fn answered(&mut self, i: usize, now: Instant, ok: bool, server_closes: bool) {
        if !ok {
            bump(&self.counters.non_2xx, 1);
        }
        let c = &self.clients[i];
        let ns = now.duration_since(c.due_at).as_nanos() as u64;
        record(&mut self.latency, ns);
        if self.pace.is_some() {
            let ns = now.duration_since(c.sent_at).as_nanos() as u64;
            record(&mut self.uncorrected, ns);
        }
        bump(&self.counters.responses, 1);
        let c = &mut self.clients[i];
        c.sent = 0;
        if self.close || server_closes {
            // Read on to the server's FIN (the caller's loop does), then reconnect.
            c.phase = Phase::Closing;
            return;
        }
        self.idle_or_send(i, now);
    }
}
