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

/// Inodes with more than one name, by (device, inode), to the destination of their first name.
#[derive(Debug)]
pub(crate) struct LinkMap {
    shards: Vec<Mutex<HashMap<(u64, u64), Made>>>,
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
        let shard = &self.shards[(ino as usize ^ dev as usize) % SHARDS];
        let mut map = shard.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(&(dev, ino)) {
            Some(first) => Some(first.clone()),
            None => {
                map.insert((dev, ino), dst.clone());
                None
            }
        }
    }
}

/// Makes `name` in `dir` another name of the entry `first` in `first_dir`, both directories
/// held by this run. An existing `name` is replaced atomically (a link under a temporary name
/// in `dir`, renamed over it), as a copied file would be.
pub(crate) fn link_to(first_dir: &Dir, first: &OsStr, dir: &Dir, name: &OsStr) -> io::Result<()> {
    match first_dir.hard_link(first, dir, name) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let temp = random_name(name);
            first_dir.hard_link(first, dir, &temp)?;
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
