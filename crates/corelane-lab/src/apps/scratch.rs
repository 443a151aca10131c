//! What `lab apps` prepares before its trials: the private directory (a mkdtemp-style
//! `WorkDir` opened up to mode 0711 so the web servers' worker users can reach `www/`), the
//! file they serve, and the C echo of the side-effect check, compiled there.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use crate::process::on_path;
use crate::workdir::WorkDir;
use crate::LabError;

/// Sets `path`'s mode through a descriptor opened with O_DIRECTORY|O_NOFOLLOW, so a symlink
/// put in its place is refused, never followed.
fn chmod_dir(path: &Path, mode: u32) -> Result<(), LabError> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::open(path, flags, Mode::empty())
        .map_err(|e| LabError::io(format!("cannot open {}", path.display()), e.into()))?;
    rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))
        .map_err(|e| LabError::io(format!("cannot set the mode of {}", path.display()), e.into()))
}

/// A fresh private directory, traversable (not listable, not writable) by other users.
pub fn private_dir() -> Result<WorkDir, LabError> {
    let dir = WorkDir::create("apps")?;
    chmod_dir(dir.path(), 0o711)?;
    Ok(dir)
}

/// Creates `www` (it must not exist yet), readable by the web servers' worker users.
pub fn make_www(www: &Path) -> Result<(), LabError> {
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(www)
        .map_err(|e| LabError::io(format!("cannot create {}", www.display()), e))?;
    chmod_dir(www, 0o755)
}

/// `size` bytes that look random (splitmix64: deterministic, so every run serves the same
/// file; a hand-rolled generator because only the bytes' variety matters, not their quality).
pub fn generated_file(size: usize) -> Vec<u8> {
    let mut state: u64 = 0x0c0e_1a4e_5eed_0003;
    let mut out = Vec::with_capacity(size + 8);
    while out.len() < size {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(size);
    out
}

/// Compiles the side-effect check's echo into `dir`; why not, if it cannot.
pub fn build_echo(dir: &Path) -> Result<PathBuf, String> {
    if !on_path("cc") {
        return Err("no C compiler (apt-get install gcc)".into());
    }
    let src = dir.join("udp_echo.c");
    let bin = dir.join("udp_echo");
    corelane::fs::write_atomic(&src, include_bytes!("../../peers/udp_echo.c"))
        .map_err(|e| format!("cannot write {}: {e}", src.display()))?;
    let out = std::process::Command::new("cc")
        .args(["-O2", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .map_err(|e| format!("cannot run cc: {e}"))?;
    if !out.status.success() {
        return Err(format!("cc failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(bin)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_private_directory_is_traversable_but_not_listable_or_writable_by_others() {
        let dir = private_dir().unwrap();
        let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o711);
        let www = dir.path().join("www");
        make_www(&www).unwrap();
        assert_eq!(std::fs::metadata(&www).unwrap().permissions().mode() & 0o7777, 0o755);
        assert!(make_www(&www).is_err(), "an existing directory is never adopted");
    }

    /// A symlink where the directory should be is refused, and its target keeps its mode.
    #[test]
    fn a_symlink_is_not_followed_when_the_mode_is_set() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("target");
        std::fs::create_dir(&target).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o700)).unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert!(chmod_dir(&link, 0o755).is_err());
        assert_eq!(std::fs::metadata(&target).unwrap().permissions().mode() & 0o7777, 0o700);
    }

    #[test]
    fn the_generated_file_is_varied_and_the_same_every_run() {
        let a = generated_file(4096);
        assert_eq!(a.len(), 4096);
        assert_eq!(a, generated_file(4096));
        assert_eq!(&generated_file(10)[..], &a[..10]);
        let distinct: std::collections::BTreeSet<u8> = a.iter().copied().collect();
        assert!(distinct.len() > 200, "{}", distinct.len());
    }
}
