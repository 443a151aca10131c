//! Changing the rx host's NIC for a row, as a user would: `corelane plan --nic NIC`, edited to
//! the row's setting, then `corelane apply PLAN --yes --revert FILE` on that host, with the
//! revert file kept there. A keeper (`corelane guard --revert-on-close FILE`) holds it: when
//! the lab lets go — or dies, or loses the connection — the keeper restores what the file
//! saved. Between rows the lab restores the previous row's change itself before the next.

use corelane::topology::CpuList;
use corelane::tune::{DevicePlan, Plan};

use crate::host::Host;
use crate::process::ChildProcess;
use crate::LabError;

use super::guard::is_nic_dir;
use super::{Remote, MAX_LIFE};

/// One NIC of a remote host under the lab's control for a run.
#[derive(Debug)]
pub struct RemoteNic {
    host: Host,
    corelane: String,
    nic: String,
    /// The private directory (on the host) holding the plan and the revert file.
    dir: String,
    /// The plan `corelane plan` proposed, as the base every row's plan edits.
    base: Plan,
    keeper: Option<ChildProcess>,
    /// The receive steering in force now (`None`: the NIC as found).
    steering: Option<CpuList>,
}

impl RemoteNic {
    /// Takes `nic` on `remote` (connected as `host`) for the run.
    pub fn open(host: &Host, remote: &Remote, nic: &str) -> Result<Self, LabError> {
        let corelane = remote.corelane().to_string();
        let plan = host.run(&corelane, &["plan", "--nic", nic, "--format", "json"])?;
        let base: Plan = serde_json::from_str(&plan).map_err(|e| LabError::Remote {
            host: host.name(),
            problem: format!("`corelane plan --nic {nic}` printed no plan the lab can read: {e}"),
        })?;
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
            base,
            keeper: None,
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

    /// Steers receive work of every RX queue to `cpus` (RPS; an empty list turns it off),
    /// through a plan applied on the host; the previous row's change is restored first.
    pub fn steer_receive(&mut self, cpus: &CpuList) -> Result<(), LabError> {
        if self.steering.as_ref() == Some(cpus) {
            return Ok(());
        }
        self.restore()?;
        let plan = rps_only(&self.base, cpus);
        let path = format!("{}/plan.json", self.dir);
        let json = serde_json::to_string_pretty(&plan)?;
        self.host.write_file(&path, &json)?;
        let revert = self.revert_file();
        self.host.run(&self.corelane, &["apply", &path, "--yes", "--revert", &revert])?;
        self.steering = Some(cpus.clone());
        Ok(())
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
            "cd /sys/class/net/$1/statistics && cat rx_packets rx_dropped rx_missed_errors";
        let text = self.host.run("sh", &["-c", script, "sh", &self.nic])?;
        let v: Vec<u64> = text.split_whitespace().filter_map(|w| w.parse().ok()).collect();
        match v[..] {
            [packets, dropped, missed] => Ok(NicCounters { packets, dropped, missed }),
            _ => Err(LabError::Remote {
                host: self.host.name(),
                problem: format!("{}'s statistics read {text:?}", self.nic),
            }),
        }
    }
}

/// A NIC's receive counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NicCounters {
    pub packets: u64,
    pub dropped: u64,
    pub missed: u64,
}

/// What the NIC counted per second over a window: packets received, dropped by the kernel
/// for the NIC (rx_dropped), missed by the NIC itself (rx_missed_errors, full rings).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct NicRates {
    pub rx_packets_per_sec: f64,
    pub rx_dropped_per_sec: f64,
    pub rx_missed_per_sec: f64,
}

impl NicCounters {
    pub fn rates_since(&self, earlier: &Self, secs: f64) -> NicRates {
        let per = |now: u64, then: u64| now.saturating_sub(then) as f64 / secs.max(1e-9);
        NicRates {
            rx_packets_per_sec: per(self.packets, earlier.packets),
            rx_dropped_per_sec: per(self.dropped, earlier.dropped),
            rx_missed_per_sec: per(self.missed, earlier.missed),
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

/// The base plan reduced to one setting: every RX queue's RPS mask (and that of the devices
/// below a stacked one); interrupts, XPS, queues, hashing and moderation left as they are.
fn rps_only(base: &Plan, cpus: &CpuList) -> Plan {
    let mask = cpus.to_mask();
    let only_rps = |device: &DevicePlan| DevicePlan {
        nic: device.nic.clone(),
        rps_cpus: mask.clone(),
        xps_cpus: Vec::new(),
        irqs: Vec::new(),
        queue_count: None,
        rx_flow_hash: Vec::new(),
        rx_usecs: None,
    };
    let mut plan = base.clone();
    plan.lower = plan.lower.iter().map(only_rps).collect();
    let top = only_rps(&base.devices()[0]);
    (plan.rps_cpus, plan.xps_cpus, plan.irqs) = (top.rps_cpus, top.xps_cpus, top.irqs);
    (plan.queue_count, plan.rx_flow_hash, plan.rx_usecs) =
        (top.queue_count, top.rx_flow_hash, top.rx_usecs);
    plan.notes.push("corelane lab: receive steering (RPS) only, for one row".into());
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_plan_changes_only_receive_steering() {
        let base = Plan {
            nic: "eth0".into(),
            policy: "spread".into(),
            numa_node: None,
            irq_cpus: "0".into(),
            syscall_cpus: "1".into(),
            app_cpus: "1".into(),
            rps_cpus: "0".into(),
            xps_cpus: vec!["1".into()],
            irqs: vec![corelane::tune::IrqPlacement { irq: 30, name: "q0".into(), cpu: 0 }],
            queue_count: Some(2),
            rx_flow_hash: Vec::new(),
            rx_usecs: Some(50),
            notes: Vec::new(),
            lower: Vec::new(),
        };
        let plan = rps_only(&base, &"0-1".parse().unwrap());
        assert_eq!(plan.rps_cpus, "3");
        assert!(plan.irqs.is_empty() && plan.xps_cpus.is_empty());
        assert_eq!((plan.queue_count, plan.rx_usecs), (None, None));
        assert!(is_nic_dir("/tmp/corelane-nic.AbCd1234"));
        assert!(!is_nic_dir("/tmp/corelane-nic./../x"));
    }
}
