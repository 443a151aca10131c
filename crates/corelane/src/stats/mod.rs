//! Counters made readable: the per-second rate line, CPU accounting (exact runtime per thread,
//! process and process tree; the tick-sampled user/system split per thread, process and CPU
//! from /proc/stat) and the kernel's UDP counters (/proc/net/snmp).

pub mod latency;
mod meter;
mod procstat;
mod rate;
mod runtime;
mod snmp;
mod task;
mod ticker;
mod totals;

pub use latency::{IntervalLog, Percentiles};
pub use meter::{Interval, LaneCounters, Meter, SequenceCounts, BATCH_BOUNDS, BATCH_BUCKETS};
pub use procstat::{CpuSplit, CpuTimes, ProcStat};
pub use rate::{format_rate_line, median, Rate};
pub use runtime::{process_runtime, runtime_of, thread_runtime, tree_runtime_of};
pub use snmp::UdpCounters;
pub use task::{schedstat_runtime, stat_cpu_ticks, stat_state_and_start};
pub use ticker::{Tick, Ticker};
pub use totals::{CpuSecs, Throughput};

pub use crate::sys::usage::{
    children as children_cpu, process as process_cpu, thread as thread_cpu, CpuUsage,
};
