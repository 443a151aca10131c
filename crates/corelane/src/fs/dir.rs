//! [`Dir`]: a directory handle you can only go down from.
//!
//! A path names a directory once, when the handle is opened ([`Dir::open`]); from then on
//! every child is one name looked up in the held descriptor, and no lookup follows a symlink
//! or leaves the directory. A name swapped for a symlink (or for anything else) between two
//! calls fails the call: the change is never carried to where the symlink points.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, FileType, Gid, Mode, OFlags, ResolveFlags, Stat, Timestamps, Uid};

/// How every lookup below a held directory resolves: inside it, no symlink anywhere (magic
/// links included).
const BENEATH: ResolveFlags =
    ResolveFlags::BENEATH.union(ResolveFlags::NO_SYMLINKS).union(ResolveFlags::NO_MAGICLINKS);

/// A directory corelane holds open. Cheap to share between threads (`&Dir`): every call is
/// one system call on the descriptor.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
}

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why)
}

/// Refuses anything but one plain name: empty, `.`, `..`, a `/` or a NUL byte.
pub fn check_name(name: &OsStr) -> io::Result<()> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') {
        return Err(invalid(format!("{name:?} is not a single name below a directory")));
    }
    if bytes.contains(&0) {
        return Err(invalid(format!("{name:?} contains a NUL byte")));
    }
    Ok(())
}

/// A fresh, unpredictable name beside `base` (`.<base>.corelane-<pid>-<n>-<random>`), so
/// another user cannot squat it in a shared directory; creations under it are O_EXCL anyway.
pub fn random_name(base: &OsStr) -> OsString {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // std::process::id() is a getpid(2) per call; a tree copy names thousands of files.
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let pid = *PID.get_or_init(std::process::id);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let salt = fastrand::u32(..);
    // NAME_MAX is 255 bytes: keep the suffix whole and cut the base.
    let base = &base.as_bytes()[..base.len().min(200)];
    let mut name = vec![b'.'];
    name.extend_from_slice(base);
    name.extend_from_slice(format!(".corelane-{pid}-{n}-{salt:08x}").as_bytes());
    OsString::from_vec(name)
}

/// A held directory is an `O_PATH` descriptor: every `*at` call works through it, and it needs
/// only search permission, as the same calls by path would (a directory one may write but not
/// list, mode 0300, can still be written into). See [`Dir::open_path_to_change`] for the
/// directory's own owner, mode, times and attributes.
const HELD: OFlags = OFlags::PATH.union(OFlags::DIRECTORY).union(OFlags::CLOEXEC);

impl Dir {
    /// Opens the directory `path` names: the one time a path is trusted. `follow`: whether its
    /// last component may be a symlink (the earlier ones resolve as the caller named them).
    pub fn open(path: &Path, follow: bool) -> io::Result<Dir> {
        let mut flags = HELD;
        if !follow {
            flags |= OFlags::NOFOLLOW;
        }
        let path = if path.as_os_str().is_empty() { Path::new(".") } else { path };
        Ok(Dir { fd: rustix::fs::open(path, flags, Mode::empty())? })
    }

    /// Opens the child directory `name` (one name, not a symlink).
    pub fn open_dir(&self, name: &OsStr) -> io::Result<Dir> {
        check_name(name)?;
        self.open_below(Path::new(name), HELD)
    }

    /// Opens the directory `rel` below this one, walked down by the kernel from this
    /// descriptor (openat2 `RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS`): each component must be a
    /// plain name and a real directory; no symlink, `.` or `..` anywhere. An empty `rel` opens
    /// this directory again.
    pub fn open_path(&self, rel: &Path) -> io::Result<Dir> {
        self.open_path_as(rel, HELD)
    }

    /// [`open_path`](Self::open_path), opened for reading so that the directory's own owner,
    /// mode, times and attributes can be changed through it (`fchown`, `fchmod`, `futimens`,
    /// `fsetxattr` refuse an `O_PATH` descriptor). Needs read permission on it.
    pub fn open_path_to_change(&self, rel: &Path) -> io::Result<Dir> {
        self.open_path_as(rel, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC)
    }

    fn open_path_as(&self, rel: &Path, flags: OFlags) -> io::Result<Dir> {
        if rel.as_os_str().is_empty() {
            return self.open_below(Path::new("."), flags);
        }
        for part in rel.as_os_str().as_bytes().split(|&b| b == b'/') {
            check_name(OsStr::from_bytes(part))?;
        }
        self.open_below(rel, flags)
    }

    fn open_below(&self, rel: &Path, flags: OFlags) -> io::Result<Dir> {
        let flags = flags | OFlags::NOFOLLOW;
        Ok(Dir { fd: rustix::fs::openat2(&self.fd, rel, flags, Mode::empty(), BENEATH)? })
    }

    /// This directory's own metadata, from its descriptor.
    pub fn stat(&self) -> io::Result<Stat> {
        Ok(rustix::fs::fstat(&self.fd)?)
    }

    /// The metadata of the entry `name`, not followed if it is a symlink.
    pub fn stat_at(&self, name: &OsStr) -> io::Result<Stat> {
        check_name(name)?;
        Ok(rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW)?)
    }

    /// Creates the directory `name` with `mode` (under the umask).
    pub fn create_dir(&self, name: &OsStr, mode: u32) -> io::Result<()> {
        check_name(name)?;
        Ok(rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(mode))?)
    }

    /// Creates the directory `name` or, if something exists there, opens it (a symlink or a
    /// file there fails with ELOOP or ENOTDIR). Returns it and whether this call created it.
    pub fn create_or_open_dir(&self, name: &OsStr, mode: u32) -> io::Result<(Dir, bool)> {
        let created = match self.create_dir(name, mode) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
            Err(e) => return Err(e),
        };
        Ok((self.open_dir(name)?, created))
    }

    /// Creates the file `name`, which must not exist (`O_CREAT|O_EXCL|O_NOFOLLOW`), opened
    /// with `flags` added (say `WRONLY`).
    pub fn create_file(&self, name: &OsStr, flags: OFlags, mode: u32) -> io::Result<OwnedFd> {
        check_name(name)?;
        let flags = flags | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        Ok(rustix::fs::openat(&self.fd, name, flags, Mode::from_raw_mode(mode))?)
    }

    /// Creates an unnamed file in this directory (`O_TMPFILE`; `flags` must hold `WRONLY` or
    /// `RDWR`). EOPNOTSUPP, EISDIR or EINVAL: the file system has no `O_TMPFILE`.
    pub fn create_unnamed(&self, flags: OFlags, mode: u32) -> io::Result<OwnedFd> {
        let flags = flags | OFlags::TMPFILE | OFlags::CLOEXEC;
        Ok(rustix::fs::openat(&self.fd, ".", flags, Mode::from_raw_mode(mode))?)
    }

    /// Gives the unnamed file `file` (see [`create_unnamed`](Self::create_unnamed)) the name
    /// `name` here; EEXIST if the name is taken. `AT_EMPTY_PATH` needs CAP_DAC_READ_SEARCH;
    /// without it, its /proc/self/fd entry with `AT_SYMLINK_FOLLOW` (linkat(2)) names the same
    /// open file.
    pub fn link_unnamed(&self, file: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
        check_name(name)?;
        match rustix::fs::linkat(file, "", &self.fd, name, AtFlags::EMPTY_PATH) {
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::PERM) => {
                let by_fd = format!("/proc/self/fd/{}", file.as_raw_fd());
                let follow = AtFlags::SYMLINK_FOLLOW;
                Ok(rustix::fs::linkat(rustix::fs::CWD, by_fd.as_str(), &self.fd, name, follow)?)
            }
            other => Ok(other?),
        }
    }

    /// Renames `from` here to `to` in `to_dir`, replacing what `to` names (renameat).
    pub fn rename(&self, from: &OsStr, to_dir: &Dir, to: &OsStr) -> io::Result<()> {
        check_name(from)?;
        check_name(to)?;
        Ok(rustix::fs::renameat(&self.fd, from, &to_dir.fd, to)?)
    }

    /// Makes `to` in `to_dir` another name of the entry `from` here (not followed if it is a
    /// symlink); EEXIST if `to` exists.
    pub fn hard_link(&self, from: &OsStr, to_dir: &Dir, to: &OsStr) -> io::Result<()> {
        check_name(from)?;
        check_name(to)?;
        Ok(rustix::fs::linkat(&self.fd, from, &to_dir.fd, to, AtFlags::empty())?)
    }

    /// Creates the symlink `name` pointing at `target` (which is stored, never resolved).
    pub fn symlink(&self, target: &Path, name: &OsStr) -> io::Result<()> {
        check_name(name)?;
        Ok(rustix::fs::symlinkat(target, &self.fd, name)?)
    }

    /// Creates the FIFO, socket or device node `name`.
    pub fn mknod(&self, name: &OsStr, kind: FileType, mode: u32, dev: u64) -> io::Result<()> {
        check_name(name)?;
        Ok(rustix::fs::mknodat(&self.fd, name, kind, Mode::from_raw_mode(mode), dev)?)
    }

    /// Takes hold of the symlink or special file `name` this process has just made here
    /// (symlinkat, mknodat), before giving it an owner, mode, times or attributes. The name
    /// is looked up once, without following it, and the entry must still be what was made:
    /// of type `kind`, owned by this process's effective user and with one name only. A user
    /// who can write this directory and renames a hard link to some other file over the name
    /// in between gets a refusal, never a chown or chmod of that file. Every change after
    /// this goes through the [`Node`]'s descriptor.
    pub fn take_made(&self, name: &OsStr, kind: FileType) -> io::Result<Node> {
        let fd = self.open_entry(name)?;
        let stat = rustix::fs::fstat(&fd)?;
        let euid = rustix::process::geteuid().as_raw();
        if FileType::from_raw_mode(stat.st_mode) != kind
            || stat.st_uid != euid
            || stat.st_nlink != 1
        {
            return Err(io::Error::other(format!(
                "{} was replaced by another file before its attributes were set",
                Path::new(name).display()
            )));
        }
        Ok(Node { fd })
    }

    /// Opens the entry `name` itself as an `O_PATH` descriptor, a symlink included (not
    /// followed): for reading its type or attributes, never its data.
    pub fn open_entry(&self, name: &OsStr) -> io::Result<OwnedFd> {
        check_name(name)?;
        let flags = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        Ok(rustix::fs::openat2(&self.fd, name, flags, Mode::empty(), BENEATH)?)
    }

    /// Removes the non-directory entry `name`.
    pub fn remove_file(&self, name: &OsStr) -> io::Result<()> {
        check_name(name)?;
        Ok(rustix::fs::unlinkat(&self.fd, name, AtFlags::empty())?)
    }

    /// Removes the entry `name` only while it is still the inode `held` (a file this run
    /// created and holds open): a name another user swapped in the meantime stays.
    pub fn remove_if_same(&self, name: &OsStr, held: BorrowedFd<'_>) -> io::Result<()> {
        let (now, ours) = (self.stat_at(name)?, rustix::fs::fstat(held)?);
        if (now.st_dev, now.st_ino) != (ours.st_dev, ours.st_ino) {
            return Err(io::Error::other("the name now holds another file"));
        }
        self.remove_file(name)
    }
}

impl AsFd for Dir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A symlink or special file this process made, held by an `O_PATH|O_NOFOLLOW` descriptor
/// (see [`Dir::take_made`]): its owner, mode, times and attributes are changed through the
/// descriptor, so whatever its name holds by then is never touched.
#[derive(Debug)]
pub struct Node {
    fd: OwnedFd,
}

impl Node {
    /// The descriptor's /proc/self/fd name: the held inode itself (a magic link, so a
    /// symlink held is the symlink, not its target).
    fn by_fd(&self) -> String {
        format!("/proc/self/fd/{}", self.fd.as_raw_fd())
    }

    /// Gives the entry an owner and group (fchownat with `AT_EMPTY_PATH`: the entry itself).
    pub fn chown(&self, uid: u32, gid: u32) -> io::Result<()> {
        let (uid, gid) = (Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)));
        let flags = AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW;
        Ok(rustix::fs::chownat(&self.fd, "", uid, gid, flags)?)
    }

    /// Sets the permission bits, refusing a symlink (ELOOP; Linux has no modes for them). An
    /// `O_PATH` descriptor cannot be fchmod'ed, and a FIFO or device cannot be opened for it
    /// without side effects: chmod goes through the descriptor's /proc/self/fd name.
    pub fn chmod(&self, mode: u32) -> io::Result<()> {
        let stat = rustix::fs::fstat(&self.fd)?;
        if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink {
            return Err(rustix::io::Errno::LOOP.into());
        }
        Ok(rustix::fs::chmod(self.by_fd().as_str(), Mode::from_raw_mode(mode))?)
    }

    /// Sets the times of the entry itself (utimensat with `AT_EMPTY_PATH`, not followed).
    pub fn set_times(&self, times: &Timestamps) -> io::Result<()> {
        let flags = AtFlags::EMPTY_PATH | AtFlags::SYMLINK_NOFOLLOW;
        Ok(rustix::fs::utimensat(&self.fd, "", times, flags)?)
    }

    /// Sets the extended attribute `attr` of the entry itself. A symlink cannot be opened for
    /// fsetxattr and rustix has no setxattrat (Linux 6.13): setxattr on the descriptor's
    /// /proc/self/fd name, whose magic link resolves to the held inode and no further.
    pub fn set_xattr(&self, attr: &OsStr, value: &[u8]) -> io::Result<()> {
        let flags = rustix::fs::XattrFlags::empty();
        Ok(rustix::fs::setxattr(self.by_fd().as_str(), attr, value, flags)?)
    }
}

impl AsFd for Node {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap()
    }

    #[test]
    fn names_that_are_not_one_plain_name_are_refused() {
        let t = tmp();
        let dir = Dir::open(t.path(), false).unwrap();
        std::fs::create_dir(t.path().join("a")).unwrap();
        for bad in ["", ".", "..", "a/", "/etc", "a/b", "x\0y"] {
            let name = OsStr::new(bad);
            assert!(dir.open_dir(name).is_err(), "{bad:?} opened");
            assert!(dir.create_file(name, OFlags::WRONLY, 0o600).is_err(), "{bad:?} created");
            assert!(dir.create_dir(name, 0o700).is_err(), "{bad:?} made");
        }
        for bad in ["..", "a/..", "a/../a", "/tmp", "a//a", "./a", "a/."] {
            assert!(dir.open_path(Path::new(bad)).is_err(), "{bad:?} opened");
        }
        assert!(dir.open_dir(OsStr::new("a")).is_ok());
        assert!(dir.open_path(Path::new("")).is_ok(), "the directory itself");
    }

    #[test]
    fn a_symlink_is_never_gone_through() {
        let t = tmp();
        let victim = t.path().join("victim");
        std::fs::create_dir_all(victim.join("inner")).unwrap();
        let root = t.path().join("root");
        std::fs::create_dir_all(root.join("real")).unwrap();
        std::os::unix::fs::symlink(&victim, root.join("link")).unwrap();
        std::os::unix::fs::symlink(&victim, root.join("real/link")).unwrap();
        let dir = Dir::open(&root, false).unwrap();
        let link = OsStr::new("link");
        assert!(dir.open_dir(link).is_err());
        assert!(dir.open_path(Path::new("link/inner")).is_err());
        assert!(dir.open_path(Path::new("real/link")).is_err());
        assert!(dir.create_file(link, OFlags::WRONLY, 0o600).is_err());
        assert!(dir.create_or_open_dir(link, 0o700).is_err());
        let node = dir.take_made(link, FileType::Symlink).unwrap();
        assert!(node.chmod(0o777).is_err());
        node.chown(65534, 65534).unwrap();
        node.set_times(&Timestamps {
            last_access: rustix::fs::Timespec { tv_sec: 1, tv_nsec: 0 },
            last_modification: rustix::fs::Timespec { tv_sec: 1, tv_nsec: 0 },
        })
        .unwrap();
        let meta = std::fs::metadata(&victim).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_ne!(meta.mtime(), 1, "times went through the symlink");
        assert_ne!(meta.uid(), 65534, "the owner went through the symlink");
        assert_ne!(meta.mode() & 0o777, 0o777, "the mode went through the symlink");
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 1);
        assert!(Dir::open(&root.join("link"), false).is_err(), "the named path, not followed");
    }

    /// The held descriptor keeps pointing at the directory it opened: a component renamed
    /// away and replaced by a symlink sends nothing through the symlink.
    #[test]
    fn a_swapped_component_fails_instead_of_redirecting() {
        let t = tmp();
        let victim = t.path().join("victim");
        std::fs::create_dir(&victim).unwrap();
        let root = t.path().join("root");
        std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
        let top = Dir::open(&root, false).unwrap();
        let sub = top.open_dir(OsStr::new("sub")).unwrap();
        std::fs::rename(root.join("sub"), t.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(&victim, root.join("sub")).unwrap();
        std::os::unix::fs::symlink(&victim, t.path().join("moved/deeper2")).unwrap();
        // Re-walking from the top refuses the symlink.
        assert!(top.open_path(Path::new("sub/deeper")).is_err());
        assert!(top.open_dir(OsStr::new("sub")).is_err());
        // The held handle still writes into the directory it opened, now moved, never the
        // victim; and a symlink inside it is not gone through either.
        sub.create_file(OsStr::new("f"), OFlags::WRONLY, 0o600).unwrap();
        assert!(sub.open_dir(OsStr::new("deeper2")).is_err());
        assert!(t.path().join("moved/f").exists());
        assert_eq!(std::fs::read_dir(&victim).unwrap().count(), 0);
    }

    /// Attributes of a symlink go on the symlink itself, never on what it points to.
    #[test]
    fn attributes_of_a_held_symlink_stay_on_it() {
        let t = tmp();
        let victim = t.path().join("victim");
        std::fs::write(&victim, b"x").unwrap();
        std::os::unix::fs::symlink(&victim, t.path().join("link")).unwrap();
        let dir = Dir::open(t.path(), false).unwrap();
        let attr = OsStr::new("trusted.corelane");
        let node = dir.take_made(OsStr::new("link"), FileType::Symlink).unwrap();
        if let Err(e) = node.set_xattr(attr, b"v") {
            return eprintln!("skipped: no trusted. attributes on symlinks here ({e})");
        }
        let mut got = [0u8; 8];
        let n = rustix::fs::lgetxattr(t.path().join("link"), attr, &mut got[..]).unwrap();
        assert_eq!(&got[..n], b"v");
        assert!(rustix::fs::getxattr(&victim, attr, &mut got[..]).is_err(), "went through");
        assert!(dir.take_made(OsStr::new("../link"), FileType::Symlink).is_err());
    }

    /// The attack on name-based attribute calls: a user who can write the directory renames a
    /// hard link to some other file over the FIFO or symlink just made, before its owner and
    /// mode are set. Taking hold of the entry refuses what is not the entry made; once held,
    /// a swap of the name changes nothing but the name.
    #[test]
    fn a_hard_link_swapped_over_a_made_entry_is_never_changed() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let t = tmp();
        let victim = t.path().join("victim");
        std::fs::write(&victim, b"secret").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
        let dir = Dir::open(t.path(), false).unwrap();
        let fifo = OsStr::new("p");
        // Swapped before the entry is taken hold of.
        dir.mknod(fifo, FileType::Fifo, 0o600, 0).unwrap();
        std::fs::hard_link(&victim, t.path().join("h")).unwrap();
        std::fs::rename(t.path().join("h"), t.path().join("p")).unwrap();
        assert!(dir.take_made(fifo, FileType::Fifo).is_err(), "a second name of another file");
        assert!(dir.take_made(fifo, FileType::RegularFile).is_err(), "nlink is 2");
        // Swapped after: every change lands on the FIFO held, none on the victim.
        let fifo2 = OsStr::new("q");
        dir.mknod(fifo2, FileType::Fifo, 0o600, 0).unwrap();
        let node = dir.take_made(fifo2, FileType::Fifo).unwrap();
        std::fs::hard_link(&victim, t.path().join("h2")).unwrap();
        std::fs::rename(t.path().join("h2"), t.path().join("q")).unwrap();
        node.chmod(0o777).unwrap();
        node.chown(65534, 65534).unwrap();
        let zero = rustix::fs::Timespec { tv_sec: 1, tv_nsec: 0 };
        node.set_times(&Timestamps { last_access: zero, last_modification: zero }).unwrap();
        let meta = std::fs::metadata(&victim).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_ne!(meta.uid(), 65534);
        assert_ne!(meta.mtime(), 1);
        let held = rustix::fs::fstat(&node).unwrap();
        assert_eq!((held.st_mode & 0o777, held.st_uid), (0o777, 65534));
    }

    #[test]
    fn unnamed_files_get_a_name_once_and_renames_stay_in_held_directories() {
        let t = tmp();
        let dir = Dir::open(t.path(), false).unwrap();
        let fd = match dir.create_unnamed(OFlags::WRONLY, 0o600) {
            Ok(fd) => fd,
            Err(e) => return eprintln!("skipped: no O_TMPFILE here ({e})"),
        };
        rustix::io::write(&fd, b"x").unwrap();
        dir.link_unnamed(fd.as_fd(), OsStr::new("a")).unwrap();
        let again = dir.link_unnamed(fd.as_fd(), OsStr::new("a")).unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        let (sub, made) = dir.create_or_open_dir(OsStr::new("d"), 0o700).unwrap();
        assert!(made);
        dir.rename(OsStr::new("a"), &sub, OsStr::new("b")).unwrap();
        assert_eq!(std::fs::read(t.path().join("d/b")).unwrap(), b"x");
        let other = sub.create_file(OsStr::new("c"), OFlags::WRONLY, 0o600).unwrap();
        std::fs::rename(t.path().join("d/c"), t.path().join("d/c2")).unwrap();
        std::fs::write(t.path().join("d/c"), b"theirs").unwrap();
        assert!(sub.remove_if_same(OsStr::new("c"), other.as_fd()).is_err());
        assert_eq!(std::fs::read(t.path().join("d/c")).unwrap(), b"theirs");
    }
}
