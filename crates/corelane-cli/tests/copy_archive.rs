//! `corelane copy -a` as a user runs it: the --preserve/--no-preserve names, and a non-zero
//! exit with one line per kind when the destination cannot keep what was asked (not root for
//! ownership, a file system without xattrs), unless that kind was excluded.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{corelane, is_root, text};

fn scratch(name: &str) -> tempfile::TempDir {
    let base = if Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" };
    tempfile::Builder::new().prefix(&format!("corelane-cli-{name}-")).tempdir_in(base).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn preserve_lists_are_parsed_with_cps_names_and_bad_names_refused() {
    let dir = scratch("preserve");
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("f"), b"x").unwrap();
    std::fs::hard_link(src.join("f"), src.join("g")).unwrap();
    let out = dir.path().join("out");
    let o = corelane(&[
        "copy",
        "-r",
        s(&src),
        s(&out),
        "--preserve=links,timestamps",
        "--no-preserve=mode",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["hard_links"], 1, "{report}");
    assert_eq!(report["preserve"]["links"], true);
    assert_eq!(report["preserve"]["mode"], false);
    assert_eq!(report["not_kept"], serde_json::json!([]));
    assert_eq!(std::fs::metadata(out.join("g")).unwrap().nlink(), 2);
    // -p keeps mode, ownership and timestamps; links are not among them.
    let basic = dir.path().join("basic");
    let o = corelane(&["copy", "-r", "-p", s(&src), s(&basic), "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["preserve"]["ownership"], true, "{report}");
    assert_eq!(report["preserve"]["links"], false);
    assert_eq!(report["hard_links"], 0);
    // --reflink=always where extents cannot be shared (tmpfs, ramfs, ext4 across files)
    // fails with the reason and leaves nothing.
    let fs_type = rustix::fs::statfs(dir.path()).unwrap().f_type;
    #[allow(clippy::unnecessary_cast)]
    if ![0x9123_683E_i64, 0x5846_5342, 0xCA45_1A4E].contains(&(fs_type as i64)) {
        let cloned = dir.path().join("cloned");
        let o = corelane(&["copy", "--reflink=always", s(&src.join("f")), s(&cloned)]);
        assert_eq!(o.status.code(), Some(1));
        assert!(
            text(&o.stderr).contains("--reflink=auto copies the data instead"),
            "{}",
            text(&o.stderr)
        );
        assert!(!cloned.exists());
    }
    for (flag, why) in [
        ("--preserve=mode,acl", "unknown attribute `acl`"),
        ("--no-preserve=owner", "unknown attribute `owner`"),
        ("--reflink=sometimes", "choose auto, always or never"),
    ] {
        let o = corelane(&["copy", "-a", s(&src), s(&dir.path().join("x")), flag]);
        assert!(!o.status.success(), "{flag}");
        assert!(text(&o.stderr).contains(why), "{flag}: {}", text(&o.stderr));
    }
}

/// A private ramfs mount: a file system without extended attributes.
struct Ramfs {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Ramfs {
    fn mount() -> Option<Self> {
        let dir = tempfile::Builder::new().prefix("corelane-ramfs-").tempdir().ok()?;
        let ok = Command::new("mount")
            .args(["-t", "ramfs", "none"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Self { path: dir.path().to_path_buf(), _dir: dir })
    }
}

impl Drop for Ramfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

#[test]
fn attributes_the_destination_cannot_keep_fail_the_copy_once_per_kind() {
    if !is_root() {
        eprintln!("skipped: needs root to mount a ramfs (a file system without xattrs)");
        return;
    }
    let Some(ramfs) = Ramfs::mount() else {
        eprintln!("skipped: cannot mount ramfs here");
        return;
    };
    let dir = scratch("lossy");
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    for f in ["a", "b", "c"] {
        std::fs::write(src.join(f), b"x").unwrap();
        rustix::fs::setxattr(src.join(f), "user.tag", b"v", rustix::fs::XattrFlags::empty())
            .unwrap();
    }
    let out = ramfs.path.join("out");
    let o = corelane(&["copy", "-a", s(&src), s(&out), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let stderr = text(&o.stderr);
    assert!(stderr.contains("could not keep xattr on 3 entries"), "{stderr}");
    assert!(stderr.contains("does not support it"), "{stderr}");
    assert_eq!(stderr.matches("could not keep").count(), 1, "once per kind: {stderr}");
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["not_kept"][0]["kind"], "xattr", "{report}");
    assert_eq!(report["not_kept"][0]["entries"], 3);
    assert_eq!(std::fs::read(out.join("b")).unwrap(), b"x", "the data is there all the same");
    // Excluded, the same copy succeeds and says nothing.
    let again = ramfs.path.join("again");
    let o = corelane(&["copy", "-a", "--no-preserve=xattr", s(&src), s(&again)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(!text(&o.stderr).contains("could not keep"));
}

#[test]
fn a_caller_who_is_not_root_cannot_keep_other_owners_and_is_told() {
    if !is_root() {
        eprintln!("skipped: needs root to make files of another user and to drop to nobody");
        return;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: setpriv (util-linux) is not installed");
        return;
    }
    let dir = scratch("not-root");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    // The binary where nobody can run it (the target directory may be private).
    let bin = dir.path().join("corelane");
    std::fs::copy(env!("CARGO_BIN_EXE_corelane"), &bin).unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("theirs"), b"x").unwrap();
    std::os::unix::fs::chown(src.join("theirs"), Some(1000), Some(1000)).unwrap();
    std::fs::set_permissions(src.join("theirs"), std::fs::Permissions::from_mode(0o4755)).unwrap();
    let as_nobody = |args: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .args(args)
            .output()
            .unwrap()
    };
    // Two entries: their file, and the source directory (root's).
    let out = dir.path().join("out");
    let o = as_nobody(&["copy", "-a", s(&src), s(&out)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("could not keep ownership on 2 entries"),
        "{}",
        text(&o.stderr)
    );
    let m = std::fs::metadata(out.join("theirs")).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o7777), (65534, 0o755), "no set-id bits without the owner");
    let again = dir.path().join("again");
    let o = as_nobody(&["copy", "-a", "--no-preserve=ownership", s(&src), s(&again)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}
