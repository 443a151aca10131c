//! `lab latency` over several load hosts: the first is the ping-pong host (its client's
//! round trips are a point's), and under load every host offers its share of the rate,
//! started together; each point keeps every host's part beside the totals.

use super::point::{HostPoint, Point};
use crate::stage::load::{self, HostClock};
use crate::testbed::LoadHost;
use crate::LabError;

/// Each load host's rate at one point: ping-pong (`None`) on the first host alone; an
/// offered `rate` in parts over all of them, differing by at most one. A rate too small to
/// give every host a part is refused, naming the fix.
pub fn shares(rate: Option<u64>, load: &[LoadHost]) -> Result<Vec<Option<u64>>, LabError> {
    let Some(rate) = rate else { return Ok(vec![None]) };
    let parts = load::split(rate, load.len());
    if parts.contains(&0) {
        return Err(LabError::Options(format!(
            "an offered load of {rate}/s cannot be split over {} load hosts: offer at least one per host and second",
            load.len()
        )));
    }
    Ok(parts.into_iter().map(Some).collect())
}

/// The point of `rate` from each host's own (`points[i]` measured on `load[i]`): the round
/// trips of the first (the ping-pong host's client), achieved, lost and sent added up; each
/// host's part kept when any host is remote (a measured clock).
pub fn combine(rate: Option<u64>, load: &[LoadHost], mut points: Vec<Point>) -> Point {
    let hosts = match load.iter().all(|l| l.clock.is_none()) {
        true => Vec::new(),
        false => load.iter().zip(&points).enumerate().map(|(i, (l, p))| of(i, l, p)).collect(),
    };
    let mut total = points.remove(0);
    for p in &points {
        total.achieved += p.achieved;
        total.lost += p.lost;
        total.sent += p.sent;
    }
    total.rate = rate;
    total.hosts = hosts;
    total
}

fn of(i: usize, l: &LoadHost, p: &Point) -> HostPoint {
    HostPoint {
        host: l.host.name(),
        role: if i == 0 { "ping-pong" } else { "load" },
        offered: p.rate,
        achieved: p.achieved,
        p50_us: p.p50_us,
        p99_us: p.p99_us,
        lost: p.lost,
        sent: p.sent,
        clock: HostClock::of(l.clock),
    }
}

/// Each host's part over several trials: medians of its rates and round trips, lost and
/// sent summed, its offer and clock as in the first trial.
pub fn medians(trials: &[&[HostPoint]]) -> Vec<HostPoint> {
    load::per_host(trials, |host, same| HostPoint {
        achieved: crate::median_of(same.iter().map(|h| h.achieved)),
        p50_us: crate::median_of(same.iter().map(|h| h.p50_us)),
        p99_us: crate::median_of(same.iter().map(|h| h.p99_us)),
        lost: same.iter().map(|h| h.lost).sum(),
        sent: same.iter().map(|h| h.sent).sum(),
        ..host.clone()
    })
}

/// One host's part as a line of a report.
pub fn line(h: &HostPoint) -> String {
    let offered = h.offered.map_or("ping-pong".to_string(), |r| format!("offered {r}/s"));
    format!(
        "{} ({}): {offered}, achieved {:.0}/s, p50 {:.1} us, p99 {:.1} us, {} lost{}",
        h.host,
        h.role,
        h.achieved,
        h.p50_us,
        h.p99_us,
        h.lost,
        h.clock.suffix()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Host;
    use crate::remote::clock::ClockOffset;

    fn point(rate: Option<u64>, achieved: f64, p99: f64) -> Point {
        Point {
            rate,
            achieved,
            p50_us: p99 / 2.0,
            p99_us: p99,
            p999_us: p99,
            max_us: p99,
            p99_uncorrected_us: None,
            lost: 1,
            sent: achieved as u64,
            hosts: Vec::new(),
        }
    }

    fn hosts(n: usize, clock: bool) -> Vec<LoadHost> {
        let clock = clock.then_some(ClockOffset { offset_ns: 1000, rtt_ns: 2000 });
        (0..n).map(|_| LoadHost { host: Host::Local, clock }).collect()
    }

    #[test]
    fn the_ping_pong_hosts_round_trips_are_the_points_and_the_load_adds_up() {
        let load = hosts(2, true);
        let p = combine(
            Some(1001),
            &load,
            vec![point(Some(501), 500.0, 40.0), point(Some(500), 499.0, 90.0)],
        );
        assert_eq!(
            (p.rate, p.achieved, p.p99_us, p.lost, p.sent),
            (Some(1001), 999.0, 40.0, 2, 999)
        );
        let roles: Vec<_> = p.hosts.iter().map(|h| (h.role, h.offered, h.p99_us)).collect();
        assert_eq!(roles, [("ping-pong", Some(501), 40.0), ("load", Some(500), 90.0)]);
        assert_eq!(p.hosts[1].clock.clock_offset_ns, Some(1000));
        // One sender side without a clock of its own (the namespace testbed): no parts.
        assert!(combine(None, &hosts(1, false), vec![point(None, 10.0, 5.0)]).hosts.is_empty());
    }

    #[test]
    fn ping_pong_runs_on_the_first_host_and_a_rate_is_split_or_refused() {
        let load = hosts(3, true);
        assert_eq!(shares(None, &load).unwrap(), [None]);
        assert_eq!(shares(Some(1000), &load).unwrap(), [Some(334), Some(333), Some(333)]);
        let err = shares(Some(2), &load).unwrap_err().to_string();
        assert!(err.contains("2/s cannot be split over 3 load hosts"), "{err}");
    }
}
