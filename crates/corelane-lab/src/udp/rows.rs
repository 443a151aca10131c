//! A row of Table 1 from the trials of its configuration.

use corelane::stats::CpuSplit;

use super::ConfigRow;
use crate::median_of;
use crate::rx_nic::NicRates;
use crate::stage::udp::{Config, Received, Trial, XdpRole};
use crate::stage::ChargedNs;
use crate::summary::Trials;
use corelane::xdp::rx::XskStats;

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
    let receives_xdp = matches!(cfg.xdp, XdpRole::Receive | XdpRole::ReceiveBusyPoll);
    let xsk = receives_xdp.then(|| xsk_over(trials)).flatten();
    let xdp_mode = modes_of(trials);
    let label = match &xdp_mode {
        Some(mode) => format!("{} [XDP: {mode}]", cfg.label),
        None => cfg.label.clone(),
    };
    ConfigRow {
        config: cfg.id.to_string(),
        label,
        xdp_mode,
        offered_pps: cfg.offered_pps as f64,
        pps: Trials::of(trials.iter().map(|t| t.pps)),
        gap_pct: None,
        received: Received::median(trials.iter().map(|t| &t.received)),
        cpu,
        hosts: crate::stage::load::medians(
            &trials.iter().map(|t| t.hosts.as_slice()).collect::<Vec<_>>(),
        ),
        charged: ChargedNs::median(&trials.iter().map(|t| t.charged).collect::<Vec<_>>()),
        xsk_lost: xsk.map(|k| k.rx_lost()),
        xsk,
        xsk_unknown: receives_xdp && xsk.is_none(),
        nic: trials.first().and_then(|t| t.nic.as_ref()).map(|_| {
            let rates: Vec<&NicRates> = trials.iter().filter_map(|t| t.nic.as_ref()).collect();
            let queues = rates.iter().map(|r| r.rx_queue_packets_per_sec.len()).min();
            NicRates {
                rx_packets_per_sec: median_of(rates.iter().map(|r| r.rx_packets_per_sec)),
                rx_dropped_per_sec: median_of(rates.iter().map(|r| r.rx_dropped_per_sec)),
                rx_missed_per_sec: median_of(rates.iter().map(|r| r.rx_missed_per_sec)),
                rx_queue_packets_per_sec: (0..queues.unwrap_or(0))
                    .map(|q| median_of(rates.iter().map(|r| r.rx_queue_packets_per_sec[q])))
                    .collect(),
            }
        }),
    }
}

/// The XDP modes the trials' receivers reported, distinct, in order; `None` without XDP.
fn modes_of(trials: &[Trial]) -> Option<String> {
    let mut modes: Vec<&str> = Vec::new();
    for mode in trials.iter().filter_map(|t| t.xdp_mode.as_deref()) {
        if !modes.contains(&mode) {
            modes.push(mode);
        }
    }
    (!modes.is_empty()).then(|| modes.join(" / "))
}

/// The median of `part` over the trials, when every trial measured it.
/// The AF_XDP sockets' counters summed over the trials; unknown (`None`) when any trial's
/// could not be read, so that a trial's unknown loss never reads as none.
fn xsk_over(trials: &[Trial]) -> Option<XskStats> {
    trials.iter().try_fold(XskStats::default(), |mut sum, t| {
        sum.add(t.xsk.as_ref()?);
        Some(sum)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(xsk: Option<XskStats>) -> Trial {
        Trial {
            hosts: Vec::new(),
            pps: 150_000.0,
            received: Received {
                sent_pps: 150_000.0,
                drops_per_sec: 0.0,
                cpu_ns_per_datagram: 60.0,
                reordered_pct: 0.0,
                lane_pps: vec![75_000.0, 75_000.0],
            },
            cpu: Vec::new(),
            nic: None,
            charged: ChargedNs { napi: Some(650.0), sender: Some(550.0), ksoftirqd: Some(5.0) },
            xsk_lost: xsk.map(|k| k.rx_lost()),
            xsk,
            xdp_mode: Some("native copy".into()),
        }
    }

    fn af_xdp() -> Config {
        Config { xdp: XdpRole::Receive, ..Config::one_lane("af-xdp", String::new(), None, 1, 0, 1) }
    }

    #[test]
    fn a_trial_whose_socket_counters_were_unreadable_makes_the_row_unknown_not_lossless() {
        let lost = XskStats { rx_ring_full: 7, ..XskStats::default() };
        let row = summarize(&af_xdp(), &[trial(Some(lost)), trial(None)]);
        assert_eq!(row.xsk_lost, None, "one trial's loss is unknown: the sum is too");
        assert!(row.xsk_unknown);
        let row = summarize(&af_xdp(), &[trial(Some(lost)), trial(Some(lost))]);
        assert_eq!((row.xsk_lost, row.xsk_unknown), (Some(14), false));
        assert_eq!(row.xsk.map(|k| k.rx_ring_full), Some(14));
        assert_eq!(row.xdp_mode.as_deref(), Some("native copy"), "said once for equal trials");
        assert!(row.label.ends_with("[XDP: native copy]"), "{}", row.label);
    }

    #[test]
    fn each_charged_part_is_the_median_over_trials_and_a_row_without_xdp_has_no_counters() {
        let row = summarize(&af_xdp(), &[trial(None), trial(None), trial(None)]);
        assert_eq!(row.charged.sender, Some(550.0));
        assert_eq!(row.charged.ksoftirqd, Some(5.0));
        let plain = Config::one_lane("recvmmsg", String::new(), None, 1, 0, 1);
        let row = summarize(&plain, &[trial(None)]);
        assert_eq!((row.xsk_lost, row.xsk_unknown), (None, false));
    }
}
