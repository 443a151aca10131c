//! Counters made readable: the per-second rate line, CPU accounting (per thread, per process,
//! per CPU from /proc/stat) and the kernel's UDP counters (/proc/net/snmp).

mod meter;
mod procstat;
mod rate;
mod snmp;

pub use meter::{Interval, LaneCounters, Meter};
pub use procstat::{CpuSplit, CpuTimes, ProcStat};
pub use rate::{format_rate_line, median, Rate};
pub use snmp::UdpCounters;

pub use crate::sys::usage::{process as process_cpu, thread as thread_cpu, CpuUsage};
