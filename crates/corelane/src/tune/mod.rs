//! Core partitioning (seed 003): which CPUs take the NIC's interrupts, which run the syscall
//! thread next to them, and which run the application lanes.

mod plan;

pub use plan::{plan, IrqPlacement, Placement, Plan, PlanError};
