//! Core partitioning (seed 003): which CPUs take the NIC's interrupts, which run the syscall
//! thread next to them, and which run the application lanes.

mod address;
mod apply;
pub mod busy_poll;
mod ownership;
mod plan;
mod refusal;
mod setting;

pub use address::parse_cidr;
pub use apply::{
    apply, apply_saving_revert, changes, pending_revert, read_revert_file, revert, review,
    ApplyError, Change, Review, Skipped,
};
pub use plan::{plan, plan_stack, DevicePlan, FlowHash, IrqPlacement, Plan, PlanError, RolePolicy};
pub use setting::{Ethtool, IfName, Setting, SettingError};
