//! Hard links across lanes: the first lane to open an inode with more than one name claims it
//! by (device, inode) and copies it; a lane meeting another name of a claimed inode records
//! the name, and the names are linked to the first copy once every lane is done. No name is
//! copied twice and no lane waits for another's copy.
//!
//! The map is split into shards, each with its own lock, chosen by the inode number: lanes
//! claiming different inodes almost never meet on a lock, and only files whose link count is
//! above one enter it, so its memory is bounded by the tree's multiply-linked files.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::AsFd;
use std::sync::Mutex;

use crate::fs::{random_name, Dir};

/// Shards of the map (a power of two, well above any lane count).
const SHARDS: usize = 64;

/// Where a copy was made: its directory (an index into the tree walk's directories) and its
/// name there. Never a path: the directory is reopened from the destination root's descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Made {
    pub(crate) dir: usize,
    pub(crate) name: OsString,
}

/// A source inode's first name in the destination and, once it is copied and in place, the
/// (device, inode) of that copy.
#[derive(Debug)]
struct First {
    made: Made,
    copy: Option<(u64, u64)>,
}

/// Inodes with more than one name, by (device, inode), to the destination of their first name.
#[derive(Debug)]
pub(crate) struct LinkMap {
    shards: Vec<Mutex<HashMap<(u64, u64), First>>>,
}

impl Default for LinkMap {
    fn default() -> Self {
        Self { shards: (0..SHARDS).map(|_| Mutex::default()).collect() }
    }
}

impl LinkMap {
    /// Claims the inode for the name copied to `dst`: `None` when this is its first name (copy
    /// it), else the destination of the first name (link to it later).
    pub(crate) fn claim(&self, dev: u64, ino: u64, dst: &Made) -> Option<Made> {
        let mut map = self.shard(dev, ino);
        match map.get(&(dev, ino)) {
            Some(first) => Some(first.made.clone()),
            None => {
                map.insert((dev, ino), First { made: dst.clone(), copy: None });
                None
            }
        }
    }

    /// Records that the first name of source inode (`dev`, `ino`) is copied, as `copy`.
    pub(crate) fn copied(&self, dev: u64, ino: u64, copy: (u64, u64)) {
        if let Some(first) = self.shard(dev, ino).get_mut(&(dev, ino)) {
            first.copy = Some(copy);
        }
    }

    /// The (device, inode) of the copy of source inode (`dev`, `ino`), once made.
    pub(crate) fn copy_of(&self, dev: u64, ino: u64) -> Option<(u64, u64)> {
        self.shard(dev, ino).get(&(dev, ino)).and_then(|first| first.copy)
    }

    fn shard(&self, dev: u64, ino: u64) -> std::sync::MutexGuard<'_, HashMap<(u64, u64), First>> {
        let shard = &self.shards[(ino as usize ^ dev as usize) % SHARDS];
        shard.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Makes `name` in `dir` another name of `copy`, the (device, inode) this run made under the
/// name `first` in `first_dir`, both directories held by this run. The first name is taken
/// hold of (O_PATH, not followed) and checked to still be that copy, and the link is made
/// from the descriptor: a user who can write `first_dir` and renames a hard link to some
/// other file over the first name gets a refusal, never a root-made name for that file. An
/// existing `name` is replaced atomically (a link under a temporary name in `dir`, renamed
/// over it), as a copied file would be.
pub(crate) fn link_to(
    first_dir: &Dir,
    first: &OsStr,
    copy: Option<(u64, u64)>,
    dir: &Dir,
    name: &OsStr,
) -> io::Result<()> {
    let held = first_dir.open_entry(first)?;
    let now = rustix::fs::fstat(&held)?;
    if copy != Some((now.st_dev, now.st_ino)) {
        return Err(io::Error::other(format!(
            "{} is no longer the copy this run made (replaced during the copy?)",
            std::path::Path::new(first).display()
        )));
    }
    match dir.link_unnamed(held.as_fd(), name) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let temp = random_name(name);
            dir.link_unnamed(held.as_fd(), &temp)?;
            dir.rename(&temp, dir, name).inspect_err(|_| {
                let _ = dir.remove_file(&temp);
            })
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_name_claims_and_later_names_get_it() {
        let map = LinkMap::default();
        let made = |name: &str| Made { dir: 0, name: name.into() };
        assert_eq!(map.claim(1, 7, &made("a")), None);
        assert_eq!(map.claim(1, 7, &made("b")), Some(made("a")));
        assert_eq!(map.claim(2, 7, &made("c")), None, "another device, another inode");
    }

    #[test]
    fn claims_from_many_threads_give_one_first_name() {
        let map = LinkMap::default();
        let firsts = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for t in 0..8 {
                let (map, firsts) = (&map, &firsts);
                s.spawn(move || {
                    for ino in 0..1000 {
                        let name = Made { dir: t, name: format!("{ino}").into() };
                        if map.claim(1, ino, &name).is_none() {
                            firsts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(firsts.into_inner(), 1000);
    }
}
