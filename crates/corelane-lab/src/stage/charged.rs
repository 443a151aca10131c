//! CPU a UDP trial charges beyond the receiver's own threads, each part apart: the NAPI
//! threads of the AF_XDP rows, the `ksoftirqd/N` threads (softirq work that left the context
//! it was raised in), and the sender, whose system calls run the receive softirq on its own
//! CPU when RPS is off (the recvmmsg path's kernel receive work, and on veth with threaded
//! NAPI off, XDP's). All exact runtimes (schedstat), sampled over the steady seconds.

use std::time::Duration;

use super::napi::NapiThreads;

/// What a trial charges besides the receiver: each part is `None` when not measured (no
/// NAPI threads on a row without XDP; a sender or kernel threads on another machine).
#[derive(Debug, Default)]
pub struct Charged {
    napi: Option<NapiThreads>,
    sender: Option<u32>,
    ksoftirqd: Option<Vec<u32>>,
}

/// The charged parts' runtimes at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChargedRuntime {
    pub napi: Option<Duration>,
    pub sender: Option<Duration>,
    pub ksoftirqd: Option<Duration>,
}

/// The charged parts per datagram received over a stretch: one trial's, or a row's medians
/// over its trials (flattened into the row's JSON, each part absent when not measured).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct ChargedNs {
    /// AF_XDP rows: the NAPI threads' exact runtime per datagram (on the veth pinned to the
    /// lanes' CPU; on a remote rx NIC the `napi/NIC-*` threads found there, absent when it runs
    /// NAPI as softirq); add it to `cpu_ns_per_datagram` for the receive path's whole cost.
    #[serde(rename = "napi_ns_per_datagram", skip_serializing_if = "Option::is_none")]
    pub napi: Option<f64>,
    /// The sender's exact runtime per datagram received, when it ran on this machine; with
    /// RPS off it includes the receive softirq its sends ran.
    #[serde(rename = "sender_ns_per_datagram", skip_serializing_if = "Option::is_none")]
    pub sender: Option<f64>,
    /// This machine's ksoftirqd threads' exact runtime per datagram received.
    #[serde(rename = "ksoftirqd_ns_per_datagram", skip_serializing_if = "Option::is_none")]
    pub ksoftirqd: Option<f64>,
}

impl ChargedNs {
    /// The medians over `all`: the NAPI part over the trials that measured it when the first
    /// did; the sender and ksoftirqd parts only when every trial measured them.
    pub fn median(all: &[ChargedNs]) -> Self {
        let if_all = |part: fn(&ChargedNs) -> Option<f64>| {
            let values: Option<Vec<f64>> = all.iter().map(part).collect();
            values.filter(|v| !v.is_empty()).map(crate::median_of)
        };
        Self {
            napi: all
                .first()
                .and_then(|c| c.napi)
                .map(|_| crate::median_of(all.iter().filter_map(|c| c.napi))),
            sender: if_all(|c| c.sender),
            ksoftirqd: if_all(|c| c.ksoftirqd),
        }
    }
}

impl Charged {
    /// `napi`: the AF_XDP rows' NAPI threads; `sender`: the sender's PID when it runs on
    /// this machine (then this machine's ksoftirqd threads are charged too).
    pub fn new(napi: Option<NapiThreads>, sender: Option<u32>) -> Self {
        let ksoftirqd = sender.map(|_| super::local_threads_named("ksoftirqd/"));
        Self { napi, sender, ksoftirqd }
    }

    pub fn runtime(&self) -> ChargedRuntime {
        ChargedRuntime {
            napi: self.napi.as_ref().map(NapiThreads::runtime),
            sender: self.sender.and_then(corelane::stats::tree_runtime_of),
            ksoftirqd: self
                .ksoftirqd
                .as_ref()
                .map(|pids| pids.iter().filter_map(|&p| corelane::stats::runtime_of(p)).sum()),
        }
    }
}

impl ChargedRuntime {
    /// Each part's runtime since `start`, per datagram of `datagrams`.
    pub fn per_datagram_since(&self, start: &ChargedRuntime, datagrams: u64) -> ChargedNs {
        let per = |now: Option<Duration>, then: Option<Duration>| {
            let used = now?.checked_sub(then?)?;
            Some(used.as_nanos() as f64 / datagrams.max(1) as f64)
        };
        ChargedNs {
            napi: per(self.napi, start.napi),
            sender: per(self.sender, start.sender),
            ksoftirqd: per(self.ksoftirqd, start.ksoftirqd),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_part_is_charged_per_datagram_and_a_part_missing_at_either_end_is_none() {
        let ms = |m| Some(Duration::from_millis(m));
        let start = ChargedRuntime { napi: ms(10), sender: ms(100), ksoftirqd: None };
        let end = ChargedRuntime { napi: ms(40), sender: None, ksoftirqd: ms(5) };
        let ns = end.per_datagram_since(&start, 1_000);
        assert_eq!(ns, ChargedNs { napi: Some(30_000.0), sender: None, ksoftirqd: None });
    }

    #[test]
    fn a_running_sender_and_the_ksoftirqd_threads_are_measured() {
        // A busy child of its own (not this test process, whose threads come and go as other
        // tests end, so their sum can fall between two readings).
        let mut busy = std::process::Command::new("yes")
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("yes(1)");
        let charged = Charged::new(None, Some(busy.id()));
        let a = charged.runtime();
        std::thread::sleep(Duration::from_millis(50));
        let b = charged.runtime();
        let _ = busy.kill();
        let _ = busy.wait();
        assert!(b.sender.unwrap() > a.sender.unwrap(), "{a:?} {b:?}");
        assert!(b.ksoftirqd.is_some(), "every Linux machine has ksoftirqd threads");
        assert_eq!(b.napi, None);
    }

    /// A row's JSON keeps its keys: each part under `<part>_ns_per_datagram`, absent when not
    /// measured; the medians follow each part's rule (NAPI over the trials that measured it,
    /// the others only when every trial did).
    #[test]
    fn a_rows_charged_parts_keep_their_keys_and_median_rules() {
        let trials = [
            ChargedNs { napi: Some(600.0), sender: Some(500.0), ksoftirqd: None },
            ChargedNs { napi: None, sender: Some(700.0), ksoftirqd: Some(3.0) },
            ChargedNs { napi: Some(800.0), sender: Some(600.0), ksoftirqd: Some(5.0) },
        ];
        let row = ChargedNs::median(&trials);
        assert_eq!(row, ChargedNs { napi: Some(700.0), sender: Some(600.0), ksoftirqd: None });
        let json = serde_json::to_string(&row).unwrap();
        assert_eq!(json, r#"{"napi_ns_per_datagram":700.0,"sender_ns_per_datagram":600.0}"#);
    }
}
