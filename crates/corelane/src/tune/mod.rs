//! Core partitioning (seed 003): which CPUs take the NIC's interrupts, which run the syscall
//! thread next to them, and which run the application lanes.

mod apply;
mod plan;

pub use apply::{apply, changes, revert, ApplyError, Change};
pub use plan::{plan, IrqPlacement, Placement, Plan, PlanError};
