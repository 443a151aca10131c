//! The source's owner, attributes, mode and times, given to a directory, symlink or special
//! file the copy made: through the directory's own descriptor, or through the held directory
//! and the entry's one name with the no-follow calls. Never through a path.

use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use rustix::fs::{Timespec, Timestamps};

use super::dest_tree::DestTree;
use super::preserve::{keep_owner, kept_mode, Losses, OwnerTarget};
use super::source_mount::SourceMount;
use super::xattr::{copy_xattrs, open_beneath, XattrSource, XattrTarget};
use super::CopyOptions;
use crate::fs::{Dir, Node};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    Directory,
    Symlink,
    Special,
}

/// Where the entry to finish is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Place<'a> {
    /// A directory, by its own descriptor (readable: see `Dir::open_path_to_change`).
    Dir(&'a Dir),
    /// A symlink or special file this copy made, held (see `Dir::take_made`).
    Node(&'a Node),
}

/// What finishing an entry needs: where its source is (for its attributes), what to keep and
/// where to count what could not be kept.
#[derive(Debug)]
pub(crate) struct Finish<'a> {
    pub(crate) source_root: BorrowedFd<'a>,
    pub(crate) root: &'a Path,
    pub(crate) opts: &'a CopyOptions,
    pub(crate) losses: &'a Losses,
    /// The mount each source directory was read from, by the walk's directory index.
    pub(crate) mounts: &'a [SourceMount],
}

fn times_of(meta: &std::fs::Metadata) -> Timestamps {
    Timestamps {
        last_access: Timespec { tv_sec: meta.atime(), tv_nsec: meta.atime_nsec() as _ },
        last_modification: Timespec { tv_sec: meta.mtime(), tv_nsec: meta.mtime_nsec() as _ },
    }
}

impl Finish<'_> {
    /// Gives the entry copied from `rel` its source's owner and attributes, then (except for
    /// symlinks, which have none of their own) its mode, then its times, keeping only what the
    /// kernel honoured on the source's `mount`. Best effort: what the destination refuses is
    /// counted as a loss (owner, attributes) or left (mode, times).
    pub(crate) fn entry(
        &self,
        rel: &Path,
        at: Place<'_>,
        meta: &std::fs::Metadata,
        kind: Entry,
        mount: SourceMount,
    ) {
        let keep = self.opts.preserve;
        let shown = if rel.as_os_str().is_empty() { self.root } else { rel };
        let owner_at = match at {
            Place::Dir(dir) => OwnerTarget::Fd(dir.as_fd()),
            Place::Node(node) => OwnerTarget::Node(node),
        };
        let owner_kept =
            keep.ownership && keep_owner(owner_at, meta.uid(), meta.gid(), shown, self.losses);
        if keep.xattr {
            let to = match at {
                Place::Dir(dir) => XattrTarget::Fd(dir.as_fd()),
                Place::Node(node) => XattrTarget::Node(node),
            };
            match open_beneath(self.source_root, rel, false) {
                Ok(fd) => {
                    let from = XattrSource::Opened(fd.as_fd());
                    copy_xattrs(from, to, owner_kept, mount, shown, self.losses)
                }
                Err(e) => self.losses.record(super::LossKind::Xattr, shown, || {
                    format!("cannot open the source to read its attributes ({e})")
                }),
            }
        }
        let directory = kind == Entry::Directory;
        let mode = kept_mode(meta.mode(), directory, keep.mode, owner_kept);
        let mode = mount.honoured_mode(mode, directory, shown, self.losses);
        let times = times_of(meta);
        match at {
            Place::Dir(dir) => {
                let _ = rustix::fs::fchmod(dir, rustix::fs::Mode::from_raw_mode(mode));
                if keep.timestamps {
                    let _ = rustix::fs::futimens(dir, &times);
                }
            }
            Place::Node(node) => {
                if kind != Entry::Symlink {
                    let _ = node.chmod(mode);
                }
                if keep.timestamps {
                    let _ = node.set_times(&times);
                }
            }
        }
    }
}

/// Gives the directories this copy created their source's owner, attributes, mode (set-id
/// bits only with the owner) and times, deepest first: level by level from the deepest, each
/// level spread over `lanes` threads (a directory's children are all finished before it, and
/// its ancestors, which the reopening walks through, are not handed to anyone yet). Each is
/// reopened from the root's descriptor and checked to be the directory created (see
/// `DestTree::open`); one replaced meanwhile is left alone. Best effort: it runs on failure
/// paths too.
pub(crate) fn finish_dirs(
    ctx: &Finish<'_>,
    tree: &DestTree,
    metas: &[std::fs::Metadata],
    lanes: usize,
) {
    let mut levels: Vec<Vec<usize>> = Vec::new();
    for (i, slot) in tree.dirs.iter().enumerate().filter(|(_, s)| s.created) {
        let depth = slot.rel.components().count();
        if levels.len() <= depth {
            levels.resize_with(depth + 1, Vec::new);
        }
        levels[depth].push(i);
    }
    let finish = |i: &usize| {
        if let Ok(dir) = tree.open_to_change(*i) {
            let (rel, mount) = (&tree.dirs[*i].rel, ctx.mounts[*i]);
            ctx.entry(rel, Place::Dir(&dir), &metas[*i], Entry::Directory, mount);
        }
    };
    let finish = &finish;
    for level in levels.iter().rev() {
        // Threads pay off only for a level with many directories.
        if lanes < 2 || level.len() < 64 {
            level.iter().for_each(finish);
            continue;
        }
        std::thread::scope(|scope| {
            for part in level.chunks(level.len().div_ceil(lanes)) {
                scope.spawn(move || part.iter().for_each(finish));
            }
        });
    }
}
