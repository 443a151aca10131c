//! corelane: multicore-aware packet, connection and file I/O for Linux.
//!
//! The idea in one line: give every core its own *lane* — its own socket, buffers, thread and
//! receive CPU — batch every crossing of the user/kernel boundary, and measure what it buys.
//!
//! * [`topology`] reads CPUs, SMT siblings, caches and NUMA nodes from sysfs.
//! * [`lane`] runs a thread pinned to a CPU with its own stop signal; [`lane::Placement`] says
//!   which CPU each lane of a set runs on.
//! * [`reuseport`] binds a group of sockets to one address, one per lane, for UDP and TCP.
//! * [`udp`] is seed 000's path: batched senders and receivers, GSO/GRO, reuseport groups.
//! * [`tcp`] is seed 001's path: a per-lane HTTP server that recycles buffers, slots and epoll
//!   events, and the load generator that measures it.
//! * [`sched`] is seed 004's path: flow-aware dispatch of events over worker lanes (RSS,
//!   spray, DSW, Diffuser), measured for reordering, balance and latency.
//! * [`copy`] is seed 002's path: file and tree duplication that picks its method and loses nothing.
//! * [`tune`] is seed 003's core partition: interrupt, syscall and application CPUs.
//! * [`child_output`] reads what a child process prints within caps on bytes and time.
//! * [`run`] puts an unmodified program into that partition, its network calls on syscall
//!   threads (the preloaded library's private copy, environment and counters).
//! * [`fs`] writes the files corelane makes for the user (plans, revert files, reports) atomically.
//! * [`xdp`] is kernel bypass: corelane's own XDP program and AF_XDP lanes for UDP.
//! * [`privilege`] gives up root once a server has bound its port.
//! * [`units`] parses sizes, counts and durations as people type them.
//! * [`stats`] turns counters into the per-second lines and the CPU accounting the lab reports.
//!
//! The library never prints: it returns results and reports progress through callbacks.
//! All unsafe code lives in `sys`, the one module allowed to call libc directly.
#![deny(unsafe_code)]
#![warn(clippy::too_many_lines)]

pub mod child_output;
pub mod copy;
pub mod fs;
pub mod lane;
pub mod metrics;
pub mod privilege;
pub mod reuseport;
pub mod run;
pub mod sched;
pub mod stats;
pub mod tcp;
pub mod topology;
pub mod tune;
pub mod udp;
pub mod units;
pub mod xdp;

#[allow(unsafe_code)]
mod sys;
