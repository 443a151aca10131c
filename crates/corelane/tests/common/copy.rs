//! Private directories on tmpfs and the library's copies run the way a test wants them: no
//! progress callback, no CPUs pinned, never stopped.

use std::path::Path;

use corelane::copy::{copy_file, copy_tree, CopyError, CopyOptions, CopyReport, TreeReport};
use corelane::lane::StopSignal;

/// A fresh private directory (mkdtemp) on tmpfs — /dev/shm where it exists — named
/// `{prefix}-…`, removed when dropped: a predictable name under a shared directory is one
/// another user could prepare.
pub fn tmpfs_dir(prefix: &str) -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
    private_dir_in(&base, prefix)
}

/// `tmpfs_dir`, on a mount where the kernel honours set-id bits, file capabilities and
/// device nodes, for tests that copy them: a copy keeps them only from such a mount, and
/// /dev/shm is often `nosuid,nodev`. Then the first of `$TMPDIR` and this build's scratch
/// directory that is neither (tmpfs or not).
pub fn set_id_dir(prefix: &str) -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    let candidates = [shm.to_path_buf(), std::env::temp_dir(), env!("CARGO_TARGET_TMPDIR").into()];
    match candidates.iter().find(|dir| dir.is_dir() && honours_set_id_and_devices(dir)) {
        Some(base) => private_dir_in(base, prefix),
        None => tmpfs_dir(prefix),
    }
}

fn private_dir_in(base: &Path, prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("{prefix}-")).tempdir_in(base).unwrap()
}

/// Whether the mount of `dir` is neither `nosuid` nor `nodev`.
fn honours_set_id_and_devices(dir: &Path) -> bool {
    use rustix::fs::StatVfsMountFlags as Flags;
    rustix::fs::statvfs(dir).is_ok_and(|s| !s.f_flag.intersects(Flags::NOSUID | Flags::NODEV))
}

/// One file copied by `copy_file`.
pub fn file(src: &Path, dst: &Path, opts: &CopyOptions) -> Result<CopyReport, CopyError> {
    copy_file(src, dst, opts, &mut |_, _| {}, &StopSignal::new())
}

/// A tree copied by `copy_tree` over `lanes` lanes.
pub fn tree(
    src: &Path,
    dst: &Path,
    opts: &CopyOptions,
    lanes: usize,
) -> Result<TreeReport, CopyError> {
    copy_tree(src, dst, opts, lanes, &[], &|_, _| {}, &StopSignal::new())
}
