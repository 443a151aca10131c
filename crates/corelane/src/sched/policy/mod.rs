//! The scheduling policies, one file each, behind [`Policy`]; [`Kind`] names them.
//!
//! Adding a policy: a file here with a type that implements [`Policy`], its `mod` line below,
//! and its line (under a doc line) in the `policies!` list.

mod diffuser;
mod dsw_atomic;
mod dsw_parallel;
mod rss;
mod spray;

use serde::Serialize;

use super::event::{Assignment, Event};
use super::ledger::Ledger;

/// A scheduling policy: where each event goes, and how it follows the workers' loads. The
/// [`Ledger`] counts events in and out around every call; a policy only reads it.
pub(crate) trait Policy: std::fmt::Debug + Send {
    /// A policy for `workers` workers (at least one), its random choices seeded by `seed`.
    fn new(workers: usize, seed: u64) -> Self
    where
        Self: Sized;

    /// Where `event` goes, stamped with its timing; `None` when the policy holds it, to hand
    /// it back later through `released` (from `completed` or `epoch`).
    fn place(&mut self, event: Event, now_ns: u64, ledger: &Ledger) -> Option<Assignment>;

    /// `event` left `worker` (the ledger has counted it out already).
    fn completed(
        &mut self,
        _event: &Event,
        _worker: usize,
        _now_ns: u64,
        _ledger: &Ledger,
        _released: &mut Vec<Assignment>,
    ) {
    }

    /// Every `EPOCH_NS`, with each worker's busy fraction over the epoch.
    fn epoch(
        &mut self,
        _busy: &[f64],
        _now_ns: u64,
        _ledger: &Ledger,
        _released: &mut Vec<Assignment>,
    ) {
    }

    /// Flow migrations so far.
    fn migrations(&self) -> u64 {
        0
    }
}

/// Declares [`Kind`] from one line per policy: its variant, its name and its type.
macro_rules! policies {
    ($($(#[doc = $doc:literal])+ $kind:ident = $name:literal => $policy:ty,)+) => {
        /// A scheduling policy, by the name the command line takes and the reports print.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
        pub enum Kind {
            $($(#[doc = $doc])+ #[serde(rename = $name)] $kind,)+
        }

        impl Kind {
            /// Every policy, in the order runs and reports list them.
            pub const ALL: [Kind; [$($name),+].len()] = [$(Kind::$kind),+];

            /// The name the command line takes and the reports print.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Kind::$kind => $name,)+
                }
            }

            /// A new policy of this kind.
            pub(crate) fn policy(self, workers: usize, seed: u64) -> Box<dyn Policy> {
                match self {
                    $(Kind::$kind => Box::new(<$policy>::new(workers, seed)),)+
                }
            }
        }
    };
}

policies! {
    /// A static flow hash: never reorders, never balances.
    Rss = "rss" => rss::Rss,
    /// Each event to the less loaded of two random workers: balances, reorders.
    Spray = "spray" => spray::Spray,
    /// DPDK's DSW: a loaded worker's flows move, paused until their events have left it.
    DswAtomic = "dsw-atomic" => dsw_atomic::DswAtomic,
    /// DSW on parallel queues: events round-robin, no pause.
    DswParallel = "dsw-parallel" => dsw_parallel::DswParallel,
    /// Ours: flows diffused over the workers as far as their imbalance calls for.
    Diffuser = "diffuser" => diffuser::Diffuser,
}

impl std::str::FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Kind::ALL.iter().copied().find(|k| k.name() == s).ok_or_else(|| {
            let names = Kind::ALL.map(|k| k.name()).join(", ");
            let names = match names.rsplit_once(", ") {
                Some((first, last)) => format!("{first} or {last}"),
                None => names,
            };
            format!("unknown scheduler {s:?}: use {names}")
        })
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The dispatcher's bookkeeping around a policy, for the policies' own tests (which drive
/// a policy and a ledger without a `Dispatcher`).
#[cfg(test)]
impl Ledger {
    pub(crate) fn dispatch(
        &mut self,
        policy: &mut dyn Policy,
        event: Event,
        now_ns: u64,
    ) -> Option<Assignment> {
        self.arrived(&event);
        let placement = policy.place(event, now_ns, self)?;
        self.count_in(&placement);
        Some(placement)
    }

    pub(crate) fn complete(
        &mut self,
        policy: &mut dyn Policy,
        event: &Event,
        worker: usize,
        now_ns: u64,
        released: &mut Vec<Assignment>,
    ) {
        self.count_out(event, worker);
        let from = released.len();
        policy.completed(event, worker, now_ns, self, released);
        for placement in &released[from..] {
            self.count_in(placement);
        }
    }

    pub(crate) fn epoch(
        &mut self,
        policy: &mut dyn Policy,
        busy: &[f64],
        now_ns: u64,
        released: &mut Vec<Assignment>,
    ) {
        let from = released.len();
        policy.epoch(busy, now_ns, self, released);
        for placement in &released[from..] {
            self.count_in(placement);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_and_print() {
        for k in Kind::ALL {
            assert_eq!(k.name().parse::<Kind>().unwrap(), k);
            assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{k}\""));
        }
        assert_eq!(
            "fifo".parse::<Kind>().unwrap_err(),
            "unknown scheduler \"fifo\": use rss, spray, dsw-atomic, dsw-parallel or diffuser"
        );
    }
}
