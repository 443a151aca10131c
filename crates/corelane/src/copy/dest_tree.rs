//! The destination tree's directories, reached only through descriptors: created walking down
//! from the destination root's descriptor one name at a time, each remembered by its inode,
//! and reopened later (by a file lane, for a hard link, for its final owner and mode) from the
//! root with no symlink followed and checked to be the very directory this run made or met.
//!
//! A directory renamed away and replaced (by a symlink, or by another directory) fails the
//! entries that go into it: nothing is written, linked or changed outside the destination, and
//! nothing inside it that this run did not create or meet where the tree puts it.

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};

use super::CopyError;
use crate::fs::Dir;

/// Descriptors the create pass keeps open down the current path; deeper, a parent is reopened
/// from the root for each child, so a deep tree never runs out of descriptors.
const MAX_HELD: usize = 16;

/// One directory of the tree: where it is below the root, its parent's index (itself for the
/// root) and, once met, its (device, inode).
#[derive(Debug)]
pub(crate) struct DirSlot {
    pub(crate) rel: PathBuf,
    pub(crate) parent: usize,
    id: Option<(u64, u64)>,
    /// Whether this run created it (only those get the source's owner, mode and times).
    pub(crate) created: bool,
}

impl DirSlot {
    pub(crate) fn new(rel: PathBuf, parent: usize) -> Self {
        Self { rel, parent, id: None, created: false }
    }
}

/// The destination's directories, in the walk's order (parents first).
#[derive(Debug)]
pub(crate) struct DestTree {
    root: Dir,
    root_path: PathBuf,
    pub(crate) dirs: Vec<DirSlot>,
}

/// Why the directory at `path` could not be had.
fn dir_error(path: PathBuf, e: io::Error) -> CopyError {
    match e.raw_os_error() {
        // A symlink or a file where the tree has a directory.
        Some(libc::ELOOP | libc::ENOTDIR) => CopyError::DestinationNotDirectory(path),
        _ => CopyError::io(format!("cannot create {}", path.display()), e),
    }
}

fn id_of(dir: &Dir) -> io::Result<(u64, u64)> {
    let stat = dir.stat()?;
    Ok((stat.st_dev, stat.st_ino))
}

/// The (device, inode) of a directory just had by `create_or_open_dir`. One this call created
/// must still be this process's own: a directory another user moved in between the mkdirat
/// and the open would otherwise be handed to the source's owner at the end.
fn id_of_had(dir: &Dir, created: bool, path: &Path) -> Result<(u64, u64), CopyError> {
    let stat =
        dir.stat().map_err(|e| CopyError::io(format!("cannot stat {}", path.display()), e))?;
    if created && stat.st_uid != super::preserve::euid() {
        let why = format!("{} was replaced as it was created", path.display());
        return Err(CopyError::io("the copy stopped", io::Error::other(why)));
    }
    Ok((stat.st_dev, stat.st_ino))
}

impl DestTree {
    /// Creates (0700, private while they fill) or opens the tree's directories: the root as
    /// `name` in `parent`, every other one as one name in its parent's descriptor. `dirs[0]`
    /// is the root. Fails when the root cannot be had; otherwise stops at the first directory
    /// below that cannot be, and the tree returned says which exist, for finishing them on the
    /// way out, beside whether all were made.
    pub(crate) fn create(
        parent: &Dir,
        name: &OsStr,
        root_path: PathBuf,
        mut dirs: Vec<DirSlot>,
    ) -> Result<(DestTree, Result<(), CopyError>), CopyError> {
        let (root, created) =
            parent.create_or_open_dir(name, 0o700).map_err(|e| dir_error(root_path.clone(), e))?;
        dirs[0].id = Some(id_of_had(&root, created, &root_path)?);
        dirs[0].created = created;
        let mut tree = DestTree { root, root_path, dirs };
        let made = tree.create_below();
        Ok((tree, made))
    }

    fn create_below(&mut self) -> Result<(), CopyError> {
        // The directories down the current path, deepest last (at most MAX_HELD of them).
        let mut held: Vec<(usize, Dir)> = Vec::new();
        for i in 1..self.dirs.len() {
            let parent = self.dirs[i].parent;
            let rel = self.dirs[i].rel.clone();
            while held.last().is_some_and(|(at, _)| !rel.starts_with(&self.dirs[*at].rel)) {
                held.pop();
            }
            let path = self.path(&rel);
            let name = rel.file_name().ok_or_else(|| CopyError::SourceUnsupported(path.clone()))?;
            let reopened;
            let parent_dir = match held.last() {
                Some((at, dir)) if *at == parent => dir,
                _ if parent == 0 => &self.root,
                _ => {
                    reopened = self.open(parent).map_err(|e| dir_error(path.clone(), e))?;
                    &reopened
                }
            };
            let (dir, created) = parent_dir
                .create_or_open_dir(name, 0o700)
                .map_err(|e| dir_error(path.clone(), e))?;
            let id = id_of_had(&dir, created, &path)?;
            self.dirs[i].id = Some(id);
            self.dirs[i].created = created;
            if held.len() < MAX_HELD {
                held.push((i, dir));
            }
        }
        Ok(())
    }

    /// The path shown for `rel` (never opened).
    pub(crate) fn path(&self, rel: &Path) -> PathBuf {
        if rel.as_os_str().is_empty() {
            self.root_path.clone()
        } else {
            self.root_path.join(rel)
        }
    }

    /// Reopens directory `index` from the root's descriptor, no symlink followed, and checks
    /// it is the directory the create pass made or met there: one that was renamed away and
    /// replaced, by a symlink or anything else, fails with an error saying so.
    pub(crate) fn open(&self, index: usize) -> io::Result<Dir> {
        self.open_as(index, false)
    }

    /// [`open`](Self::open), readable, for changing the directory's own owner, mode, times and
    /// attributes (see `Dir::open_path_to_change`).
    pub(crate) fn open_to_change(&self, index: usize) -> io::Result<Dir> {
        self.open_as(index, true)
    }

    fn open_as(&self, index: usize, to_change: bool) -> io::Result<Dir> {
        let slot = &self.dirs[index];
        let replaced = || {
            io::Error::other(format!(
                "{} was replaced during the copy (moved away, or a symlink put in its place); \
                 nothing was written through it",
                self.path(&slot.rel).display()
            ))
        };
        let opened = if to_change {
            self.root.open_path_to_change(&slot.rel)
        } else {
            self.root.open_path(&slot.rel)
        };
        let dir = opened.map_err(|e| match e.raw_os_error() {
            // A symlink (ENOTDIR with O_DIRECTORY, ELOOP), a file, or a way out of the root.
            Some(libc::ENOTDIR | libc::ELOOP | libc::EXDEV | libc::ENOENT) => replaced(),
            _ => e,
        })?;
        if slot.id.is_none() || Some(id_of(&dir)?) != slot.id {
            return Err(replaced());
        }
        Ok(dir)
    }
}

impl DestTree {
    /// The error for a directory `open` refused: a replaced one says so by itself.
    pub(crate) fn open_error(&self, index: usize, e: io::Error) -> CopyError {
        if e.kind() == io::ErrorKind::Other {
            return CopyError::io("the copy stopped", e);
        }
        let shown = self.path(&self.dirs[index].rel);
        CopyError::io(format!("cannot open {}", shown.display()), e)
    }
}

/// The directory a lane, or the symlink or hard-link pass, is writing in: kept while the next
/// entry goes to the same one, reopened (and checked) when it moves on.
#[derive(Debug, Default)]
pub(crate) struct HeldDir {
    held: Option<(usize, Dir)>,
}

impl HeldDir {
    pub(crate) fn get(&mut self, tree: &DestTree, index: usize) -> Result<&Dir, CopyError> {
        if self.held.as_ref().is_none_or(|(at, _)| *at != index) {
            self.held = None;
            let dir = tree.open(index).map_err(|e| tree.open_error(index, e))?;
            self.held = Some((index, dir));
        }
        Ok(&self.held.as_ref().expect("set above").1)
    }
}
