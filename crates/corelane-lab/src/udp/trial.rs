//! One trial of one configuration: start the receiver, then the paced sender, read the
//! receiver's per-second JSON, and sample /proc/stat over the measured seconds.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use corelane::lane::StopSignal;
use corelane::stats::{CpuSplit, ProcStat};
use serde_json::Value;

use super::configs::{Config, FLOWS};
use super::{median_of, ConfigRow, UdpLabOptions};
use crate::process::ChildProcess;
use crate::testbed::Testbed;
use crate::LabError;

/// The port inside the namespaces (private to them, so a fixed one is safe).
const NAMESPACE_PORT: u16 = 4321;

/// What one trial measured over its steady seconds.
#[derive(Debug, Clone)]
pub struct Trial {
    pub pps: f64,
    pub sent_pps: f64,
    pub drops_per_sec: f64,
    pub cpu_ns_per_datagram: f64,
    pub reordered_pct: f64,
    pub lane_pps: Vec<f64>,
    pub cpu: Vec<CpuSplit>,
}

/// A port for the receiver: fixed inside namespaces, a free one on a shared loopback.
pub(crate) fn pick_port(testbed: &Testbed) -> Result<u16, LabError> {
    if testbed.is_namespaced() {
        return Ok(NAMESPACE_PORT);
    }
    let probe = UdpSocket::bind("127.0.0.1:0")
        .map_err(|e| LabError::io("cannot find a free UDP port", e))?;
    probe.local_addr().map(|a| a.port()).map_err(|e| LabError::io("cannot find a free UDP port", e))
}

/// Waits for the child's `{"type":"ready"}` line.
pub(crate) fn wait_ready(child: &mut ChildProcess, what: &str) -> Result<(), LabError> {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        match child.next_line(Duration::from_millis(100)) {
            Some(line) if line.contains("\"ready\"") || line == "ready" => return Ok(()),
            Some(_) => {}
            None => {
                if let Some(status) = child.wait_timeout(Duration::ZERO) {
                    return Err(LabError::Child(format!(
                        "{what} exited ({status}): {}",
                        child.stderr_text()
                    )));
                }
            }
        }
    }
    Err(LabError::Child(format!("{what} did not report ready within 10s")))
}

pub fn run(
    testbed: &Testbed,
    cfg: &Config,
    opts: &UdpLabOptions,
    stop: &StopSignal,
) -> Result<Trial, LabError> {
    if let Some(cpus) = &cfg.rps {
        testbed.steer_receive(cpus)?;
    }
    let exe = opts.exe.to_string_lossy().into_owned();
    let port = pick_port(testbed)?;
    let secs = opts.duration.as_secs();
    let mut rx_args: Vec<String> = ["udp", "recv"].map(String::from).to_vec();
    rx_args.push(format!("0.0.0.0:{port}"));
    rx_args.extend([
        "--json".into(),
        "--duration".into(),
        format!("{}", secs + 5),
        "--threads".into(),
        cfg.lanes.len().to_string(),
        "--sockets".into(),
        if cfg.shared_socket { "shared" } else { "reuseport" }.into(),
        "--rcvbuf".into(),
        "4M".into(),
    ]);
    if cfg.pinned {
        rx_args.extend(["--pin".into(), cfg.lanes.to_string()]);
    }
    if cfg.uring {
        rx_args.extend(["--backend".into(), "uring".into()]);
    }
    if let Some(cpu) = cfg.sqpoll {
        rx_args.extend(["--sqpoll".into(), cpu.to_string()]);
    }
    if cfg.gro {
        rx_args.push("--gro".into());
    }
    if cfg.steer_cpu {
        rx_args.extend(["--steer".into(), "cpu".into()]);
    }
    let mut receiver = ChildProcess::spawn("corelane receiver", testbed.rx_ns(), &exe, &rx_args)?;
    wait_ready(&mut receiver, "the corelane receiver")?;

    let mut tx_args: Vec<String> = ["udp", "send"].map(String::from).to_vec();
    for addr in testbed.rx_addrs().iter().take(cfg.targets) {
        tx_args.push(SocketAddr::new(*addr, port).to_string());
    }
    tx_args.extend([
        "--json".into(),
        "--duration".into(),
        secs.to_string(),
        "--rate".into(),
        cfg.offered_pps.to_string(),
        "--gso".into(),
        cfg.gso_segments.to_string(),
        "--flows".into(),
        FLOWS.to_string(),
        "--threads".into(),
        cfg.sender_threads.to_string(),
        "--pin".into(),
        cfg.sender_cpu.to_string(),
    ]);
    let sender = ChildProcess::spawn("corelane sender", testbed.tx_ns(), &exe, &tx_args)?;

    let (mut pps, mut drops, mut cpu_ns, mut lanes) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::<Vec<f64>>::new());
    let mut stat_start = None;
    let mut cpu = Vec::new();
    let deadline = Instant::now() + opts.duration + Duration::from_secs(5);
    loop {
        if stop.is_stopped() {
            return Err(LabError::Interrupted);
        }
        if Instant::now() > deadline {
            return Err(LabError::Child(format!(
                "the receiver sent no interval {secs} within the trial: {}",
                receiver.stderr_text()
            )));
        }
        let Some(line) = receiver.next_line(Duration::from_millis(200)) else { continue };
        let Ok(v) = serde_json::from_str::<Value>(&line) else { continue };
        if v["type"] != "interval" {
            continue;
        }
        let i = &v["interval"];
        let index = i["index"].as_u64().unwrap_or(0);
        if index == 1 {
            stat_start = ProcStat::read().ok();
        } else if index >= 2 {
            pps.push(i["pps"].as_f64().unwrap_or(0.0));
            drops.push(i["kernel_drops"].as_f64().unwrap_or(0.0));
            cpu_ns.push(i["cpu_ns_per_datagram"].as_f64().unwrap_or(0.0));
            lanes.push(
                i["lane_pps"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_f64).collect())
                    .unwrap_or_default(),
            );
        }
        if index >= secs {
            if let (Some(start), Ok(end)) = (&stat_start, ProcStat::read()) {
                cpu = end.split_since(start);
            }
            break;
        }
    }
    receiver.interrupt();
    let sent = sender.finish(Duration::from_secs(5))?;
    let received = receiver.finish(Duration::from_secs(5))?;
    let summary = received
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .ok_or_else(|| LabError::Child("the receiver printed no summary".into()))?;
    let sequence = &summary["summary"]["sequence"];
    let reordered_pct = 100.0 * sequence["late"].as_f64().unwrap_or(0.0)
        / sequence["received"].as_f64().unwrap_or(0.0).max(1.0);
    let sent_pps = sent
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .and_then(|v| v["summary"]["mean"]["pps"].as_f64())
        .unwrap_or(0.0);
    let lane_count = lanes.iter().map(Vec::len).max().unwrap_or(0);
    Ok(Trial {
        pps: median_of(pps),
        sent_pps,
        drops_per_sec: median_of(drops),
        cpu_ns_per_datagram: median_of(cpu_ns),
        reordered_pct,
        lane_pps: (0..lane_count)
            .map(|l| median_of(lanes.iter().filter_map(|v| v.get(l).copied())))
            .collect(),
        cpu,
    })
}

/// Medians over trials; the CPU split is the mean over trials.
pub fn summarize(cfg: &Config, trials: &[Trial]) -> ConfigRow {
    let n = trials.len().max(1) as f64;
    let mut cpu: Vec<CpuSplit> = trials.first().map(|t| t.cpu.clone()).unwrap_or_default();
    for split in &mut cpu {
        let same: Vec<&CpuSplit> =
            trials.iter().filter_map(|t| t.cpu.iter().find(|c| c.cpu == split.cpu)).collect();
        split.user_pct = same.iter().map(|c| c.user_pct).sum::<f64>() / n;
        split.sys_pct = same.iter().map(|c| c.sys_pct).sum::<f64>() / n;
        split.softirq_pct = same.iter().map(|c| c.softirq_pct).sum::<f64>() / n;
        split.idle_pct = same.iter().map(|c| c.idle_pct).sum::<f64>() / n;
    }
    let lane_count = trials.iter().map(|t| t.lane_pps.len()).max().unwrap_or(0);
    ConfigRow {
        config: cfg.id.to_string(),
        label: cfg.label.clone(),
        offered_pps: cfg.offered_pps as f64,
        sent_pps: median_of(trials.iter().map(|t| t.sent_pps)),
        trials_pps: trials.iter().map(|t| t.pps).collect(),
        median_pps: median_of(trials.iter().map(|t| t.pps)),
        gap_pct: None,
        drops_per_sec: median_of(trials.iter().map(|t| t.drops_per_sec)),
        cpu_ns_per_datagram: median_of(trials.iter().map(|t| t.cpu_ns_per_datagram)),
        reordered_pct: median_of(trials.iter().map(|t| t.reordered_pct)),
        lane_pps: (0..lane_count)
            .map(|l| median_of(trials.iter().filter_map(|t| t.lane_pps.get(l).copied())))
            .collect(),
        cpu,
    }
}
