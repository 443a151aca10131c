//! Changing the rx host's NIC for a row, as a user would: `corelane plan --nic NIC` with the
//! row's receive CPUs as its interrupt CPUs (queue interrupts spread over them, as many
//! channels, UDP hashed on ports, or RPS where the NIC has no interrupts of its own), then
//! `corelane apply PLAN --yes --revert FILE` on that host, with the revert file kept there. A keeper (`corelane guard --revert-on-close FILE`) holds it: when
//! the lab lets go — or dies, or loses the connection — the keeper restores what the file
//! saved. Between rows the lab restores the previous row's change itself before the next.

use corelane::topology::CpuList;
use corelane::tune::{DevicePlan, Plan};

use crate::host::Host;
use crate::process::ChildProcess;
use crate::LabError;

use crate::remote::guard::is_nic_dir;
use crate::remote::{Remote, MAX_LIFE};

/// Checks an interface name a remote host printed as one the user gives is checked
/// ([`IfName`](corelane::tune::IfName): 1 to 15 bytes, no `/`, `:`, whitespace or NUL), and
/// refuses a leading `-`, which a command on the host would read as an option.
pub fn check_name(name: &str) -> Result<(), String> {
    let shown = corelane::child_output::printable(&format!("{name:?}"), 100);
    corelane::tune::IfName::parse(name).map_err(|_| {
        format!("{shown}, which is not an interface name (1 to 15 bytes, none of them '/', ':', whitespace or NUL)")
    })?;
    if name.starts_with('-') {
        return Err(format!("{shown}, which starts with '-' (an option to any command there)"));
    }
    Ok(())
}

/// One NIC of a remote host under the lab's control for a run.
#[derive(Debug)]
pub struct RemoteNic {
    host: Host,
    corelane: String,
    nic: String,
    /// The private directory (on the host) holding the plan and the revert file.
    dir: String,
    keeper: Option<ChildProcess>,
    /// Addresses (`ADDR/PREFIX`) every row's plan adds on the NIC (`--rx-add-addr`).
    addresses: Vec<String>,
    /// Whether the driver counts packets per RX queue (read through `corelane topo` there).
    per_queue: bool,
    /// The receive steering in force now (`None`: the NIC as found).
    steering: Option<CpuList>,
}

impl RemoteNic {
    /// Takes `nic` on `remote` (connected as `host`) for the run.
    pub fn open(
        host: &Host,
        remote: &Remote,
        nic: &str,
        addresses: &[(std::net::IpAddr, u8)],
    ) -> Result<Self, LabError> {
        let uid = host.run("id", &["-u"])?;
        if uid.trim() != "0" {
            return Err(LabError::Remote {
                host: host.name(),
                problem: format!(
                    "logs in as uid {}, and the rows change {nic} (receive steering), which needs root there: log in as root (--rx-host root@HOST)",
                    uid.trim()
                ),
            });
        }
        let corelane = remote.corelane().to_string();
        // A plan now: the NIC is one `corelane plan` can place, before anything is started.
        plan_for(host, &corelane, nic, None)?;
        let per_queue = !queue_packets(host, &corelane, nic)?.is_empty();
        let dir = host
            .run("sh", &["-c", "umask 077; mktemp -d /tmp/corelane-nic.XXXXXXXX"])?
            .trim()
            .to_string();
        if !is_nic_dir(&dir) {
            return Err(LabError::Remote {
                host: host.name(),
                problem: format!("mktemp printed {dir:?}: is /tmp writable there?"),
            });
        }
        let mut this = Self {
            host: host.clone(),
            corelane,
            nic: nic.into(),
            dir,
            keeper: None,
            addresses: addresses.iter().map(|(a, p)| format!("{a}/{p}")).collect(),
            per_queue,
            steering: None,
        };
        // The keeper first: a change is only ever made while something will undo it.
        let args = [
            "guard".to_string(),
            "--life".into(),
            format!("{}s", MAX_LIFE.as_secs()),
            "--revert-on-close".into(),
            this.revert_file(),
        ];
        this.keeper = Some(ChildProcess::spawn_guarded(
            "the NIC keeper",
            &host.name(),
            &remote.session_argv(&this.corelane, &args),
        )?);
        Ok(this)
    }

    fn revert_file(&self) -> String {
        format!("{}/revert.json", self.dir)
    }

    /// Steers the NIC's receive work to `cpus`, and adds the `--rx-add-addr` addresses,
    /// through a plan applied on the host (an empty list: the NIC as found); the previous
    /// row's change is restored first.
    pub fn steer_receive(&mut self, cpus: &CpuList) -> Result<(), LabError> {
        if self.steering.as_ref() == Some(cpus) {
            return Ok(());
        }
        self.restore()?;
        if cpus.is_empty() {
            return Ok(());
        }
        let path = self.write_plan(cpus)?;
        let revert = self.revert_file();
        self.host.run(&self.corelane, &["apply", &path, "--yes", "--revert", &revert])?;
        self.steering = Some(cpus.clone());
        Ok(())
    }

    /// What steering to `cpus` would change on the host, as `corelane apply` (dry run) shows
    /// it there; nothing is changed.
    pub fn preview(&self, cpus: &CpuList) -> Result<String, LabError> {
        let path = self.write_plan(cpus)?;
        let shown = self.host.run(&self.corelane, &["apply", &path]);
        self.host.run("rm", &["-f", "--", &path])?;
        shown
    }

    /// The row's plan, written into the private directory on the host; its path.
    fn write_plan(&self, cpus: &CpuList) -> Result<String, LabError> {
        let mut plan = receive_only(plan_for(&self.host, &self.corelane, &self.nic, Some(cpus))?);
        plan.addresses.clone_from(&self.addresses);
        let path = format!("{}/plan.json", self.dir);
        self.host.write_file(&path, &serde_json::to_string_pretty(&plan)?)?;
        Ok(path)
    }

    /// Puts the NIC back as found (the revert file of the change in force, if any).
    pub fn restore(&mut self) -> Result<(), LabError> {
        if self.steering.take().is_some() {
            let revert = self.revert_file();
            self.host.run(&self.corelane, &["revert", &revert])?;
            self.host.run("rm", &["-f", "--", &revert])?;
        }
        Ok(())
    }

    pub fn name(&self) -> &str {
        &self.nic
    }

    /// The NIC's own receive counters (sysfs statistics): packets, drops, misses.
    pub fn counters(&self) -> Result<NicCounters, LabError> {
        let script =
            "cd \"/sys/class/net/$1/statistics\" && cat rx_packets rx_dropped rx_missed_errors";
        let text = self.host.run("sh", &["-c", script, "sh", &self.nic])?;
        match parse_counters(&text).as_deref() {
            Some(&[packets, dropped, missed]) => {
                let queues = match self.per_queue {
                    true => queue_packets(&self.host, &self.corelane, &self.nic)?,
                    false => Vec::new(),
                };
                Ok(NicCounters { packets, dropped, missed, queues })
            }
            _ => Err(LabError::Remote {
                host: self.host.name(),
                problem: format!(
                    "{}'s statistics read {:?}, not three counters",
                    self.nic,
                    corelane::child_output::printable(&text, 200)
                ),
            }),
        }
    }
}

/// A NIC's receive counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NicCounters {
    pub packets: u64,
    pub dropped: u64,
    pub missed: u64,
    /// Packets per RX queue, where the driver counts them (empty elsewhere).
    pub queues: Vec<u64>,
}

/// What the NIC counted per second over a window: packets received, dropped by the kernel
/// for the NIC (rx_dropped), missed by the NIC itself (rx_missed_errors, full rings).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct NicRates {
    pub rx_packets_per_sec: f64,
    pub rx_dropped_per_sec: f64,
    pub rx_missed_per_sec: f64,
    /// Packets per second per RX queue, where the driver counts them (ethtool -S names).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rx_queue_packets_per_sec: Vec<f64>,
}

impl NicCounters {
    pub fn rates_since(&self, earlier: &Self, secs: f64) -> NicRates {
        let per = |now: u64, then: u64| now.saturating_sub(then) as f64 / secs.max(1e-9);
        NicRates {
            rx_packets_per_sec: per(self.packets, earlier.packets),
            rx_dropped_per_sec: per(self.dropped, earlier.dropped),
            rx_missed_per_sec: per(self.missed, earlier.missed),
            rx_queue_packets_per_sec: match self.queues.len() == earlier.queues.len() {
                true => self.queues.iter().zip(&earlier.queues).map(|(n, t)| per(*n, *t)).collect(),
                false => Vec::new(),
            },
        }
    }
}

impl Drop for RemoteNic {
    fn drop(&mut self) {
        let _ = self.restore();
        // Closing the keeper's stdin: it restores whatever is still saved, then ends.
        drop(self.keeper.take());
        let _ = self.host.run("rm", &["-rf", "--", &self.dir]);
    }
}

/// The NIC's packets per RX queue as `corelane topo --json` reads them on the host (empty
/// where the driver does not count them per queue).
fn queue_packets(host: &Host, corelane: &str, nic: &str) -> Result<Vec<u64>, LabError> {
    let reply = crate::topo::read(host, corelane)?;
    reply
        .topology
        .rx_queue_packets(nic)
        .map_err(|problem| LabError::Remote { host: host.name(), problem })
}

/// Whitespace-separated counters, every word one (`None` otherwise).
fn parse_counters(text: &str) -> Option<Vec<u64>> {
    text.split_whitespace().map(|w| w.parse().ok()).collect()
}

/// `corelane plan --nic NIC` on the host, with `cpus` as every role's CPUs when given (the
/// row's receive CPUs take the queue interrupts, or RPS on a NIC without interrupts).
fn plan_for(
    host: &Host,
    corelane: &str,
    nic: &str,
    cpus: Option<&CpuList>,
) -> Result<Plan, LabError> {
    let mut args: Vec<String> = ["plan", "--nic", nic, "--format", "json"].map(String::from).into();
    if let Some(cpus) = cpus {
        let list = cpus.to_string();
        args.extend(["--policy".into(), "custom".into()]);
        for role in ["--irq-cpus", "--syscall-cpus", "--app-cpus"] {
            args.extend([role.to_string(), list.clone()]);
        }
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let text = host.run(corelane, &args)?;
    let plan: Plan = serde_json::from_str(&text).map_err(|e| LabError::Remote {
        host: host.name(),
        problem: format!("`corelane plan --nic {nic}` printed no plan the lab can read: {e}"),
    })?;
    if plan.device.nic != nic {
        return Err(LabError::Remote {
            host: host.name(),
            problem: format!(
                "`corelane plan --nic {nic}` printed a plan for {:?}: is the corelane there a real one?",
                corelane::child_output::printable(&plan.device.nic, 100)
            ),
        });
    }
    Ok(plan)
}

/// A plan reduced to what steers receive work: queue interrupts, the queue count, UDP flow
/// hashing on ports and RPS (also of the devices below a stacked one); transmit steering (XPS) and
/// interrupt moderation left as they are.
fn receive_only(mut plan: Plan) -> Plan {
    let keep_receive =
        |device: &DevicePlan| DevicePlan { xps_cpus: Vec::new(), rx_usecs: None, ..device.clone() };
    plan.lower = plan.lower.iter().map(keep_receive).collect();
    plan.device = keep_receive(&plan.device);
    plan.notes.push("corelane lab: receive steering only, for one row".into());
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_interface_names_are_refused_and_real_ones_kept() {
        for bad in
            ["../x", "a b", "abcdefghijklmnopqrst", "a\0b", "-oProxyCommand", "", "..", "a:1"]
        {
            let err = check_name(bad).unwrap_err();
            assert!(!err.contains('\n') && !err.contains('\0'), "{err}");
        }
        for good in ["eth0", "enp0s31f6", "ens3.100", "br-1a2b", "d0"] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
    }

    #[test]
    fn counters_are_read_strictly() {
        assert_eq!(parse_counters("1\n2\n3\n"), Some(vec![1, 2, 3]));
        assert_eq!(parse_counters("1 x 2 3"), None);
        assert_eq!(parse_counters("99999999999999999999"), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Any reply where counters belong parses or is refused, never panics.
        #[test]
        fn any_counters_reply_parses_without_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
        ) {
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse_counters(&text);
            let _ = check_name(&text);
        }
    }

    #[test]
    fn a_row_plan_changes_only_receive_steering() {
        let hash =
            |flow: &str| corelane::tune::FlowHash { flow: flow.into(), fields: "sdfn".into() };
        let base = Plan {
            device: DevicePlan {
                nic: "eth0".into(),
                rps_cpus: "0".into(),
                xps_cpus: vec!["1".into()],
                irqs: vec![corelane::tune::IrqPlacement { irq: 30, name: "q0".into(), cpu: 0 }],
                queue_count: Some(2),
                rx_flow_hash: vec![hash("udp4")],
                rx_usecs: Some(50),
            },
            policy: "spread".into(),
            numa_node: None,
            irq_cpus: "0".into(),
            syscall_cpus: "1".into(),
            app_cpus: "1".into(),
            notes: Vec::new(),
            lower: Vec::new(),
            addresses: Vec::new(),
        };
        let plan = receive_only(base);
        let top = &plan.device;
        assert_eq!(top.rps_cpus, "0");
        assert_eq!(top.irqs.len(), 1);
        assert!(top.xps_cpus.is_empty());
        assert_eq!((top.queue_count, top.rx_usecs), (Some(2), None));
        assert_eq!(top.rx_flow_hash, vec![hash("udp4")]);
        assert!(is_nic_dir("/tmp/corelane-nic.AbCd1234"));
        assert!(!is_nic_dir("/tmp/corelane-nic./../x"));
    }
}
