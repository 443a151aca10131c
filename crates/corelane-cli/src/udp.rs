//! `corelane udp send` and `corelane udp recv`.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand, ValueEnum};
use corelane::lane::Placement;
use corelane::stats::format_rate_line;
use corelane::topology::CpuList;
use corelane::udp::{
    BackendOptions, Lanes, ReceivePath, Receiver, ReceiverConfig, RecvBackend, RecvInterval,
    RecvSummary, SendBackend, SendInterval, SendSummary, Sender, SenderConfig, SocketMode,
    Steering,
};
use corelane::xdp::XdpMode;

use crate::args::{
    finish, outln, parse_duration, parse_size, per_second, print_json, stop_on_signals,
};

#[derive(Debug, Subcommand)]
pub enum UdpCommand {
    /// Send numbered datagrams with sendmmsg (and GSO) to one or more targets.
    Send(SendArgs),
    /// Receive with recvmmsg (and GRO) on shared or reuseport lanes; print pps every second.
    Recv(RecvArgs),
    /// Answer every datagram to its sender from pinned reuseport lanes (a sockperf sr).
    Echo(crate::udp_latency::EchoArgs),
    /// Round-trip latency to an echo server: ping-pong or open-loop under load (sockperf pp/ul).
    Ping(crate::udp_latency::PingArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SocketsArg {
    /// One socket, all lanes read it (contends on the socket lock).
    Shared,
    /// One SO_REUSEPORT socket per lane; the kernel hashes each flow to one.
    Reuseport,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SteerArg {
    /// The kernel's flow hash.
    Hash,
    /// The lane on the CPU whose softirq processed the datagram (a reuseport BPF program).
    Cpu,
}

#[derive(Debug, Args)]
pub struct SendArgs {
    /// Where to send, e.g. 127.0.0.1:4321; several targets are spread over flows and lanes.
    #[arg(required = true, value_name = "TARGET")]
    targets: Vec<SocketAddr>,
    /// Messages per sendmmsg call (1-1024).
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Sender lanes (threads).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Payload bytes per datagram (16 to 65507; 4K and 1K forms work).
    #[arg(long, default_value = "32", value_parser = parse_size)]
    size: usize,
    /// Distinct flows (source ports), so RSS/RPS and reuseport hashing see many flows.
    #[arg(long, default_value_t = 1)]
    flows: usize,
    /// The first flow's id (the others follow): senders on several hosts feeding one
    /// receiver give each its own range, so their flows stay apart there.
    #[arg(long, default_value_t = 0)]
    first_flow: u32,
    /// Cap in datagrams per second over all lanes; 0 sends flat out.
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// Datagrams per sendmmsg message with UDP GSO (UDP_SEGMENT), 1-64; falls back when refused.
    #[arg(long, value_name = "SEGMENTS")]
    gso: Option<usize>,
    /// How long to send (10, 10s, 500ms, 2m).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Stop after this many datagrams in all.
    #[arg(long)]
    count: Option<u64>,
    /// Pin lanes round-robin to these CPUs, e.g. 0 or 0,2-3.
    #[arg(long, value_name = "CPUS")]
    pin: Option<CpuList>,
    /// How lanes send.
    #[arg(long, default_value_t = SendBackend::Mmsg, value_parser = crate::args::send_backend())]
    backend: SendBackend,
    /// One JSON object per second and a final summary, instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct RecvArgs {
    /// Addresses to bind, e.g. 0.0.0.0:4321 (several are read by every lane).
    #[arg(required = true, value_name = "ADDR")]
    addrs: Vec<SocketAddr>,
    /// Messages per recvmmsg call (1-1024).
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Receiver lanes (threads).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// How lanes share the port.
    #[arg(long, value_enum, default_value_t = SocketsArg::Reuseport)]
    sockets: SocketsArg,
    /// How a reuseport group picks a lane: the kernel's flow hash, or the lane pinned to the
    /// CPU that ran the datagram's receive softirq (needs --pin).
    #[arg(long, value_enum, default_value_t = SteerArg::Hash)]
    steer: SteerArg,
    /// Pin lanes round-robin to these CPUs, e.g. 1 or 0,2-3.
    #[arg(long, value_name = "CPUS")]
    pin: Option<CpuList>,
    /// Receive buffer per socket (e.g. 4M); root may exceed net.core.rmem_max.
    #[arg(long, value_parser = parse_size)]
    rcvbuf: Option<usize>,
    /// Let the kernel coalesce datagrams of a flow (UDP_GRO); falls back when refused.
    #[arg(long)]
    gro: bool,
    /// Bytes per receive buffer (default 2K, 64K with --gro); longer datagrams count as truncated.
    #[arg(long, value_parser = parse_size)]
    slot: Option<usize>,
    /// Skip the per-datagram header check (loss, order, corruption) for a bare receive loop.
    #[arg(long)]
    no_check: bool,
    /// After a batch less than half full, wait this long so datagrams accumulate: fewer
    /// wake-ups and syscalls per datagram, at up to that much added latency; 0 turns it off.
    #[arg(long, default_value = "50us", value_parser = parse_duration, value_name = "DELAY")]
    coalesce: Duration,
    /// How long to receive; runs until Ctrl-C without it.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Stop after this many datagrams.
    #[arg(long)]
    count: Option<u64>,
    /// Report arrivals of these groups of flow ids apart, e.g. 0-3,4-7: one group per sender
    /// (`udp send --first-flow F --flows N` sends flows F to F+N-1); at most 64 groups.
    #[arg(long, value_delimiter = ',', value_name = "FIRST-LAST")]
    flow_groups: Vec<corelane::udp::FlowGroup>,
    /// How lanes receive.
    #[arg(long, default_value_t = RecvBackend::Mmsg, value_parser = crate::args::recv_backend())]
    backend: RecvBackend,
    /// With --backend xdp: auto tries native zero-copy, then native copy, then generic, and
    /// says why; zerocopy, copy and generic insist.
    #[arg(long, value_parser = xdp_mode())]
    xdp_mode: Option<XdpMode>,
    /// With --backend xdp: the interface to attach to (default: the one holding ADDR; needed
    /// for 0.0.0.0 or ::).
    #[arg(long, value_name = "DEV")]
    xdp_dev: Option<String>,
    /// With --backend xdp: preferred busy polling. Each lane runs its queue's NAPI itself
    /// (SO_PREFER_BUSY_POLL, SO_BUSY_POLL of this many microseconds, SO_BUSY_POLL_BUDGET 64),
    /// and the interface's napi_defer_hard_irqs (2) and gro_flush_timeout (200 µs) are set
    /// for the run and restored after it, however it ends.
    #[arg(long, value_name = "USECS")]
    busy_poll: Option<u32>,
    /// With --backend uring: an SQPOLL kernel thread pinned to this CPU submits for every lane
    /// (the core-partitioning study's syscall thread); falls back, saying why, where the kernel refuses.
    #[arg(long, value_name = "CPU")]
    sqpoll: Option<usize>,
    /// Flow scheduling: the one receive lane dispatches datagrams to --workers worker lanes with this
    /// scheduler (rss, spray, dsw-atomic, dsw-parallel, diffuser) and checks their order where
    /// the workers hand them back. With --pin, the receive lane takes the first CPU and the
    /// workers the rest.
    #[arg(long, value_name = "SCHEDULER")]
    dispatch: Option<corelane::sched::Kind>,
    /// Worker lanes for --dispatch.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Worker time per datagram with --dispatch (a busy loop), e.g. 200ns or 1us.
    #[arg(long, default_value = "0", value_parser = parse_duration)]
    work: Duration,
    /// One JSON object per second and a final summary, instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArgs,
}

pub fn run(cmd: UdpCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        UdpCommand::Send(args) => send(args),
        UdpCommand::Recv(args) => recv(args),
        UdpCommand::Echo(args) => crate::udp_latency::echo(args),
        UdpCommand::Ping(args) => crate::udp_latency::ping(args),
    }
}

/// `udp send`: datagrams to the targets, a line a second and the totals.
fn send(args: SendArgs) -> anyhow::Result<ExitCode> {
    let stop = stop_on_signals()?;
    let sender = Sender::connect(SenderConfig {
        targets: args.targets,
        lanes: Lanes {
            threads: args.threads,
            placement: Placement::from_pin(args.pin),
            batch: args.batch,
        },
        size: args.size,
        flows: args.flows,
        first_flow: args.first_flow,
        rate: args.rate,
        gso: args.gso,
        duration: Some(args.duration),
        count: args.count,
        backend: args.backend,
    })?;
    if let Some(note) = sender.backend_note() {
        eprintln!("note: {note}");
    }
    let json = args.json;
    let summary = sender.run(&stop, per_second(json, &stop, send_line))?;
    finish(json, &summary, print_send_summary);
    Ok(ExitCode::SUCCESS)
}

/// The sender's line for one second.
fn send_line(i: &SendInterval) -> String {
    format!("sent {}", format_rate_line(i.interval.rate))
}

/// The sender's last lines: totals, the kernel's push-back and what GSO did.
fn print_send_summary(s: &SendSummary) {
    outln!(
        "sent {} datagrams in {:.2}s: mean {} ({} syscalls, {} flows)",
        s.throughput.datagrams,
        s.throughput.elapsed_secs,
        format_rate_line(s.throughput.mean),
        s.syscalls,
        s.flows
    );
    if s.backpressure > 0 || s.refused > 0 {
        outln!(
            "kernel pushed back {} times (ENOBUFS), {} sends refused (nobody listening)",
            s.backpressure,
            s.refused
        );
    }
    match (&s.gso.requested, s.gso.active, &s.gso.note) {
        (Some(seg), true, _) => {
            outln!("GSO: {seg} datagrams per message");
        }
        (Some(_), false, Some(note)) => {
            outln!("GSO: off: {note}");
        }
        _ => {}
    }
}

/// `--xdp-mode`: its values listed in the help, parsed by the library.
fn xdp_mode() -> impl TypedValueParser<Value = XdpMode> {
    PossibleValuesParser::new(["auto", "zerocopy", "copy", "generic"]).try_map(|m| m.parse())
}

fn recv(args: RecvArgs) -> anyhow::Result<ExitCode> {
    let stop = stop_on_signals()?;
    let xdp_dev = args.xdp_dev.clone();
    let backend = args.backend.configure(&BackendOptions {
        sqpoll_cpu: args.sqpoll,
        xdp_mode: args.xdp_mode,
        busy_poll_us: args.busy_poll,
        interface: args.xdp_dev.is_some(),
    })?;
    let away = crate::metrics::away_from(args.pin.as_ref())?;
    let receiver = Receiver::bind(ReceiverConfig {
        addrs: args.addrs,
        lanes: Lanes {
            threads: args.threads,
            placement: Placement::from_pin(args.pin),
            batch: args.batch,
        },
        receive: ReceivePath {
            rcvbuf: args.rcvbuf,
            gro: args.gro,
            coalesce: (!args.coalesce.is_zero()).then_some(args.coalesce),
            backend,
        },
        sockets: match args.sockets {
            SocketsArg::Shared => SocketMode::Shared,
            SocketsArg::Reuseport => SocketMode::Reuseport,
        },
        steering: match args.steer {
            SteerArg::Hash => Steering::Hash,
            SteerArg::Cpu => Steering::Cpu,
        },
        slot: args.slot,
        check: !args.no_check,
        duration: args.duration,
        until_datagrams: args.count,
        flow_groups: args.flow_groups,
        interface: args.xdp_dev,
        dispatch: args.dispatch.map(|kind| corelane::udp::dispatch::DispatchConfig {
            kind,
            workers: args.workers.max(1),
            work_ns: args.work.as_nanos().min(u32::MAX as u128) as u32,
        }),
    })?;
    if let Some(note) = receiver.backend_note() {
        eprintln!("note: {note}");
    }
    // Preferred busy polling: the device's deferral settings for the run, restored when this
    // is dropped (or by the keeper, if the run is killed).
    let _busy_poll = match (args.busy_poll, receiver.local_addrs().first()) {
        (Some(_), Some(&addr)) => {
            let iface = corelane::xdp::Interface::for_address(addr, xdp_dev.as_deref())?;
            crate::apply::busy_poll_for_run(&iface.name, iface.index)?
        }
        _ => None,
    };
    let metrics = corelane::metrics::RecvMetrics::new(&receiver);
    let _endpoint = crate::metrics::start(&args.metrics, metrics, away)?;
    let json = args.json;
    // Said once every lane is reading, not merely bound: a sender started on it loses nothing
    // to lanes that have not begun.
    let ready = serde_json::json!({
        "type": "ready", "addrs": receiver.local_addrs(), "backend": receiver.backend(),
        "notes": receiver.backend_note().into_iter().collect::<Vec<_>>(),
    });
    let addrs: Vec<String> = receiver.local_addrs().iter().map(ToString::to_string).collect();
    let announce = move || {
        if json {
            print_json(&ready);
        } else {
            eprintln!("receiving on {} (Ctrl-C to stop)", addrs.join(" "));
        }
    };
    let summary =
        receiver.run_announced(&stop, announce, per_second(json, &stop, interval_line))?;
    finish(json, &summary, print_recv_summary);
    Ok(ExitCode::SUCCESS)
}

/// The UDP study's receiver line, then per-lane rates and the interval's kernel drops.
/// A count, or `?` where it could not be read.
fn known(count: Option<u64>) -> String {
    count.map_or_else(|| "?".into(), |n| n.to_string())
}

fn interval_line(i: &RecvInterval) -> String {
    let mut line = format_rate_line(i.interval.rate);
    if i.interval.lane_pps.len() > 1 {
        let lanes: Vec<String> =
            i.interval.lane_pps.iter().map(|p| format!("{:.3}M", p / 1e6)).collect();
        line.push_str(&format!("  lanes {}", lanes.join(" ")));
    }
    line.push_str(&format!(
        "  drops {}  cpu {:.0} ns/dgram",
        known(i.kernel_drops),
        i.cpu_ns_per_datagram
    ));
    if let Some(x) = &i.backend.xsk {
        line.push_str(&format!(
            "  xsk lost {} (ring full {}, no fill frame {})",
            x.rx_lost(),
            x.rx_ring_full,
            x.rx_dropped
        ));
    } else if i.backend.xsk_unknown {
        line.push_str("  xsk lost unknown (XDP_STATISTICS unreadable)");
    }
    line
}

/// A line per group of flows asked for with `--flow-groups`.
fn print_flow_groups(s: &RecvSummary) {
    for g in &s.flow_groups {
        outln!(
            "  flows {}-{}: received {}, missing {}, duplicates {}, late {}",
            g.group.first,
            g.group.last,
            g.sequence.received,
            g.sequence.missing,
            g.sequence.duplicates,
            g.sequence.late
        );
    }
}

fn print_recv_summary(s: &RecvSummary) {
    if let Some(d) = &s.dispatch {
        outln!(
            "dispatch {} over {} workers: per worker {:?} (CoV {:.3}); at the egress {} of {} reordered (ratio {:.4}, mean extent {:.1}, 3-reordered {:.4}); {} migrations",
            d.scheduler,
            d.workers,
            d.per_worker,
            d.imbalance_cov,
            d.egress.reordered,
            d.egress.events,
            d.egress.reorder_ratio,
            d.egress.mean_extent,
            d.egress.n_reordered_ratio,
            d.migrations
        );
    }
    let q = &s.sequence;
    outln!(
        "received {} datagrams in {:.2}s: median {:.3}M pps, mean {}",
        s.throughput.datagrams,
        s.throughput.elapsed_secs,
        s.throughput.median_pps / 1e6,
        format_rate_line(s.throughput.mean)
    );
    outln!(
        "cpu {:.0} ns/datagram (user {:.2}s, sys {:.2}s); kernel drops {}; truncated {}",
        s.cpu_ns_per_datagram,
        s.cpu_secs.user,
        s.cpu_secs.system,
        known(s.kernel_drops),
        s.anomalies.truncated
    );
    outln!(
        "flows {}: missing {}, duplicates {}, late {}, corrupt {}, foreign {}",
        q.flows,
        q.missing,
        q.duplicates,
        q.late,
        s.anomalies.corrupt,
        s.anomalies.foreign
    );
    print_flow_groups(s);
    for lane in &s.lanes {
        let cpu = lane.cpu.map_or("any".to_string(), |c| c.to_string());
        outln!(
            "  lane {} on cpu {}: {} datagrams in {} syscalls",
            lane.lane,
            cpu,
            lane.datagrams,
            lane.syscalls
        );
    }
    if s.anomalies.truncated > 0 {
        outln!(
            "warning: {} datagrams were longer than the {}-byte receive buffer: raise --slot",
            s.anomalies.truncated,
            s.slot_bytes
        );
    }
    if let Some(note) = &s.gro.note {
        outln!("GRO: {note}");
    }
    if let Some(x) = &s.backend_report.xdp {
        outln!(
            "AF_XDP on {} ({} queues, program {}): {}, {}",
            x.interface,
            x.queues,
            x.program_id,
            x.mode,
            x.why
        );
        let c = &x.counts;
        outln!(
            "frames {}: lying length {}, malformed {}, not UDP {}, other port {} (all dropped)",
            c.frames,
            c.lying_length,
            c.malformed,
            c.not_udp,
            c.other_port,
        );
        if let Some(k) = &x.xsk {
            outln!(
                "AF_XDP sockets lost {} frames: RX ring full {}, no fill frame {} (fill ring found empty {} times); invalid descriptors RX {} TX {}; TX ring found empty {} times",
                k.rx_lost(),
                k.rx_ring_full,
                k.rx_dropped,
                k.rx_fill_ring_empty_descs,
                k.rx_invalid_descs,
                k.tx_invalid_descs,
                k.tx_ring_empty_descs
            );
        } else {
            outln!(
                "AF_XDP sockets' losses unknown: {}",
                x.xsk_error.as_deref().unwrap_or("their counters could not be read")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corelane::stats::{Interval, Rate};

    fn second(xsk: Option<corelane::xdp::rx::XskStats>, xsk_unknown: bool) -> RecvInterval {
        RecvInterval {
            interval: Interval {
                index: 2,
                at_secs: 2.0,
                rate: Rate { pps: 150_000.0, bytes_per_sec: 4.8e6 },
                lane_pps: vec![150_000.0],
                datagrams: 300_000,
                bytes: 9_600_000,
            },
            kernel_drops: Some(0),
            cpu_ns_per_datagram: 60.0,
            backend: corelane::udp::BackendSecond { xsk, xsk_unknown },
        }
    }

    /// A second whose AF_XDP counters could not be read says so; it never shows 0 lost.
    #[test]
    fn an_unreadable_second_of_socket_counters_shows_as_unknown() {
        let line = interval_line(&second(None, true));
        assert!(line.contains("xsk lost unknown"), "{line}");
        let lost = corelane::xdp::rx::XskStats { rx_ring_full: 4, ..Default::default() };
        let line = interval_line(&second(Some(lost), false));
        assert!(line.contains("xsk lost 4 (ring full 4, no fill frame 0)"), "{line}");
        assert!(!interval_line(&second(None, false)).contains("xsk"), "not an AF_XDP receive");
    }
}
