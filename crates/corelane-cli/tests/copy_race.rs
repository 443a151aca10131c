//! `corelane copy -r` / `copy -a` as root against a user who can write the destination and
//! swaps one of its directories for a symlink to a victim directory while the copy runs.
//!
//! The old copy wrote by path (`root.join(rel)`, O_NOFOLLOW on the last component only): root
//! created, and replaced, files wherever the symlink pointed, and said it had copied them all.
//! Now every entry is made through a directory descriptor reached from the destination root
//! without following symlinks: nothing appears in the victim directory, nothing there is
//! replaced, and a copy that lost its directory fails with a non-zero exit.
//!
//! `CORELANE_BIN=/path/to/corelane` runs these against another build (say the old one).

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::text;

/// The user the swapper runs as (nobody).
const USER: u32 = 65534;
/// Files in the swapped directory.
const FILES: usize = 400;
/// The victim's file of the same name as one of the copied files.
const PRECIOUS: &str = "f0007";

fn corelane_bin() -> PathBuf {
    std::env::var_os("CORELANE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_corelane")))
}

fn corelane(args: &[&Path]) -> Output {
    Command::new(corelane_bin()).args(args).output().unwrap()
}

fn scratch(name: &str) -> tempfile::TempDir {
    let base = if Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" };
    let dir = tempfile::Builder::new()
        .prefix(&format!("corelane-race-{name}-"))
        .tempdir_in(base)
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Why these tests cannot run here, if they cannot.
fn cannot_run() -> Option<&'static str> {
    if !rustix::process::geteuid().is_root() {
        return Some("not root: the attack is a user racing a root copy");
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        return Some("setpriv (util-linux) is not installed");
    }
    None
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
}

/// A victim directory root owns, holding a 0600 file that shares a name with a copied file.
struct Victim {
    dir: PathBuf,
    ino: u64,
}

impl Victim {
    fn new(base: &Path) -> Self {
        let dir = base.join("victim");
        std::fs::create_dir(&dir).unwrap();
        let file = dir.join(PRECIOUS);
        std::fs::write(&file, b"precious").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let ino = std::fs::metadata(&file).unwrap().ino();
        Self { dir, ino }
    }

    /// Nothing appeared, nothing was replaced or changed.
    fn assert_untouched(&self, round: usize, out: &Output) {
        let names: Vec<_> =
            std::fs::read_dir(&self.dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        let file = self.dir.join(PRECIOUS);
        let meta = std::fs::symlink_metadata(&file).unwrap();
        let why = format!(
            "round {round}: root wrote through the symlink ({} entries in the victim directory; \
             exit {:?}; stdout {}; stderr {})",
            names.len(),
            out.status.code(),
            text(&out.stdout).trim(),
            text(&out.stderr).trim(),
        );
        assert_eq!(names.len(), 1, "{why}");
        assert_eq!(meta.ino(), self.ino, "the 0600 file was replaced: {why}");
        assert_eq!(meta.mode() & 0o7777, 0o600, "{why}");
        assert_eq!(std::fs::read(&file).unwrap(), b"precious", "{why}");
    }
}

/// Makes `dir` with `FILES` small files, `f0000`…
fn fill(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for i in 0..FILES {
        std::fs::write(dir.join(format!("f{i:04}")), format!("data {i}\n").repeat(16)).unwrap();
    }
}

/// The swapper: this test binary, copied where the user can run it, under setpriv as `USER`.
struct Swapper {
    exe: PathBuf,
}

impl Swapper {
    fn new(base: &Path) -> Self {
        let exe = base.join("swapper");
        std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self { exe }
    }

    /// Starts one swap: once `target` changes (appears, or gets a new entry), wait `delay`,
    /// then rename it to `hold` and put a symlink to `victim` in its place. Returns when the
    /// swapper is watching.
    fn start(&self, target: &Path, hold: &Path, victim: &Path, delay: Duration) -> Child {
        let ready = hold.with_extension("ready");
        let spec = format!(
            "{}\n{}\n{}\n{}\n{}",
            target.display(),
            hold.display(),
            victim.display(),
            delay.as_micros(),
            ready.display()
        );
        let child = Command::new("setpriv")
            .args([&format!("--reuid={USER}"), &format!("--regid={USER}"), "--clear-groups"])
            .arg(&self.exe)
            .args(["--exact", "swapper", "--ignored", "--quiet", "--test-threads=1"])
            .env("CORELANE_SWAP", spec)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let began = Instant::now();
        while !ready.exists() {
            assert!(began.elapsed() < Duration::from_secs(20), "the swapper did not start");
            std::thread::sleep(Duration::from_millis(1));
        }
        child
    }
}

/// The state that changes when an entry is created in (or at) `path`.
fn watch(path: &Path) -> Option<(u64, i64, i64)> {
    std::fs::symlink_metadata(path).ok().map(|m| (m.ino(), m.mtime(), m.mtime_nsec()))
}

/// Not a test: the swapper's body, run by `Swapper::start` as another user.
#[test]
#[ignore = "run by the copy race tests as another user"]
fn swapper() {
    let Ok(spec) = std::env::var("CORELANE_SWAP") else { return };
    let parts: Vec<&str> = spec.lines().collect();
    let (target, hold, victim) = (Path::new(parts[0]), Path::new(parts[1]), Path::new(parts[2]));
    let delay = Duration::from_micros(parts[3].parse().unwrap());
    let before = watch(target);
    std::fs::write(parts[4], b"").unwrap();
    let began = Instant::now();
    while watch(target) == before {
        if began.elapsed() > Duration::from_secs(20) {
            return;
        }
        std::hint::spin_loop();
    }
    let until = Instant::now() + delay;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
    if std::fs::rename(target, hold).is_ok() {
        std::os::unix::fs::symlink(victim, target).unwrap();
        std::fs::write(hold.with_extension("swapped"), now_ns().to_string()).unwrap();
    }
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for the swapper and the test.
fn now_ns() -> i128 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec)
}

/// Whether the swap happened before the copy ended (the round raced it).
fn swapped_before(hold: &Path, end: i128) -> bool {
    std::fs::read_to_string(hold.with_extension("swapped"))
        .is_ok_and(|t| t.trim().parse::<i128>().is_ok_and(|at| at < end))
}

/// What one raced copy did, checked: the victim untouched, and either a failure that says so
/// or every file copied into the destination's own directory (the one the copy holds, moved
/// aside by the user but still the one it made or met). Returns whether the copy failed.
fn check_round(round: usize, out: &Output, victim: &Victim, target: &Path, hold: &Path) -> bool {
    victim.assert_untouched(round, out);
    if !out.status.success() {
        assert!(!out.stderr.is_empty(), "round {round}: a failure with no word");
        return true;
    }
    let real = if std::fs::symlink_metadata(target).unwrap().is_symlink() { hold } else { target };
    for i in 0..FILES {
        let name = format!("f{i:04}");
        let got = std::fs::read(real.join(&name)).unwrap_or_default();
        assert_eq!(got, format!("data {i}\n").repeat(16).as_bytes(), "round {round}: {name}");
    }
    false
}

/// Rounds until this many have run, or the time is up.
const ROUNDS: usize = 200;
const TIME: Duration = Duration::from_secs(60);

/// One race's scratch directory with its source tree's place, the victim and the swapper.
struct Arena {
    base: tempfile::TempDir,
    src: PathBuf,
    victim: Victim,
    swapper: Swapper,
}

impl Arena {
    /// The arena `name`, or `None` (saying why) where the race cannot run.
    fn new(name: &str) -> Option<Self> {
        if let Some(why) = cannot_run() {
            eprintln!("skipped: {why}");
            return None;
        }
        let base = scratch(name);
        let (src, victim, swapper) =
            (base.path().join("src"), Victim::new(base.path()), Swapper::new(base.path()));
        Some(Self { base, src, victim, swapper })
    }

    /// Runs `round` (given its number; it returns whether the copy failed and whether the
    /// swap raced it) until `ROUNDS` have run or `TIME` is up, says how they went, and insists
    /// that at least one swap came before a copy ended.
    fn race(&self, mut round: impl FnMut(usize) -> (bool, bool)) {
        let began = Instant::now();
        let (mut rounds, mut raced, mut failed) = (0, 0, 0);
        while rounds < ROUNDS && began.elapsed() < TIME {
            let (round_failed, round_raced) = round(rounds);
            failed += usize::from(round_failed);
            raced += usize::from(round_raced);
            rounds += 1;
        }
        eprintln!(
            "{rounds} rounds, {raced} swapped mid-copy, {failed} failed, the victim untouched"
        );
        assert!(raced > 0, "no swap came before a copy ended: the test proved nothing");
    }

    /// One round's swap: the swapper set on `target` (to move it to `hold`) after a delay that
    /// varies with `round`, then `copy` run against it and its outcome checked. Returns
    /// whether the copy failed and whether the swap came before it ended.
    fn swap_during(
        &self,
        round: usize,
        (target, hold): (&Path, &Path),
        copy: impl FnOnce() -> Output,
    ) -> (bool, bool) {
        let delay = Duration::from_micros((round as u64 * 97) % 20_000);
        let mut child = self.swapper.start(target, hold, &self.victim.dir, delay);
        let out = copy();
        let end = now_ns();
        child.wait().unwrap();
        (check_round(round, &out, &self.victim, target, hold), swapped_before(hold, end))
    }
}

/// `copy -r SRC DST` into a destination directory a user owns: the user renames the copy's
/// root (`DST/src`, which root just made) away and puts a symlink to the victim in its place.
#[test]
fn a_user_swapping_the_destination_for_a_symlink_never_has_root_write_elsewhere() {
    let Some(arena) = Arena::new("r") else { return };
    fill(&arena.src);
    arena.race(|round| {
        let dst = arena.base.path().join(format!("dst{round}"));
        std::fs::create_dir(&dst).unwrap();
        chown(&dst, USER);
        let (target, hold) = (dst.join("src"), dst.join("held"));
        let copy_r = || corelane(&[Path::new("copy"), Path::new("-r"), &arena.src, &dst]);
        let outcome = arena.swap_during(round, (&target, &hold), copy_r);
        std::fs::remove_dir_all(&dst).unwrap();
        outcome
    });
}

/// `copy -a` as root hands `DST`'s directories to their owner (the source's, a user here). A
/// second `copy -a` into the same destination then runs in directories that user owns: the
/// user swaps `DST/src/sub` for a symlink to the victim mid-copy.
#[test]
fn a_user_given_the_destination_by_copy_a_cannot_redirect_the_next_copy_a() {
    let Some(arena) = Arena::new("a") else { return };
    let src = &arena.src;
    fill(&src.join("sub"));
    chown(src, USER);
    chown(&src.join("sub"), USER);
    let dst = arena.base.path().join("dst");
    std::fs::create_dir(&dst).unwrap();
    let copy_a = || corelane(&[Path::new("copy"), Path::new("-a"), src, &dst]);
    arena.race(|round| {
        let first = copy_a();
        assert!(first.status.success(), "{}", text(&first.stderr));
        let target = dst.join("src/sub");
        assert_eq!(std::fs::metadata(&target).unwrap().uid(), USER, "handed to the owner");
        let hold = dst.join("src/held");
        let outcome = arena.swap_during(round, (&target, &hold), copy_a);
        std::fs::remove_dir_all(dst.join("src")).unwrap();
        outcome
    });
}

/// A tree deeper than the descriptors a process may hold: the copy keeps only a bounded stack
/// of directories open (deeper parents are reopened from the root), so it still copies whole.
#[test]
fn a_deep_tree_copies_within_a_small_descriptor_limit() {
    if Command::new("prlimit").arg("--version").output().is_err() {
        return eprintln!("skipped: prlimit (util-linux) is not installed");
    }
    let base = scratch("deep");
    let src = base.path().join("src");
    let mut deepest = src.clone();
    for _ in 0..300 {
        deepest.push("d");
    }
    std::fs::create_dir_all(&deepest).unwrap();
    std::fs::write(deepest.join("f"), b"bottom").unwrap();
    let dst = base.path().join("dst");
    let out = Command::new("prlimit")
        .arg("--nofile=40:40")
        .arg(corelane_bin())
        .args([Path::new("copy"), Path::new("-r"), &src, &dst])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let copied = dst.join(deepest.strip_prefix(&src).unwrap()).join("f");
    assert_eq!(std::fs::read(copied).unwrap(), b"bottom");
}
