//! `corelane udp echo`, `udp ping` and `load http --rate` as a user runs them: JSON shape,
//! the histogram log, bad input with one clear line.

mod common;

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::process::{Command, Stdio};

use common::{corelane, stderr};

#[test]
fn echo_and_ping_speak_json_with_the_percentile_names() {
    let mut echo = Command::new(env!("CARGO_BIN_EXE_corelane"))
        .args(["udp", "echo", "127.0.0.1:0", "--json", "--duration", "20s"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(echo.stdout.take().unwrap()).lines();
    let ready: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(ready["type"], "ready");
    let addr = ready["addr"].as_str().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("rtt.hlog");
    let out = corelane(&[
        "udp",
        "ping",
        &addr,
        "--mode",
        "under-load",
        "--rate",
        "2000",
        "-d",
        "1200ms",
        "--warmup",
        "100ms",
        "--json",
        "--histogram",
        log.to_str().unwrap(),
    ]);
    let _ = echo.kill();
    let _ = echo.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let objects: Vec<serde_json::Value> =
        stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(objects.iter().any(|o| o["type"] == "interval"), "{stdout}");
    let summary = &objects.last().unwrap()["summary"];
    for key in ["p50", "p90", "p99", "p99.9", "p99.99", "max"] {
        assert!(summary[key].as_f64().unwrap() > 0.0, "{key} in {summary}");
        assert!(summary["uncorrected"][key].as_f64().is_some(), "uncorrected {key}");
    }
    assert_eq!(summary["measure"], "round_trip");
    for key in ["sent", "received", "lost", "duplicates", "reordered", "achieved_rate"] {
        assert!(summary.get(key).is_some(), "{key} in {summary}");
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("#[StartTime: "), "{text}");
    assert!(text.lines().any(|l| l.contains(",HISTF")), "an interval line: {text}");
}

#[test]
fn latency_tools_refuse_bad_input_with_one_line() {
    let busy = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["udp", "echo", &addr], "already in use"),
        (
            vec!["udp", "ping", &addr, "--mode", "under-load", "--rate", "0"],
            "--rate must be above 0",
        ),
        (vec!["udp", "ping", &addr, "--mode", "under-load"], "needs --rate"),
        (vec!["udp", "ping", &addr, "--size", "4"], "16 to"),
        (vec!["udp", "echo", "127.0.0.1:0", "--reply-every", "0"], "--reply-every"),
        (vec!["udp", "echo", "127.0.0.1:0", "--per-source-rate", "0"], "--per-source-rate must be"),
        (
            vec!["udp", "echo", "127.0.0.1:0", "--per-source-burst", "0"],
            "--per-source-burst at least",
        ),
        (vec!["lab", "latency", "--configs", "echo,nope"], "unknown configuration `nope`"),
        (vec!["lab", "latency", "--vs", "iperf3"], "unknown peer `iperf3`: choose from sockperf"),
        (vec!["lab", "latency", "--dry-run"], "need --tx-host, --rx-host or --inventory"),
        (
            vec!["lab", "latency", "--tx-host", "root@192.0.2.1", "--tx-host", "root@192.0.2.1"],
            "load host root@192.0.2.1 is given twice",
        ),
    ];
    for (args, expect) in cases {
        let out = corelane(&args);
        assert!(!out.status.success(), "{args:?}");
        let err = stderr(&out);
        assert!(err.contains(expect), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line, got {err}");
    }
}

#[test]
fn an_unreachable_target_reports_loss_and_exits_nonzero() {
    let closed = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    let started = std::time::Instant::now();
    let out =
        corelane(&["udp", "ping", &addr, "-d", "300ms", "--warmup", "0s", "--timeout", "100ms"]);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no reply from"), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("received 0, lost"));
}

#[test]
fn load_http_rate_reports_the_achieved_rate_and_both_latencies() {
    let mut serve = Command::new(env!("CARGO_BIN_EXE_corelane"))
        .args(["serve", "http", "--addr", "127.0.0.1", "--port", "0", "--lanes", "1", "--json"])
        .args(["--duration", "20s"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(serve.stdout.take().unwrap()).lines();
    let ready: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let url = format!("http://{}/", ready["addr"].as_str().unwrap());
    let out = corelane(&["load", "http", &url, "--rate", "1000", "-c", "4", "-d", "1s", "--json"]);
    let over = corelane(&["load", "http", &url, "--rate", "0", "-d", "1s"]);
    let _ = serve.kill();
    let _ = serve.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let s = &summary["summary"];
    assert_eq!(s["rate"], 1000);
    assert!(s["requests_per_sec"].as_f64().unwrap() > 800.0, "{s}");
    assert!(s["latency"]["p99_us"].as_f64().is_some(), "{s}");
    assert!(s["latency_uncorrected"]["p99_us"].as_f64().is_some(), "{s}");
    assert!(!over.status.success());
    assert!(stderr(&over).contains("--rate must be above 0"), "{}", stderr(&over));
}

#[test]
fn the_latency_tools_have_help_and_the_lab_lists_its_experiment() {
    for args in
        [&["udp", "echo", "--help"][..], &["udp", "ping", "--help"], &["lab", "latency", "--help"]]
    {
        let out = corelane(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage"), "{args:?}");
    }
    let list = corelane(&["lab"]);
    assert!(String::from_utf8_lossy(&list.stdout).contains("latency"));
}
