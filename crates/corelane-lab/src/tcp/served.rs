//! Where `lab tcp`'s file servers find their files, on the host that serves them: here a
//! served work directory (0755, made as mkdtemp makes it); on a remote rx host a directory
//! of its own there, `mktemp -d /tmp/corelane-served.XXXXXXXX`, apart from the run's private
//! directory (which stays 0700 with the configurations, logs and revert file in it). Only the
//! served files are readable by others: nginx's workers run as `nobody`, and so does
//! `corelane serve`. A keeper there (`corelane guard --revert-on-close`, no revert file)
//! removes the directory when the lab lets go, dies or loses the connection.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::host::Host;
use crate::process::ChildProcess;
use crate::remote::guard::is_served_dir;
use crate::remote::MAX_LIFE;
use crate::workdir::WorkDir;
use crate::LabError;

/// The files served: name under the root and size. `hello.txt` is the body of the scale rows.
pub const FILES: [(&str, usize); 3] =
    [("hello.txt", 13), ("small.bin", 4 << 10), ("large.bin", 1 << 20)];

/// The root every file server serves: the run's served directory, its files written once
/// per run, then made readable by the unprivileged user the servers run as whatever the
/// umask (through descriptors of what was just written: no symlink followed).
pub fn root(served: &Path) -> Result<PathBuf, LabError> {
    use rustix::fs::{fchmod, open, openat, Mode, OFlags};
    let failed = |what: &str, e: std::io::Error| LabError::io(format!("cannot {what}"), e);
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let dir = open(served, flags | OFlags::DIRECTORY, Mode::empty())
        .map_err(|e| failed("open the file servers' root", e.into()))?;
    fchmod(&dir, Mode::from_raw_mode(0o755))
        .map_err(|e| failed("make the file servers' root readable", e.into()))?;
    for (name, size) in FILES {
        let path = served.join(name);
        if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.len() == size as u64) {
            let bytes: Vec<u8> = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
            corelane::fs::write_atomic(&path, &bytes)
                .map_err(|e| failed(&format!("write {}", path.display()), e))?;
        }
        let file = openat(&dir, name, flags, Mode::empty())
            .map_err(|e| failed(&format!("open {}", path.display()), e.into()))?;
        fchmod(&file, Mode::from_raw_mode(0o644))
            .map_err(|e| failed(&format!("make {} readable", path.display()), e.into()))?;
    }
    Ok(served.to_path_buf())
}

/// Writes the served files into `$1` on its host, as root: each created new (`set -C`, so a
/// name that exists, a planted symlink included, fails the script instead of being written
/// through: the directory is fresh and root's alone until then), sized and checked, then the files 0644 and the directory 0755. The content is
/// the local root's (`a` to `z` over and over). Arguments after `$1`: name and size pairs.
const WRITE_FILES: &str = "set -C; umask 077; cd -- \"$1\" || exit 1; shift; names=; \
    while [ $# -ge 2 ]; do \
      yes abcdefghijklmnopqrstuvwxyz | tr -d '\\n' | head -c \"$2\" > \"./$1\" || exit 1; \
      [ \"$(wc -c < \"./$1\")\" -eq \"$2\" ] || { echo \"$1: short\" >&2; exit 1; }; \
      names=\"$names ./$1\"; shift 2; \
    done; chmod 644 $names && chmod 755 .";

/// The file servers' root for the run.
#[derive(Debug)]
pub enum Served {
    /// This machine or one of its namespaces (they share its file system).
    Local(WorkDir),
    /// A remote rx host's served directory and the keeper that removes it.
    Remote { host: Host, dir: String, keeper: Option<ChildProcess> },
}

impl Served {
    /// Makes the root on `rx` with the files in it.
    pub fn create(rx: &Host) -> Result<Self, LabError> {
        let Host::Remote(remote) = rx else {
            let served = WorkDir::create_served("tcp-files")?;
            if served.path().to_str().is_none() {
                return Err(LabError::Options(format!(
                    "the served directory {} is not UTF-8 (from TMPDIR): set TMPDIR to a plain path",
                    served.path().display()
                )));
            }
            root(served.path())?;
            return Ok(Self::Local(served));
        };
        let made = rx.run("sh", &["-c", "umask 077; mktemp -d /tmp/corelane-served.XXXXXXXX"])?;
        let dir = made.trim().to_string();
        if !is_served_dir(&dir) {
            return Err(LabError::Remote {
                host: rx.name(),
                problem: format!(
                    "mktemp printed {:?}: is /tmp writable there?",
                    corelane::child_output::printable(&dir, 200)
                ),
            });
        }
        // The keeper first: the directory goes with it whatever happens to the lab.
        let args = [
            "guard".to_string(),
            "--life".into(),
            format!("{}s", MAX_LIFE.as_secs()),
            "--revert-on-close".into(),
            format!("{dir}/revert.json"),
        ];
        let keeper = match ChildProcess::spawn_guarded(
            "the served files' keeper",
            &rx.name(),
            &remote.session_argv(remote.corelane(), &args),
        ) {
            Ok(keeper) => keeper,
            Err(e) => {
                // No keeper will remove it: removed here, the name checked again.
                let _ = rx.run("rm", &["-rf", "--", &dir]);
                return Err(e);
            }
        };
        let served = Self::Remote { host: rx.clone(), dir, keeper: Some(keeper) };
        write_files(rx, served.root())?;
        Ok(served)
    }

    /// Whether the root is still there to serve from: a remote one's keeper (its life is the
    /// guard's, 15 minutes) still runs; else an error naming the host.
    pub fn check(&mut self) -> Result<(), LabError> {
        if let Self::Remote { host, keeper: Some(k), .. } = self {
            if k.wait_timeout(Duration::ZERO).is_some() {
                return Err(LabError::Remote {
                    host: host.name(),
                    problem: "the served files' keeper ended (its 15-minute life, or the connection), and with it the served files: run fewer rows or trials".into(),
                });
            }
        }
        Ok(())
    }

    /// The root's path on its host.
    pub fn root(&self) -> &str {
        match self {
            Self::Local(dir) => dir.path().to_str().unwrap_or_default(),
            Self::Remote { dir, .. } => dir,
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Self::Remote { host, dir, keeper } = self {
            // Closing the keeper's stdin: it removes the directory, then ends. Only a keeper
            // that had already ended leaves it to be removed here (and only while it is still
            // root's: the name is free in /tmp once the keeper removed it).
            let ended = keeper.as_mut().is_none_or(|k| k.wait_timeout(Duration::ZERO).is_some());
            drop(keeper.take());
            if ended && is_served_dir(dir) {
                let _ = host.run("sh", &["-c", ROOTS_OWN_REMOVED, "sh", dir]);
            }
        }
    }
}

/// Removes `$1` only if it is still a directory of root's (not one another user made under
/// the same name once it was free).
const ROOTS_OWN_REMOVED: &str =
    "[ -d \"$1\" ] && [ ! -L \"$1\" ] && [ \"$(stat -c %u -- \"$1\")\" = 0 ] && rm -rf -- \"$1\"; true";

/// Writes the served files into `dir` on `host` (see `WRITE_FILES`).
pub fn write_files(host: &Host, dir: &str) -> Result<(), LabError> {
    let mut args = vec!["-c".to_string(), WRITE_FILES.into(), "sh".into(), dir.into()];
    for (name, size) in FILES {
        args.extend([name.to_string(), size.to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    host.run("sh", &args).map(drop)
}

/// The command a dry run shows for the served root on `rx`.
pub fn shown(rx: &Host) -> String {
    let files: Vec<String> = FILES.iter().map(|(n, s)| format!("{n} ({s} B)")).collect();
    match rx {
        Host::Remote(_) => format!(
            "make /tmp/corelane-served.XXXXXXXX (0755, removed by its keeper) with {} (0644)",
            files.join(", ")
        ),
        _ => format!("make a served work directory (0755) with {} (0644)", files.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// The script a remote rx host runs writes what the local root holds, byte for byte,
    /// readable by all and writable by root only; a name already there (a planted symlink)
    /// fails it, what the symlink points to is left as it was, and the directory stays private.
    #[test]
    fn the_served_files_are_written_new_and_readable_and_a_planted_name_fails_the_write() {
        let local = tempfile::tempdir().unwrap();
        super::root(local.path()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_str().unwrap();
        write_files(&Host::Local, path).unwrap();
        let mode = |p: &std::path::Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(mode(dir.path()), 0o755);
        for (name, size) in FILES {
            let written = std::fs::read(dir.path().join(name)).unwrap();
            assert_eq!(written.len(), size, "{name}");
            assert_eq!(written, std::fs::read(local.path().join(name)).unwrap(), "{name}");
            assert_eq!(mode(&dir.path().join(name)), 0o644, "{name}");
        }
        let planted = tempfile::tempdir().unwrap();
        let target = planted.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        let again = tempfile::tempdir().unwrap();
        std::fs::set_permissions(again.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink(&target, again.path().join(FILES[2].0)).unwrap();
        let e = write_files(&Host::Local, again.path().to_str().unwrap()).unwrap_err();
        assert!(e.to_string().contains("sh -c"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        assert_eq!(mode(&target), 0o600);
        assert_eq!(mode(again.path()), 0o700, "a failed write leaves the directory private");
    }
}
