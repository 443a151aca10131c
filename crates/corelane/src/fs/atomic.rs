//! Files corelane writes for the user (plans, revert files, reports, results): whole or not
//! at all, through names that cannot be turned against the writer.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::Path;

use rustix::fs::{Mode, OFlags};

use super::{random_name, Dir};

/// Writes `bytes` to `path` atomically. The path is trusted once: its directory is opened
/// (`O_DIRECTORY`), and from then on everything happens through that descriptor: a fresh
/// temporary under a random name (`O_CREAT|O_EXCL|O_NOFOLLOW`, so nothing planted at a
/// guessable name is ever opened), written, synced, then renamed over the name with the same
/// descriptor (renameat). A directory swapped for a symlink meanwhile changes nothing: the
/// file lands in the directory first opened, or nowhere. On any failure the temporary is
/// removed and `path` is as it was. The file gets mode 0644 (under the umask).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    OutputFile::open(path)?.write(bytes)
}

/// Writes `bytes` over the file at `path` in place: an existing one opened as it is
/// (`O_TRUNC|O_NOFOLLOW`, never `O_CREAT`: a kernel setting in /proc or /sys, or a file of a
/// private directory written again), a missing one only ever created new
/// (`O_CREAT|O_EXCL|O_NOFOLLOW`). A symlink at `path`, dangling or not, is never followed.
pub fn write_in_place(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let flags = OFlags::WRONLY | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut file = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(rustix::io::Errno::NOENT) => create_new(path)?,
        Err(e) => return Err(e.into()),
    };
    io::Write::write_all(&mut file, bytes)
}

/// A file corelane writes whole, perhaps more than once, and may take back: its directory
/// opened once, every later write and the removal made through that descriptor and the one
/// name, so a run that writes a revert file and later removes it never trusts the path twice.
#[derive(Debug)]
pub struct OutputFile {
    dir: Dir,
    name: OsString,
}

impl OutputFile {
    /// Opens the directory of `path` (following symlinks in the path the user named, as a
    /// shell would) and keeps it for every write.
    pub fn open(path: &Path) -> io::Result<OutputFile> {
        let (parent, name) = split(path)?;
        Ok(OutputFile { dir: Dir::open(parent, true)?, name: name.to_owned() })
    }

    /// Writes `bytes` atomically over the name, as [`write_atomic`] says.
    pub fn write(&self, bytes: &[u8]) -> io::Result<()> {
        let temp = random_name(&self.name);
        let file = File::from(self.dir.create_file(&temp, OFlags::WRONLY, 0o644)?);
        let written = io::Write::write_all(&mut &file, bytes)
            .and_then(|()| file.sync_all())
            .and_then(|()| self.dir.rename(&temp, &self.dir, &self.name));
        if written.is_err() {
            let _ = self.dir.remove_if_same(&temp, file.as_fd());
        }
        written
    }

    /// Removes the name from the directory first opened (unlinkat: a symlink is removed,
    /// never followed).
    pub fn remove(&self) -> io::Result<()> {
        self.dir.remove_file(&self.name)
    }
}

/// Creates the new file `path` for a streaming output: `O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC`,
/// mode 0644 (under the umask). Anything already at the name, a symlink included, fails with
/// `AlreadyExists`: an existing file is never truncated or followed.
pub fn create_new(path: &Path) -> io::Result<File> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(File::from(rustix::fs::open(path, flags, Mode::from_raw_mode(0o644))?))
}

/// The directory holding `path` (`.` for a bare name) and the name in it.
fn split(path: &Path) -> io::Result<(&Path, &OsStr)> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("{} names no file", path.display()))
    })?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((parent, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.toml");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    /// A file holding `precious` in `dir`, and a symlink to it planted at `name`: returns the
    /// file's path.
    fn victim_behind(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
        let victim = dir.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join(name)).unwrap();
        victim
    }

    /// The old writer created `.<name>.corelane-tmp-<pid>` with File::create (no O_EXCL,
    /// following symlinks): a symlink planted at that name had root truncate and write its
    /// target. Planted names are now never opened.
    #[test]
    fn a_planted_symlink_at_the_old_temporary_name_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("revert.json");
        let planted = format!(".revert.json.corelane-tmp-{}", std::process::id());
        let victim = victim_behind(dir.path(), &planted);
        write_atomic(&path, b"[]").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(std::fs::read(&path).unwrap(), b"[]");
    }

    #[test]
    fn a_failed_write_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let err = write_atomic(&dir.path().join("missing/dir/file"), b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_symlink_at_the_name_is_replaced_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        std::os::unix::fs::symlink(victim.join("f"), t.path().join("f")).unwrap();
        write_atomic(&t.path().join("f"), b"x").unwrap();
        assert!(!victim.join("f").exists());
        assert!(!std::fs::symlink_metadata(t.path().join("f")).unwrap().is_symlink());
    }

    #[test]
    fn create_new_refuses_anything_already_there() {
        let t = tempfile::tempdir().unwrap();
        let victim = victim_behind(t.path(), "out.csv");
        let link = t.path().join("out.csv");
        assert_eq!(create_new(&link).unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(create_new(&victim).unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        let fresh = t.path().join("fresh.csv");
        io::Write::write_all(&mut create_new(&fresh).unwrap(), b"a,b").unwrap();
        assert_eq!(std::fs::read(&fresh).unwrap(), b"a,b");
    }

    /// A revert file is written before `apply` changes anything and removed if the changes
    /// fail. Between the two, the directory's path may be swapped for a symlink to another
    /// directory holding a file of the same name: the removal goes through the directory
    /// first opened, so the other file stays.
    #[test]
    fn an_output_is_removed_from_the_directory_first_opened() {
        let top = tempfile::tempdir().unwrap();
        let (dir, elsewhere) = (top.path().join("out"), top.path().join("elsewhere"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::write(elsewhere.join("revert.json"), b"precious").unwrap();
        let out = OutputFile::open(&dir.join("revert.json")).unwrap();
        out.write(b"[]").unwrap();
        std::fs::rename(&dir, top.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &dir).unwrap();
        out.remove().unwrap();
        assert_eq!(std::fs::read(elsewhere.join("revert.json")).unwrap(), b"precious");
        assert!(!top.path().join("moved/revert.json").exists());
    }

    #[test]
    fn an_in_place_write_never_follows_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name);
        write_in_place(&at("new"), b"fresh").unwrap();
        write_in_place(&at("new"), b"0f").unwrap();
        assert_eq!(std::fs::read(at("new")).unwrap(), b"0f");
        std::fs::write(at("victim"), "precious").unwrap();
        std::os::unix::fs::symlink(at("victim"), at("link")).unwrap();
        std::os::unix::fs::symlink(at("absent"), at("dangling")).unwrap();
        assert!(write_in_place(&at("link"), b"0f").is_err());
        assert!(write_in_place(&at("dangling"), b"0f").is_err());
        assert_eq!(std::fs::read(at("victim")).unwrap(), b"precious");
        assert!(!at("absent").exists());
    }
}
