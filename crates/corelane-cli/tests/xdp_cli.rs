//! `corelane udp recv --backend xdp` as a user runs it, in a network namespace this test
//! creates (`corelane-<pid>-xcli<n>`, a veth pair inside): the program is on the interface
//! while the receiver runs and gone after a normal end, SIGINT, SIGTERM, and SIGKILL (the next
//! start then works); without privilege it is one clear line. Root only for the namespace
//! tests; elsewhere they say why they skip.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// These tests attach XDP programs and run receivers, senders and a lab on 2 CPUs: run one
/// at a time, so one test's load never makes another's exact counts (the AF_XDP row's first
/// trial must lose nothing) a matter of timing.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether this test can run (root, AF_XDP in the kernel); if not, says why it skips.
fn able_or_skip() -> bool {
    let why = if !rustix::process::geteuid().is_root() {
        "needs root (network namespaces, XDP)"
    } else if corelane::xdp::check_available().is_err() {
        "no AF_XDP sockets in this kernel"
    } else {
        return true;
    };
    eprintln!("skipped: {why}");
    false
}

fn ip(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().expect("ip runs");
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A namespace holding a veth pair; the receiver's end has 10.232.<n>.2.
struct Netns {
    name: String,
    dev: String,
    addr: String,
}

impl Netns {
    /// A new namespace, or `None` (saying why) when the test cannot run here.
    fn or_skip() -> Option<Self> {
        able_or_skip().then(Self::new)
    }

    fn new() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let ns = Self {
            name: format!("corelane-{pid}-xcli{n}"),
            dev: format!("xc{}{n}", pid % 100_000),
            addr: format!("10.232.{n}.2"),
        };
        ip(&["netns", "add", &ns.name]);
        let peer = format!("{}p", ns.dev);
        ip(&["-n", &ns.name, "link", "add", &ns.dev, "type", "veth", "peer", "name", &peer]);
        ip(&["-n", &ns.name, "addr", "add", &format!("{}/24", ns.addr), "dev", &ns.dev]);
        for dev in [&ns.dev, &peer] {
            ip(&["-n", &ns.name, "link", "set", dev, "up"]);
        }
        ns
    }

    fn has_xdp(&self) -> bool {
        ip(&["-n", &self.name, "link", "show", "dev", &self.dev]).contains("xdp")
    }

    /// Starts the receiver and waits for its "ready" line.
    fn start(&self) -> Child {
        self.start_with(&[])
    }

    /// [`start`](Self::start) with more arguments.
    fn start_with(&self, extra: &[&str]) -> Child {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.name, env!("CARGO_BIN_EXE_corelane")])
            .args(["udp", "recv", &format!("{}:4321", self.addr), "--backend", "xdp", "--json"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let Some(Ok(first)) = lines.next() else {
            let out = child.wait_with_output().unwrap();
            panic!("no ready line: {}", String::from_utf8_lossy(&out.stderr));
        };
        assert!(first.contains("\"ready\""), "{first}");
        assert!(first.contains("native copy"), "the mode is in the JSON: {first}");
        // Keep draining so per-second lines never block the receiver.
        std::thread::spawn(move || for _ in lines {});
        child
    }

    fn wait_until_clear(&self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if !self.has_xdp() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

impl Netns {
    /// The receiver interface's busy-poll settings, as its namespace's sysfs shows them.
    fn napi_settings(&self) -> String {
        let files = ["napi_defer_hard_irqs", "gro_flush_timeout"]
            .map(|f| format!("/sys/class/net/{}/{f}", self.dev));
        let out = Command::new("ip")
            .args(["netns", "exec", &self.name, "cat"])
            .args(files)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).split_whitespace().collect::<Vec<_>>().join(" ")
    }

    fn set_napi_settings(&self, defer: u32, timeout: u64) {
        let script = format!(
            "echo {defer} > /sys/class/net/{0}/napi_defer_hard_irqs && echo {timeout} > /sys/class/net/{0}/gro_flush_timeout",
            self.dev
        );
        let status =
            Command::new("ip").args(["netns", "exec", &self.name, "sh", "-c", &script]).status();
        assert!(status.unwrap().success());
    }

    /// Waits (5 s at most) until the settings read `want`.
    fn napi_settings_become(&self, want: &str) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.napi_settings() != want {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        true
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

fn signal(child: &Child, sig: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_child(child);
    rustix::process::kill_process(pid, sig).unwrap();
}

#[test]
fn no_program_is_left_after_sigint_sigterm_or_sigkill() {
    let _serial = one_at_a_time();
    let Some(ns) = Netns::or_skip() else { return };
    for sig in [rustix::process::Signal::INT, rustix::process::Signal::TERM] {
        let mut child = ns.start();
        assert!(ns.has_xdp(), "attached while running");
        signal(&child, sig);
        let status = child.wait().unwrap();
        assert!(status.success(), "{sig:?}: {status}");
        assert!(!ns.has_xdp(), "{sig:?} left the program on the interface");
    }
    let mut child = ns.start();
    signal(&child, rustix::process::Signal::KILL);
    child.wait().unwrap();
    // The kernel releases the killed process's bpf_link; the next start then attaches anew.
    assert!(ns.wait_until_clear(), "SIGKILL left the program on the interface");
    let mut child = ns.start();
    signal(&child, rustix::process::Signal::INT);
    assert!(child.wait().unwrap().success());
    assert!(!ns.has_xdp());
}

/// The kB a process holds locked in memory (`VmLck` of /proc/PID/status).
fn locked_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmLck:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// The names of a process's threads.
fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|c| c.trim_end().to_string())
        .collect()
}

/// When the receiver says "ready", its code is locked in memory (a lane that met its
/// per-frame path on a cold page cache waited on the disk while its RX ring overflowed) and
/// its lanes run (the line used to come before they were started).
#[test]
fn when_ready_the_receivers_code_is_in_memory_and_its_lanes_run() {
    let _serial = one_at_a_time();
    let Some(ns) = Netns::or_skip() else { return };
    let mut child = ns.start();
    let pid = child.id();
    let (locked, threads) = (locked_kb(pid), thread_names(pid));
    signal(&child, rustix::process::Signal::INT);
    assert!(child.wait().unwrap().success());
    // The read-only segments of this binary: megabytes in any build.
    assert!(locked >= 1024, "only {locked} kB locked when ready");
    assert!(threads.iter().any(|t| t.starts_with("corelane-rx")), "no lane yet: {threads:?}");
}

#[test]
fn without_privilege_it_is_one_clear_line() {
    let _serial = one_at_a_time();
    if !rustix::process::geteuid().is_root()
        || Command::new("setpriv").arg("--version").output().is_err()
    {
        eprintln!("skipped: needs root and setpriv to drop to an unprivileged user");
        return;
    }
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"])
        .arg(env!("CARGO_BIN_EXE_corelane"))
        .args(["udp", "recv", "127.0.0.1:0", "--backend", "xdp", "--duration", "1s"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("XDP needs root"), "{err}");
}

/// With CAP_BPF, CAP_NET_ADMIN and CAP_NET_RAW but not CAP_IPC_LOCK, the UMEM counts against
/// RLIMIT_MEMLOCK: a 64 KiB limit is one clear line naming the limit and the fix, and the
/// program attached before the socket failed is gone with the process.
#[test]
fn umem_over_memlock_is_one_clear_line_and_leaves_nothing() {
    let _serial = one_at_a_time();
    if !able_or_skip() {
        return;
    }
    let have = |p: &str| Command::new(p).arg("--version").output().is_ok();
    if !have("setpriv") || !have("prlimit") {
        eprintln!("skipped: needs setpriv and prlimit (util-linux)");
        return;
    }
    let ns = Netns::new();
    let caps = "+net_raw,+bpf,+net_admin,+perfmon";
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name, "prlimit", "--memlock=65536", "setpriv"])
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args([format!("--inh-caps={caps}"), format!("--ambient-caps={caps}")])
        .arg(env!("CARGO_BIN_EXE_corelane"))
        .args(["udp", "recv", &format!("{}:4321", ns.addr), "--backend", "xdp"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("RLIMIT_MEMLOCK (65536 bytes)") && err.contains("ulimit -l"), "{err}");
    assert!(ns.wait_until_clear(), "the interface is as found");
}

/// `--busy-poll`: the interface's napi_defer_hard_irqs and gro_flush_timeout hold the run's
/// values while it runs, and exactly what they held before (values set here, not the defaults)
/// after Ctrl-C, SIGTERM and SIGKILL; after SIGKILL the keeper restores them and goes.
#[test]
fn busy_poll_settings_are_restored_after_sigint_sigterm_and_sigkill() {
    let _serial = one_at_a_time();
    let Some(ns) = Netns::or_skip() else { return };
    use rustix::process::Signal;
    for (i, sig) in [Signal::INT, Signal::TERM, Signal::KILL].into_iter().enumerate() {
        let (defer, timeout) = (7 + i as u32, 12_345 + i as u64);
        ns.set_napi_settings(defer, timeout);
        let before = format!("{defer} {timeout}");
        assert_eq!(ns.napi_settings(), before);
        let mut child = ns.start_with(&["--busy-poll", "50"]);
        let during = format!(
            "{} {}",
            corelane::tune::busy_poll::DEFER_HARD_IRQS,
            corelane::tune::busy_poll::GRO_FLUSH_TIMEOUT_NS
        );
        assert_eq!(ns.napi_settings(), during, "set for the run ({sig:?})");
        let keeper = keeper_of(&ns.dev);
        assert!(keeper.is_some(), "a keeper holds the revert file ({sig:?})");
        signal(&child, sig);
        let status = child.wait().unwrap();
        if sig != Signal::KILL {
            assert!(status.success(), "{sig:?}: {status}");
            assert_eq!(ns.napi_settings(), before, "restored by the run itself ({sig:?})");
        }
        assert!(ns.napi_settings_become(&before), "{sig:?} left {}", ns.napi_settings());
        let deadline = Instant::now() + Duration::from_secs(5);
        while keeper.is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists()) {
            assert!(Instant::now() < deadline, "the keeper outlived the run ({sig:?})");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(ns.wait_until_clear(), "{sig:?} left the program on the interface");
    }
}

/// The PID of the keeper holding a busy-poll revert file for a run on `dev`, if one runs.
fn keeper_of(dev: &str) -> Option<u32> {
    let procs = std::fs::read_dir("/proc").ok()?;
    procs.filter_map(Result::ok).find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if !cmdline.contains(" guard ") || !cmdline.contains("--revert-on-close") {
            return None;
        }
        let file = cmdline.split_whitespace().last()?.to_string();
        // Only a revert file in the keeper's private directory is read (never a pipe).
        if !file.starts_with("/tmp/corelane-nic.") || !file.ends_with("/revert.json") {
            return None;
        }
        let text = std::fs::read_to_string(&file).ok()?;
        text.contains(&format!("/net/{dev}/")).then_some(pid)
    })
}

/// Runs `lab udp`'s recvmmsg, AF_XDP and XDP_DROP floor rows (one 3 s trial each) into
/// `json` and `csv`, and returns the JSON report.
fn lab_udp_bypass_rows(json: &Path, csv: &Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_corelane"))
        .args(["lab", "udp", "--configs", "recvmmsg,af-xdp,xdp-floor", "--trials", "1"])
        .args(["--duration", "3s", "--vs", "none", "--json", json.to_str().unwrap()])
        .args(["--csv", csv.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

fn af_xdp_row(report: &serde_json::Value) -> serde_json::Value {
    let rows = report["rows"].as_array().unwrap();
    rows.iter().find(|r| r["config"] == "af-xdp").unwrap().clone()
}

/// The AF_XDP row's lost frames, checked to be exactly what its sockets' counters say.
fn xsk_lost(report: &serde_json::Value) -> u64 {
    let xdp = af_xdp_row(report);
    let k = &xdp["xsk"];
    let lost = k["rx_ring_full"].as_u64().unwrap() + k["rx_dropped"].as_u64().unwrap();
    assert_eq!(xdp["xsk_lost"].as_u64(), Some(lost), "{xdp}");
    lost
}

/// `lab udp`'s kernel-bypass rows on the lab's own veth testbed: each part of a path is
/// charged apart (the receiver's lanes, the NAPI threads, ksoftirqd, the sender) and the
/// AF_XDP row carries its sockets' counters; the XDP_DROP floor of the same run sits beside
/// them, and the findings compare the three by everything each path ran.
#[test]
fn lab_udp_charges_each_part_of_the_bypass_paths_and_shows_the_socket_counters() {
    let _serial = one_at_a_time();
    if !able_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (json, mut csv) = (dir.path().join("lab.json"), dir.path().join("lab.csv"));
    let mut report = lab_udp_bypass_rows(&json, &csv);
    // Its one trial is the row's first: exact, with the lanes reading before the sender starts
    // and the NAPI threads sharing their CPU. A VM's host can still take the lane's CPU for
    // longer than the RX ring lasts (55 ms at this rate); such a loss is named by the socket's
    // counters, so the row is run once more and the second run must be exact: a loss that
    // comes from corelane (a cold start, a lane off its CPU by our own doing) comes twice.
    if xsk_lost(&report) > 0 {
        eprintln!("the af-xdp row lost frames once (run again): {}", af_xdp_row(&report));
        let json = dir.path().join("lab-again.json");
        csv = dir.path().join("lab-again.csv");
        report = lab_udp_bypass_rows(&json, &csv);
    }
    assert_eq!(xsk_lost(&report), 0, "the af-xdp row lost frames twice: {}", af_xdp_row(&report));
    let rows = report["rows"].as_array().unwrap();
    let row = |id: &str| rows.iter().find(|r| r["config"] == id).unwrap().clone();
    let ns = |r: &serde_json::Value, part: &str| r[part].as_f64().unwrap_or(0.0);
    for id in ["recvmmsg", "af-xdp", "xdp-floor"] {
        let r = row(id);
        assert!(ns(&r, "sender_ns_per_datagram") > 0.0, "{id}: no sender figure: {r}");
        assert!(r["ksoftirqd_ns_per_datagram"].is_number(), "{id}: no ksoftirqd figure: {r}");
    }
    let xdp = row("af-xdp");
    assert!(ns(&xdp, "napi_ns_per_datagram") > 0.0, "{xdp}");
    assert!(
        row("recvmmsg")["xsk"].is_null() && row("xdp-floor")["napi_ns_per_datagram"].is_number()
    );
    let csv = std::fs::read_to_string(&csv).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    for column in ["napi_ns", "ksoftirqd_ns", "sender_ns", "whole_path_ns", "xsk_rx_ring_full"] {
        assert!(header.contains(&column), "{column} missing from {header:?}");
    }
    let findings = report["findings"].as_array().unwrap();
    let said = |what: &str| findings.iter().any(|f| f.as_str().unwrap().contains(what));
    assert!(
        said("everything each path ran") && said("The floor, measured in the same run"),
        "{findings:?}"
    );
}
