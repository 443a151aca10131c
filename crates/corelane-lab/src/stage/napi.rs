//! NAPI threads for the AF_XDP rows. On veth, XDP runs in the interface's NAPI poll, which by
//! default is softirq work charged to no task when it runs on an idle CPU. Threaded NAPI
//! (`/sys/class/net/DEV/threaded`, possible once XDP gave veth its NAPI) moves it into
//! `napi/DEV-N` kernel threads; pinned to the lanes' CPU they stand in for IRQ affinity, and
//! their exact runtime (schedstat) is the receive work the AF_XDP rows are charged with. On a
//! remote rx host's NIC the lab changes no NAPI setting: it charges the `napi/DEV-N` threads
//! found there (threaded NAPI as the host has it), read through the host's own counters.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::host::Host;
use crate::LabError;

/// The `napi/DEV-*` kernel threads on `host` now (PIDs as that host numbers them).
fn napi_threads(host: &Host, dev: &str) -> BTreeSet<u32> {
    let prefix = format!("napi/{dev}-");
    match host {
        Host::Local | Host::Namespace(_) => super::local_threads_named(&prefix),
        Host::Remote(_) => {
            let script = "for p in /proc/[0-9]*; do read -r c 2>/dev/null < \"$p/comm\" && case $c in \"$1\"*) echo \"${p#/proc/}\";; esac; done; true";
            let out = host.run("sh", &["-c", script, "sh", &prefix]).unwrap_or_default();
            out.lines().filter_map(|l| l.trim().parse().ok()).collect()
        }
    }
}

/// The NAPI threads of the receiving interface charged to a row.
#[derive(Debug)]
pub struct NapiThreads {
    host: Host,
    pids: Vec<u32>,
}

impl NapiThreads {
    /// The threads that exist on this machine before the receiver starts (other interfaces'
    /// or old ones).
    pub fn before(dev: &str) -> BTreeSet<u32> {
        napi_threads(&Host::Local, dev)
    }

    /// Once the receiver attached XDP: turns threaded NAPI on, waits for the new threads and
    /// pins each to `cpu`.
    pub fn pin(rx: &Host, dev: &str, before: &BTreeSet<u32>, cpu: usize) -> Result<Self, LabError> {
        rx.write_file(&format!("/sys/class/net/{dev}/threaded"), "1")?;
        let deadline = Instant::now() + Duration::from_secs(2);
        let pids: Vec<u32> = loop {
            let new: Vec<u32> =
                napi_threads(&Host::Local, dev).difference(before).copied().collect();
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
        Ok(Self { host: Host::Local, pids })
    }

    /// The `napi/DEV-*` threads a remote rx host runs for `dev` as found, changing nothing;
    /// `None` when it runs none (NAPI as softirq there, seen in the per-CPU softirq split).
    pub fn found(rx: &Host, dev: &str) -> Option<Self> {
        let pids: Vec<u32> = napi_threads(rx, dev).into_iter().collect();
        (!pids.is_empty()).then(|| Self { host: rx.clone(), pids })
    }

    /// The threads' summed exact runtime.
    pub fn runtime(&self) -> Duration {
        self.pids.iter().filter_map(|&p| self.host.cpu_time(p)).sum()
    }
}
