//! The `corelane` binary as a user runs it: help, bad input, a send/receive round trip with
//! JSON output, Ctrl-C, and (as root) the lab leaving no namespace behind.

mod common;

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{corelane, is_root, stderr, text};

/// `corelane args` started with its stdout piped (its first line says it is up) and its
/// stderr as given.
fn start(args: &[&str], stderr: Stdio) -> Child {
    Command::new(env!("CARGO_BIN_EXE_corelane"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// Ctrl-C, as a terminal sends it.
fn ctrl_c(child: &Child) {
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
}

#[test]
fn every_subcommand_has_help() {
    for args in [
        &["--help"][..],
        &["udp", "--help"],
        &["udp", "send", "--help"],
        &["udp", "recv", "--help"],
        &["lab", "--help"],
        &["topo", "--help"],
        &["plan", "--help"],
        &["copy", "--help"],
        &["lab", "all", "--help"],
        &["serve", "http", "--help"],
        &["load", "http", "--help"],
        &["report", "--help"],
    ] {
        let out = corelane(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage"), "{args:?}");
    }
    for e in corelane_lab::EXPERIMENTS {
        let out = corelane(&["lab", e.name, "--help"]);
        assert!(out.status.success(), "lab {}: {}", e.name, stderr(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains("--quick"), "lab {}", e.name);
    }
}

#[test]
fn lab_alone_lists_the_experiments() {
    let out = corelane(&["lab"]);
    assert!(out.status.success());
    let listed = String::from_utf8_lossy(&out.stdout).into_owned();
    for e in corelane_lab::EXPERIMENTS {
        assert!(listed.contains(&format!("  {:<8} {}\n", e.name, e.study)), "{listed}");
    }
    let lower = listed.to_lowercase();
    assert!(!lower.contains("seed") && !lower.contains("issue"), "{listed}");
}

#[test]
fn bad_input_gets_one_clear_line_and_a_nonzero_exit() {
    let busy = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let many_groups: Vec<String> = (0..65).map(|i| i.to_string()).collect();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["udp".into(), "recv".into(), format!("127.0.0.1:{port}")], "already in use"),
        (
            vec![
                "udp".into(),
                "recv".into(),
                "127.0.0.1:0".into(),
                "--flow-groups".into(),
                many_groups.join(","),
            ],
            "at most 64",
        ),
        (
            vec![
                "udp".into(),
                "recv".into(),
                "127.0.0.1:0".into(),
                "--flow-groups".into(),
                "9-3".into(),
            ],
            "runs backwards",
        ),
        (
            vec![
                "udp".into(),
                "recv".into(),
                "127.0.0.1:0".into(),
                "--flow-groups".into(),
                "0-7,4-11".into(),
            ],
            "overlap",
        ),
        (
            ["udp", "recv", "127.0.0.1:0", "--flow-groups", "0-3", "--backend", "xdp-drop"]
                .map(String::from)
                .to_vec(),
            "a backend that reads the datagrams",
        ),
        (
            ["udp", "recv", "127.0.0.1:0", "--sqpoll", "0"].map(String::from).to_vec(),
            "--sqpoll does not go with --backend mmsg: it is for uring",
        ),
        (
            ["udp", "recv", "127.0.0.1:0", "--backend", "xdp-drop", "--busy-poll", "50"]
                .map(String::from)
                .to_vec(),
            "--busy-poll does not go with --backend xdp-drop: it is for xdp",
        ),
        (vec!["udp".into(), "send".into(), "not-an-address".into()], "invalid socket address"),
        (
            vec!["udp".into(), "recv".into(), "127.0.0.1:0".into(), "--pin".into(), "999".into()],
            "CPU 999 does not exist",
        ),
        (
            vec!["udp".into(), "recv".into(), "127.0.0.1:0".into(), "--pin".into(), "3-1".into()],
            "runs backwards",
        ),
        (
            vec!["udp".into(), "send".into(), "127.0.0.1:9".into(), "--batch".into(), "0".into()],
            "batch 0 is out of range",
        ),
        (
            vec![
                "udp".into(),
                "send".into(),
                "127.0.0.1:9".into(),
                "--batch".into(),
                "100000".into(),
            ],
            "1 to 1024",
        ),
        (
            vec!["udp".into(), "send".into(), "127.0.0.1:9".into(), "--size".into(), "4X".into()],
            "not a size unit",
        ),
        (
            vec!["lab".into(), "udp".into(), "--vs".into(), "netperf".into()],
            "unknown peer `netperf`",
        ),
        (
            ["lab", "apps", "--apps", "mapreduce", "--spark-venv", "/nonexistent-corelane"]
                .map(String::from)
                .to_vec(),
            "--spark-venv /nonexistent-corelane: no virtual environment there",
        ),
        (
            vec!["load".into(), "http".into(), "https://127.0.0.1/".into()],
            "only http:// is supported",
        ),
        (
            vec!["serve".into(), "http".into(), "--root".into(), "/nonexistent-corelane".into()],
            "--root /nonexistent-corelane",
        ),
        (
            vec!["serve".into(), "http".into(), "--recycle".into(), "sockets".into()],
            "unknown recycling method",
        ),
        (
            vec![
                "serve".into(),
                "http".into(),
                "--port".into(),
                "0".into(),
                "--pin".into(),
                "999".into(),
            ],
            "999",
        ),
        (
            vec!["lab".into(), "udp".into(), "--configs".into(), "fast".into()],
            "unknown configuration `fast`",
        ),
        (
            vec![
                "lab".into(),
                "udp".into(),
                "--json".into(),
                "/nonexistent-corelane/r.json".into(),
            ],
            "does not exist",
        ),
    ];
    for (args, expected) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = corelane(&args);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr(&out).contains(expected), "{args:?}: {}", stderr(&out));
    }
}

/// `udp echo` with a backend that cannot answer in place is refused in one line naming it and
/// the backends that can, before any lane starts; every echoing backend is taken.
#[test]
fn an_echo_refuses_a_backend_without_an_echo_in_one_line() {
    for backend in ["xdp", "xdp-return", "xdp-drop"] {
        let out = corelane(&["udp", "echo", "127.0.0.1:0", "--backend", backend]);
        assert!(!out.status.success(), "{backend} was taken");
        let expected = format!(
            "corelane: --backend {backend} offers no echo (it cannot answer requests in place): \
             use --backend mmsg or uring\n"
        );
        assert_eq!(stderr(&out), expected);
    }
    for backend in ["mmsg", "uring"] {
        let out = corelane(&["udp", "echo", "127.0.0.1:0", "--backend", backend, "--count", "0"]);
        assert!(out.status.success(), "{backend}: {}", stderr(&out));
    }
}

/// SO_REUSEPORT lets a second server of the same user join a port and take a share of its
/// traffic without a word; a second `serve http` or `udp recv` on a port one already serves
/// is refused instead, naming the address.
#[test]
fn a_second_server_on_a_served_port_is_refused_not_joined() {
    let line = |child: &mut Child| {
        let mut first = String::new();
        BufReader::new(child.stdout.as_mut().unwrap()).read_line(&mut first).unwrap();
        first
    };
    let free_port =
        || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let tcp = free_port().to_string();
    let udp = format!(
        "127.0.0.1:{}",
        UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
    );
    let serve: Vec<&str> = vec![
        "serve",
        "http",
        "--addr",
        "127.0.0.1",
        "--port",
        &tcp,
        "--lanes",
        "2",
        "--listen",
        "reuseport",
        "--duration",
        "20s",
    ];
    let recv: Vec<&str> =
        vec!["udp", "recv", &udp, "--threads", "2", "--sockets", "reuseport", "--duration", "20s"];
    for args in [serve, recv] {
        let mut first = start(&args, Stdio::null());
        assert!(!line(&mut first).is_empty(), "{args:?}: the first server did not start");
        let second = corelane(&args);
        ctrl_c(&first);
        first.wait().unwrap();
        assert!(!second.status.success(), "{args:?}: a second server joined a served port");
        assert!(stderr(&second).contains("already in use"), "{args:?}: {}", stderr(&second));
    }
}

#[test]
fn send_and_receive_round_trip_with_json() {
    let mut rx = start(
        &[
            "udp",
            "recv",
            "127.0.0.1:0",
            "--json",
            "--count",
            "5000",
            "--duration",
            "20",
            "--rcvbuf",
            "8M",
        ],
        Stdio::inherit(),
    );
    let mut lines = BufReader::new(rx.stdout.take().unwrap()).lines();
    let ready: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(ready["type"], "ready");
    let addr = ready["addrs"][0].as_str().unwrap().to_string();
    let tx = corelane(&[
        "udp", "send", &addr, "--count", "5000", "--rate", "100000", "--flows", "3", "--json",
    ]);
    assert!(tx.status.success(), "{}", stderr(&tx));
    let sent: Vec<serde_json::Value> = String::from_utf8_lossy(&tx.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(sent.last().unwrap()["summary"]["datagrams"], 5000);
    let summary = lines
        .map(|l| serde_json::from_str::<serde_json::Value>(&l.unwrap()).unwrap())
        .find(|v| v["type"] == "summary")
        .expect("a final summary");
    assert!(rx.wait().unwrap().success());
    let s = &summary["summary"];
    assert_eq!(s["datagrams"], 5000);
    assert_eq!(s["sequence"]["missing"], 0);
    assert_eq!(s["sequence"]["duplicates"], 0);
    assert_eq!(s["sequence"]["flows"], 3);
}

#[test]
fn ctrl_c_stops_the_receiver_with_a_summary() {
    let mut rx = start(&["udp", "recv", "127.0.0.1:0", "--threads", "2"], Stdio::piped());
    let mut err = BufReader::new(rx.stderr.take().unwrap()).lines();
    assert!(err.next().unwrap().unwrap().starts_with("receiving on 127.0.0.1:"));
    ctrl_c(&rx);
    let started = Instant::now();
    let out = rx.wait_with_output().unwrap();
    assert!(out.status.success(), "exit {:?}", out.status);
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(String::from_utf8_lossy(&out.stdout).contains("received 0 datagrams"));
}

#[test]
fn the_lab_measures_a_row_and_leaves_no_namespace_behind() {
    if !is_root() {
        eprintln!("skipped: the namespace testbed needs root");
        return;
    }
    let report = quick_lab(
        "udp",
        &["--configs", "default"],
        &["config", "median_pps", "gap_pct", "drops", "cpu_ns_per_datagram"],
    );
    assert!(report["rows"][0]["median_pps"].as_f64().unwrap() > 0.0);
    assert_no_namespace_left(&report);
}

/// `corelane lab EXPERIMENT --quick ARGS --vs none` with `--json` and `--csv` files: its JSON
/// report, once its CSV header is seen to name every one of `columns`. The files stay behind
/// for a look if it fails.
fn quick_lab(experiment: &str, args: &[&str], columns: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap().keep();
    let (json, csv) = (dir.join("report.json"), dir.join("report.csv"));
    let mut lab = vec!["lab", experiment, "--quick"];
    lab.extend(args);
    lab.extend(["--vs", "none", "--json", json.to_str().unwrap(), "--csv", csv.to_str().unwrap()]);
    let out = corelane(&lab);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let header = std::fs::read_to_string(&csv).unwrap().lines().next().unwrap().to_owned();
    for column in columns {
        assert!(header.split(',').any(|c| c == *column), "{header}");
    }
    std::fs::remove_dir_all(dir).unwrap();
    report
}

/// The lab's sending namespace, the third word of its report's `network`, is gone.
fn assert_no_namespace_left(report: &serde_json::Value) {
    let namespaces = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let left = String::from_utf8_lossy(&namespaces.stdout).into_owned();
    let tx_name = report["network"].as_str().unwrap().split_whitespace().nth(2).unwrap();
    assert!(!left.contains(tx_name), "{tx_name} left behind: {left}");
}

fn shm_dir(name: &str) -> std::path::PathBuf {
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("corelane-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn copy_reports_its_method_and_refuses_bad_input_clearly() {
    let dir = shm_dir("copy");
    let src = dir.join("src");
    std::fs::write(&src, vec![7u8; 100_000]).unwrap();
    let dst = dir.join("dst");
    let out =
        corelane(&["copy", src.to_str().unwrap(), dst.to_str().unwrap(), "--json", "--verify"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["bytes"], 100_000);
    assert_eq!(report["verified"], true);
    assert!(report["method"].is_string());
    assert_eq!(std::fs::read(&dst).unwrap(), vec![7u8; 100_000]);
    let s = src.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["copy", s, s], "are the same file"),
        (vec!["copy", "/nonexistent-corelane", "x"], "no such file"),
        (vec!["copy", dir.to_str().unwrap(), "x"], "use -r"),
        (vec!["copy", s, "/nonexistent-corelane/x"], "does not exist"),
        (vec!["copy", s, "x", "--method", "rsync"], "unknown copy method"),
        (vec!["copy", s, "x", "--buffer", "0"], "--buffer must be above 0"),
    ];
    for (args, expected) in cases {
        let out = corelane(&args);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr(&out).contains(expected), "{args:?}: {}", stderr(&out));
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn ctrl_c_mid_copy_leaves_nothing_behind() {
    let dir = shm_dir("copy-int");
    let src = dir.join("src");
    std::fs::write(&src, vec![1u8; 256 << 20]).unwrap();
    std::fs::write(dir.join("dst"), b"old").unwrap();
    // 1-byte buffers: hundreds of millions of syscalls, so the copy is surely running when
    // the signal lands.
    let child = Command::new(env!("CARGO_BIN_EXE_corelane"))
        .args([
            "copy",
            src.to_str().unwrap(),
            dir.join("dst").to_str().unwrap(),
            "--method",
            "read-write",
            "--buffer",
            "1",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    ctrl_c(&child);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
    assert_eq!(std::fs::read(dir.join("dst")).unwrap(), b"old");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["dst", "src"], "a temporary file was left behind");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_copy_lab_runs_quick_and_unmounts_its_scratch() {
    let dir = shm_dir("copy-lab");
    let json = dir.join("copy.json");
    let page = dir.join("copy.html");
    let mut args = vec!["lab", "copy", "--quick", "--size", "8M", "--json", json.to_str().unwrap()];
    // The page and PNGs at the end of the run (issue 17), where the charts' font is installed.
    let font = std::path::Path::new(corelane_lab::report::chart::FONT_PATH).exists();
    if font {
        args.extend(["--report", page.to_str().unwrap(), "--png", dir.to_str().unwrap()]);
    } else {
        eprintln!("not checked: --report needs {}", corelane_lab::report::chart::FONT_PATH);
    }
    let out = corelane(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let run = &report["corelane_run"];
    assert_eq!(run["experiment"], "copy");
    assert_eq!(run["version"], corelane_lab::report::run::VERSION);
    assert!(run["command"].as_array().unwrap().iter().any(|w| w == "--quick"), "{run}");
    if font {
        let html = std::fs::read_to_string(&page).unwrap();
        assert!(html.contains("data-figure=\"throughput\"") && html.contains("memcpy"));
        assert!(dir.join("copy-throughput.png").exists());
    }
    let rows = report["rows"].as_array().unwrap();
    assert!(rows
        .iter()
        .any(|r| r["config"] == "read/write 1K" && r["median_secs"].as_f64().unwrap() > 0.0));
    assert!(rows.iter().any(|r| r["config"] == "cp -r"));
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    let scratch = report["scratch"].as_str().unwrap();
    let path = scratch.split_whitespace().find(|w| w.starts_with('/')).unwrap();
    assert!(!std::path::Path::new(path).exists(), "{path} left behind");
    assert!(!mounts.contains(path), "{path} still mounted");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn topo_shows_cpus_and_nics_and_names_a_missing_root() {
    let out = corelane(&["topo", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let topo: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!topo["cpus"].as_array().unwrap().is_empty());
    assert!(topo["nics"].as_array().unwrap().iter().any(|n| n["name"] == "lo"));
    let out = corelane(&["topo", "--root", "/nonexistent-corelane"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("cannot read /nonexistent-corelane/sys"), "{}", stderr(&out));
}

#[test]
fn a_closed_stdout_ends_the_receiver_cleanly() {
    let mut rx = start(&["udp", "recv", "127.0.0.1:0", "--duration", "20"], Stdio::null());
    let mut lines = BufReader::new(rx.stdout.take().unwrap()).lines();
    assert!(lines.next().unwrap().unwrap().contains("pps"));
    drop(lines); // like `| head -1`
    let started = Instant::now();
    let status = rx.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn plan_proposes_a_partition_as_toml_or_json_and_refuses_unknown_nics() {
    let out = corelane(&["plan", "--nic", "lo", "--format", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for field in ["irq_cpus", "syscall_cpus", "app_cpus", "rps_cpus"] {
        assert!(plan[field].is_string(), "{field}: {plan}");
    }
    let out = corelane(&["plan", "--nic", "lo"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("policy = \"spread\""));
    let out = corelane(&["plan", "--nic", "no-such-nic0"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no network interface `no-such-nic0`"), "{}", stderr(&out));
    let out = corelane(&["plan", "--nic", "lo", "--policy", "custom"]);
    assert!(stderr(&out).contains("--policy custom needs"), "{}", stderr(&out));
}

/// A namespace with a veth pair, removed when dropped.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn plan_apply_revert_round_trip_inside_a_namespace() {
    if !is_root() {
        eprintln!("skipped: apply/revert inside a network namespace needs root");
        return;
    }
    let ns = Netns(format!("corelane-{}-apply", std::process::id()));
    let ip = |args: &[&str]| {
        assert!(Command::new("ip").args(args).status().unwrap().success(), "ip {args:?}")
    };
    ip(&["netns", "add", &ns.0]);
    ip(&[
        "-n",
        &ns.0,
        "link",
        "add",
        "va",
        "numrxqueues",
        "4",
        "numtxqueues",
        "4",
        "type",
        "veth",
        "peer",
        "name",
        "vb",
        "numrxqueues",
        "4",
        "numtxqueues",
        "4",
    ]);
    let dir = shm_dir("apply");
    let (plan, revert) = (dir.join("plan.toml"), dir.join("revert.json"));
    let in_ns = |args: &[&str]| {
        Command::new("ip")
            .args(["netns", "exec", &ns.0, env!("CARGO_BIN_EXE_corelane")])
            .args(args)
            .output()
            .unwrap()
    };
    let rps = || {
        let out = Command::new("ip")
            .args(["netns", "exec", &ns.0, "cat", "/sys/class/net/va/queues/rx-1/rps_cpus"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().trim_start_matches(['0', ',']).to_string()
    };
    // The queue count goes through the ethtool ioctl (veth implements channels).
    let rx_queues = || {
        let out = in_ns(&["topo", "--json"]);
        let topo: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let nics = topo["nics"].as_array().unwrap();
        let va = nics.iter().find(|n| n["name"] == "va").unwrap();
        va["settings"]["channels"]["rx"].as_u64().unwrap()
    };
    let before = rps();
    assert_eq!(rx_queues(), 4);
    let out = in_ns(&["plan", "--nic", "va", "-o", plan.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    // A person edits the plan: two queues.
    let text = std::fs::read_to_string(&plan).unwrap();
    let edited = text.replacen("nic = \"va\"\n", "nic = \"va\"\nqueue_count = 2\n", 1);
    assert_ne!(text, edited, "{text}");
    std::fs::write(&plan, edited).unwrap();
    let dry = in_ns(&["apply", plan.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&dry.stdout).contains("dry run"),
        "{}",
        String::from_utf8_lossy(&dry.stdout)
    );
    assert_eq!(rps(), before, "a dry run changed something");
    let out =
        in_ns(&["apply", plan.to_str().unwrap(), "--yes", "--revert", revert.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(rx_queues(), 2, "the queue count was not set");
    assert_ne!(rps(), before, "the plan's RPS mask was not written");
    let out = in_ns(&["revert", revert.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(rx_queues(), 4, "revert did not restore the queue count");
    assert_eq!(rps(), before, "revert did not restore the mask");
    std::fs::remove_dir_all(dir).unwrap();
}

/// `apply --json` and `revert --json` (what the Ansible modules read): every change with the
/// value the machine holds now and the plan's, nothing changed by a dry run, an empty list
/// once the plan is in force, and the revert's entries as the changes it makes.
#[test]
fn apply_and_revert_report_each_setting_old_and_new_as_json() {
    if !is_root() {
        eprintln!("skipped: apply/revert inside a network namespace needs root");
        return;
    }
    let ns = Netns(format!("corelane-{}-applyjson", std::process::id()));
    let ip = |args: &[&str]| {
        assert!(Command::new("ip").args(args).status().unwrap().success(), "ip {args:?}")
    };
    ip(&["netns", "add", &ns.0]);
    let q = ["numrxqueues", "2", "numtxqueues", "2"];
    let mut link = vec!["-n", &ns.0, "link", "add", "va"];
    link.extend(q);
    link.extend(["type", "veth", "peer", "name", "vb"]);
    link.extend(q);
    ip(&link);
    let dir = shm_dir("applyjson");
    let (plan, revert) = (dir.join("plan.json"), dir.join("revert.json"));
    let (plan, revert) = (plan.to_str().unwrap(), revert.to_str().unwrap());
    let in_ns = |args: &[&str]| {
        let out = Command::new("ip")
            .args(["netns", "exec", &ns.0, env!("CARGO_BIN_EXE_corelane")])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let value = |path: &str| {
        let out = Command::new("ip").args(["netns", "exec", &ns.0, "cat", path]).output().unwrap();
        text(&out.stdout).trim().to_string()
    };
    let masks = || {
        ["rx-0/rps_cpus", "rx-1/rps_cpus", "tx-0/xps_cpus", "tx-1/xps_cpus"]
            .map(|q| value(&format!("/sys/class/net/va/queues/{q}")))
    };
    let before = masks();
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.0, env!("CARGO_BIN_EXE_corelane")])
        .args(["plan", "--nic", "va", "--format", "json", "-o", plan])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let dry = in_ns(&["apply", plan, "--json"]);
    assert_eq!(
        (&dry["nic"], &dry["applied"], &dry["revert_file"]),
        (&"va".into(), &false.into(), &serde_json::Value::Null)
    );
    let changes = dry["changes"].as_array().unwrap();
    assert!(!changes.is_empty(), "{dry}");
    for c in changes {
        let path = c["path"].as_str().unwrap();
        assert_eq!(c["from"].as_str().unwrap(), value(path), "{c}");
        assert_ne!(c["from"], c["to"], "{c}");
    }
    assert_eq!(masks(), before, "a dry run changed something");
    let done = in_ns(&["apply", plan, "--yes", "--json", "--revert", revert]);
    assert_eq!((&done["applied"], done["revert_file"].as_str()), (&true.into(), Some(revert)));
    assert_eq!(&done["changes"], &dry["changes"]);
    for c in changes {
        assert_eq!(value(c["path"].as_str().unwrap()), c["to"].as_str().unwrap(), "{c}");
    }
    let again = in_ns(&["apply", plan, "--json"]);
    assert_eq!(again["changes"], serde_json::json!([]), "the plan in force still shows changes");
    assert_eq!((&dry["format"], &done["format"]), (&1.into(), &1.into()));
    // One setting put back by hand, another set to a third value: the revert reads what the
    // host holds NOW, lists only what differs from the saved values, from the current value.
    let (first, second) = (&changes[0], &changes[1]);
    let set = |path: &str, v: &str| {
        let sh = format!("echo {v} > {path}");
        ip(&["netns", "exec", &ns.0, "sh", "-c", &sh]);
    };
    set(first["path"].as_str().unwrap(), first["from"].as_str().unwrap());
    set(second["path"].as_str().unwrap(), "1");
    let third = value(second["path"].as_str().unwrap());
    let undo = in_ns(&["revert", revert, "--dry-run", "--json"]);
    assert_eq!((&undo["format"], &undo["restored"]), (&1.into(), &false.into()));
    let undo_list = undo["changes"].as_array().unwrap();
    assert_eq!(undo_list.len(), changes.len() - 1, "{undo}");
    assert!(!undo_list.iter().any(|u| u["path"] == first["path"]), "{undo}");
    for (u, c) in undo_list.iter().zip(changes.iter().skip(1).rev()) {
        let now =
            if c["path"] == second["path"] { third.as_str() } else { c["to"].as_str().unwrap() };
        assert_eq!((&u["path"], u["from"].as_str(), &u["to"]), (&c["path"], Some(now), &c["from"]));
    }
    assert_ne!(masks(), before, "a dry-run revert restored something");
    let undone = in_ns(&["revert", revert, "--json"]);
    assert_eq!((&undone["restored"], &undone["changes"]), (&true.into(), &undo["changes"]));
    assert_eq!(masks(), before, "revert did not restore every mask");
    let again = in_ns(&["revert", revert, "--dry-run", "--json"]);
    assert_eq!(again["changes"], serde_json::json!([]), "a restored host still shows changes");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn serve_and_load_round_trip_with_json_and_a_summary_on_ctrl_c() {
    let mut server = start(
        &["serve", "http", "--addr", "127.0.0.1", "--port", "0", "--lanes", "2", "--json"],
        Stdio::inherit(),
    );
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let ready: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(ready["type"], "ready");
    let url = format!("http://{}/", ready["addr"].as_str().unwrap());
    let load = corelane(&["load", "http", &url, "-c", "4", "--requests", "2000", "--json"]);
    assert!(load.status.success(), "{}", stderr(&load));
    let last = String::from_utf8_lossy(&load.stdout).lines().last().unwrap().to_owned();
    let summary: serde_json::Value = serde_json::from_str(&last).unwrap();
    assert_eq!(summary["summary"]["responses"], 2000);
    assert_eq!(summary["summary"]["errors"], 0);
    assert!(summary["summary"]["latency"]["p99_us"].as_f64().unwrap() > 0.0);
    let served = interrupt_for_summary(&mut server, lines);
    assert_eq!(served["summary"]["requests"], 2000);
    assert!(served["summary"]["cpu_us_per_request"].as_f64().unwrap() > 0.0);
}

#[test]
fn the_tcp_lab_measures_rows_with_cpu_per_request_and_leaves_nothing_behind() {
    // Without root the lab runs on loopback (and says so); both ways it must measure.
    let report = quick_lab(
        "tcp",
        &["--duration", "1s", "--configs", "baseline,uring,scale,files"],
        &[
            "workload",
            "config",
            "median_rps",
            "p99_us",
            "cpu_us_per_request",
            "connections",
            "bytes_per_idle_connection",
            "cpu_ns_per_request",
        ],
    );
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "two configurations x keep-alive and close");
    for row in rows {
        assert!(row["median_rps"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["cpu_us_per_request"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(row["errors"], 0, "{row}");
    }
    assert!(report["interrupt_moderation"].as_str().unwrap().starts_with("not applicable"));
    // The scale rows (quick: 100 and 1,000 connections) and the file rows, both backends.
    let scale = report["scale_rows"].as_array().unwrap();
    assert_eq!(scale.len(), 4, "two counts x two backends: {scale:?}");
    for row in scale {
        let per_idle = row["bytes_per_idle_connection"].as_f64().unwrap();
        assert!((0.0..100_000.0).contains(&per_idle), "{row}");
        assert_eq!(row["answered_after_idle"], true, "{row}");
        assert!(row["median_rps"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(row["errors"], 0, "{row}");
    }
    let files = report["file_rows"].as_array().unwrap();
    assert_eq!(files.len(), 4, "4 KiB and 1 MiB x two backends: {files:?}");
    for row in files {
        assert!(row["median_rps"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["cpu_ns_per_request"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!((&row["errors"], &row["non_2xx"]), (&0.into(), &0.into()), "{row}");
    }
    assert!(report["skipped"].to_string().contains("largest connection count"));
    if is_root() {
        assert_no_namespace_left(&report);
    }
}

/// A crafted revert file and a crafted plan are refused by the commands with the reason,
/// before anything is read or written.
#[test]
fn crafted_plan_and_revert_files_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    let revert = dir.path().join("revert.json");
    let entry = serde_json::json!([{ "path": victim, "from": "pwned", "to": "x" }]);
    std::fs::write(&revert, entry.to_string()).unwrap();
    let out = corelane(&["revert", revert.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("is not a setting a plan may change"), "{}", stderr(&out));
    assert!(!victim.exists());

    let plan = dir.path().join("plan.toml");
    std::fs::write(
        &plan,
        "nic = \"../../../etc\"\npolicy = \"spread\"\nirq_cpus = \"0\"\nsyscall_cpus = \"0\"\napp_cpus = \"0\"\nrps_cpus = \"0\"\nirqs = []\nnotes = []\n",
    )
    .unwrap();
    let out = corelane(&["apply", plan.to_str().unwrap(), "--yes"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("is not an interface name"), "{}", stderr(&out));
}

/// `serve http --root --backend uring --json` serves files and reports what each open
/// connection holds: idle keep-alive connections hold no buffers, so well under a KiB each.
#[test]
fn serve_reports_bytes_per_connection_for_files_on_io_uring() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "file body").unwrap();
    let mut perms = std::fs::metadata(dir.path()).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(dir.path(), perms).unwrap();
    let root = dir.path().to_str().unwrap();
    let serve = ["serve", "http", "--addr", "127.0.0.1", "--port", "0", "--lanes", "1"];
    let files = ["--backend", "uring", "--root", root, "--json"];
    let mut server = start(&[&serve[..], &files].concat(), Stdio::inherit());
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let ready: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let addr = ready["addr"].as_str().unwrap().to_owned();
    let mut idle = Vec::new();
    for _ in 0..20 {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
        let mut buf = [0u8; 1024];
        let n = s.read(&mut buf).unwrap();
        let text = String::from_utf8_lossy(&buf[..n]);
        assert!(text.starts_with("HTTP/1.1 200") && text.ends_with("file body"), "{text}");
        idle.push(s);
    }
    let interval = lines
        .by_ref()
        .map(|l| serde_json::from_str::<serde_json::Value>(&l.unwrap()).unwrap())
        .find(|v| v["type"] == "interval" && v["interval"]["open"] == 20)
        .expect("a second with the connections open");
    let held = interval["interval"]["bytes_per_connection"].as_f64().expect("a number");
    assert!(held > 0.0 && held < 1024.0, "{held} B per idle connection");
    let served = interrupt_for_summary(&mut server, lines);
    assert_eq!(served["summary"]["requests"], 20);
    assert!(served["summary"]["bytes_per_connection"].as_f64().is_some_and(|b| b < 1024.0));
    drop(idle);
}

/// Ctrl-C to a `serve http --json` server: its final summary line, and a clean exit.
fn interrupt_for_summary(
    server: &mut Child,
    lines: impl Iterator<Item = std::io::Result<String>>,
) -> serde_json::Value {
    ctrl_c(server);
    let served = lines
        .map(|l| serde_json::from_str::<serde_json::Value>(&l.unwrap()).unwrap())
        .find(|v| v["type"] == "summary")
        .expect("a final summary");
    assert!(server.wait().unwrap().success());
    served
}

/// The C loop on the namespace testbed: compiled here into a private work directory, run in
/// the receiving namespace, measured, and removed with its directory.
#[test]
fn lab_udp_measures_the_c_loop_on_the_namespace_testbed_and_removes_it() {
    if !is_root() || !std::path::Path::new("/usr/bin/cc").exists() {
        eprintln!("skipped: needs root (the namespace testbed) and cc (apt-get install gcc)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("peers.json");
    let lab = ["lab", "udp", "--quick", "--configs", "none", "--vs", "c-loop", "--json"];
    let out = Command::new(env!("CARGO_BIN_EXE_corelane"))
        .args(lab)
        .arg(&json)
        .env("TMPDIR", dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = report["peers"].as_array().unwrap();
    let c_loop = rows.iter().find(|r| r["receiver"] == "C recvmmsg loop (batch 32)");
    let c_loop = c_loop.unwrap_or_else(|| panic!("no C loop row: {report}"));
    assert!(c_loop["median_pps"].as_f64().unwrap() > 1000.0, "{c_loop}");
    assert!(c_loop["cpu_ns_per_datagram"].as_f64().unwrap() > 0.0, "{c_loop}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(left, vec![json], "the C loop's work directory was left");
    assert_no_namespace_left(&report);
}

/// Flow ids past `u32` are refused in one line, not wrapped onto another sender's range
/// (the lab gives each load host its own range with `--first-flow`).
#[test]
fn a_first_flow_that_runs_past_the_last_flow_id_is_refused() {
    let out =
        corelane(&["udp", "send", "127.0.0.1:9", "--first-flow", "4294967295", "--flows", "2"]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("--first-flow 4294967295 with 2 flows runs past flow id"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// `corelane guard --clock` answers each line with this host's clock and ends with its input.
#[test]
fn guard_clock_answers_each_line() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_corelane"))
        .args(["guard", "--clock"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"?\n?\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let times: Vec<u128> = text.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(times.len(), 2, "{text}");
    assert!(times[0] <= times[1] && times[0] > 1_600_000_000_000_000_000, "{text}");
}

/// `load http --hold-idle` against a real server: one ready line with every connection held
/// and answered (the server counts them open), held until its piped stdin closes, then a
/// clean exit and the server sees them go; bad counts and hold times are one line each.
#[test]
fn hold_idle_holds_answered_connections_until_stdin_closes() {
    use std::io::Write;
    let mut server = start(
        &["serve", "http", "--addr", "127.0.0.1", "--port", "0", "--lanes", "1", "--json"],
        Stdio::inherit(),
    );
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let ready: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let url = format!("http://{}/", ready["addr"].as_str().unwrap());
    let mut holder = Command::new(env!("CARGO_BIN_EXE_corelane"))
        .args(["load", "http", &url, "--hold-idle", "--connections", "30", "--duration", "5m"])
        .arg("--json")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut held = BufReader::new(holder.stdout.take().unwrap()).lines();
    let line: serde_json::Value = serde_json::from_str(&held.next().unwrap().unwrap()).unwrap();
    assert_eq!(line, serde_json::json!({"type": "ready", "held": 30, "answered": 30}));
    let mut open = |n: u64| {
        lines
            .by_ref()
            .map(|l| serde_json::from_str::<serde_json::Value>(&l.unwrap()).unwrap())
            .find(|v| v["type"] == "interval" && v["interval"]["open"] == n)
            .is_some()
    };
    assert!(open(30), "the server never saw the 30 connections open");
    let started = Instant::now();
    holder.stdin.take().unwrap().write_all(b"").unwrap();
    assert!(holder.wait().unwrap().success());
    assert!(started.elapsed() < Duration::from_secs(10), "held past the end of stdin");
    assert!(held.next().is_none(), "nothing after the ready line");
    assert!(open(0), "the server never saw the connections go");
    interrupt_for_summary(&mut server, lines);
    let base = ["load", "http", "http://127.0.0.1:9/", "--hold-idle"];
    for (bad, names) in [
        (vec!["--connections", "0"], "--connections 0 with --hold-idle: give 1 to"),
        (vec!["--connections", "99999999"], "--connections 99999999 with --hold-idle"),
        (vec!["--duration", "20m"], "with --hold-idle: give at most 15m"),
        (vec!["--rate", "10"], "'--hold-idle' cannot be used with '--rate"),
    ] {
        let out = corelane(&[&base[..], &bad].concat());
        let err = stderr(&out);
        let first = err.lines().next().unwrap_or_default();
        assert!(!out.status.success() && first.contains(names), "{bad:?}: {err}");
    }
    // Nothing listens on port 9: the connection that failed is named.
    let out = corelane(&[&base[..], &["--connections", "3"]].concat());
    let err = stderr(&out);
    assert!(!out.status.success() && err.contains("connection 1 of 3 to 127.0.0.1:9"), "{err}");
}

/// A server that answers each connection's request with an endless head, or a head announcing
/// the largest body and then endless bytes: `load http` holds a bounded buffer per connection
/// whatever it is sent (its peak RSS stays low, where it held every byte before) and ends on
/// time with no response counted.
#[test]
fn load_http_holds_a_bounded_buffer_whatever_the_server_sends() {
    use std::io::{Read, Write};
    for opening in [
        "HTTP/1.1 200 OK\r\nX-Endless: ".to_string(),
        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", u64::MAX),
    ] {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let what = opening.clone();
        let feeder = std::thread::spawn(move || {
            // Bounded: at most 4 connections and 3 s, each fed while the client reads.
            let until = std::time::Instant::now() + std::time::Duration::from_secs(3);
            listener.set_nonblocking(true).unwrap();
            let chunk = vec![b'a'; 1 << 16];
            let mut conns = Vec::new();
            while std::time::Instant::now() < until {
                if let Ok((mut s, _)) = listener.accept() {
                    s.set_nonblocking(false).unwrap();
                    let mut request = [0u8; 1024];
                    let _ = s.read(&mut request);
                    s.set_write_timeout(Some(std::time::Duration::from_millis(20))).unwrap();
                    if s.write_all(opening.as_bytes()).is_ok() && conns.len() < 4 {
                        conns.push(s);
                    }
                }
                for s in &mut conns {
                    let _ = s.write_all(&chunk);
                }
            }
        });
        let child = Command::new(env!("CARGO_BIN_EXE_corelane"))
            .args(["load", "http", &url, "-c", "1", "-d", "2s", "--timeout", "10s", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let status = format!("/proc/{}/status", child.id());
        let mut peak_kib = 0u64;
        while let Ok(text) = std::fs::read_to_string(&status) {
            let hwm = text.lines().find(|l| l.starts_with("VmHWM:"));
            if let Some(kib) = hwm.and_then(|l| l.split_whitespace().nth(1)?.parse().ok()) {
                peak_kib = peak_kib.max(kib);
            }
            if text.lines().any(|l| l.starts_with("State:") && l.contains('Z')) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let out = child.wait_with_output().unwrap();
        feeder.join().unwrap();
        assert!(peak_kib > 0, "no RSS read");
        assert!(peak_kib < 64 * 1024, "{what:?}: load http grew to {peak_kib} KiB");
        // Never a response: refused with the reason, or (a body still coming at the end) none counted.
        let (stdout, why) = (text(&out.stdout), stderr(&out));
        match out.status.success() {
            true => {
                let last: serde_json::Value =
                    serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_default();
                assert_eq!(last["summary"]["responses"], 0, "{what:?}: {stdout}");
            }
            false => assert!(why.contains("no response from"), "{what:?}: {why}"),
        }
    }
}

/// A FIFO nobody writes to, or a device, named where a plan, revert file, saved run or
/// inventory goes is refused in one line at once: never a read that waits for a writer
/// forever or never ends (a FIFO reads as empty, which is no plan, run or inventory).
#[test]
fn a_fifo_named_as_an_input_file_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("input");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let fifo = fifo.to_str().unwrap();
    let page = dir.path().join("page.html");
    for args in [
        vec!["apply", fifo],
        vec!["revert", fifo],
        vec!["report", fifo, "-o", page.to_str().unwrap()],
        vec!["lab", "udp", "--inventory", fifo, "--dry-run"],
        vec!["apply", "/dev/zero"],
    ] {
        let mut child = start(&args, Stdio::piped());
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                child.kill().unwrap();
                child.wait().unwrap();
                panic!("corelane {args:?} still waits on the FIFO after 20 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let out = child.wait_with_output().unwrap();
        let why = stderr(&out);
        assert!(!status.success(), "{args:?}");
        if args.contains(&"/dev/zero") {
            assert!(why.contains("not a regular file or pipe"), "{args:?}: {why}");
        }
        assert_eq!(why.trim().lines().count(), 1, "{args:?}: {why}");
    }
}

/// A FIFO whose writer opened it and stays silent (here the test itself holds it open for
/// writing), named as a plan (`apply`, `run --plan`) or a revert file, is refused in one line
/// naming the file after a bounded wait; a device there is refused at once. The old reader
/// waited on the silent writer for as long as it lived.
#[test]
fn an_idle_writer_fifo_or_a_device_as_plan_or_revert_file_is_one_error_in_bounded_time() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("plan.toml");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    // O_RDWR does not wait for a reader: the test is the writer that never writes.
    let _writer = std::fs::OpenOptions::new().read(true).write(true).open(&fifo).unwrap();
    let fifo = fifo.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["apply", fifo],
        vec!["revert", fifo],
        vec!["run", "--plan", fifo, "--", "true"],
        vec!["apply", "/dev/null"],
        vec!["revert", "/dev/zero"],
        vec!["run", "--plan", "/dev/zero", "--", "true"],
    ];
    let started = Instant::now();
    let children: Vec<Child> = cases.iter().map(|args| start(args, Stdio::piped())).collect();
    for (args, mut child) in cases.iter().zip(children) {
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > Duration::from_secs(20) {
                child.kill().unwrap();
                child.wait().unwrap();
                panic!("corelane {args:?} still reads after 20 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let why = stderr(&child.wait_with_output().unwrap());
        assert!(!status.success(), "{args:?}");
        assert_eq!(why.trim().lines().count(), 1, "{args:?}: {why}");
        let named = args.iter().find(|a| a.starts_with('/')).unwrap();
        assert!(why.contains(named), "{args:?}: {why}");
        let expected =
            if named.starts_with("/dev/") { "not a regular file or pipe" } else { "sent nothing" };
        assert!(why.contains(expected), "{args:?}: {why}");
    }
}

/// A plan's `[[lower]]` device must be under its interface as sysfs shows it (a `lower_*`
/// link, or the device's `master`); another device is refused in one line naming both.
#[test]
fn a_lower_device_not_under_the_plans_interface_is_refused() {
    if !is_root() {
        return eprintln!(
            "skipped: the test makes devices in a network namespace of its own (root)"
        );
    }
    let ns = Netns(format!("corelane-{}-lower", std::process::id()));
    let ip = |args: &[&str]| Command::new("ip").args(args).status().is_ok_and(|s| s.success());
    if !ip(&["netns", "add", &ns.0]) {
        return eprintln!("skipped: cannot make a network namespace");
    }
    for args in [
        &["link", "add", "va", "type", "veth", "peer", "name", "vb"][..],
        &["link", "add", "vc", "type", "veth", "peer", "name", "vd"][..],
        &["link", "add", "br0", "type", "bridge"][..],
        &["link", "set", "vb", "master", "br0"][..],
    ] {
        if !ip(&[&["-n", ns.0.as_str()][..], args].concat()) {
            return eprintln!("skipped: ip {args:?} failed (no veth or bridge support?)");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    let apply = |lower: &str| {
        let text = format!(
            "nic = \"br0\"\nrps_cpus = \"0\"\npolicy = \"custom\"\nirq_cpus = \"0\"\nsyscall_cpus = \"\"\n\
             app_cpus = \"0\"\n\n[[lower]]\nnic = \"{lower}\"\nrps_cpus = \"0\"\n"
        );
        std::fs::write(&plan, text).unwrap();
        Command::new("ip")
            .args(["netns", "exec", &ns.0, env!("CARGO_BIN_EXE_corelane"), "apply"])
            .arg(&plan)
            .output()
            .unwrap()
    };
    let out = apply("vb");
    assert!(out.status.success(), "vb is under br0: {}", stderr(&out));
    let out = apply("vd");
    let why = stderr(&out);
    assert!(!out.status.success());
    assert_eq!(why.trim().lines().count(), 1, "{why}");
    assert!(why.contains("lower device vd is not under br0"), "{why}");
}
