//! What several of the CLI's tests share: running the built `corelane`, its output as text,
//! the saved runs, and who runs them. Each test binary includes this module and uses its own part of it.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the built `corelane` with `args` to its end.
pub fn corelane<S: AsRef<OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_corelane")).args(args).output().unwrap()
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn stderr(o: &Output) -> String {
    text(&o.stderr)
}

/// The saved run of experiment `name` (made with `corelane lab NAME --quick --json`).
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/runs/{name}.json"))
}

/// Whether the tests run as root.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Compiles tests/run/NAME.c (the `corelane run` tests' C programs; NAME may name a subfolder) under cargo's scratch
/// directory for tests (not /tmp: nothing is left behind); the program, or why there is none
/// (printed by the skipping test).
pub fn compile_run_program(name: &str) -> Result<PathBuf, String> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/run/{name}.c"));
    let out =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("run-{}", name.replace('/', "-")));
    let status = Command::new("cc")
        .args(["-O1", "-w", "-pthread", "-o"])
        .arg(&out)
        .arg(source)
        .status()
        .map_err(|e| format!("no C compiler (cc: {e})"))?;
    status.success().then_some(out).ok_or_else(|| format!("cc failed: {status}"))
}
