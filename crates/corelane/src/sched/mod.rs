//! Seed 004's flow-aware scheduling: one source of events (an RX queue's worth of packets)
//! spread over worker lanes without reordering flows — or with as little as possible.
//!
//! * [`dispatch`] — the dispatcher: a policy's placements, stamped, over the books of what is
//!   in flight (`ledger`).
//! * `policy` — the schedulers (rss, spray, dsw-atomic, dsw-parallel, diffuser), one file each
//!   behind one trait; [`Kind`] names them.
//! * [`metrics`] — RFC 4737 reordering at the egress, balance (CoV, max/mean, Jain).
//! * [`workload`] — uniform, Zipf, elephant-and-mice, 10 flows, 1 flow; per-event costs.
//! * [`sim`] — a deterministic discrete-event simulation for 4 to 64 workers.
//! * [`pool`] — worker lanes behind lock-free SPSC rings, moved in bursts.
//! * [`threads`] — the same dispatcher on real threads, over a pool.

pub mod dispatch;
mod event;
mod flowmap;
mod ledger;
pub mod metrics;
mod policy;
pub mod pool;
pub mod sim;
pub mod threads;
pub mod workload;

pub use dispatch::{Assignment, Dispatcher, Event};
pub use policy::Kind;

/// The flow ids tracked one by one: a UDP receiver's sequence accounting and the dispatcher's
/// per-flow maps take ids below it; a datagram with a higher id counts as foreign (it would
/// otherwise grow those maps at a peer's will).
pub const MAX_TRACKED_FLOWS: usize = 1 << 16;

/// A simulation or workload option no run can be made of; names the option and the fix.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("a workload needs at least one flow (and elephant at least one mouse)")]
    NoFlows,
    #[error("{what} is {value}: {fix}")]
    OutOfRange { what: &'static str, value: f64, fix: &'static str },
}
pub use metrics::{Balance, ReorderMeter, ReorderReport};
pub use sim::{simulate, RunMode, RunResult, SimConfig};
pub use workload::{Source, Workload};
