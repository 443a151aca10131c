//! A directory tree: directories and symlinks recreated in order, regular files spread over
//! lanes (largest first, so the lanes finish together), modes and times kept; with
//! `Preserve::ALL`, owners, attributes, hard links and special files as `cp -a`.

use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;

use super::file::{copy_checked, Copied, Keep, SourcePath};
use super::links::{link_to, LinkMap};
use super::preserve::{keep_owner, kept_mode, Losses, NotKept, OwnerTarget, Preserve};
use super::xattr::{copy_xattrs, open_beneath, XattrSource, XattrTarget};
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
    /// Names made as hard links to an earlier name's copy (`--preserve=links`), not copied.
    pub hard_links: u64,
    /// What was asked to be kept.
    pub preserve: Preserve,
    /// Attributes asked for that the destination could not keep, once per kind with a count.
    pub not_kept: Vec<NotKept>,
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
    /// Symlinks (read and, when their owner, times or attributes are kept, lstat-ed by the
    /// thread that makes them, beside the file lanes).
    links: Vec<PathBuf>,
    /// FIFOs, sockets and device nodes, with their lstat.
    specials: Vec<(PathBuf, std::fs::Metadata)>,
}

/// Walks the tree below `root`. `one_file_system`: list no
/// directory on another file system than the root's (it is still created, empty, as cp -x).
fn walk(root: &Path, one_file_system: bool) -> Result<Walk, CopyError> {
    let mut out = Walk::default();
    let mut pending = vec![PathBuf::new()];
    let mut root_dev = None;
    while let Some(rel) = pending.pop() {
        let dir = root.join(&rel);
        let meta = std::fs::symlink_metadata(&dir)
            .map_err(|e| CopyError::io(format!("cannot stat {}", dir.display()), e))?;
        let foreign = *root_dev.get_or_insert(meta.dev()) != meta.dev();
        out.dirs.push((rel.clone(), meta));
        if foreign && one_file_system {
            continue;
        }
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
                out.links.push(child);
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
    if opts.no_dereference {
        if let Ok(link) = std::fs::symlink_metadata(src) {
            if link.file_type().is_symlink() {
                return copy_named_symlink(src, dst, &link, opts);
            }
        }
    }
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
            hard_links: 0,
            preserve: opts.preserve,
            not_kept: r.not_kept,
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
    let p = opts.preserve;
    let link_meta = p.ownership || p.timestamps || p.xattr;
    let mut tree = walk(src, opts.one_file_system)?;
    let losses = Losses::default();
    let ctx = Finish { source_root: source_root.as_fd(), root: &root, opts, losses: &losses };
    let mut created = Vec::with_capacity(tree.dirs.len());
    let copied = create_dirs(&root, &tree.dirs, &mut created).and_then(|()| {
        let (special_files, special_links, skipped) = make_specials(&ctx, &tree.specials)?;
        let runs = plan_runs(std::mem::take(&mut tree.files));
        // Symlinks are made beside the file lanes, not before them: the directories exist,
        // and nothing else touches a symlink's name.
        let (links, files) = std::thread::scope(|scope| {
            let links = scope.spawn(|| make_links(&ctx, src, &tree.links, link_meta));
            let files = copy_files(&ctx, src, runs, lanes, cpus, progress, stop);
            let links = links.join().unwrap_or_else(|_| {
                Err(CopyError::io("making symlinks", std::io::Error::other("the thread panicked")))
            });
            (links, files)
        });
        Ok((links?, special_files, special_links, skipped, files?))
    });
    // Final owners, attributes, modes and times on every path out, deepest first (creating
    // entries changes a directory's mtime; a default ACL set early would be inherited by the
    // copies), for the directories this copy created.
    finish_dirs(&ctx, &tree.dirs, &created, lanes);
    let (symlinks, special_files, special_links, skipped, files) = copied?;
    let seconds = started.elapsed().as_secs_f64();
    Ok(TreeReport {
        source: src.into(),
        destination: root.clone(),
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
        hard_links: files.hard_links + special_links,
        preserve: opts.preserve,
        not_kept: losses.report(),
    })
}

/// What finishing an entry needs: where its source is (for its attributes), where the copy
/// goes, what to keep and where to count what could not be kept.
struct Finish<'a> {
    source_root: BorrowedFd<'a>,
    root: &'a Path,
    opts: &'a CopyOptions,
    losses: &'a Losses,
}

impl Finish<'_> {
    /// Gives the entry `rel` the copy made at `path` its source's owner and attributes, then
    /// (except for symlinks, which have none of their own) its mode, then its times.
    fn entry(&self, rel: &Path, path: &Path, meta: &std::fs::Metadata, kind: Entry) {
        let keep = self.opts.preserve;
        let shown = if rel.as_os_str().is_empty() { self.root } else { rel };
        let owner_kept = keep.ownership
            && keep_owner(OwnerTarget::Path(path), meta.uid(), meta.gid(), shown, self.losses);
        if keep.xattr {
            match open_beneath(self.source_root, rel) {
                Ok(fd) => copy_xattrs(
                    XattrSource::Opened(fd.as_fd()),
                    XattrTarget::Path(path),
                    owner_kept,
                    shown,
                    self.losses,
                ),
                Err(e) => self.losses.record(super::LossKind::Xattr, shown, || {
                    format!("cannot open the source to read its attributes ({e})")
                }),
            }
        }
        if kind != Entry::Symlink {
            let mode = kept_mode(meta.mode(), kind == Entry::Directory, keep.mode, owner_kept);
            let _ = chmod_nofollow(path, mode);
        }
        if keep.timestamps {
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
            let _ = rustix::fs::utimensat(rustix::fs::CWD, path, &times, nofollow);
        }
    }
}

/// chmod(2) that never follows a symlink at `path` (fchmodat's AT_SYMLINK_NOFOLLOW needs
/// fchmodat2, Linux 6.6): the entry is opened `O_PATH|O_NOFOLLOW`, checked not to be a
/// symlink, and changed through its /proc/self/fd name, so a FIFO swapped for a symlink to
/// /etc/shadow in a destination directory another user can write never has root chmod it.
fn chmod_nofollow(path: &Path, mode: u32) -> std::io::Result<()> {
    use rustix::fs::{FileType, Mode, OFlags};
    use std::os::fd::AsRawFd;
    let fd =
        rustix::fs::open(path, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())?;
    let stat = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink {
        return Err(rustix::io::Errno::LOOP.into());
    }
    let by_fd = format!("/proc/self/fd/{}", fd.as_raw_fd());
    Ok(rustix::fs::chmod(by_fd.as_str(), Mode::from_raw_mode(mode))?)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    Directory,
    Symlink,
    Special,
}

/// `cp -a LINK DST`: the symlink named as the source is copied as a symlink (cp's `-d`), with
/// its owner, attributes and times, under a temporary name renamed over `dst` (a file or
/// symlink there is replaced atomically; a directory is copied into).
fn copy_named_symlink(
    src: &Path,
    dst: &Path,
    meta: &std::fs::Metadata,
    opts: &CopyOptions,
) -> Result<TreeReport, CopyError> {
    let started = Instant::now();
    super::refuse_symlinked_destination(dst, opts)?;
    let name = src.file_name().ok_or_else(|| CopyError::SourceUnsupported(src.into()))?;
    let to = if dst.is_dir() { dst.join(name) } else { dst.to_path_buf() };
    let parent = match src.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let target = std::fs::read_link(src)
        .map_err(|e| CopyError::io(format!("cannot read {}", src.display()), e))?;
    let temp = super::destination::temp_name(&to);
    std::os::unix::fs::symlink(&target, &temp).map_err(|e| {
        CopyError::io(format!("cannot create a symlink beside {}", to.display()), e)
    })?;
    let source_dir = rustix::fs::open(
        parent,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(|e| CopyError::io(format!("cannot open {}", parent.display()), e.into()));
    let losses = Losses::default();
    let finished = source_dir.and_then(|dir| {
        let ctx = Finish { source_root: dir.as_fd(), root: &to, opts, losses: &losses };
        ctx.entry(Path::new(name), &temp, meta, Entry::Symlink);
        std::fs::rename(&temp, &to)
            .map_err(|e| CopyError::io(format!("cannot put {} in place", to.display()), e))
    });
    if let Err(e) = finished {
        let _ = std::fs::remove_file(&temp);
        return Err(e);
    }
    Ok(TreeReport {
        source: src.into(),
        destination: to,
        files: 0,
        directories: 0,
        symlinks: 1,
        special_files: 0,
        skipped: Vec::new(),
        bytes: 0,
        seconds: started.elapsed().as_secs_f64(),
        gb_per_sec: 0.0,
        lanes: 1,
        syscalls: 0,
        hard_links: 0,
        preserve: opts.preserve,
        not_kept: losses.report(),
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

/// Gives the directories this copy created their source's owner, attributes, mode (set-id
/// bits only with the owner) and times, deepest first: level by level from the deepest, each
/// level spread over `lanes` threads (a directory's children are all finished before it).
/// Best effort: it runs on failure paths too.
fn finish_dirs(
    ctx: &Finish<'_>,
    dirs: &[(PathBuf, std::fs::Metadata)],
    created: &[bool],
    lanes: usize,
) {
    let mut levels: Vec<Vec<usize>> = Vec::new();
    for (i, ((rel, _), _)) in dirs.iter().zip(created).enumerate().filter(|(_, (_, &m))| m) {
        let depth = rel.components().count();
        if levels.len() <= depth {
            levels.resize_with(depth + 1, Vec::new);
        }
        levels[depth].push(i);
    }
    let finish = |i: &usize| {
        let (rel, meta) = &dirs[*i];
        ctx.entry(rel, &ctx.root.join(rel), meta, Entry::Directory);
    };
    let finish = &finish;
    for level in levels.iter().rev() {
        // Threads pay off only for a level with many directories.
        if lanes < 2 || level.len() < 64 {
            level.iter().for_each(finish);
            continue;
        }
        std::thread::scope(|scope| {
            for part in level.chunks(level.len().div_ceil(lanes)) {
                scope.spawn(move || part.iter().for_each(finish));
            }
        });
    }
}

/// Recreates the symlinks `links` (paths below `src`), each with its own owner, attributes
/// and times when `link_meta` (read here, by this thread, beside the file lanes).
fn make_links(
    ctx: &Finish<'_>,
    src: &Path,
    links: &[PathBuf],
    link_meta: bool,
) -> Result<u64, CopyError> {
    for rel in links {
        let from = src.join(rel);
        let target =
            std::fs::read_link(&from).map_err(|e| CopyError::io("cannot read a symlink", e))?;
        let path = ctx.root.join(rel);
        // Replace what is there only when something is (one unlink fewer per symlink of a
        // fresh copy).
        let made = match std::os::unix::fs::symlink(&target, &path) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let _ = std::fs::remove_file(&path);
                std::os::unix::fs::symlink(&target, &path)
            }
            other => other,
        };
        made.map_err(|e| CopyError::io(format!("cannot create {}", path.display()), e))?;
        if link_meta {
            let meta = std::fs::symlink_metadata(&from)
                .map_err(|e| CopyError::io(format!("cannot stat {}", from.display()), e))?;
            ctx.entry(rel, &path, &meta, Entry::Symlink);
        }
    }
    Ok(links.len() as u64)
}

/// Recreates FIFOs, sockets (with `sockets`, as `cp -a` does) and, as root, device nodes;
/// anything else is reported as skipped. With `--preserve=links`, a second name of a special
/// file is linked to the first one's copy. Returns (made, linked, skipped).
fn make_specials(
    ctx: &Finish<'_>,
    specials: &[(PathBuf, std::fs::Metadata)],
) -> Result<(u64, u64, Vec<Skipped>), CopyError> {
    use rustix::fs::FileType;
    let root_user = rustix::process::geteuid().is_root();
    let (mut made, mut linked, mut skipped) = (0, 0, Vec::new());
    let mut firsts: std::collections::HashMap<(u64, u64), PathBuf> = Default::default();
    for (rel, meta) in specials {
        let kind = FileType::from_raw_mode(meta.mode());
        let why = match kind {
            FileType::Socket if !ctx.opts.sockets => {
                Some("a socket: only a listening process can make one (-a recreates its name)")
            }
            FileType::CharacterDevice | FileType::BlockDevice if !root_user => {
                Some("a device node: only root can create one")
            }
            FileType::Fifo
            | FileType::Socket
            | FileType::CharacterDevice
            | FileType::BlockDevice => None,
            _ => Some("an unknown file type"),
        };
        if let Some(why) = why {
            skipped.push(Skipped { path: rel.clone(), why: why.into() });
            continue;
        }
        let path = ctx.root.join(rel);
        if ctx.opts.preserve.links && meta.nlink() > 1 {
            if let Some(first) = firsts.get(&(meta.dev(), meta.ino())) {
                link_to(first, &path)
                    .map_err(|e| CopyError::io(format!("cannot link {}", path.display()), e))?;
                linked += 1;
                continue;
            }
            firsts.insert((meta.dev(), meta.ino()), path.clone());
        }
        // Created without set-id bits and under the umask; `entry` sets the exact mode.
        let mode = rustix::fs::Mode::from_raw_mode(meta.mode() & 0o777);
        let make = || rustix::fs::mknodat(rustix::fs::CWD, &path, kind, mode, meta.rdev());
        match make() {
            Err(rustix::io::Errno::EXIST) => {
                let _ = std::fs::remove_file(&path);
                make()
            }
            other => other,
        }
        .map_err(|e| CopyError::io(format!("cannot create {}", path.display()), e.into()))?;
        ctx.entry(rel, &path, meta, Entry::Special);
        made += 1;
    }
    Ok((made, linked, skipped))
}

/// What the lanes copied.
struct FilesCopied {
    files: u64,
    bytes: u64,
    syscalls: u64,
    lanes: usize,
    hard_links: u64,
}

/// Copies the regular files over lanes, each opened beneath `source_root`; with
/// `--preserve=links`, second names are linked once the lanes are done (see `links`).
fn copy_files(
    ctx: &Finish<'_>,
    src: &Path,
    runs: Vec<Vec<FileJob>>,
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
    let (source_root, root, opts) = (ctx.source_root, ctx.root, ctx.opts);
    let link_map = opts.preserve.links.then(LinkMap::default);
    let keep = Keep { losses: ctx.losses, links: link_map.as_ref() };
    let second_names: Mutex<Vec<(PathBuf, PathBuf)>> = Mutex::default();
    std::thread::scope(|scope| {
        for lane in 0..lanes {
            let (runs, next, failed, first_error) = (&runs, &next, &failed, &first_error);
            let (keep, second_names) = (&keep, &second_names);
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
                    // Second names met in this run, handed over once per run (rarely any).
                    let mut later = Vec::new();
                    for job in run {
                        let entry = SourcePath::Beneath { root: source_root, rel: &job.rel };
                        let (shown, to) = (src.join(&job.rel), root.join(&job.rel));
                        match copy_checked(
                            entry,
                            &shown,
                            to.clone(),
                            opts,
                            keep,
                            &mut |_, _| {},
                            stop,
                        ) {
                            Ok(Copied::Data(report)) => {
                                run_bytes += report.bytes;
                                run_calls += report.syscalls;
                            }
                            Ok(Copied::SecondName(first)) => later.push((first, to)),
                            Err(e) => {
                                failed.stop();
                                let mut slot =
                                    first_error.lock().unwrap_or_else(|p| p.into_inner());
                                slot.get_or_insert(e);
                                return;
                            }
                        }
                    }
                    if !later.is_empty() {
                        second_names.lock().unwrap_or_else(|p| p.into_inner()).append(&mut later);
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
    // Every first name is in place now: link the others to it.
    let second_names = second_names.into_inner().unwrap_or_else(|p| p.into_inner());
    for (first, to) in &second_names {
        link_to(first, to)
            .map_err(|e| CopyError::io(format!("cannot link {}", to.display()), e))?;
    }
    let hard_links = second_names.len() as u64;
    Ok(FilesCopied {
        files: files_done.load(Ordering::Relaxed) - hard_links,
        bytes: bytes_done.load(Ordering::Relaxed),
        syscalls: calls.load(Ordering::Relaxed),
        lanes,
        hard_links,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn chmod_nofollow_refuses_a_symlink_and_leaves_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"x").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
        let planted = dir.path().join("fifo");
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        assert!(chmod_nofollow(&planted, 0o666).is_err());
        assert_eq!(std::fs::metadata(&victim).unwrap().mode() & 0o777, 0o600);
        chmod_nofollow(&victim, 0o640).unwrap();
        assert_eq!(std::fs::metadata(&victim).unwrap().mode() & 0o777, 0o640);
    }
}
