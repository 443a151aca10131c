//! Output files at names anyone can predict (`--png DIR`'s chart names, `--histogram FILE`)
//! as another user could prepare them: a symlink planted at the name must never turn a root
//! run into a write through it. The chart is written in place of the symlink (the link
//! itself is replaced); the histogram log, streamed into a new file, is refused.

mod common;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use common::{corelane, fixture, stderr};

/// A file the attacker wants overwritten, and its content.
fn victim(dir: &Path) -> (PathBuf, &'static [u8]) {
    let path = dir.join("victim");
    std::fs::write(&path, b"precious").unwrap();
    (path, b"precious")
}

/// Every chart name `report --png` writes for the udp fixture (one run) has a symlink to
/// the victim planted at it: plotters' file backend created each name with a plain open
/// (following the link), so the victim became a PNG.
#[test]
fn planted_symlinks_at_the_chart_names_are_not_followed() {
    let font = corelane_lab::report::chart::FONT_PATH;
    if !Path::new(font).exists() {
        eprintln!("skipped: no {font} (apt-get install fonts-dejavu-core)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (victim, precious) = victim(dir.path());
    let pngs = dir.path().join("png");
    std::fs::create_dir(&pngs).unwrap();
    let names = ["udp-cpu.png", "udp-rate.png", "udp-cpu-split.png"];
    for name in names {
        symlink(&victim, pngs.join(name)).unwrap();
    }
    let page = dir.path().join("page.html");
    let out = corelane(&[
        "report".as_ref(),
        fixture("udp").as_os_str(),
        "-o".as_ref(),
        page.as_os_str(),
        "--png".as_ref(),
        pngs.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read(&victim).unwrap(), precious, "the victim was written through a link");
    let mut written = 0;
    for name in names {
        let path = pngs.join(name);
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.file_type().is_symlink() {
            continue; // a chart this fixture does not have: the link was left alone
        }
        assert!(meta.is_file(), "{name}");
        let bytes = std::fs::read(&path).unwrap();
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let info = decoder.read_info().unwrap().info().clone();
        assert!(info.width > 100 && info.height > 100, "{name}: {info:?}");
        written += 1;
    }
    assert!(written >= 2, "the charts at the planted names were written");
}

/// A symlink planted at `udp ping --histogram FILE`: File::create followed it and
/// truncated the victim. The log is now created new, and an existing name is refused.
#[test]
fn a_planted_symlink_at_the_histogram_log_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (victim, precious) = victim(dir.path());
    let log = dir.path().join("rtt.hlog");
    symlink(&victim, &log).unwrap();
    let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    let out = corelane(&[
        "udp".as_ref(),
        "ping".as_ref(),
        addr.as_ref(),
        "-d".as_ref(),
        "200ms".as_ref(),
        "--warmup".as_ref(),
        "0s".as_ref(),
        "--timeout".as_ref(),
        "100ms".as_ref(),
        "--histogram".as_ref(),
        log.as_os_str(),
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("--histogram") && err.contains("already exists"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert_eq!(std::fs::read(&victim).unwrap(), precious, "the victim was written through a link");
    assert!(std::fs::symlink_metadata(&log).unwrap().file_type().is_symlink());
}
