//! NAPI threads for the AF_XDP rows. On veth, XDP runs in the interface's NAPI poll, which by
//! default is softirq work charged to no task when it runs on an idle CPU. Threaded NAPI
//! (`/sys/class/net/DEV/threaded`, possible once XDP gave veth its NAPI) moves it into
//! `napi/DEV-N` kernel threads; pinned to the lanes' CPU they stand in for IRQ affinity, and
//! their exact runtime (schedstat) is the receive work the AF_XDP rows are charged with. They
//! keep the kernel's own policy (SCHED_OTHER), sharing the CPU with the lanes: at SCHED_FIFO a
//! NAPI thread with frames queued ran until the queue was empty, so a sender catching up after
//! a stall kept the lane off its CPU while its RX ring overflowed (a 300 ms stall lost 3,712 to
//! 20,768 frames as `rx_ring_full` at FIFO, none at SCHED_OTHER, where the sender's queue
//! pushes back instead). On a
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
    /// pins each to `cpu`, at SCHED_OTHER (the lanes get their share of it).
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
            Host::Local.run("chrt", &["-o", "-p", "0", &pid])?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// A namespace with a veth pair whose receiving end has NAPI (an XDP program on it, held
    /// by the value), removed on drop.
    struct VethNs(String, Option<corelane::xdp::Ceiling>);

    impl VethNs {
        fn new() -> Option<Self> {
            let mut ns = Self(format!("corelane-{}-napi", std::process::id()), None);
            let ip =
                |args: &[&str]| Command::new("ip").args(args).status().is_ok_and(|s| s.success());
            let made = ip(&["netns", "add", &ns.0])
                && ip(&[
                    "-n", &ns.0, "link", "add", "cnr0", "type", "veth", "peer", "name", "cnt0",
                ])
                && ip(&["-n", &ns.0, "link", "set", "cnr0", "up"])
                && ip(&["-n", &ns.0, "link", "set", "cnt0", "up"]);
            let path = format!("/run/netns/{}", ns.0);
            // XDP gives veth its NAPI; attached from a thread inside the namespace.
            ns.1 = std::thread::spawn(move || {
                let file = std::fs::File::open(&path).ok()?;
                rustix::thread::move_into_link_name_space(
                    std::os::fd::AsFd::as_fd(&file),
                    Some(rustix::thread::LinkNameSpaceType::Network),
                )
                .ok()?;
                corelane::xdp::Ceiling::attach("cnr0", "10.9.9.9:9".parse().unwrap()).ok()
            })
            .join()
            .ok()
            .flatten();
            (made && ns.1.is_some()).then_some(ns)
        }
    }

    impl Drop for VethNs {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }

    /// Field 41 of /proc/PID/stat: the scheduling policy (0 SCHED_OTHER, 1 SCHED_FIFO).
    fn policy(pid: u32) -> u32 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
        // Fields from 3 on; the policy is field 41.
        after_comm.split(' ').nth(41 - 3).unwrap().parse().unwrap()
    }

    /// The NAPI threads the AF_XDP rows charge share the lanes' CPU at SCHED_OTHER: at
    /// SCHED_FIFO they kept the lane off its CPU for as long as a sender's burst lasted.
    #[test]
    fn napi_threads_are_pinned_and_leave_the_lanes_their_share() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: needs root (a network namespace, threaded NAPI)");
            return;
        }
        let Some(ns) = VethNs::new() else {
            eprintln!("skipped: cannot put XDP on a veth pair in a namespace here");
            return;
        };
        let before = NapiThreads::before("cnr0");
        let napi = NapiThreads::pin(&Host::Namespace(ns.0.clone()), "cnr0", &before, 0).unwrap();
        assert!(!napi.pids.is_empty());
        for &pid in &napi.pids {
            assert_eq!(policy(pid), 0, "napi thread {pid} is not SCHED_OTHER");
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
            assert!(status.contains("Cpus_allowed_list:\t0\n"), "not pinned to CPU 0: {status}");
        }
    }
}
