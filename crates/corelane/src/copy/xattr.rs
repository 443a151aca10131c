//! Extended attributes and POSIX ACLs, copied name by name. An ACL is the
//! system.posix_acl_access (or, on a directory, system.posix_acl_default) attribute in the
//! kernel's own binary form, so copying that attribute copies the ACL exactly.
//!
//! The source is read through a descriptor: the open file, or for anything else an `O_PATH`
//! descriptor opened beneath the tree's root (no symlink followed) and named through
//! /proc/self/fd, so an entry swapped for a symlink between the walk and this read cannot make
//! the copy read another file's attributes.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags, XattrFlags};

use super::preserve::{LossKind, Losses};
use super::source_mount::SourceMount;

/// Where the attributes are read.
#[derive(Debug, Clone, Copy)]
pub(crate) enum XattrSource<'a> {
    /// An open file (flistxattr/fgetxattr).
    Fd(BorrowedFd<'a>),
    /// An `O_PATH` descriptor (see `open_beneath`): read through its /proc/self/fd name.
    Opened(BorrowedFd<'a>),
}

/// Where they are written.
#[derive(Debug, Clone, Copy)]
pub(crate) enum XattrTarget<'a> {
    Fd(BorrowedFd<'a>),
    /// A symlink or special file this copy made, held by its descriptor (see
    /// `Dir::take_made`).
    Node(&'a crate::fs::Node),
}

/// Opens `rel` beneath `root` without following any symlink, the last component included
/// (openat2(2): `O_NOFOLLOW` with `RESOLVE_NO_SYMLINKS` returns the symlink itself): as an
/// `O_PATH` descriptor, or with `directory`, a readable directory (a symlink fails).
pub(crate) fn open_beneath(
    root: BorrowedFd<'_>,
    rel: &Path,
    directory: bool,
) -> io::Result<OwnedFd> {
    let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
    let how = if directory { OFlags::RDONLY | OFlags::DIRECTORY } else { OFlags::PATH };
    Ok(rustix::fs::openat2(
        root,
        rel,
        how | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )?)
}

fn proc_path(fd: BorrowedFd<'_>) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// The NUL-separated attribute names of the source; empty where its file system has none.
fn names(src: XattrSource<'_>) -> io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(256);
    loop {
        buf.clear();
        let got = match src {
            XattrSource::Fd(fd) => {
                rustix::fs::flistxattr(fd, rustix::buffer::spare_capacity(&mut buf))
            }
            XattrSource::Opened(fd) => {
                rustix::fs::listxattr(proc_path(fd), rustix::buffer::spare_capacity(&mut buf))
            }
        };
        match got {
            Ok(_) => return Ok(buf),
            Err(rustix::io::Errno::RANGE) => buf.reserve(buf.capacity() * 2),
            Err(rustix::io::Errno::NOTSUP) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        }
    }
}

fn value(src: XattrSource<'_>, name: &[u8]) -> io::Result<Vec<u8>> {
    let name = os(name);
    let mut buf = Vec::with_capacity(256);
    loop {
        buf.clear();
        let got = match src {
            XattrSource::Fd(fd) => {
                rustix::fs::fgetxattr(fd, name, rustix::buffer::spare_capacity(&mut buf))
            }
            XattrSource::Opened(fd) => {
                rustix::fs::getxattr(proc_path(fd), name, rustix::buffer::spare_capacity(&mut buf))
            }
        };
        match got {
            Ok(_) => return Ok(buf),
            // An attribute of 0 bytes still needs a buffer of some capacity.
            Err(rustix::io::Errno::RANGE) => buf.reserve(buf.capacity().max(1) * 2),
            Err(e) => return Err(e.into()),
        }
    }
}

/// An attribute name as the `OsStr` rustix takes (names are bytes, as paths are).
fn os(name: &[u8]) -> &std::ffi::OsStr {
    std::os::unix::ffi::OsStrExt::from_bytes(name)
}

/// Which kind of loss an attribute's failure is.
fn kind_of(name: &[u8]) -> LossKind {
    if name.starts_with(b"system.") {
        LossKind::Acl
    } else {
        LossKind::Xattr
    }
}

/// Copies every attribute of `src` to `dst`; what the destination refuses is counted in
/// `losses` (never fatal: the data is there). security.capability is copied only with the
/// owner (`owner_kept`): file capabilities on a copy that now belongs to someone else would
/// mint privilege, as set-id bits would; nor from a source `mount` where the kernel does not
/// honour them (`nosuid`, FUSE), which is counted as a loss.
pub(crate) fn copy_xattrs(
    src: XattrSource<'_>,
    dst: XattrTarget<'_>,
    owner_kept: bool,
    mount: SourceMount,
    shown: &Path,
    losses: &Losses,
) {
    let list = match names(src) {
        Ok(list) => list,
        Err(e) => {
            losses.record(LossKind::Xattr, shown, || format!("cannot list the source's ({e})"));
            return;
        }
    };
    for name in list.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        if name == b"security.capability" && !(owner_kept && mount.keeps_capability(shown, losses))
        {
            continue;
        }
        let kind = kind_of(name);
        let foreign = kind == LossKind::Acl
            && name != b"system.posix_acl_access"
            && name != b"system.posix_acl_default";
        let set = value(src, name).and_then(|v| {
            let name = os(name);
            let flags = XattrFlags::empty();
            match dst {
                XattrTarget::Fd(fd) => Ok(rustix::fs::fsetxattr(fd, name, &v, flags)?),
                XattrTarget::Node(node) => node.set_xattr(name, &v),
            }
        });
        if let Err(e) = set {
            let shown_name = String::from_utf8_lossy(name).into_owned();
            losses.record(kind, shown, || match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) if foreign => {
                    format!("{shown_name}: an ACL type the destination file system does not know")
                }
                Some(libc::EOPNOTSUPP) => {
                    format!("{shown_name}: the destination file system does not support it")
                }
                Some(libc::EPERM | libc::EACCES) => {
                    format!("{shown_name}: not permitted (trusted. and security. need root)")
                }
                _ => format!("{shown_name}: {e}"),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn user_attributes_and_acls_are_classified() {
        assert_eq!(kind_of(b"user.a"), LossKind::Xattr);
        assert_eq!(kind_of(b"system.posix_acl_access"), LossKind::Acl);
        assert_eq!(kind_of(b"system.nfs4_acl"), LossKind::Acl);
    }

    #[test]
    fn open_beneath_follows_no_symlink_out_of_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("out")).unwrap();
        let fd = std::fs::File::open(&root).unwrap();
        // The symlink itself is opened (its own attributes), never what it points to.
        let link = open_beneath(fd.as_fd(), Path::new("out"), false).unwrap();
        let stat = rustix::fs::fstat(&link).unwrap();
        assert_eq!(
            rustix::fs::FileType::from_raw_mode(stat.st_mode),
            rustix::fs::FileType::Symlink
        );
        // Through it, or by `..`, nothing outside the root opens.
        assert!(open_beneath(fd.as_fd(), Path::new("out/passwd"), false).is_err());
        assert!(open_beneath(fd.as_fd(), Path::new("../root"), false).is_err());
        assert!(open_beneath(fd.as_fd(), Path::new(""), false).is_ok(), "the root itself");
    }

    #[test]
    fn a_user_attribute_is_copied_between_open_files() {
        let dir = tempfile::tempdir_in("/dev/shm").or_else(|_| tempfile::tempdir()).unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, b"x").unwrap();
        std::fs::write(&b, b"y").unwrap();
        if rustix::fs::setxattr(&a, "user.k", b"v", XattrFlags::empty()).is_err() {
            eprintln!("skipped: this file system has no user. attributes");
            return;
        }
        let (fa, fb) = (std::fs::File::open(&a).unwrap(), std::fs::File::open(&b).unwrap());
        let losses = Losses::default();
        let mount = SourceMount::read(&fa, fa.metadata().unwrap().dev());
        let (from, to) = (XattrSource::Fd(fa.as_fd()), XattrTarget::Fd(fb.as_fd()));
        copy_xattrs(from, to, false, mount, &a, &losses);
        assert!(losses.report().is_empty());
        assert_eq!(value(XattrSource::Fd(fb.as_fd()), b"user.k").unwrap(), b"v");
    }
}
