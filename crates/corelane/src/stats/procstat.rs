//! Per-CPU time from /proc/stat: where the cycles went (user, system, softirq, idle), which is
//! how the lab shows that receive work ran on the sender's CPU or on the receiver's.

use std::fs;
use std::io;
use std::path::Path;

/// Cumulative jiffies of one CPU, as /proc/stat lists them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTimes {
    fn total(&self) -> u64 {
        [self.nice, self.system, self.idle, self.iowait, self.irq, self.softirq, self.steal]
            .into_iter()
            .fold(self.user, u64::saturating_add)
    }

    fn since(&self, earlier: &Self) -> Self {
        Self {
            user: self.user.saturating_sub(earlier.user),
            nice: self.nice.saturating_sub(earlier.nice),
            system: self.system.saturating_sub(earlier.system),
            idle: self.idle.saturating_sub(earlier.idle),
            iowait: self.iowait.saturating_sub(earlier.iowait),
            irq: self.irq.saturating_sub(earlier.irq),
            softirq: self.softirq.saturating_sub(earlier.softirq),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }
}

/// Busy shares of one CPU over an interval, in percent.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct CpuSplit {
    pub cpu: usize,
    pub user_pct: f64,
    pub sys_pct: f64,
    /// softirq + hardirq: the kernel's receive path.
    pub softirq_pct: f64,
    pub idle_pct: f64,
}

/// A snapshot of /proc/stat's per-CPU lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcStat {
    pub cpus: Vec<(usize, CpuTimes)>,
}

impl ProcStat {
    pub fn read() -> io::Result<Self> {
        Self::read_from(Path::new("/proc/stat"))
    }

    pub fn read_from(path: &Path) -> io::Result<Self> {
        Ok(Self::parse(&fs::read_to_string(path)?))
    }

    /// Parses the `cpuN` lines of /proc/stat text from anywhere (a remote host's reply too):
    /// a CPU number past [`CpuList::MAX_CPU`](crate::topology::CpuList::MAX_CPU) or seen
    /// before is skipped, so no text makes more entries than CPUs Linux can have.
    pub fn parse(text: &str) -> Self {
        let mut seen = std::collections::BTreeSet::new();
        let cpus = text
            .lines()
            .filter_map(|line| {
                let mut fields = line.split_ascii_whitespace();
                let cpu: usize = fields.next()?.strip_prefix("cpu")?.parse().ok()?;
                if cpu >= crate::topology::CpuList::MAX_CPU || !seen.insert(cpu) {
                    return None;
                }
                let v: Vec<u64> = fields.map(|f| f.parse().unwrap_or(0)).collect();
                let at = |i: usize| v.get(i).copied().unwrap_or(0);
                Some((
                    cpu,
                    CpuTimes {
                        user: at(0),
                        nice: at(1),
                        system: at(2),
                        idle: at(3),
                        iowait: at(4),
                        irq: at(5),
                        softirq: at(6),
                        steal: at(7),
                    },
                ))
            })
            .collect();
        Self { cpus }
    }

    /// Each CPU's split between `earlier` and this snapshot.
    pub fn split_since(&self, earlier: &Self) -> Vec<CpuSplit> {
        self.cpus
            .iter()
            .filter_map(|(cpu, now)| {
                let (_, then) = earlier.cpus.iter().find(|(c, _)| c == cpu)?;
                let d = now.since(then);
                let total = d.total().max(1) as f64;
                let pct = |x: u64| 100.0 * x as f64 / total;
                Some(CpuSplit {
                    cpu: *cpu,
                    user_pct: pct(d.user.saturating_add(d.nice)),
                    sys_pct: pct(d.system),
                    softirq_pct: pct(d.softirq.saturating_add(d.irq)),
                    idle_pct: pct(d.idle.saturating_add(d.iowait)),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "cpu  10 0 10 100 0 0 0 0 0 0\ncpu0 5 0 5 50 0 0 0 0 0 0\ncpu1 5 0 5 50 0 0 0 0 0 0\nintr 1\n";
    const AFTER: &str =
        "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 5 0 55 50 0 0 50 0 0 0\ncpu1 30 0 30 100 0 0 0 0 0 0\n";

    #[test]
    fn splits_per_cpu_busy_time() {
        let split = ProcStat::parse(AFTER).split_since(&ProcStat::parse(BEFORE));
        assert_eq!(split.len(), 2);
        assert_eq!((split[0].sys_pct, split[0].softirq_pct, split[0].idle_pct), (50.0, 50.0, 0.0));
        assert_eq!((split[1].user_pct, split[1].sys_pct, split[1].idle_pct), (25.0, 25.0, 50.0));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// /proc/stat as a hostile host may answer it: huge counters, junk, cut lines.
        #[test]
        fn any_proc_stat_text_parses_and_splits_without_panic(
            rows in proptest::collection::vec((0usize..4, proptest::collection::vec(proptest::prelude::any::<u64>(), 0..10)), 0..6),
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
        ) {
            let mut text = String::new();
            for (cpu, fields) in &rows {
                text.push_str(&format!("cpu{cpu}"));
                for f in fields {
                    text.push_str(&format!(" {f}"));
                }
                text.push('\n');
            }
            text.push_str(&String::from_utf8_lossy(&junk));
            text.push_str("\ncpu99999 1 2 3\ncpu18446744073709551616 1\n");
            let now = ProcStat::parse(&text);
            proptest::prop_assert!(now.cpus.len() <= 4);
            let zero = ProcStat { cpus: now.cpus.iter().map(|(c, _)| (*c, CpuTimes::default())).collect() };
            let _ = now.split_since(&zero);
            let _ = zero.split_since(&now);
            let _ = now.split_since(&now);
        }
    }

    #[test]
    fn reads_the_real_file() {
        let stat = ProcStat::read().unwrap();
        assert!(!stat.cpus.is_empty());
    }
}
