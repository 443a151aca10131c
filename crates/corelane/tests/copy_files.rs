//! Copies of real files on tmpfs (/dev/shm where it exists): every method byte-exact over the
//! awkward sizes, holes kept, refusals that name the problem, and nothing left behind on failure.

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use common::copy::{file as copy, tree};
use corelane::copy::{copy_file, CopyError, CopyMethod, CopyOptions, CreateCall};
use corelane::lane::StopSignal;

/// A private directory on tmpfs, kept when a test fails (each test removes it at its end).
fn scratch(name: &str) -> PathBuf {
    common::copy::tmpfs_dir(&format!("corelane-test-{name}")).keep()
}

/// Deterministic, non-repeating content so a misplaced chunk cannot compare equal.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u64).wrapping_mul(2_654_435_761).rotate_right(13) as u8).collect()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn every_method_is_byte_exact_over_awkward_sizes() {
    let dir = scratch("methods");
    for size in [0usize, 1, 4095, 4096, 4097, (1 << 20) + 3] {
        let src = dir.join(format!("src-{size}"));
        fs::write(&src, pattern(size)).unwrap();
        fs::set_permissions(&src, fs::Permissions::from_mode(0o640)).unwrap();
        for method in CopyMethod::ALL {
            for create in [CreateCall::Open, CreateCall::Creat] {
                let dst = dir.join(format!("dst-{size}-{}", method.name()));
                let opts = CopyOptions {
                    method: Some(method),
                    buffer: 4096,
                    create,
                    ..CopyOptions::default()
                };
                let report =
                    copy(&src, &dst, &opts).unwrap_or_else(|e| panic!("{method:?} {size}: {e}"));
                assert_eq!(fs::read(&dst).unwrap(), pattern(size), "{method:?} size {size}");
                assert_eq!(report.bytes, size as u64);
                assert_eq!(fs::metadata(&dst).unwrap().mode() & 0o777, 0o640, "mode kept");
                assert_eq!(
                    fs::metadata(&dst).unwrap().mtime(),
                    fs::metadata(&src).unwrap().mtime(),
                    "mtime kept"
                );
                fs::remove_file(&dst).unwrap();
            }
        }
    }
    assert!(
        entries(&dir).iter().all(|n| n.starts_with("src-")),
        "stray files: {:?}",
        entries(&dir)
    );
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn holes_stay_holes() {
    let dir = scratch("sparse");
    let src = dir.join("sparse");
    {
        let f = fs::File::create(&src).unwrap();
        f.set_len(64 << 20).unwrap();
        use std::os::unix::fs::FileExt;
        f.write_all_at(&pattern(8192), 32 << 20).unwrap();
    }
    let dst = dir.join("copy");
    let report = copy(&src, &dst, &CopyOptions::default()).unwrap();
    assert_eq!(fs::read(&dst).unwrap(), fs::read(&src).unwrap());
    let allocated = fs::metadata(&dst).unwrap().blocks() * 512;
    if fs::metadata(&src).unwrap().blocks() * 512 < (1 << 20) {
        assert_eq!(report.extents, 1, "one data extent between two holes");
        assert!(allocated < (1 << 20), "holes were filled: {allocated} bytes allocated");
    } else {
        eprintln!("note: this file system does not keep holes; checked content only");
    }
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn refusals_name_the_problem_and_touch_nothing() {
    let dir = scratch("refuse");
    let src = dir.join("a");
    fs::write(&src, b"data").unwrap();
    fs::hard_link(&src, dir.join("hard")).unwrap();
    std::os::unix::fs::symlink(&src, dir.join("soft")).unwrap();
    let opts = CopyOptions::default();
    for same in ["a", "hard", "soft"] {
        let err = copy(&src, &dir.join(same), &opts).unwrap_err();
        assert!(matches!(err, CopyError::SameFile { .. }), "{same}: {err}");
    }
    assert!(matches!(
        copy(&dir.join("missing"), &dir.join("x"), &opts).unwrap_err(),
        CopyError::SourceMissing(_)
    ));
    assert!(matches!(
        copy(&dir, &dir.join("x"), &opts).unwrap_err(),
        CopyError::SourceIsDirectory(_)
    ));
    let err = copy(&src, &dir.join("no/such/dir/x"), &opts).unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert_eq!(fs::read(&src).unwrap(), b"data");
    assert_eq!(entries(&dir), ["a", "hard", "soft"]);
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn copying_into_a_directory_uses_the_source_name_and_replaces_atomically() {
    let dir = scratch("into");
    fs::create_dir(dir.join("out")).unwrap();
    fs::write(dir.join("f"), b"new").unwrap();
    fs::write(dir.join("out/f"), b"old contents").unwrap();
    let report = copy(
        &dir.join("f"),
        &dir.join("out"),
        &CopyOptions { verify: true, fsync: true, ..CopyOptions::default() },
    )
    .unwrap();
    assert!(report.verified);
    assert_eq!(fs::read(dir.join("out/f")).unwrap(), b"new");
    assert_eq!(entries(&dir.join("out")), ["f"]);
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_raised_stop_aborts_and_leaves_the_old_destination() {
    let dir = scratch("stop");
    fs::write(dir.join("src"), pattern(4 << 20)).unwrap();
    fs::write(dir.join("dst"), b"old").unwrap();
    let stop = StopSignal::new();
    stop.stop();
    let opts =
        CopyOptions { method: Some(CopyMethod::ReadWrite), buffer: 1024, ..CopyOptions::default() };
    let err =
        copy_file(&dir.join("src"), &dir.join("dst"), &opts, &mut |_, _| {}, &stop).unwrap_err();
    assert!(matches!(err, CopyError::Interrupted(_)), "{err}");
    assert_eq!(fs::read(dir.join("dst")).unwrap(), b"old");
    assert_eq!(entries(&dir), ["dst", "src"]);
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_full_file_system_leaves_no_temporary_and_the_old_destination() {
    if !common::root_or_skip("to mount a small tmpfs to fill") {
        return;
    }
    let dir = scratch("enospc");
    let small = dir.join("small");
    fs::create_dir(&small).unwrap();
    let ok = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "corelane-test", small.to_str().unwrap()])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: could not mount a tmpfs");
        return;
    }
    fs::write(dir.join("big"), pattern(4 << 20)).unwrap();
    fs::write(small.join("dst"), b"old").unwrap();
    for method in [None, Some(CopyMethod::ReadWrite), Some(CopyMethod::Splice)] {
        let err = copy(
            &dir.join("big"),
            &small.join("dst"),
            &CopyOptions { method, ..CopyOptions::default() },
        )
        .unwrap_err();
        assert!(matches!(err, CopyError::NoSpace(_)), "{method:?}: {err}");
        assert_eq!(fs::read(small.join("dst")).unwrap(), b"old");
        assert_eq!(entries(&small), ["dst"], "temporary file left behind");
    }
    // A tree into the full file system: the file that did not fit is removed, not left partial.
    fs::create_dir(dir.join("tree")).unwrap();
    fs::write(dir.join("tree/big"), pattern(4 << 20)).unwrap();
    let opts = CopyOptions { fresh_in_place: true, ..CopyOptions::default() };
    let err = tree(&dir.join("tree"), &small.join("t"), &opts, 2).unwrap_err();
    assert!(matches!(err, CopyError::NoSpace(_)), "{err}");
    assert!(!small.join("t/big").exists(), "a partial file stayed under its name");
    let _ = std::process::Command::new("umount").arg(&small).status();
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn trees_keep_layout_modes_times_and_symlinks_over_lanes() {
    let dir = scratch("tree");
    let src = dir.join("src");
    fs::create_dir_all(src.join("a/b")).unwrap();
    for i in 0..50 {
        fs::write(src.join(format!("a/f{i}")), pattern(i * 1000)).unwrap();
    }
    fs::write(src.join("a/b/deep"), b"deep").unwrap();
    std::os::unix::fs::symlink("a/f1", src.join("link")).unwrap();
    fs::set_permissions(src.join("a/b"), fs::Permissions::from_mode(0o750)).unwrap();
    let report = tree(&src, &dir.join("dst"), &CopyOptions::default(), 3).unwrap();
    assert_eq!((report.files, report.directories, report.symlinks), (51, 3, 1));
    let dst = dir.join("dst");
    for i in 0..50 {
        assert_eq!(fs::read(dst.join(format!("a/f{i}"))).unwrap(), pattern(i * 1000));
    }
    assert_eq!(fs::read_link(dst.join("link")).unwrap(), Path::new("a/f1"));
    assert_eq!(fs::metadata(dst.join("a/b")).unwrap().mode() & 0o777, 0o750);
    assert_eq!(
        fs::metadata(dst.join("a/b")).unwrap().mtime(),
        fs::metadata(src.join("a/b")).unwrap().mtime()
    );
    let err = tree(&src, &src.join("a"), &CopyOptions::default(), 1).unwrap_err();
    assert!(matches!(err, CopyError::SameFile { .. }), "copying a tree into itself: {err}");
    fs::remove_dir_all(dir).unwrap();
}
