//! `corelane run`'s library side (seed 003 for unmodified programs): the private copy of the
//! preloaded system-call library, the environment the program gets, and the counters the
//! library shares with `corelane run`, the supervisor that runs the program, and the syscall
//! threads' CPU time read while it runs, and the programs whose calls cannot be carried. The program is placed by CPU affinity; the library
//! (crate `corelane-preload`) carries its network calls to syscall threads.

/// The contract with the preloaded library (one file, compiled by both).
#[path = "../../../corelane-preload/src/abi.rs"]
pub mod abi;
mod environment;
mod lane_cpu;
mod lane_off;
mod library;
mod program_kind;
mod stats;
mod supervise;

pub use environment::{preloadable, program_environment, LaneSetting, LOADER_VARIABLES};
pub use lane_cpu::{run_time, LaneCpu};
pub use lane_off::{lane_off_entries, LaneOffEntry};
pub use library::{remove_dead_runs, PrivateLibrary, DIR_PREFIX, FILE_NAME as LIBRARY_FILE_NAME};
pub use program_kind::{
    not_carried, resolve as resolve_program, shown as program_shown, NotCarried,
};
pub use stats::{
    parse as parse_stats, records, Delegated, LaneMode, LaneOff, LaneReport, ProcessRecord,
    SharedStats, MAX_RECORDS,
};
pub use supervise::{
    monotonic_ns, supervise, Ended, NoWatch, Program, SuperviseError, Watch, SAMPLE_EVERY,
};
