//! redis's and memcached's own test suites, run as their CI runs them, against the server
//! started natively and under `corelane run` with each syscall lane (threads, uring): the
//! tests that pass natively must pass under every lane. The suites are Debian's source
//! packages of the installed versions, fetched (and memcached built) by .ci/app-suites.sh
//! into target/app-suites/; without them the tests print why and skip. The three modes run
//! at once (own ports, own directories); every run is bounded in time and a hang is named.
//! Each test prints a table and writes it to target/app-suites/SUITE.results.json.

mod common;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

/// How a server runs: as itself, or under `corelane run` with one of the lanes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Native,
    Threads,
    Uring,
}

const MODES: [Mode; 3] = [Mode::Native, Mode::Threads, Mode::Uring];

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::Threads => "threads",
            Mode::Uring => "uring",
        }
    }

    fn lane(self) -> Option<&'static str> {
        match self {
            Mode::Native => None,
            Mode::Threads => Some("threads"),
            Mode::Uring => Some("uring"),
        }
    }

    /// The words put before the server's command: none natively, else
    /// `corelane run --syscall-cpus C --syscall-lane L --json JSON --`.
    fn prefix(self, json: &str) -> Vec<String> {
        let Some(lane) = self.lane() else { return Vec::new() };
        let cpu = if available_cpus() >= 2 { "1" } else { "0" };
        let corelane = env!("CARGO_BIN_EXE_corelane");
        [corelane, "run", "--syscall-cpus", cpu, "--syscall-lane", lane, "--json", json, "--"]
            .map(String::from)
            .to_vec()
    }
}

fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Where .ci/app-suites.sh puts the sources: the workspace's target/app-suites/.
fn suites_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/app-suites")
}

/// The unpacked source of `package`, if .ci/app-suites.sh fetched the version installed as
/// `binary_package`; otherwise why not.
fn source_tree(package: &str, binary_package: &str) -> Result<PathBuf, String> {
    let dir = suites_dir().join(package);
    let stamp = std::fs::read_to_string(dir.join(".corelane-source-version")).map_err(|_| {
        format!("no {package} source in target/app-suites/ (run .ci/app-suites.sh)")
    })?;
    let query = Command::new("dpkg-query")
        .args(["-W", "-f=${source:Version}", binary_package])
        .output()
        .map_err(|e| format!("no dpkg-query ({e}): not a Debian system"))?;
    let installed = common::text(&query.stdout);
    if !query.status.success() || installed.is_empty() {
        return Err(format!("{binary_package} is not installed (.ci/run installs it)"));
    }
    if stamp.trim() != installed {
        return Err(format!(
            "target/app-suites/{package} is {} but {binary_package} {installed} is installed \
             (run .ci/app-suites.sh again)",
            stamp.trim()
        ));
    }
    Ok(dir)
}

/// A loopback port nobody listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A child started in a process group of its own (its pid is the group's id), so a hung run
/// can be ended whole.
fn spawn_in_group(cmd: &mut Command, log: &Path) -> Child {
    let out = std::fs::File::create(log).unwrap();
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .process_group(0)
        // cargo sets LD_LIBRARY_PATH for tests; a root `corelane run` would note that it drops it.
        .env_remove("LD_LIBRARY_PATH");
    cmd.spawn().unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"))
}

/// Sends `signal` to the group `child` leads, while the child is not yet reaped (so the id
/// is still ours).
fn signal_group(child: &Child, signal: Signal) {
    if let Some(pid) = Pid::from_raw(child.id() as i32) {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}

/// Whether `child` has ended, without reaping it.
fn ended(child: &Child) -> bool {
    use rustix::process::{waitid, WaitId, WaitIdOptions};
    let pid = Pid::from_raw(child.id() as i32).unwrap();
    let opts = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
    matches!(waitid(WaitId::Pid(pid), opts), Ok(Some(_)) | Err(_))
}

/// How a bounded run ended: its status, or `None` when it was killed for taking too long.
struct Ended {
    status: Option<ExitStatus>,
    output: String,
}

/// Runs `cmd` in its own process group with its output in `log`, for at most `limit`; on
/// timeout (and after it ends, for anything it left running) the group is killed.
fn run_bounded(cmd: &mut Command, log: &Path, limit: Duration) -> Ended {
    let mut child = spawn_in_group(cmd, log);
    let start = Instant::now();
    let mut hung = false;
    while !ended(&child) {
        if start.elapsed() > limit {
            hung = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    signal_group(&child, Signal::KILL);
    let status = child.wait().unwrap();
    let output = std::fs::read(log).map(|b| common::text(&b)).unwrap_or_default();
    Ended { status: (!hung).then_some(status), output }
}

/// Asks a server started by `spawn_in_group` to stop (SIGTERM: `corelane run` forwards it),
/// then kills its group if it has not ended within 10 s.
fn stop_server(mut child: Child) {
    if let Some(pid) = Pid::from_raw(child.id() as i32) {
        let _ = rustix::process::kill_process(pid, Signal::TERM);
    }
    let start = Instant::now();
    while !ended(&child) && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    signal_group(&child, Signal::KILL);
    child.wait().unwrap();
}

/// The calls the lanes carried, summed over every `corelane run` summary in `dir`.
fn delegated_calls(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut total = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let summary: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        if let Some(kinds) = summary["delegated"].as_object() {
            total += kinds.values().filter_map(serde_json::Value::as_u64).sum::<u64>();
        }
    }
    total
}

/// One mode's run of a suite.
#[derive(Debug)]
struct SuiteRun {
    mode: Mode,
    /// What passed, by name (redis: `unit: test`; memcached: `t/FILE.t`).
    passed: BTreeSet<String>,
    /// What failed or hung, with why.
    failed: Vec<String>,
    /// What the suite skipped itself, with why (memcached's files planning no test).
    skipped: Vec<String>,
    /// Individual assertions passed and failed (redis: tests; memcached: TAP lines).
    checks_passed: usize,
    checks_failed: usize,
    /// Calls the lane carried (0 natively).
    delegated: u64,
    seconds: f64,
}

impl SuiteRun {
    fn new(mode: Mode) -> Self {
        SuiteRun {
            mode,
            passed: BTreeSet::new(),
            failed: Vec::new(),
            skipped: Vec::new(),
            checks_passed: 0,
            checks_failed: 0,
            delegated: 0,
            seconds: 0.0,
        }
    }

    /// Adds `other`'s results (a part of the same mode's run) to this one's.
    fn absorb(&mut self, other: SuiteRun) {
        self.passed.extend(other.passed);
        self.failed.extend(other.failed);
        self.skipped.extend(other.skipped);
        self.failed.sort();
        self.skipped.sort();
        self.checks_passed += other.checks_passed;
        self.checks_failed += other.checks_failed;
        self.delegated += other.delegated;
        self.seconds += other.seconds;
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "mode": self.mode.name(),
            "passed": self.passed.len(),
            "failed": self.failed.len(),
            "checks_passed": self.checks_passed,
            "checks_failed": self.checks_failed,
            "failures": self.failed,
            "skipped": self.skipped,
            "delegated_calls": self.delegated,
            "seconds": (self.seconds * 10.0).round() / 10.0,
        })
    }
}

/// Held while a suite runs: the two suites' three modes each already fill 2 CPUs, and
/// together they would turn timing-sensitive tests into failures.
fn one_suite_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SUITE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SUITE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs `one(mode)` for the three modes at once and returns their runs in MODES order.
fn each_mode_at_once(one: impl Fn(Mode) -> SuiteRun + Sync) -> Vec<SuiteRun> {
    std::thread::scope(|s| {
        let one = &one;
        let handles: Vec<_> = MODES.map(|m| s.spawn(move || one(m))).into_iter().collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// The table the lead copies to RESULTS.md, also written to target/app-suites/SUITE.results.json.
fn report(suite: &str, what: &str, runs: &[SuiteRun], wall: Duration) -> String {
    let mut table = format!("{suite}: {what}\n");
    let _ = writeln!(
        table,
        "| mode | passed | failed | skipped | checks ok | checks failed | lane calls | s |"
    );
    let _ = writeln!(table, "|---|---|---|---|---|---|---|---|");
    for r in runs {
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} | {} | {} | {} | {:.0} |",
            r.mode.name(),
            r.passed.len(),
            r.failed.len(),
            r.skipped.len(),
            r.checks_passed,
            r.checks_failed,
            r.delegated,
            r.seconds
        );
    }
    let native = &runs[0];
    let failures = if native.failed.is_empty() { "none".into() } else { native.failed.join("; ") };
    let _ = writeln!(table, "native failures: {failures}");
    if !native.skipped.is_empty() {
        let _ = writeln!(table, "skipped by the suite itself: {}", native.skipped.join("; "));
    }
    let _ = writeln!(table, "wall time (modes at once): {:.0} s", wall.as_secs_f64());
    let json = serde_json::json!({
        "suite": suite,
        "what": what,
        "wall_seconds": wall.as_secs(),
        "modes": runs.iter().map(SuiteRun::json).collect::<Vec<_>>(),
    });
    let path = suites_dir().join(format!("{suite}.results.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    table
}

/// The check every suite ends with: natively something passed, every lane carried calls,
/// and each lane's passing set is the native one (differences named both ways).
fn assert_same_passing_sets(suite: &str, runs: &[SuiteRun]) {
    let native = &runs[0];
    assert!(!native.passed.is_empty(), "{suite}: nothing passed natively: {:?}", native.failed);
    for lane in &runs[1..] {
        let name = lane.mode.name();
        assert!(lane.delegated > 0, "{suite} under {name}: the lane carried no call");
        let lost: Vec<_> = native.passed.difference(&lane.passed).collect();
        let gained: Vec<_> = lane.passed.difference(&native.passed).collect();
        assert!(
            lost.is_empty() && gained.is_empty(),
            "{suite} under {name}: passing natively only: {lost:?}; under the lane only: \
             {gained:?}; its failures: {:?}",
            lane.failed
        );
    }
}

fn copy_tree(from: &Path, to: &Path) {
    let status = Command::new("cp").arg("-a").arg(from).arg(to).status().unwrap();
    assert!(status.success(), "cp -a {} {}", from.display(), to.display());
}

// ---------------------------------------------------------------------------------------
// redis: `runtest --host --port` against redis-server (Debian's, the source's version).

/// The units run, each in a runtest of its own against a server of its own (an exception
/// or a hang costs only that unit, and a unit killed midway leaves no configuration behind
/// for the next): those that run in `--host` mode natively (the server started as redis's
/// own CI starts its external server, DEBUG enabled) and finish within seconds each.
/// unit/dump has a test that fails natively (Debian's server answers a bad RESTORE payload
/// with a checksum error): it stays, and is listed.
const REDIS_UNITS: &[&str] = &[
    "unit/type/string",
    "unit/type/hash",
    "unit/type/list",
    "unit/type/incr",
    "unit/type/stream-cgroups",
    "unit/pubsub",
    "unit/keyspace",
    "unit/expire",
    "unit/protocol",
    "unit/multi",
    "unit/functions",
    "unit/bitops",
    "unit/bitfield",
    "unit/introspection",
    "unit/introspection-2",
    "unit/tracking",
    "unit/info-command",
    "unit/lazyfree",
    "unit/slowlog",
    "unit/pause",
    "unit/querybuf",
    "unit/quit",
    "unit/dump",
];

/// Units that pass natively in `--host` mode but take 10-55 s each: run with
/// CORELANE_APP_SUITES=all (left out of CI for its time).
const REDIS_LONG_UNITS: &[&str] = &[
    "unit/type/zset",
    "unit/scripting",
    "unit/type/stream",
    "unit/type/list-2",
    "unit/type/list-3",
    "unit/sort",
    "unit/scan",
    "unit/other",
    "unit/latency-monitor",
];

/// Units never run, and why (printed with the table).
const REDIS_LEFT_OUT: &str = "unit/type/set (its SRANDMEMBER long-chain test needs the \
    server's pid, which --host mode lacks: runtest raises an exception), unit/hyperloglog and \
    unit/geo (over 2 minutes each natively), units whose every test is tagged external:skip";

/// Whether CORELANE_APP_SUITES=all asks for the long units and files too.
fn all_asked() -> bool {
    std::env::var("CORELANE_APP_SUITES").is_ok_and(|v| v == "all")
}

/// A unit's longest run; a slower one is killed and named as hung.
const REDIS_UNIT_LIMIT: Duration = Duration::from_secs(150);

/// redis-server in `mode` for unit `name`, as redis's own CI starts the server for
/// `runtest --host`, in a data directory of its own.
fn start_redis(mode: Mode, work: &Path, name: &str, port: u16) -> Child {
    let data = work.join(format!("{name}.data"));
    std::fs::create_dir(&data).unwrap();
    let json = work.join(format!("summaries/{name}.json"));
    let mut words = mode.prefix(json.to_str().unwrap());
    words.push("/usr/bin/redis-server".into());
    let port = port.to_string();
    let args = ["--port", &port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"];
    words.extend(args.map(String::from));
    words.extend(["--dir", data.to_str().unwrap()].map(String::from));
    let enable =
        ["--enable-protected-configs", "--enable-debug-command", "--enable-module-command"];
    words.extend(enable.iter().flat_map(|o| [o.to_string(), "yes".into()]));
    let mut cmd = Command::new(&words[0]);
    cmd.args(&words[1..]).current_dir(&data);
    spawn_in_group(&mut cmd, &work.join(format!("{name}.server.log")))
}

/// Waits (at most 10 s) until something accepts on `port`.
fn wait_listening(port: u16) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A copy of runtest and tests/ of its own (runtest cleans tests/tmp), with Debian's
/// redis-cli and redis-benchmark where the suite looks for them (src/).
fn redis_workdir(source: &Path, mode: Mode) -> tempfile::TempDir {
    let work = tempfile::Builder::new()
        .prefix(&format!("redis-suite-{}-", mode.name()))
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    copy_tree(&source.join("runtest"), work.path());
    copy_tree(&source.join("tests"), work.path());
    std::fs::create_dir(work.path().join("src")).unwrap();
    std::fs::create_dir(work.path().join("summaries")).unwrap();
    for bin in ["redis-server", "redis-cli", "redis-benchmark"] {
        let installed = Path::new("/usr/bin").join(bin);
        std::os::unix::fs::symlink(&installed, work.path().join("src").join(bin)).unwrap();
    }
    work
}

/// Adds one runtest's lines to `run`: `[ok]: NAME (N ms)` passed, `[err]: NAME in FILE`
/// failed, `[exception]` ended the unit.
fn parse_runtest(unit: &str, output: &str, run: &mut SuiteRun) {
    for line in output.lines() {
        let line = strip_colors(line);
        if let Some(rest) = line.strip_prefix("[ok]: ") {
            let name = rest.rsplit_once(" (").map_or(rest, |(n, _)| n);
            let mut key = format!("{unit}: {name}");
            let mut n = 1;
            while run.passed.contains(&key) {
                n += 1;
                key = format!("{unit}: {name} #{n}");
            }
            run.passed.insert(key);
            run.checks_passed += 1;
        } else if let Some(rest) = line.strip_prefix("[err]: ") {
            run.failed.push(format!("{unit}: {rest}"));
            run.checks_failed += 1;
        } else if let Some(rest) = line.strip_prefix("[exception]: ") {
            run.failed.push(format!("{unit}: exception: {rest}"));
        }
    }
}

/// runtest colours its words when it writes to a terminal-like TERM: without the escapes.
fn strip_colors(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The last test runtest started or finished in `output`, to name where a hang was.
fn last_test(output: &str) -> String {
    let mut lines = output.lines().map(strip_colors);
    let last = lines.rfind(|l| l.starts_with('[') || l.starts_with("Testing"));
    last.unwrap_or_else(|| "before the first test".into())
}

/// Runs `unit` with runtest against a fresh server in `mode`, into `run`.
fn redis_unit(work: &Path, mode: Mode, unit: &str, baseport: &str, run: &mut SuiteRun) {
    let name = unit.replace('/', "_");
    let port = free_port();
    let server = start_redis(mode, work, &name, port);
    if !wait_listening(port) {
        stop_server(server);
        let log = std::fs::read_to_string(work.join(format!("{name}.server.log")));
        let log = log.unwrap_or_default();
        return run.failed.push(format!("{unit}: redis-server did not listen on {port}: {log}"));
    }
    let mut cmd = Command::new("./runtest");
    cmd.args(["--host", "127.0.0.1", "--port", &port.to_string(), "--baseport", baseport])
        .args(["--single", unit])
        .current_dir(work);
    let ended = run_bounded(&mut cmd, &work.join(format!("{name}.log")), REDIS_UNIT_LIMIT);
    stop_server(server);
    let failures_before = run.failed.len();
    parse_runtest(unit, &ended.output, run);
    match ended.status {
        None => run.failed.push(format!("{unit}: hung after {}", last_test(&ended.output))),
        Some(s) if !s.success() && run.failed.len() == failures_before => {
            run.failed.push(format!("{unit}: runtest {s}: {}", last_test(&ended.output)));
        }
        Some(_) => {}
    }
}

fn redis_mode(source: &Path, mode: Mode, index: u16, units: &[&str]) -> SuiteRun {
    let mut run = SuiteRun::new(mode);
    let start = Instant::now();
    let work = redis_workdir(source, mode);
    // runtest's own ports (its test server's), apart for each mode.
    let baseport = (21111 + 1000 * index).to_string();
    for unit in units {
        redis_unit(work.path(), mode, unit, &baseport, &mut run);
    }
    run.delegated = delegated_calls(&work.path().join("summaries"));
    run.seconds = start.elapsed().as_secs_f64();
    run
}

#[test]
fn redis_runtest_passes_the_same_tests_natively_and_under_each_lane() {
    let source = match source_tree("redis", "redis-server") {
        Ok(s) => s,
        Err(why) => return eprintln!("skipped: {why}"),
    };
    if Command::new("tclsh").arg("/dev/null").status().is_err() {
        return eprintln!(
            "skipped: no tclsh for redis's runtest (apt-get install tcl; .ci/run does)"
        );
    }
    let mut units = REDIS_UNITS.to_vec();
    let long = if all_asked() {
        units.extend(REDIS_LONG_UNITS);
        String::new()
    } else {
        format!("; for time (CORELANE_APP_SUITES=all runs them): {}", REDIS_LONG_UNITS.join(" "))
    };
    let _one_suite = one_suite_at_a_time();
    let start = Instant::now();
    let runs = each_mode_at_once(|mode| {
        let index = MODES.iter().position(|m| *m == mode).unwrap() as u16;
        redis_mode(&source, mode, index, &units)
    });
    let what = format!(
        "runtest --host against redis-server, a server per unit, units {}; left out: \
         {REDIS_LEFT_OUT}{long}",
        units.join(" ")
    );
    eprintln!("{}", report("redis", &what, &runs, start.elapsed()));
    assert_same_passing_sets("redis", &runs);
}

// ---------------------------------------------------------------------------------------
// memcached: its t/*.t, built from the source (memcached-debug, as `make test` runs them).

/// A file's longest run; a slower one is killed and named as hung.
const MEMCACHED_FILE_LIMIT: Duration = Duration::from_secs(150);

/// The files run at once within a mode.
const MEMCACHED_FILES_AT_ONCE: usize = 2;

/// Files that pass natively but keep a CPU busy for 25-60 s each (tens of thousands of
/// checks, or the restart file's long waits): run with CORELANE_APP_SUITES=all. t/restart.t
/// stops the server with SIGUSR1 (through timedrun), which `corelane run` now forwards.
/// t/issue_67.t binds fixed ports (11211, 11232-11273): it runs in the full set only, and
/// there one mode at a time (`MEMCACHED_FIXED_PORTS`).
const MEMCACHED_LONG_FILES: &[&str] = &[
    "t/issue_67.t",
    "t/lru-crawler.t",
    "t/getset.t",
    "t/binary-extstore.t",
    "t/chunked-items.t",
    "t/chunked-extstore.t",
    "t/restart.t",
    "t/binary.t",
];

/// Files that bind fixed ports: run after the rest, one mode at a time (with the three modes
/// at once they collide with themselves: t/issue_67.t failed so, natively and under a lane).
const MEMCACHED_FIXED_PORTS: &[&str] = &["t/issue_67.t"];

/// The harness's build directory for one mode: t/ copied, timedrun, and memcached-debug —
/// natively the built binary, under a lane a script that starts it through `corelane run`
/// (each start writes its summary into summaries/). Every server the suite starts goes
/// through it, those the files start themselves included.
fn memcached_workdir(source: &Path, mode: Mode) -> tempfile::TempDir {
    let work = tempfile::Builder::new()
        .prefix(&format!("memcached-suite-{}-", mode.name()))
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let dir = work.path();
    let source = source.canonicalize().unwrap();
    // The source as the harness expects its build directory (files read doc/, scripts/…),
    // linked; t/ copied (files write beside themselves), memcached-debug this mode's.
    for entry in std::fs::read_dir(&source).unwrap().flatten() {
        let name = entry.file_name();
        if name != "t" && name != "memcached-debug" {
            std::os::unix::fs::symlink(entry.path(), dir.join(&name)).unwrap();
        }
    }
    copy_tree(&source.join("t"), dir);
    std::fs::create_dir(dir.join("summaries")).unwrap();
    let binary = source.join("memcached-debug");
    if mode.lane().is_none() {
        std::os::unix::fs::symlink(&binary, dir.join("memcached-debug")).unwrap();
        return work;
    }
    // "$$": the shell's pid, which exec hands to `corelane run`: one summary per start.
    let json = format!("'{}/summaries/run.'$$'.json'", dir.display());
    let words: Vec<String> = mode.prefix("JSON").into_iter().map(|w| format!("'{w}'")).collect();
    let script = format!(
        "#!/bin/sh\nexec {} '{}' \"$@\"\n",
        words.join(" ").replace("'JSON'", &json),
        binary.display()
    );
    let path = dir.join("memcached-debug");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    work
}

/// One .t file's TAP: its plan, oks and not-oks (TODO lines are neither), and a skip-all.
#[derive(Default)]
struct Tap {
    planned: Option<usize>,
    ok: usize,
    not_ok: usize,
    skip_all: Option<String>,
}

fn parse_tap(output: &str) -> Tap {
    let mut tap = Tap::default();
    for line in output.lines() {
        if let Some(plan) = line.strip_prefix("1..") {
            let (count, rest) = plan.split_once(' ').unwrap_or((plan, ""));
            tap.planned = count.trim().parse().ok();
            if tap.planned == Some(0) {
                tap.skip_all = Some(rest.trim_start_matches(['#', ' ']).to_string());
            }
        } else if line.starts_with("ok ") {
            tap.ok += 1;
        } else if line.starts_with("not ok ") && !line.contains("# TODO") {
            tap.not_ok += 1;
        }
    }
    tap
}

/// Runs one .t with perl in `work` and records it in `run`.
fn memcached_file(work: &Path, file: &str, run: &mut SuiteRun) {
    let log = work.join(format!("{}.log", file.replace('/', "_")));
    let mut cmd = Command::new("perl");
    cmd.arg(file).current_dir(work);
    let ended = run_bounded(&mut cmd, &log, MEMCACHED_FILE_LIMIT);
    let tap = parse_tap(&ended.output);
    run.checks_passed += tap.ok;
    run.checks_failed += tap.not_ok;
    let Some(status) = ended.status else {
        let last = ended.output.lines().rfind(|l| l.contains("ok ")).unwrap_or("none");
        run.failed.push(format!(
            "{file}: hung after {} s (last: {last})",
            MEMCACHED_FILE_LIMIT.as_secs()
        ));
        return;
    };
    if let Some(why) = tap.skip_all {
        run.skipped.push(format!("{file}: {why}"));
    } else if status.success() && tap.not_ok == 0 && tap.planned.is_some_and(|p| p == tap.ok) {
        run.passed.insert(file.to_string());
    } else {
        let planned = tap.planned.map_or("no plan".into(), |p| format!("{p} planned"));
        run.failed
            .push(format!("{file}: {} ok, {} not ok, {planned}, {status}", tap.ok, tap.not_ok));
    }
}

/// Every t/*.t, in name order.
fn memcached_files(source: &Path) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(source.join("t"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".t"))
        .map(|n| format!("t/{n}"))
        .collect();
    files.sort();
    files
}

fn memcached_mode(source: &Path, mode: Mode, files: &[String]) -> SuiteRun {
    let start = Instant::now();
    let work = memcached_workdir(source, mode);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let parts: Vec<SuiteRun> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..MEMCACHED_FILES_AT_ONCE)
            .map(|_| {
                s.spawn(|| {
                    let mut part = SuiteRun::new(mode);
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(file) = files.get(i) else { return part };
                        memcached_file(work.path(), file, &mut part);
                    }
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut run = SuiteRun::new(mode);
    for part in parts {
        run.absorb(part);
    }
    run.delegated = delegated_calls(&work.path().join("summaries"));
    run.seconds = start.elapsed().as_secs_f64();
    run
}

#[test]
fn memcached_t_suite_passes_the_same_files_natively_and_under_each_lane() {
    let source = match source_tree("memcached", "memcached") {
        Ok(s) => s,
        Err(why) => return eprintln!("skipped: {why}"),
    };
    if !source.join("memcached-debug").exists() || !source.join("timedrun").exists() {
        return eprintln!(
            "skipped: memcached is not built in target/app-suites/ (run .ci/app-suites.sh)"
        );
    }
    if Command::new("prove").arg("--version").output().is_err() {
        return eprintln!("skipped: no perl test tools (apt-get install perl; .ci/run does)");
    }
    let mut files = memcached_files(&source);
    let mut what = "t/*.t against memcached-debug built from the source".to_string();
    if !all_asked() {
        files.retain(|f| !MEMCACHED_LONG_FILES.contains(&f.as_str()));
        let long = MEMCACHED_LONG_FILES.join(" ");
        what += &format!("; for time or fixed ports (CORELANE_APP_SUITES=all runs them): {long}");
    }
    let _one_suite = one_suite_at_a_time();
    let start = Instant::now();
    let (fixed, apart): (Vec<String>, Vec<String>) =
        files.iter().cloned().partition(|f| MEMCACHED_FIXED_PORTS.contains(&f.as_str()));
    let mut runs = each_mode_at_once(|mode| memcached_mode(&source, mode, &apart));
    if !fixed.is_empty() {
        for run in &mut runs {
            run.absorb(memcached_mode(&source, run.mode, &fixed));
        }
        what += &format!("; {} one mode at a time (fixed ports)", fixed.join(" "));
    }
    what = format!("{} files of {what}", files.len());
    eprintln!("{}", report("memcached", &what, &runs, start.elapsed()));
    assert_same_passing_sets("memcached", &runs);
}
