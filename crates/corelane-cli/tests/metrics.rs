//! `--metrics ADDR`: each long-running command's exposition is accepted by `promtool check
//! metrics`, a real Prometheus (started here, its own config and data directory, killed by
//! PID at the end) scrapes all four commands under load and its query API sees their counters
//! rise, and the endpoint stays small and answering under hostile clients.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_corelane");

/// A child process killed (by its PID) and reaped when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `corelane ARGS` and waits (10 s at most) for the stderr lines beginning with each
/// of `markers`; returns the child and the rest of each line after its marker.
fn start(args: &[&str], markers: &[&str]) -> (Running, Vec<String>) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let running = Running(child);
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut found: Vec<Option<String>> = vec![None; markers.len()];
    let end = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    while found.iter().any(Option::is_none) {
        let left = end.saturating_duration_since(Instant::now());
        let Ok(line) = rx.recv_timeout(left) else {
            panic!("corelane {args:?} did not print {markers:?}; it printed {seen:?}")
        };
        for (marker, slot) in markers.iter().zip(found.iter_mut()) {
            if let Some(rest) = line.strip_prefix(marker) {
                *slot = Some(rest.to_owned());
            }
        }
        seen.push(line);
    }
    (running, found.into_iter().map(Option::unwrap).collect())
}

/// The address in `http://ADDR/…` or `ADDR …`.
fn addr_in(text: &str) -> SocketAddr {
    let text = text.trim_start_matches("http://");
    let end = text.find(['/', ' ']).unwrap_or(text.len());
    text[..end].parse().unwrap_or_else(|_| panic!("no address in {text:?}"))
}

/// The metrics address a command printed.
fn metrics_addr(rest: &str) -> SocketAddr {
    addr_in(rest)
}

/// One request on its own connection: status line, head and body.
fn request(addr: SocketAddr, raw: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(3)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    stream.write_all(raw.as_bytes()).unwrap();
    let mut bytes = Vec::new();
    let _ = stream.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_owned(), body.to_owned())
}

fn get(addr: SocketAddr, path: &str, accept: Option<&str>) -> (u16, String, String) {
    let accept = accept.map(|a| format!("Accept: {a}\r\n")).unwrap_or_default();
    request(addr, &format!("GET {path} HTTP/1.1\r\nHost: t\r\n{accept}Connection: close\r\n\r\n"))
}

/// `promtool check metrics` on an exposition; `None` when promtool is absent.
fn promtool_check(text: &str) -> Option<(bool, String)> {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!("{}{}", common::text(&out.stdout), common::text(&out.stderr));
    Some((out.status.success(), said))
}

/// A free loopback port, for Prometheus's own listener.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A Prometheus server of the test's own.
struct Prometheus {
    _child: Running,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Scrapes every (job, target) each second; `None` (said why) when it is not installed.
    fn start(jobs: &[(&str, SocketAddr)]) -> Option<Self> {
        if Command::new("prometheus").arg("--version").output().is_err() {
            eprintln!("skipping the Prometheus scrape: no `prometheus` here (Debian's package)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut config = String::from(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n",
        );
        for (job, target) in jobs {
            config.push_str(&format!(
                "  - job_name: {job}\n    scrape_interval: 1s\n    static_configs:\n      - targets: ['{target}']\n"
            ));
        }
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", dir.path().join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(dir.path().join("log")).unwrap()))
            .spawn()
            .unwrap();
        let prometheus = Self { _child: Running(child), addr, _dir: dir };
        let end = Instant::now() + Duration::from_secs(20);
        while get_quiet(addr, "/-/ready") != 200 {
            assert!(Instant::now() < end, "Prometheus not ready in 20 s: {}", prometheus.log());
            std::thread::sleep(Duration::from_millis(200));
        }
        Some(prometheus)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("log")).unwrap_or_default()
    }

    /// The first sample's value of an instant query, if any.
    fn query(&self, expr: &str) -> Option<f64> {
        let q: String = url::form_urlencoded::byte_serialize(expr.as_bytes()).collect();
        let (status, _, body) = get(self.addr, &format!("/api/v1/query?query={q}"), None);
        assert_eq!(status, 200, "{expr}: {body}");
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        json["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    }
}

/// The status of a GET, 0 when nothing answered.
fn get_quiet(addr: SocketAddr, path: &str) -> u16 {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return 0;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = write!(stream, "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    let mut head = [0u8; 12];
    match stream.read_exact(&mut head) {
        Ok(()) => String::from_utf8_lossy(&head[9..12]).parse().unwrap_or(0),
        Err(_) => 0,
    }
}

/// Each command's exposition is valid for promtool, and in OpenMetrics when asked.
fn check_exposition(what: &str, addr: SocketAddr, families: &[&str]) {
    let (status, head, body) = get(addr, "/metrics", None);
    assert_eq!(status, 200, "{what}: {head}");
    assert!(head.contains("Content-Type: text/plain; version=0.0.4"), "{what}: {head}");
    for family in families {
        assert!(body.contains(&format!("# TYPE {family} ")), "{what}: no {family} in\n{body}");
    }
    match promtool_check(&body) {
        Some((ok, said)) => {
            assert!(ok, "promtool check metrics refused {what}'s exposition: {said}\n{body}")
        }
        None => eprintln!("skipping promtool check for {what}: no `promtool` here"),
    }
    let (status, head, body) =
        get(addr, "/metrics", Some("application/openmetrics-text;version=1.0.0,text/plain;q=0.5"));
    assert_eq!(status, 200);
    assert!(
        head.contains("Content-Type: application/openmetrics-text; version=1.0.0"),
        "{what}: {head}"
    );
    assert!(body.ends_with("# EOF\n"), "{what}: OpenMetrics ends with # EOF");
}

/// Waits (30 s at most) until every query is positive; the last values.
fn wait_positive(prometheus: &Prometheus, queries: &[&str]) -> Vec<Option<f64>> {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let values: Vec<Option<f64>> = queries.iter().map(|q| prometheus.query(q)).collect();
        if values.iter().all(|v| v.is_some_and(|v| v > 0.0)) || Instant::now() > end {
            return values;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn prometheus_scrapes_every_command_under_load() {
    let m = "--metrics=127.0.0.1:0";
    let (_serve, s) = start(
        &[
            "serve",
            "http",
            "--addr",
            "127.0.0.1",
            "--port",
            "0",
            "--lanes",
            "2",
            "--duration",
            "60s",
            m,
        ],
        &["serving http://", "metrics on "],
    );
    let (serve_addr, serve_metrics) = (addr_in(&s[0]), metrics_addr(&s[1]));
    let (_recv, r) = start(
        &["udp", "recv", "127.0.0.1:0", "--duration", "60s", m],
        &["receiving on ", "metrics on "],
    );
    let (recv_addr, recv_metrics) = (addr_in(&r[0]), metrics_addr(&r[1]));
    let (_echo, e) = start(
        &["udp", "echo", "127.0.0.1:0", "--duration", "60s", m],
        &["echoing on ", "metrics on "],
    );
    let (echo_addr, echo_metrics) = (addr_in(&e[0]), metrics_addr(&e[1]));
    let program = common::compile_run_program("metrics_load").unwrap_or_else(|why| panic!("{why}"));
    let program = program.to_str().unwrap();
    let (_run, u) =
        start(&["run", "--syscall-cpus", "0", m, "--", program, "40"], &["metrics on "]);
    let run_metrics = metrics_addr(&u[0]);

    check_exposition(
        "serve http",
        serve_metrics,
        &[
            "corelane_http_requests_total",
            "corelane_http_request_duration_seconds",
            "corelane_process_cpu_seconds_total",
            "corelane_lane_cpu_seconds_total",
        ],
    );
    check_exposition(
        "udp recv",
        recv_metrics,
        &[
            "corelane_udp_received_datagrams_total",
            "corelane_udp_received_bytes_total",
            "corelane_udp_receive_batch_datagrams",
            "corelane_udp_missing_datagrams",
            "corelane_udp_duplicate_datagrams_total",
            "corelane_udp_late_datagrams_total",
        ],
    );
    check_exposition(
        "udp echo",
        echo_metrics,
        &[
            "corelane_udp_answered_datagrams_total",
            "corelane_udp_answered_bytes_total",
            "corelane_udp_receive_batch_datagrams",
        ],
    );
    check_exposition(
        "run",
        run_metrics,
        &[
            "corelane_run_carried_calls_total",
            "corelane_run_in_place_calls_total",
            "corelane_run_carrier_cpu_seconds_total",
            "corelane_run_program_cpu_seconds_total",
            "corelane_run_processes",
        ],
    );

    let jobs = [
        ("serve", serve_metrics),
        ("recv", recv_metrics),
        ("echo", echo_metrics),
        ("run", run_metrics),
    ];
    let Some(prometheus) = Prometheus::start(&jobs) else { return };
    let url = format!("http://{serve_addr}/");
    let recv_target = recv_addr.to_string();
    let echo_target = echo_addr.to_string();
    let loads = [
        vec!["load", "http", url.as_str(), "-c", "2", "-d", "15s", "--rate", "2000"],
        vec!["udp", "send", recv_target.as_str(), "--rate", "5000", "--duration", "15s"],
        vec![
            "udp",
            "ping",
            echo_target.as_str(),
            "--mode",
            "under-load",
            "--rate",
            "2000",
            "-d",
            "15s",
            "--warmup",
            "0s",
        ],
    ];
    let _loads: Vec<Running> = loads
        .iter()
        .map(|args| {
            Running(
                Command::new(BIN)
                    .args(args)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    let queries = [
        "sum(increase(corelane_http_requests_total{job=\"serve\"}[10s]))",
        "sum(increase(corelane_udp_received_datagrams_total{job=\"recv\"}[10s]))",
        "sum(increase(corelane_udp_answered_datagrams_total{job=\"echo\"}[10s]))",
        "sum(increase(corelane_run_carried_calls_total{job=\"run\"}[10s]))",
        // The quantiles people ask for: p99 request duration, the median batch size.
        "histogram_quantile(0.99, sum by (le) (rate(corelane_http_request_duration_seconds_bucket{job=\"serve\"}[10s])))",
        "histogram_quantile(0.5, sum by (le) (rate(corelane_udp_receive_batch_datagrams_bucket{job=\"recv\"}[10s])))",
        "histogram_quantile(0.5, sum by (le) (rate(corelane_udp_receive_batch_datagrams_bucket{job=\"echo\"}[10s])))",
    ];
    let values = wait_positive(&prometheus, &queries);
    eprintln!("Prometheus: {:?}", queries.iter().zip(&values).collect::<Vec<_>>());
    for (query, value) in queries.iter().zip(&values) {
        assert!(
            value.is_some_and(|v| v.is_finite() && v > 0.0),
            "{query} = {value:?}; Prometheus said: {}",
            prometheus.log()
        );
    }
    let up = prometheus.query("sum(up)");
    assert_eq!(up, Some(4.0), "every target up");
    let p99 = values[4].unwrap();
    assert!(p99 < 10.0, "a loopback request's p99 is under the 10 s bucket: {p99}");
}

#[test]
fn the_endpoint_answers_only_scrapes() {
    let (mut recv, r) = start(
        &["udp", "recv", "127.0.0.1:0", "--duration", "30s", "--metrics", "127.0.0.1:0"],
        &["metrics on "],
    );
    let addr = metrics_addr(&r[0]);
    assert_eq!(get(addr, "/", None).0, 404);
    assert_eq!(get(addr, "/metrics/x", None).0, 404);
    let (status, head, _) =
        request(addr, "POST /metrics HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi");
    assert_eq!(status, 405, "{head}");
    assert!(head.contains("Allow: GET, HEAD"), "{head}");
    assert_eq!(request(addr, "GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n").0, 400);
    let (status, head, body) =
        request(addr, "HEAD /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_eq!(status, 200, "{head}");
    assert!(body.is_empty(), "HEAD has no body: {body:?}");
    // Two requests on one kept-alive connection, the second sent after the first answer.
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    for _ in 0..2 {
        stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let mut length = 0usize;
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert!(line.starts_with("HTTP/1.1 200"), "{line}");
        loop {
            line.clear();
            reader.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0u8; length];
        reader.read_exact(&mut body).unwrap();
    }
    // Ctrl-C ends the command and its endpoint with it: the port is closed once it exits.
    let pid = rustix::process::Pid::from_raw(recv.0.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let end = Instant::now() + Duration::from_secs(5);
    while recv.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "still running 5 s after SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(TcpStream::connect(addr).is_err(), "the endpoint closed with the command");
}

/// The process's resident memory, in KiB, from /proc/PID/status.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn hostile_scrapers_cost_bounded_memory() {
    let (recv, r) = start(
        &["udp", "recv", "127.0.0.1:0", "--duration", "60s", "--metrics", "127.0.0.1:0"],
        &["metrics on "],
    );
    let addr = metrics_addr(&r[0]);
    assert_eq!(get(addr, "/metrics", None).0, 200);
    let before = rss_kib(recv.0.id());
    // 500 idle connections, held open and silent.
    let idle: Vec<TcpStream> = (0..500)
        .filter_map(|_| TcpStream::connect_timeout(&addr, Duration::from_secs(3)).ok())
        .collect();
    assert!(idle.len() >= 450, "only {} of 500 connected", idle.len());
    // Oversized heads: 64 KiB of one header.
    let oversized: Vec<(u16, String, String)> = (0..8)
        .map(|_| {
            request(addr, &format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(65_536)))
        })
        .collect();
    // Slowloris: a head a byte every 100 ms, never finished, on 8 connections.
    let slow: Vec<std::thread::JoinHandle<()>> = (0..8)
        .map(|_| {
            std::thread::spawn(move || {
                let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(3)) else {
                    return;
                };
                for b in b"GET /metrics HTTP/1.1\r\nX-Slow: ".iter().cycle().take(30) {
                    if s.write_all(&[*b]).is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let (status, _, body) = get(addr, "/metrics", None);
    assert_eq!(status, 200, "a scraper is answered beside 500 idle and 8 slow clients");
    assert!(started.elapsed() < Duration::from_secs(3), "answered in {:?}", started.elapsed());
    assert!(body.contains("corelane_udp_received_datagrams_total"));
    let grown = rss_kib(recv.0.id()).saturating_sub(before);
    assert!(grown < 16 * 1024, "grew {grown} KiB with hostile clients");
    for (status, head, _) in &oversized {
        assert_eq!(*status, 431, "{head}");
    }
    // The endpoint holds at most 64: the others of the 500 were closed, which a read sees.
    let closed = idle
        .iter()
        .filter(|s| {
            s.set_nonblocking(true).unwrap();
            match (&**s).read(&mut [0u8; 1]) {
                Ok(n) => n == 0,
                Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
            }
        })
        .count();
    assert!(
        closed >= idle.len() - 64,
        "{closed} of {} idle connections closed by the endpoint",
        idle.len()
    );
    slow.into_iter().for_each(|t| t.join().unwrap());
}

#[test]
fn a_bad_metrics_address_is_refused() {
    let out = common::corelane(&[
        "udp",
        "recv",
        "127.0.0.1:0",
        "--duration",
        "1s",
        "--metrics",
        "nonsense",
    ]);
    assert!(!out.status.success());
    let said = common::stderr(&out);
    assert!(said.contains("--metrics") && said.contains("127.0.0.1:9464"), "{said}");
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let busy = taken.local_addr().unwrap().to_string();
    let out =
        common::corelane(&["udp", "echo", "127.0.0.1:0", "--duration", "1s", "--metrics", &busy]);
    assert!(!out.status.success());
    let said = common::stderr(&out);
    assert!(said.contains("--metrics") && said.contains("cannot listen"), "{said}");
    let out = common::corelane(&["run", "--metrics", "127.0.0.1:0", "--", "true"]);
    assert!(!out.status.success());
    assert!(
        common::stderr(&out).contains("--metrics needs a syscall lane"),
        "{}",
        common::stderr(&out)
    );
}

/// A command run with `--json`: its endpoint, its "ready" object and its stdout lines.
struct JsonRun {
    running: Running,
    metrics: SocketAddr,
    ready: serde_json::Value,
    stdout: mpsc::Receiver<String>,
}

impl JsonRun {
    /// Starts `corelane ARGS --json --metrics=127.0.0.1:0`; waits (10 s at most) for its
    /// endpoint and its ready line.
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(BIN)
            .args(args)
            .args(["--json", "--metrics=127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = |pipe: Box<dyn Read + Send>| {
            let (tx, rx) = mpsc::channel::<String>();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            rx
        };
        let stdout = lines(Box::new(child.stdout.take().unwrap()));
        let stderr = lines(Box::new(child.stderr.take().unwrap()));
        let running = Running(child);
        let end = Instant::now() + Duration::from_secs(10);
        let said = loop {
            let left = end.saturating_duration_since(Instant::now());
            match stderr.recv_timeout(left) {
                Ok(line) if line.starts_with("metrics on ") => break line,
                Ok(_) => {}
                Err(_) => panic!("corelane {args:?} never said where its metrics are"),
            }
        };
        let metrics = metrics_addr(said.trim_start_matches("metrics on "));
        let ready = Self::next_of(&stdout, "ready");
        Self { running, metrics, ready, stdout }
    }

    /// The next stdout object of `kind` (10 s at most).
    fn next_of(stdout: &mpsc::Receiver<String>, kind: &str) -> serde_json::Value {
        let end = Instant::now() + Duration::from_secs(10);
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let line = stdout.recv_timeout(left).unwrap_or_else(|_| panic!("no {kind} line"));
            let value: serde_json::Value = serde_json::from_str(&line).unwrap();
            if value["type"] == kind {
                return value;
            }
        }
    }

    /// Ends the command with SIGINT and returns its summary.
    fn finish(mut self) -> serde_json::Value {
        let pid = rustix::process::Pid::from_raw(self.running.0.id() as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
        let summary = Self::next_of(&self.stdout, "summary");
        let _ = self.running.0.wait();
        summary["summary"].clone()
    }
}

/// Every sample of family `name` (exactly: `name{…} v` or `name v`) in an exposition, as
/// (its lane label, if any; its value).
fn samples(body: &str, name: &str) -> Vec<(Option<usize>, f64)> {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, labels) = series.split_once('{').unwrap_or((series, ""));
            (metric == name).then_some(())?;
            let lane = labels
                .split(',')
                .find_map(|l| l.strip_prefix("lane=\""))
                .and_then(|l| l.trim_end_matches(['"', '}']).parse().ok());
            Some((lane, value.parse().ok()?))
        })
        .collect()
}

fn total(body: &str, name: &str) -> f64 {
    samples(body, name).iter().map(|(_, v)| v).sum()
}

/// Scrapes `addr` until `done` says the exposition shows everything sent (10 s at most).
fn scrape_until(addr: SocketAddr, done: impl Fn(&str) -> bool) -> String {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, _, body) = get(addr, "/metrics", None);
        assert_eq!(status, 200);
        if done(&body) {
            return body;
        }
        assert!(Instant::now() < end, "the scrape never showed it all:\n{body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A corelane datagram of `flow` and `seq`, 64 bytes.
fn datagram(flow: u32, seq: u64) -> Vec<u8> {
    let mut d = vec![0u8; 64];
    corelane::udp::payload::prefill(&mut d);
    corelane::udp::payload::write_header(&mut d, flow, seq);
    d
}

/// A sender that skips, repeats and reorders on purpose: flow 0 skips 100..110, repeats 150
/// three times, sends 200..=205 backwards after 199 and jumps to 300; flow 1 (from another
/// port) skips 20..30 and repeats 5. Missing: 10 + 94 (206..=299) + 10; duplicates 4; late
/// 5 (204..=200). Returns the datagrams sent.
fn send_with_gaps(to: SocketAddr) -> u64 {
    let flow0: Vec<u64> = (0..100)
        .chain(110..200)
        .chain([150, 150, 150])
        .chain((200..=205).rev())
        .chain([300])
        .collect();
    let flow1: Vec<u64> = (0..20).chain(30..40).chain([5]).collect();
    let sockets = [
        std::net::UdpSocket::bind("127.0.0.1:0").unwrap(),
        std::net::UdpSocket::bind("127.0.0.1:0").unwrap(),
    ];
    for (flow, seqs) in [flow0, flow1].iter().enumerate() {
        for (i, &seq) in seqs.iter().enumerate() {
            sockets[flow].send_to(&datagram(flow as u32, seq), to).unwrap();
            if i % 16 == 15 {
                // Paced, so no receive buffer overflows: every datagram is the sender's.
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    (100 + 90 + 3 + 6 + 1) + (20 + 10 + 1)
}

#[test]
fn sequence_figures_and_batch_sizes_are_the_summarys() {
    let recv = JsonRun::start(&[
        "udp",
        "recv",
        "127.0.0.1:0",
        "--threads",
        "2",
        "--sockets",
        "reuseport",
        "--duration",
        "60s",
    ]);
    let to: SocketAddr = recv.ready["addrs"][0].as_str().unwrap().parse().unwrap();
    let sent = send_with_gaps(to);
    let body = scrape_until(recv.metrics, |b| {
        total(b, "corelane_udp_received_datagrams_total") as u64 >= sent
    });
    let summary = recv.finish();
    let sequence = &summary["sequence"];
    let figure = |key: &str| sequence[key].as_u64().unwrap();
    assert_eq!(
        (figure("received"), figure("missing"), figure("duplicates"), figure("late")),
        (sent, 114, 4, 5),
        "the sender's gaps, as the summary counts them: {summary}"
    );
    let scraped = |name: &str| total(&body, name) as u64;
    assert_eq!(
        (
            scraped("corelane_udp_missing_datagrams"),
            scraped("corelane_udp_duplicate_datagrams_total"),
            scraped("corelane_udp_late_datagrams_total"),
        ),
        (114, 4, 5),
        "the scrape's sequence figures are the summary's:\n{body}"
    );
    // Each lane's histogram counted every call that brought datagrams, and their sum is
    // what the lane received.
    for lane in summary["lanes"].as_array().unwrap() {
        let index = lane["lane"].as_u64().unwrap() as usize;
        let of = |name: &str| {
            samples(&body, name).iter().find(|(l, _)| *l == Some(index)).map(|&(_, v)| v as u64)
        };
        let batches = lane["batches"].as_u64().unwrap();
        assert_eq!(of("corelane_udp_receive_batch_datagrams_count"), Some(batches), "{lane}");
        assert_eq!(
            of("corelane_udp_receive_batch_datagrams_sum"),
            lane["datagrams"].as_u64(),
            "{lane}"
        );
        // A call brings at most --batch (32) messages and is one system call at least.
        let datagrams = lane["datagrams"].as_u64().unwrap();
        assert!(batches * 32 >= datagrams, "{lane}");
        assert!(batches <= lane["syscalls"].as_u64().unwrap(), "{lane}");
        let within_32 = body
            .lines()
            .find(|l| {
                l.starts_with("corelane_udp_receive_batch_datagrams_bucket{")
                    && l.contains(&format!("lane=\"{index}\""))
                    && l.contains("le=\"32\"")
            })
            .and_then(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok());
        assert_eq!(within_32, Some(batches), "no call brought more than 32:\n{body}");
    }
    assert!(scraped("corelane_udp_receive_batch_datagrams_count") > 0);
}

#[test]
fn echo_counts_the_bytes_it_answers_and_its_batches() {
    let echo = JsonRun::start(&["udp", "echo", "127.0.0.1:0", "--duration", "60s"]);
    let to: SocketAddr = echo.ready["addr"].as_str().unwrap().parse().unwrap();
    let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let (requests, size) = (200u64, 100usize);
    let mut answered_bytes = 0u64;
    for seq in 0..requests {
        let mut request = vec![0u8; size];
        corelane::udp::payload::prefill(&mut request);
        corelane::udp::payload::write_header(&mut request, 0, seq);
        client.send_to(&request, to).unwrap();
        let mut reply = [0u8; 2048];
        answered_bytes += client.recv(&mut reply).unwrap() as u64;
    }
    assert_eq!(answered_bytes, requests * size as u64, "every request answered whole");
    let body = scrape_until(echo.metrics, |b| {
        total(b, "corelane_udp_answered_datagrams_total") as u64 >= requests
    });
    let summary = echo.finish();
    assert_eq!(total(&body, "corelane_udp_answered_bytes_total") as u64, answered_bytes, "{body}");
    let batches: u64 =
        summary["lanes"].as_array().unwrap().iter().map(|l| l["batches"].as_u64().unwrap()).sum();
    assert_eq!(total(&body, "corelane_udp_receive_batch_datagrams_count") as u64, batches);
    assert_eq!(total(&body, "corelane_udp_receive_batch_datagrams_sum") as u64, requests);
    // One request in flight at a time: every call brought exactly one.
    assert_eq!(batches, requests, "{summary}");
}

/// On both backends (io_uring, where the kernel refuses it, falls back to epoll and says so),
/// for a fixed body and for files: a small one (read in behind its head on io_uring) and one
/// over 64 KiB (sendfile).
#[test]
fn request_durations_count_every_request_served() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("small"), vec![b's'; 4096]).unwrap();
    std::fs::write(dir.path().join("large"), vec![b'l'; 200_000]).unwrap();
    let root = dir.path().to_str().unwrap();
    for backend in ["epoll", "uring"] {
        durations_count_every_request(backend, &[], &[("", 3000)]);
        // Root's temporary directory is root's alone: the server keeps root to read it.
        let files = ["--root", root, "--user", "root"];
        durations_count_every_request(backend, &files, &[("small", 300), ("large", 300)]);
    }
}

/// Serves with `extra` arguments, loads each (path, requests) and checks the histogram.
fn durations_count_every_request(backend: &str, extra: &[&str], loads: &[(&str, u64)]) {
    let mut args = vec!["serve", "http", "--addr", "127.0.0.1", "--port", "0", "--lanes", "2"];
    args.extend(["--backend", backend, "--duration", "60s"]);
    args.extend(extra);
    let serve = JsonRun::start(&args);
    eprintln!("{backend}: {}", serve.ready);
    for (path, requests) in loads {
        let url = format!("http://{}/{path}", serve.ready["addr"].as_str().unwrap());
        let requests = requests.to_string();
        let load = common::corelane(&["load", "http", &url, "-c", "4", "--requests", &requests]);
        assert!(load.status.success(), "{}", common::stderr(&load));
    }
    let made: u64 = loads.iter().map(|(_, n)| n).sum();
    // Requests are counted at their parse, durations once their answer is written: the two
    // agree once the load has read every answer.
    let body = scrape_until(serve.metrics, |b| {
        let count = total(b, "corelane_http_request_duration_seconds_count");
        count > 0.0 && count == total(b, "corelane_http_requests_total")
    });
    let summary = serve.finish();
    let count = total(&body, "corelane_http_request_duration_seconds_count");
    assert_eq!(count as u64, summary["requests"].as_u64().unwrap(), "{backend}: {summary}");
    assert!(count >= made as f64, "{backend}: every request the load made is counted: {count}");
    let errors = total(&body, "corelane_http_error_responses_total");
    assert_eq!(errors, 0.0, "{backend} {extra:?}: every answer a 200:\n{body}");
    for lane in 0..2 {
        let of = |name: &str| samples(&body, name).into_iter().find(|(l, _)| *l == Some(lane));
        let (count, requests) = (
            of("corelane_http_request_duration_seconds_count"),
            of("corelane_http_requests_total"),
        );
        assert_eq!(count.map(|c| c.1), requests.map(|r| r.1), "{backend} lane {lane}:\n{body}");
    }
    let sum = total(&body, "corelane_http_request_duration_seconds_sum");
    assert!(sum > 0.0 && sum / count < 1.0, "{backend}: a loopback request's mean {}", sum / count);
}
