//! A directory tree: directories and symlinks recreated in order, regular files spread over
//! lanes (largest first, so the lanes finish together), modes and times kept; with
//! `Preserve::ALL`, owners, attributes, hard links and special files as `cp -a`.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;

use super::dest_tree::{DestTree, DirSlot, HeldDir};
use super::destination::open_destination;
use super::file::{copy_checked, Copied, Keep, SourcePath, Target};
use super::finish::{finish_dirs, Entry, Finish, Place};
use super::links::{link_to, LinkMap, Made};
use super::preserve::{Losses, NotKept, Preserve};
use super::source_mount::SourceMount;
use super::xattr::open_beneath;
use super::{copy_file, CopyError, CopyOptions};
use crate::fs::{random_name, Dir};
use crate::lane::{run_scoped, Placement, StopSignal};
use crate::topology::CpuList;

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
    /// Entries not copied, each with why (sockets; devices without root or from a `nodev`
    /// mount).
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
    /// Attributes asked for that the destination could not keep (or the source's mount did not
    /// honour), once per kind with a count.
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

/// The tree below the source, in creation order (parents before children, depth first). Every
/// entry knows its directory's index in `dirs`, where the copy reopens it.
#[derive(Default)]
struct Walk {
    dirs: Vec<DirSlot>,
    /// The source directories' lstat, by the same index.
    metas: Vec<std::fs::Metadata>,
    /// The mount each source directory is read from, by the same index.
    mounts: Vec<SourceMount>,
    files: Vec<FileJob>,
    /// Symlinks and their directory (read and, when their owner, times or attributes are kept,
    /// lstat-ed by the thread that makes them, beside the file lanes).
    links: Vec<(PathBuf, usize)>,
    /// FIFOs, sockets and device nodes.
    specials: Vec<Special>,
}

/// A FIFO, socket or device node of the source: where it is, its lstat and its mount.
struct Special {
    rel: PathBuf,
    dir: usize,
    meta: std::fs::Metadata,
    mount: SourceMount,
}

/// Walks the tree below the source root `root` (shown as `shown`), every directory opened
/// beneath it with no symlink followed and its owner, mode, times and mount read from its
/// descriptor (a directory swapped for a symlink mid-walk fails the walk; it is never followed).
/// `one_file_system`: list no directory on another file system than the root's (it is still
/// created, empty, as cp -x). One directory is open at a time.
fn walk(root: BorrowedFd<'_>, shown: &Path, one_file_system: bool) -> Result<Walk, CopyError> {
    let mut out = Walk::default();
    let mut pending = vec![(PathBuf::new(), 0)];
    let mut root_dev = None;
    while let Some((rel, parent)) = pending.pop() {
        let path = shown.join(&rel);
        let failed = |what: &str, e: std::io::Error| {
            CopyError::io(format!("cannot {what} {}", path.display()), e)
        };
        let file =
            std::fs::File::from(open_beneath(root, &rel, true).map_err(|e| failed("open", e))?);
        let meta = file.metadata().map_err(|e| failed("stat", e))?;
        let foreign = *root_dev.get_or_insert(meta.dev()) != meta.dev();
        out.dirs.push(DirSlot::new(rel.clone(), parent));
        out.mounts.push(SourceMount::read(&file, meta.dev()));
        out.metas.push(meta);
        if foreign && one_file_system {
            continue;
        }
        let dir_index = out.dirs.len() - 1;
        let mut nth_in_dir = 0;
        let mut entries =
            rustix::fs::Dir::new(OwnedFd::from(file)).map_err(|e| failed("list", e.into()))?;
        while let Some(entry) = entries.read() {
            let entry = entry.map_err(|e| failed("list", e.into()))?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            let child = rel.join(name);
            let kind = match entry.file_type() {
                // DT_UNKNOWN: this file system's readdir does not say; ask (not followed).
                rustix::fs::FileType::Unknown => {
                    let nofollow = rustix::fs::AtFlags::SYMLINK_NOFOLLOW;
                    let stat = entries
                        .fd()
                        .and_then(|fd| rustix::fs::statat(fd, name, nofollow))
                        .map_err(|e| failed("stat an entry of", e.into()))?;
                    rustix::fs::FileType::from_raw_mode(stat.st_mode)
                }
                kind => kind,
            };
            match kind {
                rustix::fs::FileType::Directory => pending.push((child, dir_index)),
                rustix::fs::FileType::Symlink => out.links.push((child, dir_index)),
                rustix::fs::FileType::RegularFile => {
                    out.files.push(FileJob { rel: child, dir: dir_index, nth_in_dir });
                    nth_in_dir += 1;
                }
                // FIFOs, sockets and devices: recreated or reported, never dropped silently.
                _ => {
                    let entry = open_beneath(root, &child, false)
                        .map_err(|e| failed("open an entry of", e))?;
                    let entry = std::fs::File::from(entry);
                    let meta = entry.metadata().map_err(|e| failed("stat an entry of", e))?;
                    let mount = out.mounts[dir_index].of_entry(&entry, meta.dev());
                    out.specials.push(Special { rel: child, dir: dir_index, meta, mount });
                }
            }
        }
    }
    Ok(out)
}

/// Copies the tree `src` to `dst` (`dst/<name of src>` when `dst` is an existing directory),
/// regular files over `lanes` threads pinned round-robin to `cpus` when given (each checked
/// online before anything is made). `progress(files, bytes)`
/// is called as files complete, from any lane.
///
/// Directories are created 0700 and get their source's mode (without set-id bits) last, on
/// every path out, failure and Ctrl-C included: no directory is ever wider than its source.
/// Files are opened beneath the source's root with no symlink followed (see `SourcePath`).
/// The destination path is trusted once, when its directory is opened: every entry is then
/// made by one name in a directory reached from that descriptor (see `DestTree`), so a
/// destination directory swapped for a symlink mid-copy fails the copy instead of carrying it.
pub fn copy_tree(
    src: &Path,
    dst: &Path,
    opts: &CopyOptions,
    lanes: usize,
    cpus: &[usize],
    progress: &(dyn Fn(u64, u64) + Sync),
    stop: &StopSignal,
) -> Result<TreeReport, CopyError> {
    let placement = Placement::from_pin((!cpus.is_empty()).then(|| CpuList::new(cpus.to_vec())));
    placement.check()?;
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
    // `copy -r . backup/` copies into backup/<this directory's name>.
    let named = std::fs::canonicalize(src).unwrap_or_else(|_| src.to_path_buf());
    let own = named.file_name().ok_or_else(|| CopyError::SourceUnsupported(src.into()))?;
    let (parent, root_name, root) = open_destination(dst, own, opts.follow_destination_symlink)?;
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
    let mut tree = walk(source_root.as_fd(), src, opts.one_file_system)?;
    let losses = Losses::default();
    let mounts = std::mem::take(&mut tree.mounts);
    let ctx = Finish {
        source_root: source_root.as_fd(),
        root: &root,
        opts,
        losses: &losses,
        mounts: &mounts,
    };
    let dirs = std::mem::take(&mut tree.dirs);
    let (dest, made) = DestTree::create(&parent, &root_name, root.clone(), dirs)?;
    drop(parent);
    let copied = made.and_then(|()| {
        copy_entries(&ctx, &dest, src, &mut tree, lanes, &placement, progress, stop)
    });
    // Final owners, attributes, modes and times on every path out, deepest first (creating
    // entries changes a directory's mtime; a default ACL set early would be inherited by the
    // copies), for the directories this copy created.
    finish_dirs(&ctx, &dest, &tree.metas, lanes);
    let (symlinks, special_files, special_links, skipped, files) = copied?;
    let seconds = started.elapsed().as_secs_f64();
    Ok(TreeReport {
        source: src.into(),
        destination: root,
        files: files.files,
        directories: tree.metas.len() as u64,
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

/// What the tree's entries came to: symlinks, special files made, special files linked,
/// skipped entries, and the files.
type EntriesCopied = (u64, u64, u64, Vec<Skipped>, FilesCopied);

/// Makes everything below the directories: special files, then symlinks beside the file lanes.
#[allow(clippy::too_many_arguments)]
fn copy_entries(
    ctx: &Finish<'_>,
    dest: &DestTree,
    src: &Path,
    tree: &mut Walk,
    lanes: usize,
    placement: &Placement,
    progress: &(dyn Fn(u64, u64) + Sync),
    stop: &StopSignal,
) -> Result<EntriesCopied, CopyError> {
    let p = ctx.opts.preserve;
    let link_meta = p.ownership || p.timestamps || p.xattr;
    let (special_files, special_links, skipped) = make_specials(ctx, dest, &tree.specials)?;
    let runs = plan_runs(std::mem::take(&mut tree.files));
    // Symlinks are made beside the file lanes, not before them: the directories exist,
    // and nothing else touches a symlink's name.
    let (links, files) = std::thread::scope(|scope| {
        let links = scope.spawn(|| make_links(ctx, dest, src, &tree.links, link_meta));
        let files = copy_files(ctx, dest, src, runs, lanes, placement, progress, stop);
        let links = links.join().unwrap_or_else(|_| {
            Err(CopyError::io("making symlinks", std::io::Error::other("the thread panicked")))
        });
        (links, files)
    });
    Ok((links?, special_files, special_links, skipped, files?))
}

/// `cp -a LINK DST`: the symlink named as the source is copied as a symlink (cp's `-d`), with
/// its owner, attributes and times, under a temporary name renamed over `dst` (a file or
/// symlink there is replaced atomically; a directory is copied into), all in the destination
/// directory's descriptor.
fn copy_named_symlink(
    src: &Path,
    dst: &Path,
    meta: &std::fs::Metadata,
    opts: &CopyOptions,
) -> Result<TreeReport, CopyError> {
    let started = Instant::now();
    let name = src.file_name().ok_or_else(|| CopyError::SourceUnsupported(src.into()))?;
    let (dir, to_name, to) = open_destination(dst, name, opts.follow_destination_symlink)?;
    let parent = match src.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let target = std::fs::read_link(src)
        .map_err(|e| CopyError::io(format!("cannot read {}", src.display()), e))?;
    let temp = random_name(&to_name);
    dir.symlink(&target, &temp).map_err(|e| {
        CopyError::io(format!("cannot create a symlink beside {}", to.display()), e)
    })?;
    let source_dir = rustix::fs::open(
        parent,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(|e| CopyError::io(format!("cannot open {}", parent.display()), e.into()));
    let losses = Losses::default();
    let finished = source_dir.and_then(|source| {
        let mount = SourceMount::read(&source, meta.dev());
        let mounts = [mount];
        let ctx = Finish {
            source_root: source.as_fd(),
            root: &to,
            opts,
            losses: &losses,
            mounts: &mounts,
        };
        let node = dir
            .take_made(&temp, rustix::fs::FileType::Symlink)
            .map_err(|e| CopyError::io(format!("cannot finish {}", to.display()), e))?;
        ctx.entry(Path::new(name), Place::Node(&node), meta, Entry::Symlink, mount);
        dir.rename(&temp, &dir, &to_name)
            .map_err(|e| CopyError::io(format!("cannot put {} in place", to.display()), e))
    });
    if let Err(e) = finished {
        let _ = dir.remove_file(&temp);
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

/// The last name of a walked entry (every entry below the root has one).
fn last_name(rel: &Path) -> &OsStr {
    rel.file_name().unwrap_or_default()
}

/// Replaces what is at `name` in `dir` by what `make` creates there: only when something is
/// (one unlink fewer per entry of a fresh copy), and only a non-directory (unlinkat).
fn make_or_replace(
    dir: &Dir,
    name: &OsStr,
    make: impl Fn() -> std::io::Result<()>,
) -> std::io::Result<()> {
    match make() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let _ = dir.remove_file(name);
            make()
        }
        other => other,
    }
}

/// Recreates the symlinks `links` (paths below `src`, with their directory), each with its
/// own owner, attributes and times when `link_meta` (read here, by this thread, beside the
/// file lanes).
fn make_links(
    ctx: &Finish<'_>,
    dest: &DestTree,
    src: &Path,
    links: &[(PathBuf, usize)],
    link_meta: bool,
) -> Result<u64, CopyError> {
    let mut held = HeldDir::default();
    for (rel, index) in links {
        let from = src.join(rel);
        let failed = |e| CopyError::io(format!("cannot read the symlink {}", from.display()), e);
        // The symlink itself, opened beneath the source root: its target and its own owner
        // and times come from the descriptor, not from a path looked up again.
        let link = open_beneath(ctx.source_root, rel, false).map_err(failed)?;
        let target = rustix::fs::readlinkat(&link, "", Vec::new())
            .map_err(|e| failed(e.into()))?
            .into_bytes();
        let target = PathBuf::from(OsString::from_vec(target));
        let dir = held.get(dest, *index)?;
        let name = last_name(rel);
        make_or_replace(dir, name, || dir.symlink(&target, name))
            .map_err(|e| CopyError::io(format!("cannot create {}", dest.path(rel).display()), e))?;
        if link_meta {
            let meta = std::fs::File::from(link).metadata().map_err(failed)?;
            let node = dir.take_made(name, rustix::fs::FileType::Symlink).map_err(|e| {
                CopyError::io(format!("cannot finish {}", dest.path(rel).display()), e)
            })?;
            ctx.entry(rel, Place::Node(&node), &meta, Entry::Symlink, ctx.mounts[*index]);
        }
    }
    Ok(links.len() as u64)
}

/// Why a special file of this kind, read from `mount`, is not copied, if it is not.
fn special_skip(kind: rustix::fs::FileType, sockets: bool, mount: SourceMount) -> Option<String> {
    use rustix::fs::FileType;
    match kind {
        FileType::Socket if !sockets => {
            Some("a socket: only a listening process can make one (-a recreates its name)".into())
        }
        FileType::CharacterDevice | FileType::BlockDevice
            if !rustix::process::geteuid().is_root() =>
        {
            Some("a device node: only root can create one".into())
        }
        FileType::CharacterDevice | FileType::BlockDevice => {
            mount.device_skip().map(|why| format!("a device node: {why}"))
        }
        FileType::Fifo | FileType::Socket => None,
        _ => Some("an unknown file type".into()),
    }
}

/// Recreates FIFOs, sockets (with `sockets`, as `cp -a` does) and, as root, device nodes not
/// read from a `nodev` mount; anything else is reported as skipped. With `--preserve=links`, a second name of a special
/// file is linked to the first one's copy. Returns (made, linked, skipped).
fn make_specials(
    ctx: &Finish<'_>,
    dest: &DestTree,
    specials: &[Special],
) -> Result<(u64, u64, Vec<Skipped>), CopyError> {
    let (mut made, mut linked, mut skipped) = (0, 0, Vec::new());
    // Each multiply-linked source inode's first copy: where, and its (device, inode).
    let mut firsts: std::collections::HashMap<(u64, u64), (Made, (u64, u64))> = Default::default();
    let mut held = HeldDir::default();
    for Special { rel, dir: index, meta, mount } in specials {
        let kind = rustix::fs::FileType::from_raw_mode(meta.mode());
        if let Some(why) = special_skip(kind, ctx.opts.sockets, *mount) {
            skipped.push(Skipped { path: rel.clone(), why });
            continue;
        }
        let (path, name) = (dest.path(rel), last_name(rel));
        let linked_source = ctx.opts.preserve.links && meta.nlink() > 1;
        if linked_source {
            if let Some((first, copy)) = firsts.get(&(meta.dev(), meta.ino())) {
                let first_dir = dest.open(first.dir).map_err(|e| dest.open_error(first.dir, e))?;
                let dir = held.get(dest, *index)?;
                link_to(&first_dir, &first.name, Some(*copy), dir, name)
                    .map_err(|e| CopyError::io(format!("cannot link {}", path.display()), e))?;
                linked += 1;
                continue;
            }
        }
        let dir = held.get(dest, *index)?;
        // Created without set-id bits and under the umask; `entry` sets the exact mode.
        let mode = meta.mode() & 0o777;
        make_or_replace(dir, name, || dir.mknod(name, kind, mode, meta.rdev()))
            .map_err(|e| CopyError::io(format!("cannot create {}", path.display()), e))?;
        let node = dir
            .take_made(name, kind)
            .map_err(|e| CopyError::io(format!("cannot finish {}", path.display()), e))?;
        ctx.entry(rel, Place::Node(&node), meta, Entry::Special, *mount);
        if linked_source {
            let copy = rustix::fs::fstat(&node).map_err(|e| {
                CopyError::io(format!("cannot read back {}", path.display()), e.into())
            })?;
            let first = Made { dir: *index, name: name.into() };
            firsts.insert((meta.dev(), meta.ino()), (first, (copy.st_dev, copy.st_ino)));
        }
        made += 1;
    }
    Ok((made, linked, skipped))
}

/// A later name of a hard-linked source file, linked once the lanes are done: to its first
/// name's copy, found by the source inode.
struct SecondName {
    first: Made,
    source: (u64, u64),
    to: Made,
}

/// What the lanes copied.
struct FilesCopied {
    files: u64,
    bytes: u64,
    syscalls: u64,
    lanes: usize,
    hard_links: u64,
}

/// What the lanes share: the runs to claim, how far they got, the first error.
struct Lanes<'a> {
    runs: &'a [Vec<FileJob>],
    next: AtomicUsize,
    files_done: AtomicU64,
    bytes_done: AtomicU64,
    calls: AtomicU64,
    first_error: Mutex<Option<CopyError>>,
    failed: StopSignal,
    /// Second names of hard-linked files: (first name's copy, this name), linked at the end.
    second_names: Mutex<Vec<SecondName>>,
}

impl Lanes<'_> {
    fn fail(&self, e: CopyError) {
        self.failed.stop();
        self.first_error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
    }
}

/// One lane: claims runs of files (all in one directory), holds that directory open while it
/// copies them into it, and records second names of hard-linked files for later.
fn lane_loop(
    ctx: &Finish<'_>,
    dest: &DestTree,
    src: &Path,
    shared: &Lanes<'_>,
    keep: &Keep<'_>,
    progress: &(dyn Fn(u64, u64) + Sync),
    stop: &StopSignal,
) {
    let mut held = HeldDir::default();
    loop {
        if stop.is_stopped() || shared.failed.is_stopped() {
            break;
        }
        let Some(run) = shared.runs.get(shared.next.fetch_add(1, Ordering::Relaxed)) else {
            break;
        };
        let (mut run_bytes, mut run_calls) = (0, 0);
        // Second names met in this run, handed over once per run (rarely any).
        let mut later = Vec::new();
        for job in run {
            let dir = match held.get(dest, job.dir) {
                Ok(dir) => dir,
                Err(e) => return shared.fail(e),
            };
            let entry = SourcePath::Beneath {
                root: ctx.source_root,
                rel: &job.rel,
                dir: ctx.mounts[job.dir],
            };
            let name = last_name(&job.rel);
            let to = Target { dir, index: job.dir, name, path: dest.path(&job.rel) };
            match copy_checked(entry, &src.join(&job.rel), to, ctx.opts, keep, &mut |_, _| {}, stop)
            {
                Ok(Copied::Data(report)) => {
                    run_bytes += report.bytes;
                    run_calls += report.syscalls;
                }
                Ok(Copied::SecondName { first, source }) => later.push(SecondName {
                    first,
                    source,
                    to: Made { dir: job.dir, name: name.into() },
                }),
                Err(e) => return shared.fail(e),
            }
        }
        if !later.is_empty() {
            shared.second_names.lock().unwrap_or_else(|p| p.into_inner()).append(&mut later);
        }
        shared.calls.fetch_add(run_calls, Ordering::Relaxed);
        let n = run.len() as u64;
        let files = shared.files_done.fetch_add(n, Ordering::Relaxed) + n;
        let bytes = shared.bytes_done.fetch_add(run_bytes, Ordering::Relaxed) + run_bytes;
        progress(files, bytes);
    }
}

/// Copies the regular files over lanes, each opened beneath `source_root`; with
/// `--preserve=links`, second names are linked once the lanes are done (see `links`), between
/// directories reopened from the destination root.
#[allow(clippy::too_many_arguments)]
fn copy_files(
    ctx: &Finish<'_>,
    dest: &DestTree,
    src: &Path,
    runs: Vec<Vec<FileJob>>,
    lanes: usize,
    placement: &Placement,
    progress: &(dyn Fn(u64, u64) + Sync),
    stop: &StopSignal,
) -> Result<FilesCopied, CopyError> {
    let lanes = lanes.clamp(1, runs.len().max(1));
    let link_map = ctx.opts.preserve.links.then(LinkMap::default);
    let keep = Keep { losses: ctx.losses, links: link_map.as_ref() };
    let shared = Lanes {
        runs: &runs,
        next: AtomicUsize::new(0),
        files_done: AtomicU64::new(0),
        bytes_done: AtomicU64::new(0),
        calls: AtomicU64::new(0),
        first_error: Mutex::new(None),
        failed: StopSignal::new(),
        second_names: Mutex::default(),
    };
    // A lane that cannot be pinned raises `failed`, so the others stop early.
    let pinned = run_scoped("copy", lanes, placement, &shared.failed, |_| {
        lane_loop(ctx, dest, src, &shared, &keep, progress, stop);
        Ok(())
    });
    if let Some(e) = shared.first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    pinned.map_err(|e| CopyError::io("a copy lane failed", e))?;
    if stop.is_stopped() {
        return Err(CopyError::Interrupted(ctx.root.into()));
    }
    // Every first name is in place now: link the others to it.
    let second_names = shared.second_names.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut held = HeldDir::default();
    for SecondName { first, source: (dev, ino), to } in &second_names {
        let shown = dest.path(&dest.dirs[to.dir].rel).join(&to.name);
        let failed = |e| CopyError::io(format!("cannot link {}", shown.display()), e);
        let first_dir = dest.open(first.dir).map_err(|e| dest.open_error(first.dir, e))?;
        let dir = held.get(dest, to.dir)?;
        let copy = link_map.as_ref().and_then(|map| map.copy_of(*dev, *ino));
        link_to(&first_dir, &first.name, copy, dir, &to.name).map_err(failed)?;
    }
    let hard_links = second_names.len() as u64;
    Ok(FilesCopied {
        files: shared.files_done.load(Ordering::Relaxed) - hard_links,
        bytes: shared.bytes_done.load(Ordering::Relaxed),
        syscalls: shared.calls.load(Ordering::Relaxed),
        lanes,
        hard_links,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tree lanes pinned with the error dropped: a CPU that is not there meant an
    /// unpinned copy and no word of it. The CPUs are checked before anything is made.
    #[test]
    fn a_cpu_that_is_not_online_is_refused_before_anything_is_made() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("src/sub")).unwrap();
        std::fs::create_dir(tmp.path().join("dst")).unwrap();
        std::fs::write(tmp.path().join("src/sub/file"), b"bytes").unwrap();
        let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
        let copy = |cpus: &[usize]| {
            copy_tree(&src, &dst, &CopyOptions::default(), 2, cpus, &|_, _| {}, &StopSignal::new())
        };
        let err = copy(&[0, 100_000]).unwrap_err();
        assert!(matches!(err, CopyError::Pin(_)), "{err}");
        assert!(err.to_string().contains("CPU 100000 does not exist or is offline"), "{err}");
        assert_eq!(std::fs::read_dir(&dst).unwrap().count(), 0, "nothing left behind");
        let report = copy(&[0]).unwrap();
        assert_eq!(report.files, 1);
        assert_eq!(std::fs::read(dst.join("src/sub/file")).unwrap(), b"bytes");
    }
}
