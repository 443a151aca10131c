//! What a root `corelane copy` of another user's files can be turned into: every test here
//! plays the other user (files they own, names they plant) and checks that no privilege is
//! minted, nothing outside the destination is written and nothing is silently dropped.

mod common;

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use common::copy::file;
use common::root_or_skip;
use corelane::copy::{copy_tree, CopyError, CopyOptions, CreateCall, TreeReport};
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
