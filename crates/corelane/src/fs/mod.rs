//! The file system as root may touch it: through descriptors corelane holds, never through a
//! path trusted twice.
//!
//! - [`Dir`]: a directory handle you can only go down from. Every child is reached by one
//!   name (no `/`, `.` or `..`) with no symlink followed, and every change (create, rename,
//!   link, symlink, mknod, owner, times, attributes, unlink) is made relative to a held
//!   directory descriptor or through the changed file's own descriptor.
//! - [`write_atomic`] and [`create_new`]: the files corelane writes for the user (plans,
//!   revert files, reports, results), whole or not at all, never through a planted name.
//! - [`write_in_place`]: a kernel setting or a file of a private directory, rewritten as it
//!   is (never created through, nor following, a planted name).
//! - [`read_capped`]: a file the user named (plan, revert file, saved run, inventory), a
//!   regular one only and never more than a cap.
//! - [`remove_dead_runs`] and [`remove_dead_run`]: the directories killed runs left in /tmp,
//!   removed through descriptors, never through a symlink, never another user's.

mod atomic;
mod dir;
mod read;
mod stale;

pub use atomic::{create_new, write_atomic, write_in_place, OutputFile};
pub use dir::{check_name, random_name, Dir, Node};
pub use read::{read_capped, ReadCappedError};
pub use stale::{
    own_start, process_start, remove_dead_run, remove_dead_runs, run_is_dead, Contents, TREE_DEPTH,
};
