//! `corelane udp recv --backend xdp` as a user runs it, in a network namespace this test
//! creates (`corelane-<pid>-xcli<n>`, a veth pair inside): the program is on the interface
//! while the receiver runs and gone after a normal end, SIGINT, SIGTERM, and SIGKILL (the next
//! start then works); without privilege it is one clear line. Root only for the namespace
//! tests; elsewhere they say why they skip.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

fn unavailable() -> Option<&'static str> {
    if !rustix::process::geteuid().is_root() {
        return Some("needs root (network namespaces, XDP)");
    }
    if corelane::xdp::check_available().is_err() {
        return Some("no AF_XDP sockets in this kernel");
    }
    None
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
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.name, env!("CARGO_BIN_EXE_corelane")])
            .args(["udp", "recv", &format!("{}:4321", self.addr), "--backend", "xdp", "--json"])
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
    if let Some(why) = unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let ns = Netns::new();
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

#[test]
fn without_privilege_it_is_one_clear_line() {
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
    if let Some(why) = unavailable() {
        eprintln!("skipped: {why}");
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
