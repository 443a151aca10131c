//! Two copies of one tree compared entry by entry: type, mode, owner, mtime (a symlink's own),
//! link target, device numbers, size, xattrs (ACLs included) and the groups of hard links.
//! The real-tree row checks with it that `corelane copy -a` made what `cp -a` made.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::LabError;

/// What the comparison found.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub entries: usize,
    /// The first differing entries (at most `MAX_SHOWN`), as "expected | actual".
    pub differences: Vec<String>,
    pub differing: usize,
    pub same_hard_link_groups: bool,
}

impl Comparison {
    pub fn identical(&self) -> bool {
        self.differing == 0 && self.same_hard_link_groups
    }
}

const MAX_SHOWN: usize = 10;

fn xattrs(p: &Path) -> Vec<String> {
    let mut names = vec![0u8; 1 << 16];
    let n = rustix::fs::llistxattr(p, &mut names[..]).unwrap_or(0);
    let mut out: Vec<String> = names[..n]
        .split(|&b| b == 0)
        .filter(|n| !n.is_empty())
        .map(|name| {
            let name = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name);
            let mut value = vec![0u8; 1 << 16];
            let len = rustix::fs::lgetxattr(p, name, &mut value[..]).unwrap_or(0);
            let hex: String = value[..len].iter().map(|b| format!("{b:02x}")).collect();
            format!("{}={hex}", name.to_string_lossy())
        })
        .collect();
    out.sort();
    out
}

/// A tree's metadata: one line per entry by path, and its hard-link groups.
struct Listing {
    lines: BTreeMap<PathBuf, String>,
    groups: Vec<Vec<PathBuf>>,
}

fn listing(root: &Path) -> Result<Listing, LabError> {
    let mut lines = BTreeMap::new();
    let mut groups: BTreeMap<u64, Vec<PathBuf>> = BTreeMap::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let p = root.join(&rel);
        let m = std::fs::symlink_metadata(&p)
            .map_err(|e| LabError::io(format!("cannot stat {}", p.display()), e))?;
        let kind = m.file_type();
        if kind.is_dir() {
            let entries = std::fs::read_dir(&p)
                .map_err(|e| LabError::io(format!("cannot list {}", p.display()), e))?;
            for entry in entries.flatten() {
                pending.push(rel.join(entry.file_name()));
            }
        } else if m.nlink() > 1 {
            groups.entry(m.ino()).or_default().push(rel.clone());
        }
        let target = if kind.is_symlink() {
            format!("{:?}", std::fs::read_link(&p).unwrap_or_default())
        } else {
            String::new()
        };
        let line = format!(
            "mode={:o} owner={}:{} mtime={}.{:09} target={target} dev={}:{} size={} xattrs={:?}",
            m.mode(),
            m.uid(),
            m.gid(),
            m.mtime(),
            m.mtime_nsec(),
            rustix::fs::major(m.rdev()),
            rustix::fs::minor(m.rdev()),
            if kind.is_dir() { 0 } else { m.size() },
            xattrs(&p),
        );
        lines.insert(rel, line);
    }
    let mut groups: Vec<Vec<PathBuf>> = groups
        .into_values()
        .map(|mut g| {
            g.sort();
            g
        })
        .collect();
    groups.sort();
    Ok(Listing { lines, groups })
}

/// Compares the tree `actual` with `expected`.
pub fn compare(expected: &Path, actual: &Path) -> Result<Comparison, LabError> {
    let Listing { lines: want, groups: want_groups } = listing(expected)?;
    let Listing { lines: got, groups: got_groups } = listing(actual)?;
    let mut differences = Vec::new();
    let mut differing = 0;
    for (rel, line) in &want {
        let other = got.get(rel);
        if other != Some(line) {
            differing += 1;
            if differences.len() < MAX_SHOWN {
                let other = other.map_or("missing", String::as_str);
                differences.push(format!("{rel:?}: {line} | {other}"));
            }
        }
    }
    for rel in got.keys().filter(|rel| !want.contains_key(*rel)) {
        differing += 1;
        if differences.len() < MAX_SHOWN {
            differences.push(format!("{rel:?}: missing | present"));
        }
    }
    Ok(Comparison {
        entries: want.len(),
        differences,
        differing,
        same_hard_link_groups: want_groups == got_groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_mode_and_a_missing_entry_are_found() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        for t in [&a, &b] {
            std::fs::create_dir(t).unwrap();
            std::fs::write(t.join("f"), b"x").unwrap();
        }
        std::fs::write(a.join("only-in-a"), b"x").unwrap();
        std::fs::set_permissions(b.join("f"), std::fs::Permissions::from_mode(0o600)).unwrap();
        let c = compare(&a, &b).unwrap();
        assert!(!c.identical());
        // The roots' mtimes may differ too; f's mode and only-in-a always do.
        assert!(c.differing >= 2, "{c:?}");
        assert!(c.differences.iter().any(|d| d.contains("only-in-a") && d.contains("missing")));
    }
}
