//! Debian's headless Chromium, for the tests that load a page in a real browser (corelane-cli's
//! report test includes this file too).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Chromium, if installed; if not, says that the test skips and how to install it.
pub fn find() -> Option<PathBuf> {
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        eprintln!("skipped: no chromium to load the page in (apt-get install chromium; .ci/run installs it)");
    }
    found
}

/// Runs `chromium` headless on `page` with a fresh profile and nothing of its own going on
/// (no first run, sync, updates or background traffic), with the test's `more` flags.
pub fn run(chromium: &Path, more: &[&str], page: impl AsRef<OsStr>) -> Output {
    let profile = tempfile::tempdir().unwrap();
    Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .args(more)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(page)
        .output()
        .unwrap()
}
