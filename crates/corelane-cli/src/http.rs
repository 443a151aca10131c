//! `corelane serve http` and `corelane load http`.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use corelane::lane::Placement;
use corelane::privilege::RunAs;
use corelane::tcp::load::LoadInterval;
use corelane::tcp::static_file::StaticRoot;
use corelane::tcp::{
    Backend, Content, Limits, Listen, LoadConfig, LoadSummary, Recycle, ServeInterval, Server,
    ServerConfig,
};
use corelane::topology::{CpuList, Topology};

use crate::args::{
    finish, outln, parse_duration, parse_size, per_second, print_json, stop_on_signals,
};

#[derive(Debug, Subcommand)]
pub enum ServeCommand {
    /// An HTTP/1.1 server with one lane per CPU, each recycling its buffers, slots and events.
    Http(ServeArgs),
}

#[derive(Debug, Subcommand)]
pub enum LoadCommand {
    /// HTTP/1.1 load, closed loop or at a constant --rate (wrk2): requests/s, errors, latency.
    Http(LoadArgs),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    addr: IpAddr,
    /// TCP port (0 picks a free one and prints it).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Lanes (threads, each with its own listener and epoll); default one per online CPU.
    #[arg(long)]
    lanes: Option<usize>,
    /// Pin lanes round-robin to these CPUs, e.g. 1 or 0-3.
    #[arg(long, value_name = "CPUS")]
    pin: Option<CpuList>,
    /// The body every GET gets (text/plain).
    #[arg(long, default_value = "Hello, World!", conflicts_with = "root")]
    body: String,
    /// Serve files under this directory instead of --body.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Recycling methods on: all, none, or a comma list of fd, events, buffers.
    #[arg(long, default_value = "all")]
    recycle: Recycle,
    /// How connections reach lanes: shared (one listener), reuseport (one per lane), or
    /// reuseport-cpu (the lane pinned to the CPU that received the SYN; needs --pin).
    #[arg(long, default_value = "reuseport")]
    listen: Listen,
    /// How lanes talk to the kernel: epoll, or uring (multishot accept into registered
    /// files, provided buffers, one submission per loop).
    #[arg(long, default_value = "epoll")]
    backend: Backend,
    /// With --backend uring: an SQPOLL kernel thread pinned to this CPU submits for every
    /// lane (the core-partitioning study's syscall thread); falls back, saying why, where the kernel refuses.
    #[arg(long, value_name = "CPU")]
    sqpoll: Option<usize>,
    /// Open connections at most, over all lanes; more get 503.
    #[arg(long, default_value_t = 16384)]
    max_connections: usize,
    /// Request line plus headers at most (414 or 431 beyond).
    #[arg(long, default_value = "8K", value_parser = parse_size)]
    max_header_bytes: usize,
    /// Time a client has to send a request's head, from accept or from the request's first
    /// byte on a kept-alive connection (408 and close beyond).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    header_timeout: Duration,
    /// Time a client has to send a whole request, body included, from its first byte (408
    /// and close beyond).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    request_timeout: Duration,
    /// A closing connection whose client reads nothing for this long is dropped.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    linger_timeout: Duration,
    /// Response bytes a connection may have waiting for its client; beyond it the server
    /// stops reading that connection until the client reads (bounds what a pipelining
    /// client that never reads can make the server hold).
    #[arg(long, default_value = "64K", value_parser = parse_size)]
    max_pending_output: usize,
    /// Keep-alive connections idle this long are closed.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    idle_timeout: Duration,
    /// Serve this long, then drain and exit (default: until Ctrl-C).
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Started as root: the user to become once the port is bound, before serving (its
    /// groups, gid and uid; no capability kept), so a file only root may read is 403. `root`
    /// keeps root, and says so.
    #[arg(long, value_name = "NAME", default_value = "nobody")]
    user: String,
    /// A JSON line when ready, one per second and a summary, instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    metrics: crate::metrics::MetricsArgs,
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// What to request, e.g. http://127.0.0.1:8080/ (plain HTTP/1.1).
    url: String,
    /// Connections, each with one request in flight.
    #[arg(long, short = 'c', default_value_t = 50)]
    connections: usize,
    /// Client lanes (threads); connections are spread over them.
    #[arg(long, default_value_t = 1)]
    lanes: usize,
    /// Pin lanes round-robin to these CPUs.
    #[arg(long, value_name = "CPUS")]
    pin: Option<CpuList>,
    /// How long to load (10, 10s, 500ms, 2m).
    #[arg(long, short = 'd', default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Stop after this many responses.
    #[arg(long)]
    requests: Option<u64>,
    /// A new connection per request (`Connection: close`).
    #[arg(long)]
    close: bool,
    /// A request unanswered this long is an error.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    timeout: Duration,
    /// Constant throughput: this many requests per second over all connections, latency
    /// counted from when each request was due (wrk2's correction); without it, closed loop.
    #[arg(long, value_name = "REQ_PER_SEC")]
    rate: Option<u64>,
    /// One JSON object per second and a final summary, instead of text.
    #[arg(long)]
    json: bool,
    /// Instead of loading: open --connections connections, one GET of the URL on each,
    /// answered whole, then hold them open and silent; print one ready line (how many are
    /// held and how many were answered 200) and keep them until SIGINT/SIGTERM, the end of a
    /// piped stdin, or --duration (at most 15m). What an idle connection costs a server.
    #[arg(long, conflicts_with_all = ["rate", "close", "requests"])]
    hold_idle: bool,
}

pub fn serve(cmd: ServeCommand) -> anyhow::Result<ExitCode> {
    let ServeCommand::Http(args) = cmd;
    let lanes = match args.lanes {
        Some(n) => n,
        None => Topology::read().map(|t| t.cpus.len()).unwrap_or(1).max(1),
    };
    let content = match &args.root {
        Some(dir) => Content::Root(
            StaticRoot::new(dir).with_context(|| format!("--root {}", dir.display()))?,
        ),
        None => Content::Body(args.body.clone().into_bytes()),
    };
    let mut config = ServerConfig::new(SocketAddr::new(args.addr, args.port), content);
    config.lanes = lanes;
    config.placement = Placement::from_pin(args.pin.clone());
    config.recycle = args.recycle;
    config.listen = args.listen;
    config.backend = match (args.backend, args.sqpoll) {
        (Backend::Uring { .. }, sqpoll_cpu) => Backend::Uring { sqpoll_cpu },
        (Backend::Epoll, None) => Backend::Epoll,
        (Backend::Epoll, Some(_)) => {
            bail!("--sqpoll needs --backend uring (the SQPOLL thread is io_uring's)")
        }
    };
    raise_fd_limit();
    config.limits = Limits {
        max_header_bytes: args.max_header_bytes.max(64),
        header_timeout: args.header_timeout,
        request_timeout: args.request_timeout.max(args.header_timeout),
        linger_timeout: args.linger_timeout,
        max_pending_output: args.max_pending_output.max(1),
        idle_timeout: args.idle_timeout,
        max_connections: args.max_connections.max(1),
        ..Limits::default()
    };
    config.run_as = Some(RunAs::lookup(&args.user)?);
    let stop = stop_on_signals()?;
    let server = Server::start(config, stop.clone())?;
    let addr = server.local_addr();
    for note in server.notes() {
        eprintln!("note: {note}");
    }
    let identity = server.identity().context("the server did not say who it runs as")?;
    let warning = identity.root.then(|| {
        format!(
            "serving as root (uid 0{}): any file root may read under --root is served; leave out --user root to serve as nobody",
            if args.user == "root" { ", --user root" } else { "" }
        )
    });
    if let Some(w) = &warning {
        eprintln!("WARNING: {w}");
    }
    if args.json {
        print_json(&serde_json::json!({
            "type": "ready", "addr": addr, "lanes": lanes, "backend": server.backend(),
            "notes": server.notes(), "user": identity, "warning": warning,
        }));
    } else {
        eprintln!(
            "serving http://{addr}/ on {lanes} lane(s), {} backend, recycling {}, listen {}, as {} (uid {}){} (Ctrl-C to stop)",
            server.backend(), args.recycle, args.listen, identity.user, identity.uid,
            if identity.root { ", ROOT" } else { "" }
        );
    }
    let metrics = corelane::metrics::ServeMetrics::new(server.counters());
    let away = crate::metrics::away_from(args.pin.as_ref())?;
    let _endpoint = crate::metrics::start(&args.metrics, metrics, away)?;
    let report = per_second(args.json, &stop, serve_line);
    let summary = server.run(args.duration, report)?;
    finish(args.json, &summary, |s| {
        outln!(
            "served {} requests on {} connections in {:.1}s; 4xx {}, 5xx {}, refused {}, timed out {}; CPU {:.2} us/request",
            s.totals.requests,
            s.totals.connections,
            s.seconds,
            s.totals.client_errors,
            s.totals.server_errors,
            s.totals.refused,
            s.totals.timeouts,
            s.cpu_us_per_request
        );
    });
    Ok(ExitCode::SUCCESS)
}

fn serve_line(i: &ServeInterval) -> String {
    let held = i.bytes_per_connection.map_or(String::new(), |b| format!("  {b:.0} B/connection"));
    format!(
        "{:>10.0} req/s  open {:>6}  4xx {}  5xx {}  CPU {:.2} us/request{held}",
        i.requests_per_sec, i.open, i.client_errors, i.server_errors, i.cpu_us_per_request
    )
}

/// A server holds a socket per connection: lift the soft fd limit to the hard one.
fn raise_fd_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.maximum.is_some() && limit.current < limit.maximum {
        let _ =
            setrlimit(Resource::Nofile, Rlimit { current: limit.maximum, maximum: limit.maximum });
    }
}

pub fn load(cmd: LoadCommand) -> anyhow::Result<ExitCode> {
    let LoadCommand::Http(args) = cmd;
    let (target, host, path) = parse_url(&args.url)?;
    raise_fd_limit();
    if args.hold_idle {
        return hold_idle(&args, target, &host, &path);
    }
    let mut config = LoadConfig::new(target);
    config.host = host;
    config.path = path;
    config.connections = args.connections;
    config.lanes = args.lanes;
    config.placement = Placement::from_pin(args.pin.clone());
    config.duration = args.duration;
    config.requests = args.requests;
    config.close = args.close;
    config.timeout = args.timeout;
    config.rate = args.rate;
    let stop = stop_on_signals()?;
    if !args.json {
        eprintln!(
            "loading {} with {} connection(s) on {} lane(s) for {:?}{}{}",
            args.url,
            args.connections,
            args.lanes,
            args.duration,
            if args.close { ", a new connection per request" } else { "" },
            args.rate.map(|r| format!(", at {r} requests/s")).unwrap_or_default()
        );
    }
    let summary =
        corelane::tcp::load::run(&config, &stop, per_second(args.json, &stop, load_line))?;
    finish(args.json, &summary, print_load_summary);
    if let Some(rate) = summary.rate {
        if summary.requests_per_sec < rate as f64 * 0.99 {
            eprintln!(
                "warning: achieved {:.0} requests/s, short of the {rate} asked: the server (or this client, or too few --connections) could not keep up",
                summary.requests_per_sec
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The longest `--hold-idle` holds its connections.
const MAX_HOLD: Duration = Duration::from_secs(900);

/// `load http --hold-idle`: the connections opened, answered and held (see [`LoadArgs`]).
fn hold_idle(
    args: &LoadArgs,
    target: SocketAddr,
    host: &str,
    path: &str,
) -> anyhow::Result<ExitCode> {
    let most = hold_limit();
    if args.connections == 0 || args.connections > most {
        bail!(
            "--connections {} with --hold-idle: give 1 to {most} (each held connection is a descriptor; this process may open {} in all: raise `ulimit -n` for more)",
            args.connections,
            most + 64
        );
    }
    if args.duration > MAX_HOLD || args.duration.is_zero() {
        bail!("--duration {:?} with --hold-idle: give at most 15m (how long the connections are held), above zero", args.duration);
    }
    let stop = stop_on_signals()?;
    watch_piped_stdin(&stop);
    // --duration bounds the whole run, the opening included.
    let end = std::time::Instant::now() + args.duration;
    let (n, timeout) = (args.connections, args.timeout);
    let held =
        corelane::tcp::idle::hold(target, host, path, n, timeout, end, &|| stop.is_stopped())
            .with_context(|| format!("--hold-idle to {}", args.url))?;
    if args.json {
        print_json(&serde_json::json!({
            "type": "ready", "held": held.streams.len(), "answered": held.answered,
        }));
    } else {
        outln!(
            "holding {} idle connection(s) to {} ({} answered 200) until Ctrl-C, the end of a piped stdin, or {:?}",
            held.streams.len(),
            args.url,
            held.answered,
            args.duration
        );
    }
    while !stop.is_stopped() && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(held);
    Ok(ExitCode::SUCCESS)
}

/// The most connections `--hold-idle` may hold: its open-file limit (the soft one, raised to
/// the hard one), less 64 for everything else, and at most 2^20.
fn hold_limit() -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let files = limit.current.unwrap_or(1 << 20).min(1 << 20) as usize;
    files.saturating_sub(64)
}

/// Stops `stop` when stdin is a pipe or socket (ssh's) and reaches its end (a parent that
/// lets go), so a holder started from a script or over ssh ends with it; a terminal or
/// /dev/null is not watched.
fn watch_piped_stdin(stop: &corelane::lane::StopSignal) {
    use rustix::fs::FileType;
    let piped = rustix::fs::fstat(std::io::stdin()).is_ok_and(|st| {
        matches!(FileType::from_raw_mode(st.st_mode), FileType::Fifo | FileType::Socket)
    });
    if !piped {
        return;
    }
    let stop = stop.clone();
    std::thread::spawn(move || {
        let mut sink = [0u8; 64];
        let mut stdin = std::io::stdin();
        while matches!(std::io::Read::read(&mut stdin, &mut sink), Ok(n) if n > 0) {}
        stop.stop();
    });
}

fn load_line(i: &LoadInterval) -> String {
    format!("{:>10.0} req/s  errors {}", i.requests_per_sec, i.errors)
}

fn print_load_summary(s: &LoadSummary) {
    outln!(
        "{} responses in {:.2}s: {:.0} req/s; non-2xx {}, errors {}, connections {}",
        s.responses,
        s.seconds,
        s.requests_per_sec,
        s.non_2xx,
        s.errors,
        s.connects
    );
    let line = |l: &corelane::tcp::load::Latency| {
        format!(
            "p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  p99.99 {:.1}  max {:.1}  mean {:.1}",
            l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.p9999_us, l.max_us, l.mean_us
        )
    };
    match &s.latency_uncorrected {
        Some(u) => {
            outln!("latency us (from when due): {}", line(&s.latency));
            outln!("  uncorrected (from sent):  {}", line(u));
        }
        None => {
            outln!("latency us: {}", line(&s.latency));
        }
    }
}

/// The address to connect to, the Host header and the request target of an http:// URL.
fn parse_url(text: &str) -> anyhow::Result<(SocketAddr, String, String)> {
    let url = url::Url::parse(text)
        .with_context(|| format!("{text:?} is not a URL: write it as http://HOST:PORT/PATH"))?;
    if url.scheme() != "http" {
        bail!("{text:?}: only http:// is supported (corelane load speaks plain HTTP/1.1)");
    }
    let host = url.host_str().context("the URL has no host")?.to_owned();
    let port = url.port_or_known_default().unwrap_or(80);
    let target = (host.trim_start_matches('[').trim_end_matches(']'), port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {host}"))?
        .next()
        .with_context(|| format!("{host} has no address"))?;
    let mut path = url.path().to_owned();
    if let Some(q) = url.query() {
        path.push('?');
        path.push_str(q);
    }
    let host_header = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host,
    };
    Ok((target, host_header, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_address_host_and_path() {
        let (addr, host, path) = parse_url("http://127.0.0.1:8080/a/b?c=1").unwrap();
        assert_eq!(addr, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(host, "127.0.0.1:8080");
        assert_eq!(path, "/a/b?c=1");
        let (addr, _, path) = parse_url("http://[::1]/").unwrap();
        assert_eq!(addr, "[::1]:80".parse().unwrap());
        assert_eq!(path, "/");
        assert!(parse_url("https://127.0.0.1/").unwrap_err().to_string().contains("only http://"));
        assert!(parse_url("127.0.0.1:80").is_err());
    }
}
