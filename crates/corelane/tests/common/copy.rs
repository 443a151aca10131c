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
    tempfile::Builder::new().prefix(&format!("{prefix}-")).tempdir_in(base).unwrap()
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
