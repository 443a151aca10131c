//! NAPI threads for the AF_XDP rows. On veth, XDP runs in the interface's NAPI poll, which by
//! default is softirq work charged to no task when it runs on an idle CPU. Threaded NAPI
//! (`/sys/class/net/DEV/threaded`, possible once XDP gave veth its NAPI) moves it into
//! `napi/DEV-N` kernel threads; pinned to the lanes' CPU they stand in for IRQ affinity, and
//! their exact runtime (schedstat) is the receive work the AF_XDP rows are charged with.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::host::Host;
use crate::LabError;

/// The `napi/DEV-*` kernel threads on this machine now.
fn napi_threads(dev: &str) -> BTreeSet<u32> {
    let prefix = format!("napi/{dev}-");
    let Ok(dir) = std::fs::read_dir("/proc") else { return BTreeSet::new() };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim_end().starts_with(&prefix))
        })
        .collect()
}

/// A thread's exact runtime so far.
fn runtime_of(pid: u32) -> Duration {
    let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap_or_default();
    Duration::from_nanos(corelane::stats::schedstat_runtime(&text).unwrap_or(0))
}

/// The NAPI threads of the receiving interface, pinned to the lanes' CPU.
#[derive(Debug)]
pub struct NapiThreads {
    pids: Vec<u32>,
}

impl NapiThreads {
    /// The threads that exist before the receiver starts (other interfaces' or old ones).
    pub fn before(dev: &str) -> BTreeSet<u32> {
        napi_threads(dev)
    }

    /// Once the receiver attached XDP: turns threaded NAPI on, waits for the new threads and
    /// pins each to `cpu`.
    pub fn pin(rx: &Host, dev: &str, before: &BTreeSet<u32>, cpu: usize) -> Result<Self, LabError> {
        rx.write_file(&format!("/sys/class/net/{dev}/threaded"), "1")?;
        let deadline = Instant::now() + Duration::from_secs(2);
        let pids: Vec<u32> = loop {
            let new: Vec<u32> = napi_threads(dev).difference(before).copied().collect();
            if !new.is_empty() || Instant::now() > deadline {
                break new;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if pids.is_empty() {
            return Err(LabError::Options(format!(
                "{dev}: no napi/{dev}-* thread appeared after turning threaded NAPI on"
            )));
        }
        for pid in &pids {
            let pid = pid.to_string();
            Host::Local.run("taskset", &["-p", "-c", &cpu.to_string(), &pid])?;
            // Receive work preempts the lanes, as softirq would: SCHED_FIFO priority 1.
            Host::Local.run("chrt", &["-f", "-p", "1", &pid])?;
        }
        Ok(Self { pids })
    }

    /// The threads' summed exact runtime.
    pub fn runtime(&self) -> Duration {
        self.pids.iter().map(|&p| runtime_of(p)).sum()
    }
}
