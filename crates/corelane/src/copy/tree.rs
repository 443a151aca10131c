//! A directory tree: directories and symlinks recreated in order, regular files spread over
//! lanes (largest first, so the lanes finish together), modes and times kept.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;

use super::file::copy_checked;
use super::{copy_file, CopyError, CopyOptions};
use crate::lane::{pin_current_thread, StopSignal};

/// What a tree copy did.
#[derive(Debug, Clone, Serialize)]
pub struct TreeReport {
    pub source: PathBuf,
    pub destination: PathBuf,
    pub files: u64,
    pub directories: u64,
    pub symlinks: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub gb_per_sec: f64,
    pub lanes: usize,
    pub syscalls: u64,
}

/// Files a lane claims at a time (one shared atomic per run, not per file).
const RUN_FILES: usize = 32;

/// Groups files into runs that lanes claim whole. A run holds neighbouring files of one
/// directory (warm directory and dentry cache lines), and consecutive runs come from
/// different directories, so two lanes rarely wait on the same directory's lock to create
/// their files.
fn plan_runs(mut files: Vec<FileJob>) -> Vec<Vec<FileJob>> {
    files.sort_by_key(|f| (f.dir, f.nth_in_dir));
    let mut per_dir: Vec<Vec<Vec<FileJob>>> = Vec::new();
    let mut last_dir = usize::MAX;
    for job in files {
        if job.dir != last_dir {
            per_dir.push(Vec::new());
            last_dir = job.dir;
        }
        let runs = per_dir.last_mut().expect("pushed above");
        let full = runs.last().is_none_or(|r: &Vec<FileJob>| r.len() >= RUN_FILES);
        if full {
            runs.push(Vec::new());
        }
        runs.last_mut().expect("pushed above").push(job);
    }
    // Round-robin over directories: run 0 of every directory, then run 1, ...
    let mut runs = Vec::new();
    let mut iters: Vec<_> = per_dir.into_iter().map(Vec::into_iter).collect();
    loop {
        let before = runs.len();
        runs.extend(iters.iter_mut().filter_map(Iterator::next));
        if runs.len() == before {
            break;
        }
    }
    runs
}

/// One regular file to copy and its place in its directory. The walk reads no metadata of
/// files (readdir's d_type says what they are): the lanes fstat what they open, in parallel.
struct FileJob {
    rel: PathBuf,
    dir: usize,
    nth_in_dir: usize,
}

/// The tree below the source, in creation order (parents before children).
#[derive(Default)]
struct Walk {
    dirs: Vec<(PathBuf, std::fs::Metadata)>,
    files: Vec<FileJob>,
    links: Vec<(PathBuf, PathBuf)>,
}

fn walk(root: &Path) -> Result<Walk, CopyError> {
    let mut out = Walk::default();
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let dir = root.join(&rel);
        let meta = std::fs::symlink_metadata(&dir)
            .map_err(|e| CopyError::io(format!("cannot stat {}", dir.display()), e))?;
        out.dirs.push((rel.clone(), meta));
        let dir_index = out.dirs.len() - 1;
        let mut nth_in_dir = 0;
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| CopyError::io(format!("cannot list {}", dir.display()), e))?;
        for entry in entries {
            let entry =
                entry.map_err(|e| CopyError::io(format!("cannot list {}", dir.display()), e))?;
            let child = rel.join(entry.file_name());
            let kind = entry
                .file_type()
                .map_err(|e| CopyError::io(format!("cannot stat {}", child.display()), e))?;
            if kind.is_dir() {
                pending.push(child);
            } else if kind.is_symlink() {
                let target = std::fs::read_link(entry.path())
                    .map_err(|e| CopyError::io("cannot read a symlink", e))?;
                out.links.push((child, target));
            } else if kind.is_file() {
                out.files.push(FileJob { rel: child, dir: dir_index, nth_in_dir });
                nth_in_dir += 1;
            }
            // Sockets, FIFOs and devices are not copied (neither does `cp -r` without -a).
        }
    }
    Ok(out)
}

/// Copies the tree `src` to `dst` (`dst/<name of src>` when `dst` is an existing directory),
/// regular files over `lanes` threads pinned to `cpus` when given. `progress(files, bytes)`
/// is called as files complete, from any lane.
pub fn copy_tree(
    src: &Path,
    dst: &Path,
    opts: &CopyOptions,
    lanes: usize,
    cpus: &[usize],
    progress: &(dyn Fn(u64, u64) + Sync),
    stop: &StopSignal,
) -> Result<TreeReport, CopyError> {
    let meta = std::fs::metadata(src).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => CopyError::SourceMissing(src.into()),
        _ => CopyError::io(format!("cannot stat {}", src.display()), e),
    })?;
    if !meta.is_dir() {
        return copy_file(src, dst, opts, &mut |_, _| {}, stop).map(|r| TreeReport {
            source: r.source,
            destination: r.destination,
            files: 1,
            directories: 0,
            symlinks: 0,
            bytes: r.bytes,
            seconds: r.seconds,
            gb_per_sec: r.gb_per_sec,
            lanes: 1,
            syscalls: r.syscalls,
        });
    }
    let root = if dst.is_dir() {
        // `copy -r . backup/` copies into backup/<this directory's name>.
        let named = std::fs::canonicalize(src).unwrap_or_else(|_| src.to_path_buf());
        dst.join(named.file_name().ok_or_else(|| CopyError::SourceUnsupported(src.into()))?)
    } else {
        match dst.parent() {
            Some(p) if !p.as_os_str().is_empty() && !p.is_dir() => {
                return Err(CopyError::DestinationDirMissing(p.into()))
            }
            _ => dst.to_path_buf(),
        }
    };
    if root.starts_with(src)
        || std::fs::canonicalize(dst)
            .is_ok_and(|d| d.starts_with(std::fs::canonicalize(src).unwrap_or_default()))
    {
        return Err(CopyError::SameFile { src: src.into(), dst: root });
    }
    let started = Instant::now();
    let mut tree = walk(src)?;
    for (rel, _) in &tree.dirs {
        let path = root.join(rel);
        match std::fs::create_dir(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && path.is_dir() => {}
            Err(e) => return Err(CopyError::io(format!("cannot create {}", path.display()), e)),
        }
    }
    for (rel, target) in &tree.links {
        let path = root.join(rel);
        let _ = std::fs::remove_file(&path);
        std::os::unix::fs::symlink(target, &path)
            .map_err(|e| CopyError::io(format!("cannot create {}", path.display()), e))?;
    }
    let runs = plan_runs(std::mem::take(&mut tree.files));
    let next = AtomicUsize::new(0);
    let (files_done, bytes_done, calls) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let first_error: Mutex<Option<CopyError>> = Mutex::new(None);
    let failed = StopSignal::new();
    let lanes = lanes.clamp(1, runs.len().max(1));
    std::thread::scope(|scope| {
        for lane in 0..lanes {
            let (runs, root, next, failed, first_error) =
                (&runs, &root, &next, &failed, &first_error);
            let (files_done, bytes_done, calls) = (&files_done, &bytes_done, &calls);
            let cpu = (!cpus.is_empty()).then(|| cpus[lane % cpus.len()]);
            scope.spawn(move || {
                if let Some(cpu) = cpu {
                    let _ = pin_current_thread(cpu);
                }
                loop {
                    if stop.is_stopped() || failed.is_stopped() {
                        break;
                    }
                    let Some(run) = runs.get(next.fetch_add(1, Ordering::Relaxed)) else { break };
                    let (mut run_bytes, mut run_calls) = (0, 0);
                    for job in run {
                        let (from, to) = (src.join(&job.rel), root.join(&job.rel));
                        match copy_checked(&from, to, None, opts, &mut |_, _| {}, stop) {
                            Ok(report) => {
                                run_bytes += report.bytes;
                                run_calls += report.syscalls;
                            }
                            Err(e) => {
                                failed.stop();
                                let mut slot =
                                    first_error.lock().unwrap_or_else(|p| p.into_inner());
                                slot.get_or_insert(e);
                                return;
                            }
                        }
                    }
                    calls.fetch_add(run_calls, Ordering::Relaxed);
                    let files = files_done.fetch_add(run.len() as u64, Ordering::Relaxed)
                        + run.len() as u64;
                    let bytes = bytes_done.fetch_add(run_bytes, Ordering::Relaxed) + run_bytes;
                    progress(files, bytes);
                }
            });
        }
    });
    if let Some(e) = first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    if stop.is_stopped() {
        return Err(CopyError::Interrupted(root));
    }
    // Directory modes and times last, deepest first: creating entries changes a directory's mtime.
    for (rel, meta) in tree.dirs.iter().rev() {
        let path = root.join(rel);
        let _ =
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(meta.mode() & 0o7777));
        let times = rustix::fs::Timestamps {
            last_access: rustix::fs::Timespec {
                tv_sec: meta.atime(),
                tv_nsec: meta.atime_nsec() as _,
            },
            last_modification: rustix::fs::Timespec {
                tv_sec: meta.mtime(),
                tv_nsec: meta.mtime_nsec() as _,
            },
        };
        let _ = rustix::fs::utimensat(rustix::fs::CWD, &path, &times, rustix::fs::AtFlags::empty());
    }
    let seconds = started.elapsed().as_secs_f64();
    let bytes = bytes_done.load(Ordering::Relaxed);
    Ok(TreeReport {
        source: src.into(),
        destination: root,
        files: files_done.load(Ordering::Relaxed),
        directories: tree.dirs.len() as u64,
        symlinks: tree.links.len() as u64,
        bytes,
        seconds,
        gb_per_sec: if seconds > 0.0 { bytes as f64 / seconds / 1e9 } else { 0.0 },
        lanes,
        syscalls: calls.load(Ordering::Relaxed),
    })
}
