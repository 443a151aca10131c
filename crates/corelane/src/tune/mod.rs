//! Core partitioning (seed 003): which CPUs take the NIC's interrupts, which run the syscall
//! thread next to them, and which run the application lanes.

mod apply;
mod plan;
mod setting;

pub use apply::{
    apply, apply_saving_revert, changes, read_revert_file, revert, ApplyError, Change,
};
pub use plan::{plan, IrqPlacement, Placement, Plan, PlanError};
pub use setting::{Ethtool, IfName, Setting, SettingError};
