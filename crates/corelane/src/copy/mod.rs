//! Seed 002's file duplication, grown into a copy command that loses nothing.
//!
//! The seed's lesson is fewer user/kernel crossings: a 1 KiB read/write buffer makes a million
//! round trips per GiB, a 1 MiB buffer a thousand. The kernel-side methods go further and copy
//! without the data ever reaching user space (`copy_file_range`, `sendfile`, `splice`), or
//! batch the crossings (`io_uring`). [`copy_file`] picks one by itself (`auto`) or runs the one
//! asked for, writes into a temporary file beside the destination and renames it over the
//! destination only when complete, keeps holes, mode and times, and reports what it did.
//! [`copy_tree`] spreads a tree's files over lanes: one file's writes serialise on its inode
//! lock, so parallelism belongs across files. With [`Preserve::ALL`] (`copy -a`) it keeps what
//! `cp -a` keeps: owners, xattrs and ACLs, hard links (found across lanes), symlink times and
//! special files; what the destination cannot keep is counted per kind in [`NotKept`]. Only
//! what the kernel honours on the source's mount is recreated: no set-id bits or file
//! capabilities from a `nosuid` mount, no device nodes from a `nodev` one, FUSE counting as
//! both (`source_mount.rs`).
//!
//! The destination is written only through descriptors the copy holds (`crate::fs::Dir`):
//! its path is resolved once, and every directory, file, link and attribute below it is made
//! by one name in a held directory or through the entry's own descriptor, so a user who can
//! write the destination and swaps a directory for a symlink mid-copy fails the copy instead
//! of carrying it elsewhere (`dest_tree.rs`).

mod dest_tree;
mod destination;
mod extents;
mod file;
mod finish;
mod links;
mod method;
mod preserve;
mod source_mount;
mod tree;
mod xattr;

use std::io;
use std::path::PathBuf;

use serde::Serialize;

pub use file::copy_file;
pub use method::{CopyMethod, CreateCall};
pub use preserve::{LossKind, NotKept, Preserve, Reflink};
pub use tree::{copy_tree, Skipped, TreeReport};

/// How to copy.
#[derive(Debug, Clone)]
pub struct CopyOptions {
    /// `None` lets corelane choose for the pair of file systems.
    pub method: Option<CopyMethod>,
    /// Buffer bytes for read/write, O_DIRECT and io_uring (heap, any size).
    pub buffer: usize,
    /// How the destination file is created (the large-file study compares the two).
    pub create: CreateCall,
    /// fsync the file before renaming it into place.
    pub fsync: bool,
    /// Compare checksums of source and destination after the copy.
    pub verify: bool,
    /// Write a destination that does not exist yet under its own name (removed on failure)
    /// instead of through a temporary file; see `copy_tree`. An existing destination is
    /// always replaced atomically.
    pub fresh_in_place: bool,
    /// Copy into a destination directory reached through a symlink. Off by default: a
    /// symlink where a directory is expected (say, planted in a shared directory) would carry
    /// a root copy anywhere on the system.
    pub follow_destination_symlink: bool,
    /// What is kept beyond the bytes (cp's `--preserve`); `Preserve::ALL` for `-a`.
    pub preserve: Preserve,
    /// Whether to share extents (FICLONE) instead of copying data.
    pub reflink: Reflink,
    /// Do not descend into directories on other file systems (cp's `-x`); their mount points
    /// are created, empty.
    pub one_file_system: bool,
    /// Recreate sockets with mknod as `cp -a` does (a socket file carries no listener, only a
    /// name and its attributes); off, sockets are listed as skipped.
    pub sockets: bool,
    /// A source that is itself a symlink is copied as a symlink, not followed (cp's `-d`, part
    /// of `-a`). Symlinks inside a tree are always copied as symlinks.
    pub no_dereference: bool,
}

impl Default for CopyOptions {
    fn default() -> Self {
        Self {
            method: None,
            buffer: 1 << 20,
            create: CreateCall::Open,
            fsync: false,
            verify: false,
            fresh_in_place: false,
            follow_destination_symlink: false,
            preserve: Preserve::DEFAULT,
            reflink: Reflink::Auto,
            one_file_system: false,
            sockets: false,
            no_dereference: false,
        }
    }
}

impl CopyOptions {
    /// What `cp -a` and `corelane copy -a` ask for: everything kept ([`Preserve::ALL`]),
    /// sockets recreated, a source that is a symlink copied as a symlink, and destinations
    /// that do not exist yet written in place, as a tree's are.
    pub fn archive() -> Self {
        Self {
            preserve: Preserve::ALL,
            sockets: true,
            no_dereference: true,
            fresh_in_place: true,
            ..Self::default()
        }
    }
}

/// What one file copy did.
#[derive(Debug, Clone, Serialize)]
pub struct CopyReport {
    pub source: PathBuf,
    pub destination: PathBuf,
    pub bytes: u64,
    pub seconds: f64,
    pub gb_per_sec: f64,
    /// The method that ran.
    pub method: CopyMethod,
    /// Why the method that ran is not the one asked for, when it is not.
    pub fallback: Option<String>,
    /// System calls that moved data (or io_uring_enter calls).
    pub syscalls: u64,
    /// Data extents copied (more than one: the source had holes, which were kept).
    pub extents: usize,
    pub verified: bool,
    /// Attributes asked for that the destination could not keep (or the source's mount did
    /// not honour), once per kind.
    pub not_kept: Vec<NotKept>,
}

/// Why a copy failed; in every case the destination is as it was before.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error("{0}: no such file or directory")]
    SourceMissing(PathBuf),
    #[error("cannot read {0}: permission denied")]
    SourceUnreadable(PathBuf),
    #[error("{0} is a directory: use -r to copy a tree")]
    SourceIsDirectory(PathBuf),
    #[error("{0} is not a regular file, directory or symlink")]
    SourceUnsupported(PathBuf),
    #[error("{src} and {dst} are the same file")]
    SameFile { src: PathBuf, dst: PathBuf },
    #[error("destination directory {0} does not exist: create it first")]
    DestinationDirMissing(PathBuf),
    #[error("destination {0} is a symlink to a directory: name the real directory, or pass --follow-dest-symlink to copy through it")]
    DestinationSymlink(PathBuf),
    #[error("{0} exists and is not a directory (a symlink or a file where the tree has a directory): move it away first")]
    DestinationNotDirectory(PathBuf),
    #[error(
        "no space left on the file system of {0}; it is unchanged and no temporary file was left"
    )]
    NoSpace(PathBuf),
    #[error("interrupted; {0} is unchanged and no temporary file was left")]
    Interrupted(PathBuf),
    #[error("checksums differ after copying {src} to {dst}: the destination was not put in place")]
    VerifyFailed { src: PathBuf, dst: PathBuf },
    #[error("cannot share the extents of {src} with {dst} ({why}): --reflink=always needs both on one btrfs, xfs or bcachefs file system; --reflink=auto copies the data instead")]
    ReflinkRefused { src: PathBuf, dst: PathBuf, why: String },
    /// A CPU to pin the lanes to that this machine does not have online.
    #[error(transparent)]
    Pin(#[from] crate::topology::TopologyError),
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
}

impl CopyError {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        Self::Io { what: what.into(), source }
    }
}
