//! Builds corelane's system-call library (crates/corelane-preload) with the same rustc and
//! embeds it in the binary, so a plain `cargo run -- run …` has it; the library has no
//! dependencies, so one rustc call builds it (no nested cargo, no lock on the target dir).

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let src = manifest.join("../corelane-preload/src");
    println!("cargo:rerun-if-changed={}", src.display());
    let out =
        PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo")).join("libcorelane_preload.so");
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let mut cmd = Command::new(rustc);
    cmd.args([
        "--edition=2021",
        "--crate-type=cdylib",
        "--crate-name=corelane_preload",
        "-Copt-level=3",
        "-Cpanic=abort",
        "-Cdebuginfo=0",
        "-Cstrip=debuginfo",
        "--cap-lints=allow",
    ]);
    if let Some(target) = env::var_os("TARGET") {
        cmd.arg("--target").arg(target);
    }
    cmd.arg("-o").arg(&out).arg(src.join("lib.rs"));
    let status = cmd.status().expect("cannot run rustc for corelane-preload");
    assert!(status.success(), "rustc failed to build corelane-preload ({status})");
}
