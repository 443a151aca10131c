//! A row of Table 1 from the trials of its configuration.

use corelane::stats::CpuSplit;

use super::ConfigRow;
use crate::median_of;
use crate::rx_nic::NicRates;
use crate::stage::udp::{Config, Trial};
use crate::summary::Trials;

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
        pps: Trials::of(trials.iter().map(|t| t.pps)),
        gap_pct: None,
        drops_per_sec: median_of(trials.iter().map(|t| t.drops_per_sec)),
        cpu_ns_per_datagram: median_of(trials.iter().map(|t| t.cpu_ns_per_datagram)),
        reordered_pct: median_of(trials.iter().map(|t| t.reordered_pct)),
        lane_pps: (0..lane_count)
            .map(|l| median_of(trials.iter().filter_map(|t| t.lane_pps.get(l).copied())))
            .collect(),
        cpu,
        hosts: crate::stage::load::medians(
            &trials.iter().map(|t| t.hosts.as_slice()).collect::<Vec<_>>(),
        ),
        napi_ns_per_datagram: trials
            .first()
            .and_then(|t| t.napi_ns_per_datagram)
            .map(|_| median_of(trials.iter().filter_map(|t| t.napi_ns_per_datagram))),
        xsk_lost: trials.iter().filter_map(|t| t.xsk_lost).reduce(|a, b| a + b),
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
