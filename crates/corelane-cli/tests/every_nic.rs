//! `plan --nic` and a dry-run `apply` on every interface of the machine running the tests
//! (in CI: the CI machine's own NICs, whatever their drivers). Each either works or refuses
//! in one line that names the interface and the cause; never a bare OS error. A dry run
//! reads only, so this needs no root.

mod common;

use std::process::Output;

use common::corelane;

/// Passes when `out` succeeded, or failed with one line that names `nic` and is not an OS
/// error's text alone.
fn works_or_says_why(out: &Output, nic: &str, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("os error"), "{what} on {nic} printed a bare OS error: {stderr}");
    if out.status.success() {
        return;
    }
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("wrote ")).collect();
    assert_eq!(lines.len(), 1, "{what} on {nic}: one line, not {stderr}");
    assert!(lines[0].contains(nic), "{what} on {nic}: the reason must name it: {stderr}");
}

#[test]
fn plan_and_a_dry_run_apply_work_on_every_interface_here() {
    let mut names: Vec<String> = std::fs::read_dir("/sys/class/net")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no interfaces in /sys/class/net");
    let dir = tempfile::tempdir().unwrap();
    for nic in &names {
        let plan = dir.path().join(format!("{nic}.toml"));
        let plan = plan.to_str().unwrap();
        let out = corelane(&["plan", "--nic", nic, "-o", plan]);
        works_or_says_why(&out, nic, "plan");
        if !out.status.success() {
            eprintln!("plan --nic {nic} refused: {}", String::from_utf8_lossy(&out.stderr));
            continue;
        }
        let out = corelane(&["apply", plan]);
        works_or_says_why(&out, nic, "apply (dry run)");
        let stdout = String::from_utf8_lossy(&out.stdout);
        if out.status.success() {
            assert!(
                stdout.contains("dry run") || stdout.contains("nothing to change"),
                "{nic}: {stdout}"
            );
        }
        eprintln!("{nic}:\n{stdout}");
    }
}

/// A name no interface can have is refused before anything is read, in one line.
#[test]
fn a_name_no_interface_can_have_is_refused_in_one_line() {
    for bad in ["../../etc", "a name", "sixteen-chars-xx", ""] {
        let out = corelane(&["plan", "--nic", bad]);
        assert!(!out.status.success(), "{bad:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("is not an interface name"), "{bad:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
}
