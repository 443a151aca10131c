//! A directory tree: directories and symlinks recreated in order, regular files spread over
//! lanes (largest first, so the lanes finish together), modes and times kept.

use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;

use super::destination::granted_mode;
use super::file::{copy_checked, SourcePath};
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
    /// FIFOs and device nodes recreated (devices only when running as root, as `cp -R` does).
    pub special_files: u64,
    /// Entries not copied, each with why (sockets; devices without root).
    pub skipped: Vec<Skipped>,
    pub bytes: u64,
    pub seconds: f64,
    pub gb_per_sec: f64,
    pub lanes: usize,
    pub syscalls: u64,
}

/// An entry of the tree that was not copied.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub path: PathBuf,
    pub why: String,
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
    /// FIFOs, sockets and device nodes, with their lstat.
    specials: Vec<(PathBuf, std::fs::Metadata)>,
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
            } else {
                // FIFOs, sockets and devices: recreated or reported, never dropped silently.
                let meta = std::fs::symlink_metadata(entry.path())
                    .map_err(|e| CopyError::io(format!("cannot stat {}", child.display()), e))?;
                out.specials.push((child, meta));
            }
        }
    }
    Ok(out)
}

/// Copies the tree `src` to `dst` (`dst/<name of src>` when `dst` is an existing directory),
/// regular files over `lanes` threads pinned to `cpus` when given. `progress(files, bytes)`
/// is called as files complete, from any lane.
///
/// Directories are created 0700 and get their source's mode (without set-id bits) last, on
/// every path out, failure and Ctrl-C included: no directory is ever wider than its source.
/// Files are opened beneath the source's root with no symlink followed (see `SourcePath`).
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
            special_files: 0,
            skipped: Vec::new(),
            bytes: r.bytes,
            seconds: r.seconds,
            gb_per_sec: r.gb_per_sec,
            lanes: 1,
            syscalls: r.syscalls,
        });
    }
    super::refuse_symlinked_destination(dst, opts)?;
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
    let source_root = rustix::fs::open(
        src,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(|e| CopyError::io(format!("cannot open {}", src.display()), e.into()))?;
    let started = Instant::now();
    let mut tree = walk(src)?;
    let mut created = Vec::with_capacity(tree.dirs.len());
    let copied = create_dirs(&root, &tree.dirs, &mut created).and_then(|()| {
        let links = make_links(&root, &tree.links)?;
        let (special_files, skipped) = make_specials(&root, &tree.specials)?;
        let runs = plan_runs(std::mem::take(&mut tree.files));
        let files =
            copy_files(source_root.as_fd(), src, &root, runs, opts, lanes, cpus, progress, stop)?;
        Ok((links, special_files, skipped, files))
    });
    // Final modes and times on every path out, deepest first (creating entries changes a
    // directory's mtime), for the directories this copy created.
    finish_dirs(&root, &tree.dirs, &created);
    let (symlinks, special_files, skipped, files) = copied?;
    let seconds = started.elapsed().as_secs_f64();
    Ok(TreeReport {
        source: src.into(),
        destination: root,
        files: files.files,
        directories: tree.dirs.len() as u64,
        symlinks,
        special_files,
        skipped,
        bytes: files.bytes,
        seconds,
        gb_per_sec: if seconds > 0.0 { files.bytes as f64 / seconds / 1e9 } else { 0.0 },
        lanes: files.lanes,
        syscalls: files.syscalls,
    })
}

/// Creates the tree's directories 0700 (private while they fill), parents first; `created`
/// says, per directory, whether this copy made it. An existing entry is used only if it is a
/// real directory: a symlink planted where a directory goes would carry the copy elsewhere.
fn create_dirs(
    root: &Path,
    dirs: &[(PathBuf, std::fs::Metadata)],
    created: &mut Vec<bool>,
) -> Result<(), CopyError> {
    use std::os::unix::fs::DirBuilderExt;
    for (rel, _) in dirs {
        let path = root.join(rel);
        match std::fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => created.push(true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
                    return Err(CopyError::DestinationNotDirectory(path));
                }
                created.push(false);
            }
            Err(e) => return Err(CopyError::io(format!("cannot create {}", path.display()), e)),
        }
    }
    Ok(())
}

/// Gives the directories this copy created their source's mode (without set-id bits) and
/// times, deepest first. Best effort: it runs on failure paths too.
fn finish_dirs(root: &Path, dirs: &[(PathBuf, std::fs::Metadata)], created: &[bool]) {
    for ((rel, meta), _) in dirs.iter().zip(created).rev().filter(|(_, &made)| made) {
        let path = root.join(rel);
        let mode = granted_mode(meta.mode(), true);
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode));
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
        let nofollow = rustix::fs::AtFlags::SYMLINK_NOFOLLOW;
        let _ = rustix::fs::utimensat(rustix::fs::CWD, &path, &times, nofollow);
    }
}

fn make_links(root: &Path, links: &[(PathBuf, PathBuf)]) -> Result<u64, CopyError> {
    for (rel, target) in links {
        let path = root.join(rel);
        let _ = std::fs::remove_file(&path);
        std::os::unix::fs::symlink(target, &path)
            .map_err(|e| CopyError::io(format!("cannot create {}", path.display()), e))?;
    }
    Ok(links.len() as u64)
}

/// Recreates FIFOs (and, as root, device nodes) as `cp -R` does; sockets cannot be recreated
/// (a socket file is only a name for a listening process), so they are reported as skipped.
fn make_specials(
    root: &Path,
    specials: &[(PathBuf, std::fs::Metadata)],
) -> Result<(u64, Vec<Skipped>), CopyError> {
    use rustix::fs::FileType;
    let root_user = rustix::process::geteuid().is_root();
    let (mut made, mut skipped) = (0, Vec::new());
    for (rel, meta) in specials {
        let kind = FileType::from_raw_mode(meta.mode());
        let why = match kind {
            FileType::Socket => Some("a socket: only a listening process can make one"),
            FileType::CharacterDevice | FileType::BlockDevice if !root_user => {
                Some("a device node: only root can create one")
            }
            FileType::Fifo | FileType::CharacterDevice | FileType::BlockDevice => None,
            _ => Some("an unknown file type"),
        };
        if let Some(why) = why {
            skipped.push(Skipped { path: rel.clone(), why: why.into() });
            continue;
        }
        let path = root.join(rel);
        let mode = rustix::fs::Mode::from_raw_mode(granted_mode(meta.mode(), false));
        let make = || rustix::fs::mknodat(rustix::fs::CWD, &path, kind, mode, meta.rdev());
        match make() {
            Err(rustix::io::Errno::EXIST) => {
                let _ = std::fs::remove_file(&path);
                make()
            }
            other => other,
        }
        .map_err(|e| CopyError::io(format!("cannot create {}", path.display()), e.into()))?;
        made += 1;
    }
    Ok((made, skipped))
}

/// What the lanes copied.
struct FilesCopied {
    files: u64,
    bytes: u64,
    syscalls: u64,
    lanes: usize,
}

/// Copies the regular files over lanes, each opened beneath `source_root`.
#[allow(clippy::too_many_arguments)]
fn copy_files(
    source_root: BorrowedFd<'_>,
    src: &Path,
    root: &Path,
    runs: Vec<Vec<FileJob>>,
    opts: &CopyOptions,
    lanes: usize,
    cpus: &[usize],
    progress: &(dyn Fn(u64, u64) + Sync),
    stop: &StopSignal,
) -> Result<FilesCopied, CopyError> {
    let next = AtomicUsize::new(0);
    let (files_done, bytes_done, calls) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let first_error: Mutex<Option<CopyError>> = Mutex::new(None);
    let failed = StopSignal::new();
    let lanes = lanes.clamp(1, runs.len().max(1));
    std::thread::scope(|scope| {
        for lane in 0..lanes {
            let (runs, next, failed, first_error) = (&runs, &next, &failed, &first_error);
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
                        let entry = SourcePath::Beneath { root: source_root, rel: &job.rel };
                        let (shown, to) = (src.join(&job.rel), root.join(&job.rel));
                        match copy_checked(entry, &shown, to, opts, &mut |_, _| {}, stop) {
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
        return Err(CopyError::Interrupted(root.into()));
    }
    Ok(FilesCopied {
        files: files_done.load(Ordering::Relaxed),
        bytes: bytes_done.load(Ordering::Relaxed),
        syscalls: calls.load(Ordering::Relaxed),
        lanes,
    })
}
