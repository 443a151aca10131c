//! One file: check, plan the method, copy extent by extent into a temporary file, keep mode
//! and times, verify when asked, rename into place.

use std::ffi::OsStr;
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rustix::fs::{Mode, OFlags, ResolveFlags, Timespec, Timestamps};

use super::destination::{creation_keeps, granted_mode, open_destination, TempDestination};
use super::extents::data_extents;
use super::links::{LinkMap, Made};
use super::method::{transfer, CopyMethod, SPLICE_PIPE};
use super::preserve::{keep_owner, kept_mode, Losses, OwnerTarget, Reflink};
use super::source_mount::SourceMount;
use super::xattr::{copy_xattrs, XattrSource, XattrTarget};
use super::{CopyError, CopyOptions, CopyReport};
use crate::fs::Dir;
use crate::lane::StopSignal;

/// O_DIRECT transfers must be block-aligned in memory, offset and length.
const DIRECT_ALIGN: usize = 4096;

/// A heap buffer of `len` bytes starting on a `DIRECT_ALIGN` boundary. Over-allocating and
/// slicing keeps this safe code (no custom allocation layout).
struct AlignedBuffer {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuffer {
    /// `aligned`: round the length up to whole blocks and align the start (O_DIRECT);
    /// otherwise exactly `len` bytes, as the large-file study's buffer-size table needs.
    fn new(len: usize, aligned: bool) -> Self {
        let len = len.max(1);
        if !aligned {
            return Self { storage: vec![0u8; len], start: 0, len };
        }
        let len = len.next_multiple_of(DIRECT_ALIGN);
        let storage = vec![0u8; len + DIRECT_ALIGN];
        let start = storage.as_ptr().align_offset(DIRECT_ALIGN);
        Self { storage, start, len }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

fn source_metadata(src: &Path) -> Result<Metadata, CopyError> {
    let meta = std::fs::metadata(src).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => CopyError::SourceMissing(src.into()),
        io::ErrorKind::PermissionDenied => CopyError::SourceUnreadable(src.into()),
        _ => CopyError::io(format!("cannot stat {}", src.display()), e),
    })?;
    if meta.is_dir() {
        return Err(CopyError::SourceIsDirectory(src.into()));
    }
    if !meta.is_file() {
        return Err(CopyError::SourceUnsupported(src.into()));
    }
    Ok(meta)
}

/// Where a source file is: a path the user named (followed if it is a symlink, as `cp` does),
/// or an entry of a tree opened beneath the tree's root, no component of it a symlink, in a
/// directory read from the mount `dir`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SourcePath<'a> {
    Named(&'a Path),
    Beneath { root: BorrowedFd<'a>, rel: &'a Path, dir: SourceMount },
}

impl SourcePath<'_> {
    /// The mount of this source, opened as `fd` on device `dev`: its directory's, or its own
    /// when it is on another device (a file mount) or was named by the user.
    fn mount(self, fd: BorrowedFd<'_>, dev: u64) -> SourceMount {
        match self {
            SourcePath::Named(_) => SourceMount::read(fd, dev),
            SourcePath::Beneath { dir, .. } => dir.of_entry(fd, dev),
        }
    }
}

/// Opens a source for reading without blocking (a FIFO put in a file's place must not hang
/// the copy) and checks that what was opened is a regular file: the type is checked on the
/// descriptor, not the path, so swapping the file between a walk and the open gains nothing.
fn open_source(
    src: SourcePath<'_>,
    shown: &Path,
) -> Result<(OwnedFd, rustix::fs::Stat), CopyError> {
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    let opened = match src {
        SourcePath::Named(path) => rustix::fs::open(path, flags, Mode::empty()),
        SourcePath::Beneath { root, rel, .. } => rustix::fs::openat2(
            root,
            rel,
            flags | OFlags::NOFOLLOW,
            Mode::empty(),
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
        ),
    };
    let fd = opened.map_err(|e| match e {
        rustix::io::Errno::ACCESS | rustix::io::Errno::PERM => {
            CopyError::SourceUnreadable(shown.into())
        }
        rustix::io::Errno::NOENT => CopyError::SourceMissing(shown.into()),
        // ELOOP: a symlink where a file was; EXDEV: a path leading out of the tree.
        rustix::io::Errno::LOOP | rustix::io::Errno::XDEV => {
            CopyError::SourceUnsupported(shown.into())
        }
        e => CopyError::io(format!("cannot open {}", shown.display()), e.into()),
    })?;
    let stat = rustix::fs::fstat(&fd)
        .map_err(|e| CopyError::io(format!("cannot stat {}", shown.display()), e.into()))?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
        return Err(CopyError::SourceUnsupported(shown.into()));
    }
    Ok((fd, stat))
}

/// The same open file again with O_DIRECT (a flag of the open file description), through its
/// /proc/self/fd entry, so it is the very inode already checked.
fn reopen_direct(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    Ok(rustix::fs::open(
        path.as_str(),
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::DIRECT | OFlags::NONBLOCK,
        Mode::empty(),
    )?)
}

/// Errors that mean "this method does not work for these files", not "the copy failed".
fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::EXDEV
                | libc::EOPNOTSUPP
                | libc::EINVAL
                | libc::ENOSYS
                | libc::EPERM
                | libc::ENOTTY
        )
    )
}

fn map_failure(e: io::Error, dst: &Path, what: &str) -> CopyError {
    match (e.kind(), e.raw_os_error()) {
        (io::ErrorKind::Interrupted, _) => CopyError::Interrupted(dst.into()),
        (_, Some(libc::ENOSPC | libc::EDQUOT)) => CopyError::NoSpace(dst.into()),
        _ => CopyError::io(format!("{what} {}", dst.display()), e),
    }
}

fn checksum(path: &Path) -> io::Result<blake3::Hash> {
    Ok(blake3::Hasher::new().update_reader(File::open(path)?)?.finalize())
}

/// File systems whose copy_file_range shares or offloads the data (reflink, server-side copy)
/// instead of running the kernel's generic splice loop: statfs(2) magic numbers.
const OFFLOADING_FS: [i64; 7] = [
    0x9123_683E, // btrfs
    0x5846_5342, // xfs
    0x6969,      // nfs
    0xFF53_4D42, // cifs
    0xFE53_4D42, // smb2
    0xCA45_1A4E, // bcachefs
    0x2FC1_2FC1, // zfs
];

/// Whether copy_file_range between this source and the destination directory `dir` shares or
/// offloads the data: same file system, one of `OFFLOADING_FS`.
fn offloads(src: BorrowedFd<'_>, info: &SourceInfo, dir: &Dir) -> bool {
    // Both are open: ask their descriptors, not their paths again.
    // f_type is a c_long on 64-bit Linux and an i32 on some 32-bit targets.
    #[allow(clippy::useless_conversion)]
    let fs_type = rustix::fs::fstatfs(src).ok().map(|s| i64::from(s.f_type));
    let same_fs = dir.stat().is_ok_and(|d| d.st_dev == info.dev);
    same_fs && fs_type.is_some_and(|t| OFFLOADING_FS.contains(&t))
}

/// `auto`'s order for this pair of files. Where the file system offloads copy_file_range
/// (same file system, one of `OFFLOADING_FS`) it goes first, after FICLONE when sharing
/// extents is allowed. Elsewhere (tmpfs, ext4, across file systems) copy_file_range falls
/// back to the kernel's generic splice loop, and splice through a 1 MiB pipe moved data
/// faster in `corelane lab copy` (docs/RESULTS.md), so splice goes first; read/write is the
/// last resort. `--reflink=never` drops copy_file_range where it would share extents.
fn auto_candidates(
    src: BorrowedFd<'_>,
    info: &SourceInfo,
    dst: &Dir,
    reflink: Reflink,
) -> Vec<CopyMethod> {
    // A file that fits one pipe is one copy_file_range call; a splice would need a pipe and
    // two calls. No need to look at the file systems (a tree has thousands of these); where
    // they share extents, copy_file_range shares them as FICLONE would.
    if info.size <= SPLICE_PIPE as u64 && reflink != Reflink::Never {
        return vec![CopyMethod::CopyFileRange, CopyMethod::Splice, CopyMethod::ReadWrite];
    }
    match (offloads(src, info, dst), reflink) {
        (true, Reflink::Never) => vec![CopyMethod::Splice, CopyMethod::ReadWrite],
        (true, _) => vec![
            CopyMethod::Ficlone,
            CopyMethod::CopyFileRange,
            CopyMethod::Splice,
            CopyMethod::ReadWrite,
        ],
        (false, _) if info.size <= SPLICE_PIPE as u64 => {
            vec![CopyMethod::CopyFileRange, CopyMethod::Splice, CopyMethod::ReadWrite]
        }
        (false, _) => vec![CopyMethod::Splice, CopyMethod::CopyFileRange, CopyMethod::ReadWrite],
    }
}

/// Copies the regular file `src` to `dst` (a file path, or a directory to copy into).
/// `progress(done, total)` is called as bytes move; raising `stop` aborts the copy, leaving
/// the destination as it was.
pub fn copy_file(
    src: &Path,
    dst: &Path,
    opts: &CopyOptions,
    progress: &mut dyn FnMut(u64, u64),
    stop: &StopSignal,
) -> Result<CopyReport, CopyError> {
    let meta = source_metadata(src)?;
    let own_name = src.file_name().ok_or_else(|| CopyError::SourceUnsupported(src.into()))?;
    let (dir, name, path) = open_destination(dst, own_name, opts.follow_destination_symlink)?;
    let flags = rustix::fs::AtFlags::empty();
    if let Ok(existing) = rustix::fs::statat(&dir, &name, flags) {
        if existing.st_dev == meta.dev() && existing.st_ino == meta.ino() {
            return Err(CopyError::SameFile { src: src.into(), dst: path });
        }
    }
    let losses = Losses::default();
    let keep = Keep { losses: &losses, links: None };
    let to = Target { dir: &dir, index: 0, name: &name, path };
    match copy_checked(SourcePath::Named(src), src, to, opts, &keep, progress, stop)? {
        Copied::Data(mut report) => {
            report.not_kept = losses.report();
            Ok(report)
        }
        Copied::SecondName { .. } => unreachable!("no link map for a single file"),
    }
}

/// What a tree copy shares between its files: the losses counted and, with
/// `--preserve=links`, the inodes already claimed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keep<'a> {
    pub(crate) losses: &'a Losses,
    pub(crate) links: Option<&'a LinkMap>,
}

/// What `copy_checked` did with a source.
#[derive(Debug)]
pub(crate) enum Copied {
    Data(CopyReport),
    /// Another name of an inode claimed by an earlier name, copied to this destination: link
    /// to it once every lane is done.
    SecondName {
        first: Made,
        source: (u64, u64),
    },
}

/// Where one copy goes: the entry `name` of the held directory `dir` (the tree walk's
/// directory number `index`, for hard links), shown as `path`.
#[derive(Debug)]
pub(crate) struct Target<'a> {
    pub(crate) dir: &'a Dir,
    pub(crate) index: usize,
    pub(crate) name: &'a OsStr,
    pub(crate) path: PathBuf,
}

/// What a copy needs to know of its source, from fstat(2) of the opened file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SourceInfo {
    dev: u64,
    size: u64,
    mode: u32,
    blocks: u64,
    atime: Timespec,
    mtime: Timespec,
}

impl From<&rustix::fs::Stat> for SourceInfo {
    fn from(s: &rustix::fs::Stat) -> Self {
        Self {
            dev: s.st_dev,
            size: s.st_size as u64,
            mode: s.st_mode,
            blocks: s.st_blocks as u64,
            atime: Timespec { tv_sec: s.st_atime as _, tv_nsec: s.st_atime_nsec as _ },
            mtime: Timespec { tv_sec: s.st_mtime as _, tv_nsec: s.st_mtime_nsec as _ },
        }
    }
}

/// The copy itself, once the caller has opened the destination's directory and checked it is
/// not the source. `shown` names the source in reports and errors.
pub(crate) fn copy_checked(
    src: SourcePath<'_>,
    shown: &Path,
    to: Target<'_>,
    opts: &CopyOptions,
    keep: &Keep<'_>,
    progress: &mut dyn FnMut(u64, u64),
    stop: &StopSignal,
) -> Result<Copied, CopyError> {
    let (plain, stat) = open_source(src, shown)?;
    let dst = to.path;
    if let Some(links) = keep.links {
        if stat.st_nlink > 1 {
            let made = Made { dir: to.index, name: to.name.to_os_string() };
            if let Some(first) = links.claim(stat.st_dev, stat.st_ino, &made) {
                return Ok(Copied::SecondName { first, source: (stat.st_dev, stat.st_ino) });
            }
        }
    }
    let mount = src.mount(plain.as_fd(), stat.st_dev);
    let info = SourceInfo::from(&stat);
    let size = info.size;
    let started = Instant::now();
    let candidates = candidates(opts, plain.as_fd(), &info, to.dir);
    let mut fallback: Option<String> = None;
    for (i, &method) in candidates.iter().enumerate() {
        let last = i + 1 == candidates.len();
        let direct = method == CopyMethod::Direct;
        // O_DIRECT is a flag of the open file, so that method opens the source again.
        let direct_source = if direct {
            match reopen_direct(plain.as_fd()) {
                Ok(fd) => Some(fd),
                Err(e) if !last && unsupported(&e) => {
                    fallback = Some(format!("the source's file system refused O_DIRECT ({e})"));
                    continue;
                }
                Err(e) => return Err(CopyError::io(format!("cannot open {}", shown.display()), e)),
            }
        } else {
            None
        };
        let source = direct_source.as_ref().map_or(plain.as_fd(), |fd| fd.as_fd());
        let (temp, created) = match create_temp(to.dir, to.name, opts, direct, &info) {
            Ok(made) => made,
            Err(e) if direct && !last && unsupported(&e) => {
                fallback = Some(format!("the destination's file system refused O_DIRECT ({e})"));
                continue;
            }
            Err(e) => return Err(map_failure(e, &dst, "cannot create a temporary file beside")),
        };
        let data = move_data(method, source, &temp, &info, opts, progress, stop)
            .map_err(|e| map_failure(e, &dst, "cannot size"))?;
        if let Err(e) = data.outcome {
            // A method the kernel refuses for this pair, before any byte moved: try the next.
            if data.moved == 0 && !last && unsupported(&e) {
                fallback = Some(format!("{} refused here ({e})", method.name()));
                continue;
            }
            if method == CopyMethod::Ficlone && opts.reflink == Reflink::Always {
                return Err(CopyError::ReflinkRefused {
                    src: shown.into(),
                    dst,
                    why: e.to_string(),
                });
            }
            return Err(map_failure(e, &dst, "cannot write"));
        }
        if direct {
            // The last O_DIRECT write was rounded up to a whole block.
            rustix::fs::ftruncate(temp.fd(), size)
                .map_err(|e| map_failure(e.into(), &dst, "cannot size"))?;
        }
        let attributes =
            Attributes { plain: plain.as_fd(), stat: &stat, info: &info, created, mount };
        attributes.give(temp.fd(), opts, keep.losses, shown, &dst)?;
        let verified = opts.verify && verify(plain.as_fd(), &temp, shown, &dst)?;
        let copy = rustix::fs::fstat(temp.fd()).map(|s| (s.st_dev, s.st_ino));
        temp.commit(opts.fsync).map_err(|e| map_failure(e, &dst, "cannot put in place"))?;
        if let (Some(links), Ok(copy)) = (keep.links.filter(|_| stat.st_nlink > 1), copy) {
            links.copied(stat.st_dev, stat.st_ino, copy);
        }
        let seconds = started.elapsed().as_secs_f64();
        return Ok(Copied::Data(CopyReport {
            source: shown.into(),
            destination: dst,
            bytes: size,
            seconds,
            gb_per_sec: if seconds > 0.0 { size as f64 / seconds / 1e9 } else { 0.0 },
            method,
            fallback,
            syscalls: data.calls,
            extents: data.extents,
            verified,
            not_kept: Vec::new(),
        }));
    }
    unreachable!("the last candidate either returns or fails")
}

/// The methods to try, in order: the one asked for (O_DIRECT and io_uring falling back to
/// read/write), or the best this pair of file systems allows.
fn candidates(
    opts: &CopyOptions,
    plain: BorrowedFd<'_>,
    info: &SourceInfo,
    dir: &Dir,
) -> Vec<CopyMethod> {
    match (opts.reflink, opts.method) {
        (Reflink::Always, _) => vec![CopyMethod::Ficlone],
        (_, Some(CopyMethod::Direct)) => vec![CopyMethod::Direct, CopyMethod::ReadWrite],
        (_, Some(CopyMethod::IoUring)) => vec![CopyMethod::IoUring, CopyMethod::ReadWrite],
        (_, Some(m)) => vec![m],
        (reflink, None) => auto_candidates(plain, info, dir, reflink),
    }
}

/// The temporary beside `name` in `dir`, and the mode it was created with when that is the
/// source's: created with the source's bits when the umask lets them through; 0600
/// otherwise, and the attributes set the exact bits. Either way no one else can read a
/// partial copy that the source did not allow them to read.
fn create_temp<'a>(
    dir: &'a Dir,
    name: &'a OsStr,
    opts: &CopyOptions,
    direct: bool,
    info: &SourceInfo,
) -> io::Result<(TempDestination<'a>, Option<u32>)> {
    let mode = granted_mode(info.mode, false);
    let keeps = creation_keeps(mode);
    let create = if keeps { mode } else { 0o600 };
    let temp =
        TempDestination::create(dir, name, opts.create, direct, create, opts.fresh_in_place)?;
    Ok((temp, keeps.then_some(mode)))
}

/// What one method moved: its system calls, the bytes before any failure, how many data
/// extents, and how it ended.
struct DataMoved {
    calls: u64,
    moved: u64,
    extents: usize,
    outcome: io::Result<()>,
}

/// Moves the source's data into the temporary with `method`, extent by extent, holes kept;
/// an error sizing the temporary is returned, a failed transfer is the `outcome`.
fn move_data(
    method: CopyMethod,
    source: BorrowedFd<'_>,
    temp: &TempDestination<'_>,
    info: &SourceInfo,
    opts: &CopyOptions,
    progress: &mut dyn FnMut(u64, u64),
    stop: &StopSignal,
) -> io::Result<DataMoved> {
    let size = info.size;
    // A file with every block allocated has no holes: skip the SEEK_DATA/SEEK_HOLE walk.
    // FICLONE shares the whole file, holes included, in one call.
    let whole = method == CopyMethod::Ficlone;
    let dense = whole || info.blocks * 512 >= size;
    let extents = if (dense && size > 0) || (whole && opts.reflink == Reflink::Always) {
        vec![(0, size)]
    } else {
        data_extents(source, size)
    };
    // Sized first when there are holes, so extents land at their offsets and holes stay.
    if !dense {
        rustix::fs::ftruncate(temp.fd(), size)?;
    }
    // Only the methods that pass data through user space need a buffer.
    let needs_buffer =
        matches!(method, CopyMethod::ReadWrite | CopyMethod::Direct | CopyMethod::IoUring);
    let direct = method == CopyMethod::Direct;
    let mut buffer = AlignedBuffer::new(if needs_buffer { opts.buffer } else { 1 }, direct);
    let mut data = DataMoved { calls: 0, moved: 0, extents: extents.len(), outcome: Ok(()) };
    for &(offset, len) in &extents {
        let base = data.moved;
        let mut keep_going = |done: u64| {
            progress(base + done, size);
            !stop.is_stopped()
        };
        let buf = buffer.as_mut();
        match transfer(method, source, temp.fd(), offset, len, buf, &mut keep_going) {
            Ok(calls) => {
                data.calls += calls;
                data.moved += len;
            }
            Err(e) => {
                data.outcome = Err(e);
                break;
            }
        }
    }
    Ok(data)
}

/// What a copied file keeps of its source besides the bytes.
struct Attributes<'a> {
    /// The source, opened.
    plain: BorrowedFd<'a>,
    stat: &'a rustix::fs::Stat,
    info: &'a SourceInfo,
    /// The mode the temporary was created with, when the umask let the source's bits
    /// through (else it is 0600 and needs its mode set).
    created: Option<u32>,
    /// The mount the source was read from: what the kernel honours there is all it keeps.
    mount: SourceMount,
}

impl Attributes<'_> {
    /// Owner first (chown clears set-id bits and file capabilities), then attributes, then
    /// the exact mode, times last.
    fn give(
        &self,
        temp: BorrowedFd<'_>,
        opts: &CopyOptions,
        losses: &Losses,
        shown: &Path,
        dst: &Path,
    ) -> Result<(), CopyError> {
        let (stat, info) = (self.stat, self.info);
        let owner_kept = opts.preserve.ownership
            && keep_owner(OwnerTarget::Fd(temp), stat.st_uid, stat.st_gid, shown, losses);
        if opts.preserve.xattr {
            let (from, to) = (XattrSource::Fd(self.plain), XattrTarget::Fd(temp));
            copy_xattrs(from, to, owner_kept, self.mount, shown, losses);
        }
        let final_mode = kept_mode(info.mode, false, opts.preserve.mode, owner_kept);
        let final_mode = self.mount.honoured_mode(final_mode, false, shown, losses);
        if self.created != Some(final_mode) {
            rustix::fs::fchmod(temp, Mode::from_raw_mode(final_mode))
                .map_err(|e| map_failure(e.into(), dst, "cannot set the mode of"))?;
        }
        if opts.preserve.timestamps {
            let times = Timestamps { last_access: info.atime, last_modification: info.mtime };
            rustix::fs::futimens(temp, &times)
                .map_err(|e| map_failure(e.into(), dst, "cannot set the times of"))?;
        }
        Ok(())
    }
}

/// `--verify`: the copy's checksum against the opened source's (not its path again: the
/// path may name another file by now).
fn verify(
    plain: BorrowedFd<'_>,
    temp: &TempDestination<'_>,
    shown: &Path,
    dst: &Path,
) -> Result<bool, CopyError> {
    let opened = PathBuf::from(format!("/proc/self/fd/{}", plain.as_raw_fd()));
    match checksum(&opened).and_then(|a| checksum(&temp.read_path()).map(|b| a == b)) {
        Ok(true) => Ok(true),
        Ok(false) => Err(CopyError::VerifyFailed { src: shown.into(), dst: dst.into() }),
        Err(e) => Err(CopyError::io("cannot read back for --verify", e)),
    }
}
