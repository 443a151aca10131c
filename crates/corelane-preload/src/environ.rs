//! The environment as the library reads and, with `--no-follow-exec`, edits it: by walking
//! `environ` itself, before main, never through getenv/setenv/unsetenv (a shell such as bash
//! brings its own, which do not touch `environ` until its main runs).

use crate::abi::{ENV_PREFIX, LIBRARY_FILE_NAME};

/// The value of `name` among `entries` (`NAME=value` each), the first one set.
pub fn value<'a>(entries: &'a [Vec<u8>], name: &str) -> Option<&'a [u8]> {
    entries.iter().find_map(|e| e.strip_prefix(name.as_bytes())?.strip_prefix(b"="))
}

/// Whether an LD_PRELOAD entry names this library (its file name, not a mere suffix).
fn is_library(entry: &[u8]) -> bool {
    let name = LIBRARY_FILE_NAME.as_bytes();
    entry == name || entry.strip_suffix(name).is_some_and(|dir| dir.ends_with(b"/"))
}

/// The environment programs this one executes get without the library: for each entry, None
/// to drop it (every CORELANE_* variable; LD_PRELOAD when the library was all it named), or
/// the bytes it becomes (LD_PRELOAD without the library's entry: never longer), else itself.
pub fn without_library(entries: &[Vec<u8>]) -> Vec<Option<Vec<u8>>> {
    entries
        .iter()
        .map(|entry| {
            if entry.starts_with(ENV_PREFIX.as_bytes()) {
                return None;
            }
            let Some(list) = entry.strip_prefix(b"LD_PRELOAD=") else {
                return Some(entry.clone());
            };
            let kept: Vec<&[u8]> = list
                .split(|&b| b == b':' || b == b' ')
                .filter(|e| !e.is_empty() && !is_library(e))
                .collect();
            if kept.is_empty() {
                return None;
            }
            let mut out = b"LD_PRELOAD=".to_vec();
            out.extend(kept.join(&b':'));
            Some(out)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<Vec<u8>> {
        items.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn the_library_and_its_variables_leave_the_environment_and_the_rest_stays() {
        let env = v(&[
            "PATH=/bin",
            "LD_PRELOAD=/tmp/corelane-run-1-x/libcorelane_preload.so:/usr/lib/libeatmydata.so",
            "CORELANE_SYSCALL_LANE=uring",
            "HOME=/root",
            "CORELANE_STATS=100:1:2",
            "CORELANE_NO_FOLLOW_EXEC=1",
        ]);
        let edited = without_library(&env);
        let kept: Vec<&[u8]> = edited.iter().flatten().map(Vec::as_slice).collect();
        assert_eq!(
            kept,
            [&b"PATH=/bin"[..], b"LD_PRELOAD=/usr/lib/libeatmydata.so", b"HOME=/root"]
        );
        // Nothing grows: each kept entry fits in the string it replaces.
        for (old, new) in env.iter().zip(&edited) {
            assert!(new.as_ref().map_or(0, Vec::len) <= old.len());
        }
        assert_eq!(value(&env, "CORELANE_STATS"), Some(&b"100:1:2"[..]));
        assert_eq!(value(&env, "CORELANE_STAT"), None);
    }

    #[test]
    fn ld_preload_naming_only_the_library_goes_and_lookalikes_stay() {
        let env = v(&["LD_PRELOAD=/x/libcorelane_preload.so", "A=1"]);
        assert_eq!(without_library(&env), vec![None, Some(b"A=1".to_vec())]);
        let env = v(&["LD_PRELOAD=/x/mylibcorelane_preload.so /y/libcorelane_preload.so"]);
        assert_eq!(
            without_library(&env),
            vec![Some(b"LD_PRELOAD=/x/mylibcorelane_preload.so".to_vec())]
        );
    }
}
