//! The unmodified programs `lab apps` serves with — nginx, memcached, redis, Apache (event and
//! prefork) — as Debian installs them: each one's configuration in the lab's private
//! directory, its command line, the load generator people drive it with, and the check that
//! its answers are right (a row whose check fails is an error naming the program and what was wrong).
//! MapReduce (Apache Spark) is one more program here; its cluster and job are `spark.rs` and
//! `job.rs`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::host::Host;
use crate::LabError;

/// A server program the lab runs as it is (by its `id` in rows and tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum App {
    Nginx,
    Memcached,
    Redis,
    Apache,
    /// Apache with the prefork MPM: eight single-threaded processes, a new connection per
    /// request (several processes' carriers on one syscall CPU).
    #[serde(rename = "apache-prefork")]
    ApachePrefork,
    /// Apache Spark's standalone cluster running a shuffle-heavy job.
    Mapreduce,
}

/// The name of the file the web servers serve (generated, in `www/` of the private
/// directory).
pub const FILE_NAME: &str = "corelane-apps.bin";

impl std::fmt::Display for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

impl App {
    pub const ALL: [App; 6] =
        [App::Nginx, App::Memcached, App::Redis, App::Apache, App::ApachePrefork, App::Mapreduce];

    /// How rows and `--apps` name it.
    pub fn id(&self) -> &'static str {
        match self {
            Self::Nginx => "nginx",
            Self::Memcached => "memcached",
            Self::Redis => "redis",
            Self::Apache => "apache",
            Self::ApachePrefork => "apache-prefork",
            Self::Mapreduce => "mapreduce",
        }
    }

    /// The server program and the programs that load and check it, each with its package.
    pub fn needs(&self) -> &'static [(&'static str, &'static str)] {
        match self {
            Self::Nginx => &[("nginx", "nginx-light"), ("wrk", "wrk"), ("curl", "curl")],
            Self::Memcached => &[
                ("memcached", "memcached"),
                ("memcaslap", "libmemcached-tools"),
                ("memccapable", "libmemcached-tools"),
            ],
            Self::Redis => &[
                ("redis-server", "redis-server"),
                ("redis-benchmark", "redis-tools"),
                ("redis-cli", "redis-tools"),
            ],
            Self::Apache | Self::ApachePrefork => {
                &[("apache2", "apache2"), ("wrk", "wrk"), ("curl", "curl")]
            }
            // The cluster's JVMs and the driver's (pyspark itself: `spark::Spark::find`).
            Self::Mapreduce => {
                &[("java", "openjdk-17-jre-headless"), ("java", "openjdk-17-jre-headless")]
            }
        }
    }

    /// The port it listens on inside the receiving namespace (private to it).
    pub fn namespace_port(&self) -> u16 {
        match self {
            Self::Nginx => 8080,
            Self::Memcached => 11211,
            Self::Redis => 6379,
            Self::Apache => 8081,
            Self::ApachePrefork => 8082,
            Self::Mapreduce => 7077,
        }
    }

    /// The load generator, as rows name it.
    pub fn load_generator(&self) -> &'static str {
        match self {
            Self::Nginx | Self::Apache => "wrk --latency",
            Self::ApachePrefork => "wrk --latency, a new connection per request",
            Self::Memcached => "memcaslap (10% sets, 10% verified)",
            Self::Redis => "redis-benchmark -t set,get",
            Self::Mapreduce => "pyspark driver (group-by over generated records)",
        }
    }

    /// Whether the load generator reports a p99.
    pub fn reports_p99(&self) -> bool {
        !matches!(self, Self::Memcached | Self::Mapreduce)
    }
}

/// Where one program serves and is loaded from.
#[derive(Debug, Clone, Copy)]
pub struct Stage<'a> {
    pub rx: &'a Host,
    pub tx: &'a Host,
    pub addr: IpAddr,
    pub port: u16,
    pub connections: usize,
    pub duration: Duration,
    /// The private directory: configurations, the served file, run summaries.
    pub dir: &'a Path,
    /// The served file's contents.
    pub file: &'a [u8],
    /// The load generator's CPU.
    pub load_cpu: usize,
}

impl Stage<'_> {
    fn url(&self) -> String {
        format!("http://{}:{}/{FILE_NAME}", self.addr, self.port)
    }
}

/// Where `program` is on `host`, or an error saying what to install.
pub fn locate(host: &Host, program: &str, package: &str) -> Result<String, LabError> {
    host.find_program(program).ok_or_else(|| {
        LabError::Options(format!("{program} is not installed (apt-get install {package})"))
    })
}

/// Writes `text` into the private directory as a new file (write_atomic: a fresh temporary,
/// renamed; mode 0644 so a server's worker user can read it).
pub fn write_private(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf, LabError> {
    let path = dir.join(name);
    corelane::fs::write_atomic(&path, bytes)
        .map_err(|e| LabError::io(format!("cannot write {}", path.display()), e))?;
    Ok(path)
}

/// The program and arguments that start `app` on the stage, its configuration written first.
pub fn server_command(app: App, stage: &Stage<'_>) -> Result<(String, Vec<String>), LabError> {
    let (program, package) = app.needs()[0];
    let exe = locate(stage.rx, program, package)?;
    let (addr, port) = (stage.addr.to_string(), stage.port.to_string());
    let args: Vec<String> = match app {
        App::Nginx => vec!["-c".into(), nginx_conf(stage)?.display().to_string()],
        App::Memcached => {
            // -u root: memcached refuses to run as root without naming the user.
            let a = ["-u", "root", "-l", &addr, "-p", &port, "-U", "0", "-t", "2", "-m", "1024"];
            a.iter().chain(&["-c", "4096"]).map(|s| s.to_string()).collect()
        }
        App::Redis => {
            let dir = stage.dir.display().to_string();
            let a = ["--port", &port, "--bind", &addr, "--save", "", "--appendonly", "no"];
            let b = ["--dir", &dir, "--daemonize", "no", "--protected-mode", "no"];
            a.iter().chain(&b).map(|s| s.to_string()).collect()
        }
        App::Apache | App::ApachePrefork => {
            let conf = apache_conf(stage, app == App::ApachePrefork)?.display().to_string();
            vec!["-f".into(), conf, "-DFOREGROUND".into()]
        }
        App::Mapreduce => return Err(not_a_server()),
    };
    Ok((exe, args))
}

/// nginx: a master and two workers (whatever CPUs they are given) serving the file with
/// sendfile, keep-alive unlimited, every path in the private directory.
fn nginx_conf(stage: &Stage<'_>) -> Result<PathBuf, LabError> {
    let d = stage.dir.display();
    let (addr, port) = (stage.addr, stage.port);
    let text = format!(
        "worker_processes 2;\ndaemon off;\nmaster_process on;\npid {d}/nginx.pid;\n\
         error_log {d}/nginx-error.log;\nevents {{ worker_connections 4096; }}\n\
         http {{\n  access_log off;\n  sendfile on;\n  keepalive_requests 1000000000;\n\
         client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n\
         uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         server {{ listen {addr}:{port}; root {d}/www; default_type application/octet-stream; }}\n}}\n"
    );
    write_private(stage.dir, "nginx.conf", text.as_bytes())
}

/// Apache: the event MPM, one child process with 64 threads (more than the load's
/// connections, so none waits for a thread), keep-alive unlimited, serving the file; or
/// (`prefork`) the prefork MPM as sites run it: eight single-threaded processes, all started
/// at once and kept, each connection closed after its answer.
fn apache_conf(stage: &Stage<'_>, prefork: bool) -> Result<PathBuf, LabError> {
    let d = stage.dir.display();
    let modules = "/usr/lib/apache2/modules";
    let mpm = if prefork {
        format!(
            "LoadModule mpm_prefork_module {modules}/mod_mpm_prefork.so\nStartServers {PREFORK}\n\
             MinSpareServers {PREFORK}\nMaxSpareServers {PREFORK}\nServerLimit {PREFORK}\n\
             MaxRequestWorkers {PREFORK}\nMaxConnectionsPerChild 0\nKeepAlive Off\n"
        )
    } else {
        format!(
            "LoadModule mpm_event_module {modules}/mod_mpm_event.so\nStartServers 1\n\
             ServerLimit 1\nThreadsPerChild 64\nThreadLimit 64\nMaxRequestWorkers 64\n\
             KeepAlive On\nMaxKeepAliveRequests 0\nKeepAliveTimeout 30\n"
        )
    };
    let text = format!(
        "ServerRoot {d}\nListen {}:{}\nPidFile {d}/apache.pid\nErrorLog {d}/apache-error.log\n\
         DefaultRuntimeDir {d}\n{mpm}\
         LoadModule authz_core_module {modules}/mod_authz_core.so\nUser daemon\nGroup daemon\n\
         ServerName corelane-lab\nDocumentRoot {d}/www\n\
         <Directory {d}/www>\n  Require all granted\n</Directory>\n",
        stage.addr, stage.port
    );
    write_private(stage.dir, "apache.conf", text.as_bytes())
}

/// Apache prefork's processes (a pre-forking site's usual few per CPU).
const PREFORK: usize = 8;

/// What one load run measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct Load {
    /// Requests (or memcached operations) answered.
    pub requests: u64,
    pub rps: f64,
    pub p99_us: Option<f64>,
}

/// redis-benchmark runs a count of requests, not a duration: a short run first measures
/// the rate, so the measured run lasts about the stage's duration (half of it per test).
/// Other load generators run for a time and need nothing (`None`). Run before the CPU
/// window opens.
pub fn requests_for(app: App, stage: &Stage<'_>) -> Result<Option<u64>, LabError> {
    if app != App::Redis {
        return Ok(None);
    }
    let probe = redis_benchmark(stage, 2_000)?;
    let per_test = probe.rps * stage.duration.as_secs_f64() / 2.0;
    Ok(Some((per_test as u64).clamp(1_000, 5_000_000)))
}

fn redis_benchmark(stage: &Stage<'_>, per_test: u64) -> Result<Load, LabError> {
    let (host, port) = (stage.addr.to_string(), stage.port.to_string());
    let (n, conns) = (per_test.to_string(), stage.connections.to_string());
    let args = ["-h", &host, "-p", &port, "-t", "set,get", "-n", &n, "-c", &conns, "--csv"];
    let args = args.iter().map(|s| s.to_string()).collect();
    // A rate far below the probe's takes longer than the duration: allow three times it.
    let lines = run_load(stage, "redis-benchmark", "redis-tools", args, stage.duration * 3)?;
    Ok(Load { requests: 2 * per_test, ..parse_redis_benchmark(&lines)? })
}

/// Runs a load generator pinned to the stage's load CPU; its lines once it exits cleanly.
fn run_load(
    stage: &Stage<'_>,
    program: &str,
    package: &str,
    args: Vec<String>,
    takes: Duration,
) -> Result<Vec<String>, LabError> {
    let exe = locate(stage.tx, program, package)?;
    let child = stage.tx.spawn_pinned(program, stage.load_cpu, &exe, &args)?;
    child.finish(takes + Duration::from_secs(30))
}

/// Runs `app`'s load generator on the stage (`requests`: from [`requests_for`]) and checks
/// what it reports: errors, failed verifications and missing answers are an error naming
/// them.
pub fn load(app: App, stage: &Stage<'_>, requests: Option<u64>) -> Result<Load, LabError> {
    let secs = stage.duration.as_secs().max(1).to_string();
    let conns = stage.connections.to_string();
    let target = format!("{}:{}", stage.addr, stage.port);
    let takes = stage.duration;
    match app {
        App::Nginx | App::Apache | App::ApachePrefork => {
            let args = ["-t1", &format!("-c{conns}"), &format!("-d{secs}s"), "--latency"];
            let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            if app == App::ApachePrefork {
                args.extend(["-H".into(), "Connection: close".into()]);
            }
            args.extend(["--timeout".into(), "5s".into(), stage.url()]);
            parse_wrk(&run_load(stage, "wrk", "wrk", args, takes)?)
        }
        App::Memcached => {
            let args = ["-s", &target, "-T", "1", "-c", &conns, "-t", &format!("{secs}s")];
            let args = args.iter().chain(&["-v", "0.1"]).map(|s| s.to_string()).collect();
            parse_memcaslap(&run_load(stage, "memcaslap", "libmemcached-tools", args, takes)?)
        }
        App::Redis => redis_benchmark(stage, requests.unwrap_or(20_000)),
        App::Mapreduce => Err(not_a_server()),
    }
}

/// MapReduce is a cluster running a job, not one server under load (see `job.rs`).
fn not_a_server() -> LabError {
    LabError::Options("mapreduce runs as a Spark cluster and job, not as one server".into())
}

fn bad_output(child: &str, problem: String) -> LabError {
    LabError::ChildOutput { child: child.into(), problem }
}

/// A duration as wrk prints it (`496.00us`, `1.65ms`, `2.01s`), in µs.
fn wrk_duration_us(text: &str) -> Option<f64> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let v: f64 = number.parse().ok()?;
    let scale = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        _ => return None,
    };
    Some(v * scale)
}

/// wrk's report: requests, rate, p99; any socket error or non-2xx answer is an error.
pub fn parse_wrk(lines: &[String]) -> Result<Load, LabError> {
    let missing = |what: &str| bad_output("wrk", format!("printed no {what}: {lines:?}"));
    let mut load = Load::default();
    let mut errors = Vec::new();
    for line in lines.iter().map(|l| l.trim()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.get(1) == Some(&"requests") && words.get(2) == Some(&"in") {
            load.requests = words[0].parse().map_err(|_| missing("request count"))?;
        } else if let Some(v) = line.strip_prefix("Requests/sec:") {
            load.rps = v.trim().parse().map_err(|_| missing("Requests/sec"))?;
        } else if words.first() == Some(&"99%") {
            load.p99_us = words.get(1).and_then(|w| wrk_duration_us(w));
        } else if let Some(rest) = line.strip_prefix("Socket errors:") {
            let counts =
                rest.split(',').filter_map(|p| p.split_whitespace().last()?.parse::<u64>().ok());
            if counts.sum::<u64>() > 0 {
                errors.push(line.to_string());
            }
        } else if line.starts_with("Non-2xx or 3xx responses:") {
            errors.push(line.to_string());
        }
    }
    if !errors.is_empty() {
        return Err(bad_output("wrk", format!("saw errors: {}", errors.join("; "))));
    }
    if load.requests == 0 || load.rps <= 0.0 {
        return Err(missing("answered requests"));
    }
    load.p99_us.ok_or_else(|| missing("99% latency"))?;
    Ok(load)
}

/// memcaslap's report: operations and rate; a failed verification is an error.
pub fn parse_memcaslap(lines: &[String]) -> Result<Load, LabError> {
    let missing = |what: &str| bad_output("memcaslap", format!("printed no {what}: {lines:?}"));
    let field = |key: &str| -> Option<u64> {
        lines.iter().rev().find_map(|l| l.trim().strip_prefix(key)?.trim().parse().ok())
    };
    let failed = field("verify_failed:").ok_or_else(|| missing("verify_failed"))?;
    if failed > 0 {
        return Err(bad_output("memcaslap", format!("{failed} verified gets returned wrong data")));
    }
    let total = lines.iter().rev().find(|l| l.contains("Ops:") && l.contains("TPS:"));
    let total = total.ok_or_else(|| missing("Ops/TPS line"))?;
    let after = |key: &str| -> Option<f64> {
        total.split(key).nth(1)?.split_whitespace().next()?.parse().ok()
    };
    let load = Load {
        requests: after("Ops:").ok_or_else(|| missing("Ops"))? as u64,
        rps: after("TPS:").ok_or_else(|| missing("TPS"))?,
        p99_us: None,
    };
    if load.requests == 0 {
        return Err(missing("completed operations"));
    }
    Ok(load)
}

/// redis-benchmark's CSV: the SET and GET rates and p99s; both tests must be there. The
/// row's rate is both tests' requests over both tests' time, its p99 the larger of the two.
pub fn parse_redis_benchmark(lines: &[String]) -> Result<Load, LabError> {
    let missing =
        |what: &str| bad_output("redis-benchmark", format!("printed no {what}: {lines:?}"));
    let mut tests = Vec::new();
    for line in lines {
        let fields: Vec<String> =
            line.split(',').map(|f| f.trim_matches('"').to_string()).collect();
        if fields.len() >= 7 && (fields[0] == "SET" || fields[0] == "GET") {
            let rps: f64 = fields[1].parse().map_err(|_| missing("rps"))?;
            let p99_ms: f64 = fields[6].parse().map_err(|_| missing("p99"))?;
            tests.push((rps, p99_ms));
        }
    }
    if tests.len() != 2 || tests.iter().any(|t| t.0 <= 0.0) {
        return Err(missing("SET and GET results"));
    }
    // Each test ran the same number of requests: the harmonic mean is their joint rate.
    let rps = 2.0 / tests.iter().map(|t| 1.0 / t.0).sum::<f64>();
    Ok(Load { requests: 0, rps, p99_us: Some(tests.iter().map(|t| t.1).fold(0.0, f64::max) * 1e3) })
}

/// The correctness check of a row: a file fetched byte-exact (web servers), a SET/GET round
/// trip with a value only this trial knows (redis), memccapable in full (memcached, when
/// `suite`). Returns what was checked.
pub fn check(app: App, stage: &Stage<'_>, suite: bool, trial: usize) -> Result<String, LabError> {
    match app {
        App::Nginx | App::Apache | App::ApachePrefork => check_file(app, stage, trial),
        App::Redis => check_redis(stage, trial),
        App::Memcached if suite => {
            let exe = locate(stage.tx, "memccapable", "libmemcached-tools")?;
            let args = ["-h", &stage.addr.to_string(), "-p", &stage.port.to_string(), "-t", "5"];
            let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            let lines =
                stage.tx.spawn("memccapable", &exe, &args)?.finish(Duration::from_secs(120))?;
            let failed: Vec<&String> = lines.iter().filter(|l| l.contains("[FAIL]")).collect();
            if !failed.is_empty() || !lines.iter().any(|l| l.contains("All tests passed")) {
                return Err(bad_output("memccapable", format!("did not pass: {failed:?}")));
            }
            let passed = lines.iter().filter(|l| l.contains("[pass]")).count();
            Ok(format!("memccapable passed ({passed} tests); memcaslap verified 10% of gets"))
        }
        App::Memcached => Ok("memcaslap verified 10% of gets".into()),
        App::Mapreduce => Err(not_a_server()),
    }
}

fn check_file(app: App, stage: &Stage<'_>, trial: usize) -> Result<String, LabError> {
    let exe = locate(stage.tx, "curl", "curl")?;
    let name = format!("fetched-{}-{trial}", app.id());
    let out = stage.dir.join(&name);
    let args = ["-sS", "--fail", "--max-time", "10", "-o"];
    let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    args.extend([out.display().to_string(), stage.url()]);
    stage.tx.spawn("curl", &exe, &args)?.finish(Duration::from_secs(20))?;
    let got =
        std::fs::read(&out).map_err(|e| LabError::io(format!("cannot read {}", out.display()), e));
    let _ = std::fs::remove_file(&out);
    let got = got?;
    if got != stage.file {
        let first = got.iter().zip(stage.file).position(|(a, b)| a != b);
        return Err(bad_output(
            app.id(),
            format!(
                "served {} bytes of a {}-byte file, first difference at {:?}",
                got.len(),
                stage.file.len(),
                first
            ),
        ));
    }
    Ok(format!("file fetched byte-exact ({} bytes), wrk saw no errors", got.len()))
}

fn check_redis(stage: &Stage<'_>, trial: usize) -> Result<String, LabError> {
    let exe = locate(stage.tx, "redis-cli", "redis-tools")?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let (key, value) = (format!("corelane:{trial}"), format!("v{nanos:x}-{}", std::process::id()));
    let (host, port) = (stage.addr.to_string(), stage.port.to_string());
    let cli = |words: &[&str]| -> Result<Vec<String>, LabError> {
        let mut args: Vec<String> =
            ["-h", &host, "-p", &port].iter().map(|s| s.to_string()).collect();
        args.extend(words.iter().map(|s| s.to_string()));
        stage.tx.spawn("redis-cli", &exe, &args)?.finish(Duration::from_secs(10))
    };
    let set = cli(&["SET", &key, &value])?;
    let get = cli(&["GET", &key])?;
    if set != ["OK"] || get != [value.as_str()] {
        return Err(bad_output(
            "redis",
            format!("SET/GET round trip of {value:?} answered {set:?} then {get:?}"),
        ));
    }
    Ok("SET/GET round trip correct; redis-benchmark ran SET and GET in full".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(String::from).collect()
    }

    #[test]
    fn wrk_reports_are_read_and_errors_refused() {
        let ok = "Running 2s test @ http://x/\n  Latency Distribution\n     50%  496.00us\n     99%   11.23ms\n  53837 requests in 2.00s, 220.88MB read\nRequests/sec:  26899.15\n";
        let load = parse_wrk(&lines(ok)).unwrap();
        assert_eq!(load.requests, 53837);
        assert_eq!(load.rps, 26899.15);
        assert_eq!(load.p99_us, Some(11230.0));
        let bad = format!("{ok}  Socket errors: connect 0, read 31, write 0, timeout 0\n");
        let err = parse_wrk(&lines(&bad)).unwrap_err().to_string();
        assert!(err.contains("read 31"), "{err}");
        let non2xx = format!("{ok}  Non-2xx or 3xx responses: 7\n");
        assert!(parse_wrk(&lines(&non2xx)).is_err());
        assert!(parse_wrk(&lines("Requests/sec: 5\n")).is_err(), "no request count");
    }

    #[test]
    fn memcaslap_and_redis_benchmark_reports_are_read() {
        let m = "cmd_get: 274163\ncmd_set: 30471\nget_misses: 0\nverify_misses: 0\nverify_failed: 0\n\nRun time: 2.0s Ops: 304634 TPS: 152307 Net_rate: 170.4M/s\n";
        let load = parse_memcaslap(&lines(m)).unwrap();
        assert_eq!((load.requests, load.rps), (304634, 152307.0));
        let failed = m.replace("verify_failed: 0", "verify_failed: 3");
        assert!(parse_memcaslap(&lines(&failed)).unwrap_err().to_string().contains("3 verified"));
        let r = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\"SET\",\"60000.00\",\"0.168\",\"0.032\",\"0.159\",\"0.255\",\"0.575\",\"3.567\"\n\"GET\",\"40000.00\",\"0.247\",\"0.016\",\"0.095\",\"0.223\",\"4.639\",\"8.559\"\n";
        let load = parse_redis_benchmark(&lines(r)).unwrap();
        assert!((load.rps - 48000.0).abs() < 1e-6, "{}", load.rps);
        assert!((load.p99_us.unwrap() - 4639.0).abs() < 1e-6);
        let only_set: String = r.lines().take(2).collect::<Vec<_>>().join("\n");
        assert!(parse_redis_benchmark(&lines(&only_set)).is_err());
    }

    #[test]
    fn wrk_durations_are_read_in_microseconds() {
        assert_eq!(wrk_duration_us("496.00us"), Some(496.0));
        assert_eq!(wrk_duration_us("1.65ms"), Some(1650.0));
        assert_eq!(wrk_duration_us("2.00s"), Some(2e6));
        assert_eq!(wrk_duration_us("12"), None);
    }
}
