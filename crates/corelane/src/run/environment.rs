//! The environment `corelane run` gives the program: its own, minus anything that could choose
//! the library for it, plus the variables the preloaded library reads.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::abi;
use crate::topology::CpuList;

/// Variables that make ld.so load code from elsewhere; dropped when the run is root's.
pub const LOADER_VARIABLES: [&str; 3] = ["LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT"];

/// What the library is told.
#[derive(Debug, Clone)]
pub struct LaneSetting<'a> {
    pub library: &'a Path,
    pub syscall_cpus: &'a CpuList,
    /// `threads` or `uring`.
    pub lane: &'static str,
    /// The counters, as [`abi::ENV_STATS`] names them (`FD:DEV:INO`).
    pub stats: Option<String>,
    pub follow_exec: bool,
}

/// The program's environment, and the names of the variables dropped from it.
///
/// Every inherited CORELANE_* variable is dropped (only ours reach the library). As root,
/// LD_PRELOAD, LD_LIBRARY_PATH and LD_AUDIT are dropped too, so whoever set the environment
/// cannot make root's program load their code; otherwise the caller's LD_PRELOAD follows ours.
pub fn program_environment(
    inherited: impl IntoIterator<Item = (OsString, OsString)>,
    root: bool,
    lane: Option<&LaneSetting<'_>>,
) -> (Vec<(OsString, OsString)>, Vec<String>) {
    let mut dropped = Vec::new();
    let mut their_preload = None;
    let mut env = Vec::new();
    for (name, value) in inherited {
        let text = name.to_string_lossy();
        let loader = root && LOADER_VARIABLES.contains(&text.as_ref());
        if text.starts_with(abi::ENV_PREFIX) || loader {
            dropped.push(text.into_owned());
        } else if text == "LD_PRELOAD" && lane.is_some() {
            their_preload = Some(value);
        } else {
            env.push((name, value));
        }
    }
    if let Some(lane) = lane {
        let mut preload = lane.library.as_os_str().to_owned();
        if let Some(theirs) = their_preload.filter(|v| !v.is_empty()) {
            preload.push(":");
            preload.push(theirs);
        }
        env.push(("LD_PRELOAD".into(), preload));
        env.push((abi::ENV_LANE.into(), lane.lane.into()));
        env.push((abi::ENV_CPUS.into(), lane.syscall_cpus.to_string().into()));
        if let Some(stats) = &lane.stats {
            env.push((abi::ENV_STATS.into(), stats.into()));
        }
        if !lane.follow_exec {
            env.push((abi::ENV_NO_FOLLOW_EXEC.into(), "1".into()));
        }
    }
    (env, dropped)
}

/// Whether a path can go into LD_PRELOAD as one entry (ld.so splits on ':' and spaces).
pub fn preloadable(path: &Path) -> bool {
    !path.as_os_str().as_bytes().iter().any(|b| matches!(b, b':' | b' ' | b'\t' | b'\n'))
        && path.is_absolute()
        && path.as_os_str() != OsStr::new("")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs.iter().map(|(a, b)| ((*a).into(), (*b).into())).collect()
    }

    fn get<'a>(env: &'a [(OsString, OsString)], name: &str) -> Option<&'a OsStr> {
        env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_os_str())
    }

    #[test]
    fn root_drops_loader_variables_and_foreign_corelane_ones() {
        let cpus: CpuList = "1".parse().unwrap();
        let lib = Path::new("/tmp/corelane-run-1-x/libcorelane_preload.so");
        let lane = LaneSetting {
            library: lib,
            syscall_cpus: &cpus,
            lane: "uring",
            stats: Some("105:12:345".into()),
            follow_exec: false,
        };
        let inherited = env(&[
            ("LD_PRELOAD", "/home/evil/evil.so"),
            ("LD_LIBRARY_PATH", "/home/evil"),
            ("CORELANE_SYSCALL_CPUS", "0-63"),
            ("CORELANE_LIBRARY", "/home/evil/x.so"),
            ("CORELANE_STATS", "3:1:1"),
            ("PATH", "/usr/bin"),
        ]);
        let (out, dropped) = program_environment(inherited.clone(), true, Some(&lane));
        assert_eq!(get(&out, "LD_PRELOAD"), Some(lib.as_os_str()));
        assert_eq!(get(&out, "LD_LIBRARY_PATH"), None);
        assert_eq!(get(&out, "CORELANE_SYSCALL_CPUS"), Some(OsStr::new("1")));
        assert_eq!(get(&out, "CORELANE_LIBRARY"), None);
        assert_eq!(get(&out, abi::ENV_STATS), Some(OsStr::new("105:12:345")));
        assert_eq!(get(&out, "CORELANE_STATS_FD"), None);
        assert_eq!(get(&out, "CORELANE_NO_FOLLOW_EXEC"), Some(OsStr::new("1")));
        assert_eq!(get(&out, "CORELANE_SYSCALL_LANE"), Some(OsStr::new("uring")));
        assert_eq!(get(&out, "PATH"), Some(OsStr::new("/usr/bin")));
        assert_eq!(dropped.len(), 5);
        let (user, _) = program_environment(inherited, false, Some(&lane));
        let expected = format!("{}:/home/evil/evil.so", lib.display());
        assert_eq!(get(&user, "LD_PRELOAD"), Some(OsStr::new(&expected)));
    }

    #[test]
    fn odd_paths_are_not_preloadable() {
        assert!(preloadable(Path::new("/tmp/a/libcorelane_preload.so")));
        assert!(!preloadable(Path::new("/tmp/a b/x.so")));
        assert!(!preloadable(Path::new("/tmp/a:b/x.so")));
        assert!(!preloadable(Path::new("x.so")));
    }
}
