//! `corelane udp echo` and `corelane udp ping`: round-trip latency, sockperf's way.

use std::io::BufWriter;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use clap::{Args, ValueEnum};
use corelane::lane::Placement;
use corelane::stats::{format_rate_line, IntervalLog, Percentiles};
use corelane::topology::CpuList;
use corelane::udp::{
    BackendOptions, Echo, EchoConfig, EchoInterval, EchoSummary, Ping, PingConfig, PingInterval,
    PingMode, PingSummary, RecvBackend, Wire,
};

use crate::args::{finish, outln, parse_duration, parse_size, print_json, stop_on_signals};

#[derive(Debug, Args)]
pub struct EchoArgs {
    /// Address to answer on, e.g. 0.0.0.0:11111.
    addr: SocketAddr,
    /// Lanes, each with its own SO_REUSEPORT socket.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Pin lanes round-robin to these CPUs, e.g. 1 or 0-1.
    #[arg(long, value_name = "CPUS")]
    pin: Option<CpuList>,
    /// Messages per recvmmsg/sendmmsg (1-1024).
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Receive buffer per socket (e.g. 4M).
    #[arg(long, value_parser = parse_size)]
    rcvbuf: Option<usize>,
    /// UDP_GRO on receive; answers go back as GSO segments of the size they came in.
    #[arg(long)]
    gro: bool,
    /// SO_BUSY_POLL for this many microseconds (and SO_PREFER_BUSY_POLL); reported when refused.
    #[arg(long, value_name = "USEC")]
    busy_poll: Option<u32>,
    /// Answer every Nth datagram a lane receives (sockperf's --reply-every).
    #[arg(long, default_value_t = 1, value_name = "N")]
    reply_every: u64,
    /// Receive coalescing: after a batch less than half full, wait this long (as `udp recv
    /// --coalesce`); off by default, since every wait is added to a reply's latency.
    #[arg(long, default_value = "0", value_parser = parse_duration, value_name = "DELAY")]
    coalesce: Duration,
    /// Answer only this wire's requests: corelane (its request magic, answered with the
    /// reply magic) or sockperf (as `sockperf sr`: requests flagged for an answer, client bit
    /// cleared). Without it, both. Replies and anything else are never answered.
    #[arg(long, value_enum)]
    wire: Option<WireArg>,
    /// Answers per second one source address may draw from one lane (a token bucket per
    /// address, 4096 addresses per lane); beyond it requests are dropped and counted.
    #[arg(long, default_value_t = corelane::udp::budget::DEFAULT_RATE, value_name = "PER_SEC")]
    per_source_rate: u64,
    /// Answers one source address may draw at once from one lane (the bucket's size).
    #[arg(long, default_value_t = corelane::udp::budget::DEFAULT_BURST, value_name = "N")]
    per_source_burst: u64,
    /// How lanes talk to the kernel (a backend that cannot answer in place is refused).
    #[arg(long, default_value_t = RecvBackend::Mmsg, value_parser = crate::args::recv_backend())]
    backend: RecvBackend,
    /// With --backend uring: an SQPOLL kernel thread pinned to this CPU submits for every lane.
    #[arg(long, value_name = "CPU")]
    sqpoll: Option<usize>,
    /// How long to answer; until Ctrl-C without it.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Stop after answering this many datagrams.
    #[arg(long)]
    count: Option<u64>,
    /// A JSON line when ready, one per second and a summary, instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum WireArg {
    /// corelane's checked payload (flow, sequence number, check word).
    Corelane,
    /// sockperf's 14-byte header, to cross with `sockperf sr` / `sockperf pp|ul`.
    Sockperf,
}

impl From<WireArg> for Wire {
    fn from(w: WireArg) -> Self {
        match w {
            WireArg::Corelane => Wire::Corelane,
            WireArg::Sockperf => Wire::Sockperf,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ModeArg {
    /// One message in flight (sockperf ping-pong).
    PingPong,
    /// Open loop at --rate messages per second (sockperf under-load).
    UnderLoad,
}

#[derive(Debug, Args)]
pub struct PingArgs {
    /// The echo server, e.g. 127.0.0.1:11111 (corelane udp echo, sockperf sr).
    target: SocketAddr,
    #[arg(long, value_enum, default_value_t = ModeArg::PingPong)]
    mode: ModeArg,
    /// Messages per second with --mode under-load.
    #[arg(long)]
    rate: Option<u64>,
    /// Payload bytes per message (16 to 65507).
    #[arg(long, default_value = "64", value_parser = parse_size)]
    size: usize,
    /// Sockets (source ports) used round-robin.
    #[arg(long, default_value_t = 1)]
    flows: usize,
    /// Pin the client to this CPU (the first of the list).
    #[arg(long, value_name = "CPUS")]
    pin: Option<CpuList>,
    /// How long to measure, after the warm-up.
    #[arg(long, short = 'd', default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Send but do not measure for this long first.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    warmup: Duration,
    /// A reply later than this counts as lost.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    timeout: Duration,
    /// Stop after this many measured messages.
    #[arg(long)]
    count: Option<u64>,
    /// SO_BUSY_POLL microseconds on the client's sockets.
    #[arg(long, value_name = "USEC")]
    busy_poll: Option<u32>,
    /// corelane's payload, or sockperf's header (to measure against `sockperf sr`).
    #[arg(long, value_enum, default_value_t = WireArg::Corelane)]
    wire: WireArg,
    /// Write every second's histogram here in HdrHistogram's interval log format (ns); a new
    /// file: an existing file or symlink at FILE is refused, never written over.
    #[arg(long, value_name = "FILE")]
    histogram: Option<PathBuf>,
    /// One JSON object per second and a summary, instead of text.
    #[arg(long)]
    json: bool,
}

pub fn echo(args: EchoArgs) -> anyhow::Result<ExitCode> {
    let stop = stop_on_signals()?;
    let mut config = EchoConfig::new(args.addr);
    config.lanes.threads = args.threads;
    let away = crate::metrics::away_from(args.pin.as_ref())?;
    config.lanes.placement = Placement::from_pin(args.pin);
    config.lanes.batch = args.batch;
    config.receive.rcvbuf = args.rcvbuf;
    config.receive.gro = args.gro;
    config.busy_poll_us = args.busy_poll;
    config.reply_every = args.reply_every;
    config.receive.coalesce = (!args.coalesce.is_zero()).then_some(args.coalesce);
    config.wire = args.wire.map(Wire::from);
    config.per_source_rate = args.per_source_rate;
    config.per_source_burst = args.per_source_burst;
    config.duration = args.duration;
    config.until_replies = args.count;
    let options = BackendOptions { sqpoll_cpu: args.sqpoll, ..BackendOptions::default() };
    config.receive.backend = args.backend.configure(&options)?;
    let echo = Echo::bind(config)?;
    let notes: Vec<String> = [
        echo.busy_poll().note.clone(),
        echo.gro().note.clone(),
        echo.backend_note().map(String::from),
    ]
    .into_iter()
    .flatten()
    .collect();
    for note in &notes {
        eprintln!("note: {note}");
    }
    if args.json {
        print_json(&serde_json::json!({
            "type": "ready", "addr": echo.local_addr(), "notes": notes,
        }));
    } else {
        eprintln!("echoing on {} (Ctrl-C to stop)", echo.local_addr());
    }
    let metrics = corelane::metrics::EchoMetrics::new(&echo);
    let _endpoint = crate::metrics::start(&args.metrics, metrics, away)?;
    let json = args.json;
    let summary = echo.run(&stop, crate::args::per_second(json, &stop, echo_line))?;
    finish(json, &summary, print_echo_summary);
    Ok(ExitCode::SUCCESS)
}

/// The echo's line for one second.
fn echo_line(i: &EchoInterval) -> String {
    format!(
        "{}  replies {}  cpu {:.0} ns/dgram",
        format_rate_line(i.interval.rate),
        i.replies,
        i.cpu_ns_per_datagram
    )
}

fn print_echo_summary(s: &EchoSummary) {
    outln!(
        "answered {} of {} datagrams in {:.2}s (every {}); send errors {}, truncated {}; cpu {:.0} ns/datagram",
        s.replies,
        s.datagrams,
        s.elapsed_secs,
        s.reply_every,
        s.send_errors,
        s.truncated,
        s.cpu_ns_per_datagram
    );
    let d = &s.dropped;
    outln!(
        "not answered: {} replies, {} not asking, {} unrecognised, {} from itself, {} from port 0, {} over the budget ({}/s, burst {} per source and lane)",
        d.dropped_replies,
        d.dropped_not_asked,
        d.dropped_unrecognised,
        d.dropped_self,
        d.dropped_port0,
        d.dropped_over_budget,
        s.per_source_rate,
        s.per_source_burst
    );
    if let Some(us) = s.busy_poll.requested_us {
        outln!(
            "busy poll {us} us: {}{}",
            if s.busy_poll.active { "on" } else { "off" },
            if s.napi_id == 0 && s.busy_poll.active {
                " (but this path has no NAPI id, so there is nothing to poll)"
            } else {
                ""
            }
        );
    }
}

/// Why the histogram log cannot be created, with what to do.
fn histogram_error(path: &Path, e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::AlreadyExists {
        anyhow::anyhow!(
            "--histogram {}: already exists (remove it or choose a new name; the log is never written over an existing file or symlink)",
            path.display()
        )
    } else {
        anyhow::anyhow!("cannot create the histogram log {}: {e}", path.display())
    }
}

pub fn ping(args: PingArgs) -> anyhow::Result<ExitCode> {
    let mode = match (args.mode, args.rate) {
        (ModeArg::PingPong, None) => PingMode::PingPong,
        (ModeArg::PingPong, Some(_)) => {
            anyhow::bail!("--rate needs --mode under-load (ping-pong keeps one message in flight)")
        }
        (ModeArg::UnderLoad, Some(rate)) => PingMode::UnderLoad { rate },
        (ModeArg::UnderLoad, None) => {
            anyhow::bail!("--mode under-load needs --rate MESSAGES_PER_SECOND")
        }
    };
    let stop = stop_on_signals()?;
    let mut config = PingConfig::new(args.target, mode);
    config.size = args.size;
    config.flows = args.flows;
    config.placement = Placement::from_pin(args.pin);
    config.duration = args.duration;
    config.warmup = args.warmup;
    config.timeout = args.timeout;
    config.count = args.count;
    config.busy_poll_us = args.busy_poll;
    config.wire = args.wire.into();
    let ping = Ping::connect(config)?;
    let mut log = match &args.histogram {
        Some(path) => {
            // Created new (never an existing file or a planted symlink) and streamed: a
            // long run's log is not held in memory, and an interrupted run keeps its intervals.
            let file = corelane::fs::create_new(path).map_err(|e| histogram_error(path, e))?;
            Some(IntervalLog::new(BufWriter::new(file), SystemTime::now())?)
        }
        None => None,
    };
    if !args.json {
        eprintln!(
            "{} {} for {:?} after {:?} warm-up; round-trip times (sockperf prints half of them)",
            match mode {
                PingMode::PingPong => "ping-pong with".to_string(),
                PingMode::UnderLoad { rate } => format!("under load at {rate} msg/s to"),
            },
            args.target,
            args.duration,
            args.warmup
        );
    }
    let json = args.json;
    let output = stop.clone();
    let mut log_error = None;
    let mut offset = Duration::ZERO;
    let summary = ping.run(&stop, |line: &PingInterval, h| {
        if let Some(log) = &mut log {
            let length = Duration::from_secs_f64((line.at_secs - offset.as_secs_f64()).max(0.0));
            if let Err(e) = log.interval(h, offset, length) {
                log_error.get_or_insert(e);
            }
            offset = Duration::from_secs_f64(line.at_secs);
        }
        let written = if json {
            print_json(&serde_json::json!({"type": "interval", "interval": line}))
        } else {
            outln!(
                "sent {:>8}  received {:>8}  rtt us p50 {:>8.1}  p99 {:>8.1}  max {:>9.1}",
                line.sent,
                line.received,
                line.p50,
                line.p99,
                line.max
            )
        };
        if !written {
            output.stop();
        }
    })?;
    if let Some(log) = log {
        log.finish().context("cannot write the histogram log")?;
    }
    if let Some(e) = log_error {
        return Err(e).context("cannot write the histogram log");
    }
    finish(json, &summary, print_ping_summary);
    if summary.sent > 0 && summary.received == 0 {
        eprintln!(
            "corelane: no reply from {} ({} sent, all lost{}): is an echo server listening there?",
            summary.target,
            summary.sent,
            if summary.refused > 0 { ", port unreachable" } else { "" }
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn percentiles_line(p: &Percentiles) -> String {
    format!(
        "p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  p99.99 {:.1}  max {:.1}",
        p.p50, p.p90, p.p99, p.p99_9, p.p99_99, p.max
    )
}

fn print_ping_summary(s: &PingSummary) {
    outln!(
        "{} to {}: sent {} ({:.0} msg/s{}), received {}, lost {}, duplicates {}, reordered {}, late {}, invalid {}",
        s.mode,
        s.target,
        s.sent,
        s.achieved_rate,
        s.rate.map(|r| format!(" of {r} asked")).unwrap_or_default(),
        s.received,
        s.lost,
        s.duplicates,
        s.reordered,
        s.late,
        s.invalid
    );
    outln!("round trip us:  {}", percentiles_line(&s.latency));
    if s.rate.is_some() {
        outln!("  uncorrected:   {}", percentiles_line(&s.uncorrected));
    }
    outln!(
        "(sockperf reports half the round trip: compare its figures x2)  client cpu {:.0} ns/message",
        s.client_cpu_ns_per_message
    );
    if let Some(r) = s.rate {
        if s.achieved_rate < r as f64 * 0.99 {
            outln!(
                "warning: sent {:.0} msg/s, short of the {r} asked: the client could not keep up",
                s.achieved_rate
            );
        }
    }
}
