//! A row's load over several load hosts: split (rate and flows, each host its own range of
//! flow ids so the receiver keeps them apart) and started on all of them at one agreed time.
//! The controller picks the time on its own clock a little ahead, and each host's guard gets
//! it in that host's clock (the measured offset added), so the senders start together even
//! though their clocks, and the ssh sessions that start them, do not agree.

use std::time::Duration;

use corelane::udp::FlowGroup;
use serde::Serialize;

use crate::process::ChildProcess;
use crate::remote::clock::{self, ClockOffset};
use crate::testbed::LoadHost;
use crate::LabError;

/// One load host's part of a row's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    /// Datagrams (or requests) per second it offers.
    pub rate: u64,
    /// Flows it opens, with ids from `first_flow` on.
    pub flows: usize,
    pub first_flow: u32,
}

impl Share {
    /// Its flow ids, for the receiver to count apart (`udp recv --flow-groups`).
    pub fn flow_group(&self) -> FlowGroup {
        let last = self.first_flow.saturating_add((self.flows.max(1) - 1) as u32);
        FlowGroup { first: self.first_flow, last }
    }
}

/// `total` in `parts` parts (at least one) that differ by at most one, the larger first.
pub fn split(total: u64, parts: usize) -> Vec<u64> {
    let n = parts.max(1) as u64;
    (0..n).map(|i| total / n + u64::from(i < total % n)).collect()
}

/// `rate` and `flows` over `hosts` load hosts: parts that differ by at most one, the larger
/// first; every host gets at least one flow.
pub fn shares(rate: u64, flows: usize, hosts: usize) -> Vec<Share> {
    let n = hosts.max(1);
    let rates = split(rate, n);
    let mut first_flow = 0u32;
    (0..n)
        .map(|i| {
            let share = Share {
                rate: rates[i],
                flows: (flows / n + usize::from(i < flows % n)).max(1),
                first_flow,
            };
            first_flow = first_flow.saturating_add(share.flows as u32);
            share
        })
        .collect()
}

/// How far ahead of now the agreed start lies: enough for every host's ssh session and
/// guard to be up (twice the slowest control round trip on top), well within the receiver's
/// warm-up second.
fn start_margin(load: &[LoadHost]) -> Duration {
    let slowest = load.iter().filter_map(|l| l.clock).map(|c| c.rtt_ns).max().unwrap_or(0);
    Duration::from_millis(300) + Duration::from_nanos(slowest.saturating_mul(2))
}

/// One load host's figures in one trial.
#[derive(Debug, Clone, Serialize)]
pub struct HostFigures {
    pub host: String,
    /// What it was asked to offer (per second).
    pub offered_pps: f64,
    /// What it sent: its mean rate over the trial.
    pub sent_pps: f64,
    /// What arrived of it: the row's received rate times its flows' part of every datagram
    /// the receiver counted (`None`: the row's receiver reads no datagram, XDP_DROP).
    pub received_pps: Option<f64>,
    /// Its datagrams that never arrived: gaps in its flows' sequence numbers at the receiver.
    pub missing: Option<u64>,
    /// Its sender's CPU time (user + system) per datagram sent.
    pub cpu_ns_per_datagram: f64,
    #[serde(flatten)]
    pub clock: HostClock,
}

/// A load host's clock against the controller's when the run began, as a row records it
/// (absent: the controller or the namespace testbed, one clock).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct HostClock {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_offset_ns: Option<i64>,
    /// The round trip that offset was measured over (it is known to within half of it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_rtt_ns: Option<u64>,
}

impl HostClock {
    pub fn of(clock: Option<ClockOffset>) -> Self {
        Self { clock_offset_ns: clock.map(|c| c.offset_ns), clock_rtt_ns: clock.map(|c| c.rtt_ns) }
    }

    /// ", clock +0.1 ms (±0.1)" for a report line, or nothing without a measured clock.
    pub fn suffix(&self) -> String {
        match (self.clock_offset_ns, self.clock_rtt_ns) {
            (Some(off), Some(rtt)) => {
                format!(", clock {:+.1} ms (±{:.1})", off as f64 / 1e6, rtt as f64 / 2e6)
            }
            _ => String::new(),
        }
    }
}

/// One load host's figures in one HTTP measurement (`corelane load` there).
#[derive(Debug, Clone, Serialize)]
pub struct HttpHostFigures {
    pub host: String,
    /// Its part of the row's connections.
    pub connections: u64,
    /// Requests per second it completed.
    pub rps: f64,
    /// Its own latency percentiles, in microseconds.
    pub p50_us: f64,
    pub p99_us: f64,
    /// Connection errors, timeouts and non-2xx answers it saw.
    pub errors: u64,
    #[serde(flatten)]
    pub clock: HostClock,
}

/// Each host's HTTP figures over several trials: medians, its connections and clock as in
/// the first trial, errors summed.
pub fn http_medians(trials: &[&[HttpHostFigures]]) -> Vec<HttpHostFigures> {
    per_host(trials, |host, same| HttpHostFigures {
        rps: crate::median_of(same.iter().map(|h| h.rps)),
        p50_us: crate::median_of(same.iter().map(|h| h.p50_us)),
        p99_us: crate::median_of(same.iter().map(|h| h.p99_us)),
        errors: same.iter().map(|h| h.errors).sum(),
        ..host.clone()
    })
}

/// One value per load host over several trials: `merge` makes it from the host's figures
/// in the first trial that has any and its figures in every such trial (hosts are in the
/// same order in each; a trial whose load failed everywhere has none, and no part).
pub(crate) fn per_host<T>(trials: &[&[T]], merge: impl Fn(&T, &[&T]) -> T) -> Vec<T> {
    let Some(first) = trials.iter().find(|t| !t.is_empty()) else { return Vec::new() };
    let same = |i: usize| -> Vec<&T> { trials.iter().filter_map(|t| t.get(i)).collect() };
    first.iter().enumerate().map(|(i, host)| merge(host, &same(i))).collect()
}

/// One host's HTTP figures as a line of a report.
pub fn http_host_line(h: &HttpHostFigures) -> String {
    let clock = h.clock.suffix();
    format!(
        "{}: {} connections, {:.0} req/s, p50 {:.0} us, p99 {:.0} us, {} errors{clock}",
        h.host, h.connections, h.rps, h.p50_us, h.p99_us, h.errors
    )
}

/// One host's figures as a line of a report: offered, sent, sender CPU and clock.
pub fn host_line(h: &HostFigures) -> String {
    let clock = h.clock.suffix();
    format!(
        "{}: offered {:.3} Mpps, sent {:.3} Mpps, {}sender {:.0} ns CPU/datagram{clock}",
        h.host,
        h.offered_pps / 1e6,
        h.sent_pps / 1e6,
        match (h.received_pps, h.missing) {
            (Some(pps), Some(missing)) => {
                format!("received {:.3} Mpps ({missing} missing), ", pps / 1e6)
            }
            _ => String::new(),
        },
        h.cpu_ns_per_datagram
    )
}

/// Each host's figures over several trials: medians of what it sent, got through and spent,
/// its missing datagrams summed, its offered load and clock as in the first trial.
pub fn medians(trials: &[&[HostFigures]]) -> Vec<HostFigures> {
    per_host(trials, |host, same| HostFigures {
        sent_pps: crate::median_of(same.iter().map(|h| h.sent_pps)),
        received_pps: same
            .iter()
            .map(|h| h.received_pps)
            .collect::<Option<Vec<f64>>>()
            .map(crate::median_of),
        missing: same.iter().map(|h| h.missing).sum(),
        cpu_ns_per_datagram: crate::median_of(same.iter().map(|h| h.cpu_ns_per_datagram)),
        ..host.clone()
    })
}

/// Starts `argv(i)` (program and arguments) as `name` on every load host: at once on a
/// single host without a measured clock, else on all at one agreed time. Every host's guard
/// is started before any is awaited, so no host's session waits for another's. Any host's
/// failure ends the ones already started (they are dropped) and is returned naming its host.
pub fn start_all(
    load: &[LoadHost],
    name: &str,
    argv: impl Fn(usize) -> Result<(String, Vec<String>), LabError>,
) -> Result<Vec<ChildProcess>, LabError> {
    let argvs: Vec<(String, Vec<String>)> = (0..load.len()).map(&argv).collect::<Result<_, _>>()?;
    if load.iter().all(|l| l.clock.is_none()) {
        return load
            .iter()
            .zip(&argvs)
            .map(|(l, (program, args))| l.host.spawn(name, program, args))
            .collect();
    }
    let start = clock::now_ns() + start_margin(load).as_nanos() as i128;
    let mut started = Vec::new();
    for (l, (program, args)) in load.iter().zip(&argvs) {
        let offset = l.clock.map_or(0, |c| i128::from(c.offset_ns));
        let at = u64::try_from(start + offset).unwrap_or(0);
        started.push(l.host.spawn_at(name, program, args, at)?);
    }
    for child in &mut started {
        child.await_guard_pid()?;
    }
    Ok(started)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_load_is_split_evenly_and_the_flows_kept_apart() {
        let s = shares(1_500_001, 8, 2);
        assert_eq!(s.iter().map(|s| s.rate).sum::<u64>(), 1_500_001);
        assert_eq!(
            s,
            vec![
                Share { rate: 750_001, flows: 4, first_flow: 0 },
                Share { rate: 750_000, flows: 4, first_flow: 4 }
            ]
        );
        let three = shares(10, 8, 3);
        assert_eq!(three.iter().map(|s| s.flows).collect::<Vec<_>>(), [3, 3, 2]);
        assert_eq!(three.iter().map(|s| s.first_flow).collect::<Vec<_>>(), [0, 3, 6]);
        assert_eq!(shares(7, 8, 1), vec![Share { rate: 7, flows: 8, first_flow: 0 }]);
        // More hosts than flows: each still gets one flow of its own.
        let many = shares(100, 2, 4);
        assert!(many.iter().all(|s| s.flows == 1));
        assert_eq!(many.iter().map(|s| s.first_flow).collect::<Vec<_>>(), [0, 1, 2, 3]);
        // Each host's flow ids, as the receiver counts them apart: adjacent, never shared.
        let groups: Vec<(u32, u32)> =
            three.iter().map(|s| s.flow_group()).map(|g| (g.first, g.last)).collect();
        assert_eq!(groups, [(0, 2), (3, 5), (6, 7)]);
    }

    /// A trial whose load failed everywhere (no per-host figures) does not take the hosts'
    /// parts away from the row, wherever it falls.
    #[test]
    fn a_failed_trial_leaves_the_hosts_parts_of_the_others() {
        let ok: &[(&str, u64)] = &[("a", 10), ("b", 30)];
        let merged = per_host(&[&[][..], ok, ok], |h: &(&str, u64), same| {
            (h.0, same.iter().map(|s| s.1).sum())
        });
        assert_eq!(merged, [("a", 20), ("b", 60)]);
    }

    proptest::proptest! {
        #[test]
        fn any_split_adds_up_and_never_overlaps(rate in proptest::prelude::any::<u64>(), flows in 0usize..100, hosts in 0usize..40) {
            let s = shares(rate, flows, hosts);
            proptest::prop_assert_eq!(s.iter().map(|s| u128::from(s.rate)).sum::<u128>(), u128::from(rate));
            for w in s.windows(2) {
                proptest::prop_assert_eq!(w[1].first_flow, w[0].first_flow + w[0].flows as u32);
            }
        }
    }
}
