//! What a root `corelane copy` of another user's files can be turned into: every test here
//! plays the other user (files they own, names they plant) and checks that no privilege is
//! minted, nothing outside the destination is written and nothing is silently dropped.

mod common;

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use common::copy::file;
use common::root_or_skip;
use corelane::copy::{copy_tree, CopyError, CopyOptions, CreateCall, NotKept, TreeReport};
use corelane::lane::StopSignal;

fn scratch() -> tempfile::TempDir {
    common::copy::tmpfs_dir("corelane-trust")
}

/// A tree copied over two lanes.
fn tree(src: &Path, dst: &Path, opts: &CopyOptions) -> Result<TreeReport, CopyError> {
    common::copy::tree(src, dst, opts, 2)
}

/// Where a swap test copies under `dir`: the source, with directories `a` and `b` made, the
/// destination, and the victim the other user aims the copy at.
fn swap_stage(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let src = dir.join("src");
    for sub in ["a", "b"] {
        fs::create_dir_all(src.join(sub)).unwrap();
    }
    (src, dir.join("dst"), dir.join("victim"))
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

/// A root copy of a setuid/setgid file another user owns was a root-owned `-rwsr-sr-x`
/// program: a root shell for that user. The bits go, as with `cp` without `-p`.
#[test]
fn a_root_copy_of_another_users_setuid_file_has_no_setid_bits() {
    if !root_or_skip("to own a file as another user and copy it as root") {
        return;
    }
    let dir = scratch();
    let (src, dst) = (dir.path().join("src"), dir.path().join("dst"));
    fs::create_dir(&src).unwrap();
    let prog = src.join("prog");
    fs::write(&prog, b"#!/bin/sh\nid\n").unwrap();
    std::os::unix::fs::chown(&prog, Some(65534), Some(65534)).unwrap();
    fs::set_permissions(&prog, fs::Permissions::from_mode(0o6755)).unwrap();
    let sticky = src.join("sticky");
    fs::write(&sticky, b"x").unwrap();
    fs::set_permissions(&sticky, fs::Permissions::from_mode(0o1644)).unwrap();

    let single = dir.path().join("single");
    file(&prog, &single, &CopyOptions::default()).unwrap();
    assert_eq!(mode(&single), 0o755, "single-file copy");
    assert_eq!(fs::metadata(&single).unwrap().uid(), 0);

    for create in [CreateCall::Open, CreateCall::Creat] {
        let out = dir.path().join(format!("tree-{create:?}"));
        tree(&src, &out, &CopyOptions { create, ..CopyOptions::default() }).unwrap();
        assert_eq!(mode(&out.join("prog")), 0o755, "tree copy, {create:?}");
        assert_eq!(mode(&out.join("sticky")), 0o644, "sticky bit on a file, {create:?}");
    }
    let _ = dst;
}

/// Directories were created with the umask's 0755 and given their modes only at the very end
/// of a successful copy: a private directory's files were readable by all during the copy and
/// stayed so after a failure. Now 0700 while filling, and the source's mode on every way out.
#[test]
fn a_directory_is_never_wider_than_its_source_even_after_a_failure() {
    let dir = scratch();
    let src = dir.path().join("src");
    for d in ["a", "b", "c"] {
        fs::create_dir_all(src.join(d)).unwrap();
        fs::write(src.join(d).join("f"), b"secret").unwrap();
    }
    fs::set_permissions(src.join("a"), fs::Permissions::from_mode(0o700)).unwrap();
    fs::set_permissions(src.join("b"), fs::Permissions::from_mode(0o750)).unwrap();
    // The copy fails: a file stands where the tree has directory `c`.
    let out = dir.path().join("out");
    fs::create_dir_all(out.join("src")).unwrap();
    fs::write(out.join("src/c"), b"in the way").unwrap();
    let err = tree(&src, &out, &CopyOptions::default()).unwrap_err();
    let out = out.join("src");
    assert!(matches!(err, CopyError::DestinationNotDirectory(_)), "{err}");
    assert_eq!(mode(&out.join("a")), 0o700);
    assert_eq!(mode(&out.join("b")), 0o750);

    // And the same on success, with a directory made setgid by its owner.
    fs::set_permissions(src.join("c"), fs::Permissions::from_mode(0o2770)).unwrap();
    let ok = dir.path().join("ok");
    tree(&src, &ok, &CopyOptions::default()).unwrap();
    assert_eq!(mode(&ok.join("a")), 0o700);
    assert_eq!(mode(&ok.join("c")), 0o770, "no set-group-ID on a directory root made");
}

/// `--create creat` made its temporary with creat(2) under a predictable name: another user
/// who planted symlinks at those names had root truncate and write the files they point to.
#[test]
fn planted_symlinks_at_temporary_names_are_never_followed() {
    let dir = scratch();
    let victim = dir.path().join("victim");
    fs::write(&victim, b"precious").unwrap();
    let src = dir.path().join("src");
    fs::write(&src, b"payload").unwrap();
    let dst = dir.path().join("dst");
    fs::write(&dst, b"old").unwrap();
    let pid = std::process::id();
    for n in 0..256 {
        let _ = std::os::unix::fs::symlink(
            &victim,
            dir.path().join(format!(".dst.corelane-{pid}-{n}")),
        );
    }
    let opts = CopyOptions { create: CreateCall::Creat, ..CopyOptions::default() };
    for _ in 0..4 {
        file(&src, &dst, &opts).unwrap();
    }
    assert_eq!(fs::read(&victim).unwrap(), b"precious");
    assert_eq!(fs::read(&dst).unwrap(), b"payload");
}

/// A destination directory that is a symlink was followed: a link planted where a directory
/// is expected sent a root copy anywhere. Refused unless asked for.
#[test]
fn a_symlinked_destination_directory_is_refused_unless_asked() {
    let dir = scratch();
    let (src, elsewhere) = (dir.path().join("src"), dir.path().join("elsewhere"));
    fs::create_dir(&src).unwrap();
    fs::write(src.join("f"), b"x").unwrap();
    fs::create_dir(&elsewhere).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();

    let err = tree(&src, &link, &CopyOptions::default()).unwrap_err();
    assert!(matches!(err, CopyError::DestinationSymlink(_)), "{err}");
    assert!(err.to_string().contains("--follow-dest-symlink"), "{err}");
    let err = file(&src.join("f"), &link, &CopyOptions::default()).unwrap_err();
    assert!(matches!(err, CopyError::DestinationSymlink(_)), "{err}");
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0, "nothing written through the link");

    let follow = CopyOptions { follow_destination_symlink: true, ..CopyOptions::default() };
    tree(&src, &link, &follow).unwrap();
    assert!(elsewhere.join("src/f").is_file());
}

/// FIFOs, sockets and devices were dropped without a word, and a FIFO put where a file was
/// expected could hang the copy (blocking open). FIFOs are recreated, sockets reported.
#[test]
fn special_files_are_recreated_or_reported_never_dropped() {
    let dir = scratch();
    let src = dir.path().join("src");
    fs::create_dir(&src).unwrap();
    fs::write(src.join("file"), b"x").unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        src.join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o640),
        0,
    )
    .unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(src.join("sock")).unwrap();
    let out = dir.path().join("out");
    let r = tree(&src, &out, &CopyOptions::default()).unwrap();
    assert_eq!((r.files, r.special_files), (1, 1), "{r:?}");
    let fifo = fs::symlink_metadata(out.join("fifo")).unwrap();
    assert!(fifo.file_type().is_fifo());
    assert_eq!(fifo.mode() & 0o777, 0o640);
    assert_eq!(r.skipped.len(), 1, "{r:?}");
    assert_eq!(r.skipped[0].path, Path::new("sock"));
    assert!(r.skipped[0].why.contains("socket"));
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.contains("\"skipped\":[{\"path\":\"sock\""), "{json}");
    assert!(!out.join("sock").exists());
}

/// A symlink inside the source tree is copied as a symlink, never through: a tree entry is
/// opened beneath the tree's root with no symlink followed, so swapping a file for a link to
/// /etc/shadow between the walk and the open reads nothing outside the tree.
#[test]
fn tree_entries_are_opened_beneath_the_root_without_following_links() {
    let dir = scratch();
    let src = dir.path().join("src");
    fs::create_dir_all(src.join("sub")).unwrap();
    let outside = dir.path().join("outside");
    fs::write(&outside, b"not yours").unwrap();
    std::os::unix::fs::symlink(&outside, src.join("sub/link")).unwrap();
    let out = dir.path().join("out");
    tree(&src, &out, &CopyOptions::default()).unwrap();
    let copied = fs::symlink_metadata(out.join("sub/link")).unwrap();
    assert!(copied.file_type().is_symlink());
}

/// The destination's parent directory may be reached through a symlink the user named (as
/// with cp); only a destination that is itself a symlinked directory needs the flag.
#[test]
fn a_destination_path_through_a_symlinked_parent_is_followed() {
    let dir = scratch();
    let real = dir.path().join("real");
    fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&real, dir.path().join("via")).unwrap();
    let src = dir.path().join("src");
    fs::write(&src, b"data").unwrap();
    for create in [CreateCall::Open, CreateCall::Creat] {
        let opts = CopyOptions { create, ..CopyOptions::default() };
        file(&src, &dir.path().join("via/copy"), &opts).unwrap();
        assert_eq!(fs::read(real.join("copy")).unwrap(), b"data", "{create:?}");
    }
}

/// The copy wrote each entry by path (`root.join(rel)`): a destination directory renamed away
/// and replaced by a symlink between two files had root write the rest, and replace what was
/// there, wherever the symlink pointed. Entries are now made through directory descriptors
/// reopened from the destination root without following symlinks and checked to be the
/// directory the copy made: the copy fails, and the victim directory is as it was.
#[test]
fn a_destination_directory_swapped_for_a_symlink_mid_copy_fails_the_copy() {
    let dir = scratch();
    let (src, dst, victim) = swap_stage(dir.path());
    for sub in ["a", "b"] {
        for i in 0..100 {
            fs::write(src.join(sub).join(format!("f{i}")), b"copied").unwrap();
        }
    }
    fs::create_dir_all(&dst).unwrap();
    fs::create_dir(&victim).unwrap();
    fs::write(victim.join("f7"), b"precious").unwrap();
    let victim_ino = fs::metadata(victim.join("f7")).unwrap().ino();
    let swapped = std::sync::atomic::AtomicBool::new(false);
    // After the first run of files (one directory's), both directories become symlinks to
    // the victim: the next run goes to the other one.
    let swap = |_, _| {
        if !swapped.swap(true, std::sync::atomic::Ordering::SeqCst) {
            for sub in ["a", "b"] {
                let at = dst.join("src").join(sub);
                fs::rename(&at, dir.path().join(format!("moved-{sub}"))).unwrap();
                std::os::unix::fs::symlink(&victim, &at).unwrap();
            }
        }
    };
    for preserve in [corelane::copy::Preserve::DEFAULT, corelane::copy::Preserve::ALL] {
        swapped.store(false, std::sync::atomic::Ordering::SeqCst);
        let _ = fs::remove_dir_all(dst.join("src"));
        for sub in ["a", "b"] {
            let _ = fs::remove_dir_all(dir.path().join(format!("moved-{sub}")));
        }
        let opts = CopyOptions { preserve, ..CopyOptions::default() };
        let result = copy_tree(&src, &dst, &opts, 1, &[], &swap, &StopSignal::new());
        let names: Vec<_> =
            fs::read_dir(&victim).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["f7"], "root wrote through the symlink ({preserve:?})");
        assert_eq!(fs::read(victim.join("f7")).unwrap(), b"precious");
        assert_eq!(fs::metadata(victim.join("f7")).unwrap().ino(), victim_ino);
        let err = result.expect_err("the copy lost a directory and must say so");
        assert!(err.to_string().contains("was replaced during the copy"), "{err}");
    }
}

/// The second name of a hard-linked file is linked to the first name's copy once the lanes
/// are done. A user who can write the destination renames a hard link to another file over
/// that first name in between: root must not give that file a name of its own making.
#[test]
fn a_first_name_swapped_before_its_second_is_linked_is_refused() {
    let dir = scratch();
    let (src, dst, victim) = swap_stage(dir.path());
    fs::write(src.join("a/one"), b"copied").unwrap();
    fs::hard_link(src.join("a/one"), src.join("b/two")).unwrap();
    fs::create_dir_all(&dst).unwrap();
    fs::write(&victim, b"precious").unwrap();
    let victim_ino = fs::metadata(&victim).unwrap().ino();
    let swapped = std::sync::atomic::AtomicBool::new(false);
    // Both names are counted once the lanes are done (the second before it is linked).
    let swap = |files: u64, _| {
        if files == 2 && !swapped.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let planted = dst.join("src/a/.planted");
            fs::hard_link(&victim, &planted).unwrap();
            fs::rename(&planted, dst.join("src/a/one")).unwrap();
        }
    };
    let opts = CopyOptions { preserve: corelane::copy::Preserve::ALL, ..CopyOptions::default() };
    let result = copy_tree(&src, &dst, &opts, 1, &[], &swap, &StopSignal::new());
    assert!(swapped.load(std::sync::atomic::Ordering::SeqCst), "the swap never ran");
    let err = result.expect_err("the first name was replaced and the copy must say so");
    assert!(err.to_string().contains("no longer the copy this run made"), "{err}");
    let second = dst.join("src/b/two");
    assert!(
        fs::symlink_metadata(&second).map_or(true, |m| m.ino() != victim_ino),
        "root linked the victim into the destination"
    );
    assert_eq!(fs::metadata(&victim).unwrap().nlink(), 2, "the victim and the planted name only");
}

/// Set in the re-run of a test inside its own mount namespace (see `in_private_mounts`).
const IN_PRIVATE_MOUNTS: &str = "CORELANE_TEST_IN_PRIVATE_MOUNTS";

/// Runs the test `name` of this binary again under `unshare --mount` (a private mount
/// namespace: what it mounts goes with it). True in that re-run, which goes on with the test;
/// false in the caller, once it checked the re-run ran that one test and it passed.
fn in_private_mounts(name: &str) -> bool {
    if std::env::var_os(IN_PRIVATE_MOUNTS).is_some() {
        return true;
    }
    let run = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private"])
        .arg(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(IN_PRIVATE_MOUNTS, "1")
        .output();
    let out = match run {
        Ok(out) => out,
        Err(e) => {
            eprintln!("skipped: cannot run unshare for a private mount namespace ({e})");
            return false;
        }
    };
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    print!("{stdout}");
    eprint!("{stderr}");
    assert!(out.status.success(), "the run in a private mount namespace failed");
    assert!(stdout.contains("1 passed"), "{name} did not run in the private mount namespace");
    false
}

/// A tmpfs mounted at `at` with `flags`, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: PathBuf, flags: rustix::mount::MountFlags) -> Tmpfs {
        fs::create_dir_all(&at).unwrap();
        rustix::mount::mount("corelane-test", &at, "tmpfs", flags, None).unwrap();
        Tmpfs(at)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = rustix::mount::unmount(&self.0, rustix::mount::UnmountFlags::DETACH);
    }
}

/// The losses of kind `name` ("set-id", "capability") in a report.
fn lost<'a>(not_kept: &'a [NotKept], name: &str) -> Option<&'a NotKept> {
    not_kept.iter().find(|n| n.kind.name() == name)
}

/// A file capability (cap_net_raw+ep), as `setcap` writes security.capability (revision 2).
const NET_RAW_CAPABILITY: [u8; 20] = {
    let mut v = [0u8; 20];
    let magic = 0x0200_0001u32.to_le_bytes();
    let permitted = (1u32 << 13).to_le_bytes();
    let mut i = 0;
    while i < 4 {
        v[i] = magic[i];
        v[4 + i] = permitted[i];
        i += 1;
    }
    v
};

fn capability(path: &Path) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 64];
    let n = rustix::fs::getxattr(path, "security.capability", &mut buf).ok()?;
    buf.truncate(n);
    Some(buf)
}

/// The source tree of the nosuid,nodev test, under `src`: a root setuid program, another
/// user's setgid one, a root program with a file capability (when the file system takes
/// one), a world-writable /dev/mem node of that user, a set-group-ID directory and a FIFO.
/// Returns whether the capability was set.
fn nosuid_nodev_tree(src: &Path) -> bool {
    use std::os::unix::fs::chown;
    fs::create_dir_all(src.join("shared")).unwrap();
    fs::set_permissions(src.join("shared"), fs::Permissions::from_mode(0o2775)).unwrap();
    for (name, owner, mode) in [("evil", 0, 0o4755), ("sgid", 1000, 0o2755), ("capped", 0, 0o755)] {
        let path = src.join(name);
        fs::write(&path, b"#!/bin/sh\nid\n").unwrap();
        chown(&path, Some(owner), Some(owner)).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
    }
    let flags = rustix::fs::XattrFlags::empty();
    let capped =
        rustix::fs::setxattr(src.join("capped"), "security.capability", &NET_RAW_CAPABILITY, flags);
    if let Err(e) = &capped {
        eprintln!("file capabilities not checked: tmpfs refused security.capability ({e})");
    }
    let (char_dev, fifo) = (rustix::fs::FileType::CharacterDevice, rustix::fs::FileType::Fifo);
    let at = |name: &str| src.join(name);
    let rw = rustix::fs::Mode::from_raw_mode(0o666);
    rustix::fs::mknodat(rustix::fs::CWD, at("mem"), char_dev, rw, rustix::fs::makedev(1, 1))
        .unwrap();
    chown(at("mem"), Some(1000), Some(1000)).unwrap();
    fs::set_permissions(at("mem"), fs::Permissions::from_mode(0o666)).unwrap();
    rustix::fs::mknodat(rustix::fs::CWD, at("fifo"), fifo, rw, 0).unwrap();
    capped.is_ok()
}

/// A FUSE mount (user-mountable) or removable media reports any owner, mode and device
/// numbers; the kernel honours none of the set-id bits, capabilities or devices on a
/// nosuid,nodev mount, but a root `copy -a` recreated them on an ordinary file system: a
/// root-owned setuid program with the user's contents and a world-writable /dev/mem, and
/// `copy -r` the node too. Now set-id bits and capabilities are dropped and counted as not
/// kept, device nodes skipped saying why, also for a file mounted on its own in a plain
/// directory; FIFOs, directories' set-group-ID bits, owners and the same file from a plain
/// mount are kept.
#[test]
fn set_id_bits_capabilities_and_devices_from_a_nosuid_nodev_source_are_not_recreated() {
    use rustix::mount::MountFlags;
    if !root_or_skip("to mount tmpfs in a private mount namespace")
        || !in_private_mounts(
            "set_id_bits_capabilities_and_devices_from_a_nosuid_nodev_source_are_not_recreated",
        )
    {
        return;
    }
    let dir = scratch();
    let source = Tmpfs::mount(dir.path().join("src"), MountFlags::NOSUID | MountFlags::NODEV);
    // /dev/shm is itself nosuid,nodev: the copies go to a mount that honours both.
    let dest = Tmpfs::mount(dir.path().join("dst"), MountFlags::empty());
    let (src, dst) = (source.0.join("tree"), dest.0.clone());
    let caps = nosuid_nodev_tree(&src);
    let uid = |p: &Path| fs::symlink_metadata(p).unwrap().uid();

    let a = tree(&src, &dst.join("a"), &CopyOptions::archive()).unwrap();
    let out = dst.join("a");
    assert_eq!((mode(&out.join("evil")), uid(&out.join("evil"))), (0o755, 0), "copy -a");
    assert_eq!((mode(&out.join("sgid")), uid(&out.join("sgid"))), (0o755, 1000));
    assert!(!out.join("mem").exists() && fs::symlink_metadata(out.join("mem")).is_err());
    assert_eq!(capability(&out.join("capped")), None, "no file capability");
    assert_eq!(mode(&out.join("shared")), 0o2775, "a directory's set-group-ID bit stays");
    assert!(fs::symlink_metadata(out.join("fifo")).unwrap().file_type().is_fifo());
    assert_eq!(a.skipped.len(), 1, "{a:?}");
    assert_eq!(a.skipped[0].path, Path::new("mem"));
    assert!(a.skipped[0].why.contains("nodev mount"), "{:?}", a.skipped);
    let set_id = lost(&a.not_kept, "set-id").expect("the set-id bits are reported as not kept");
    assert_eq!(set_id.entries, 2, "{:?}", a.not_kept);
    assert!(set_id.why.contains("nosuid mount"), "{set_id:?}");
    if caps {
        let cap = lost(&a.not_kept, "capability").expect("the capability is reported");
        assert!(cap.entries == 1 && cap.example.ends_with("capped"), "{cap:?}");
    }
    let json = serde_json::to_string(&a).unwrap();
    assert!(json.contains("\"kind\":\"set-id\""), "{json}");

    // copy -r as root: devices are recreated, but not from a nodev mount; set-id bits go
    // with the owner, as before, so nothing more is lost.
    let r = tree(&src, &dst.join("r"), &CopyOptions::default()).unwrap();
    assert!(fs::symlink_metadata(dst.join("r/mem")).is_err(), "copy -r made the node");
    assert_eq!(mode(&dst.join("r/evil")), 0o755);
    assert!(r.skipped.len() == 1 && r.skipped[0].why.contains("nodev"), "{r:?}");
    assert!(r.not_kept.is_empty(), "{:?}", r.not_kept);

    // A single file, with everything kept: the same.
    let single = file(&src.join("evil"), &dst.join("single"), &CopyOptions::archive()).unwrap();
    assert_eq!((mode(&dst.join("single")), uid(&dst.join("single"))), (0o755, 0));
    assert!(lost(&single.not_kept, "set-id").is_some(), "{:?}", single.not_kept);
    let capped = file(&src.join("capped"), &dst.join("capped"), &CopyOptions::archive()).unwrap();
    assert_eq!(capability(&dst.join("capped")), None);
    assert_eq!(lost(&capped.not_kept, "capability").is_some(), caps, "{:?}", capped.not_kept);

    // A file mounted on its own (FUSE can mount on a file) in a directory of a mount that
    // honours set-id bits is judged by its own mount.
    let mixed = dst.join("mixed");
    fs::create_dir(&mixed).unwrap();
    fs::write(mixed.join("bound"), b"").unwrap();
    rustix::mount::mount_bind(src.join("evil"), mixed.join("bound")).unwrap();
    let m = tree(&mixed, &dst.join("mixed-copy"), &CopyOptions::archive()).unwrap();
    assert_eq!(mode(&dst.join("mixed-copy/bound")), 0o755, "a file mount's own flags count");
    assert!(lost(&m.not_kept, "set-id").is_some(), "{:?}", m.not_kept);
    rustix::mount::unmount(mixed.join("bound"), rustix::mount::UnmountFlags::empty()).unwrap();

    // The same files from a mount that honours them keep everything (the check can fail).
    let plain = dst.join("plain");
    tree(&src, &plain, &CopyOptions::archive()).unwrap();
    fs::set_permissions(plain.join("evil"), fs::Permissions::from_mode(0o4755)).unwrap();
    let back = tree(&plain, &dst.join("control"), &CopyOptions::archive()).unwrap();
    assert_eq!(mode(&dst.join("control/evil")), 0o4755, "{:?}", back.not_kept);
    assert!(back.not_kept.is_empty(), "{:?}", back.not_kept);
    drop((source, dest));
}
