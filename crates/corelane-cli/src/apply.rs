//! `corelane apply PLAN` and `corelane revert FILE`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use corelane::tune::{
    apply, apply_saving_revert, pending_revert, read_revert_file, review, Change, Plan, Skipped,
};

use crate::args::outln;

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// A plan written by `corelane plan` (TOML or JSON). Only the interrupts of its interface
    /// (and of the devices under it) as this machine shows them are moved; any other is refused.
    plan: PathBuf,
    /// Make the changes; without it, only show them (dry run).
    #[arg(long)]
    yes: bool,
    /// Where to save the previous values (default: ./corelane-revert-<nic>-<time>.json).
    #[arg(long, value_name = "FILE")]
    revert: Option<PathBuf>,
    /// Read and write sysfs and procfs under this directory instead of /.
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// Print one JSON object instead of text: the interface, every change (setting, current
    /// value, the plan's), the settings skipped, whether they were applied and the revert file.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct RevertArgs {
    /// The file `corelane apply --yes` saved. Every entry is checked before any is restored:
    /// only the settings a plan may change, with values of their kind, and interrupts of a
    /// network interface only.
    file: PathBuf,
    /// The directory `apply --root` was given (sysfs and procfs under it instead of /).
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// Only show what would be restored (the file is read and checked; nothing is written).
    #[arg(long)]
    dry_run: bool,
    /// Print one JSON object instead of text: every setting restored (applied value, restored
    /// value), the settings skipped, and whether anything was written.
    #[arg(long)]
    json: bool,
}

/// The version of the JSON objects `apply --json` and `revert --json` print: a reader
/// refuses one of another version.
const JSON_FORMAT: u32 = 1;

/// What `apply --json` prints: the review, and what became of it.
#[derive(Debug, serde::Serialize)]
struct ApplyReport<'a> {
    format: u32,
    nic: &'a str,
    policy: &'a str,
    changes: &'a [Change],
    skipped: &'a [Skipped],
    applied: bool,
    revert_file: Option<&'a Path>,
}

/// What `revert --json` prints: each setting whose value now differs from the one saved, as
/// the change it makes (`from` the value it holds now, `to` the one restored), last applied
/// first; the settings the kernel no longer shows, skipped with the reason.
#[derive(Debug, serde::Serialize)]
struct RevertReport<'a> {
    format: u32,
    changes: &'a [Change],
    skipped: &'a [Skipped],
    restored: bool,
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string(value)?);
    Ok(())
}

/// A plan is a few kilobytes; this is far more than any.
const MAX_PLAN_BYTES: u64 = 1 << 20;

pub fn read_plan(path: &Path) -> anyhow::Result<Plan> {
    let bytes = corelane::fs::read_capped(path, MAX_PLAN_BYTES)
        .with_context(|| format!("cannot read the plan {}", path.display()))?;
    let text = String::from_utf8(bytes)
        .with_context(|| format!("{} is not a plan written by `corelane plan`", path.display()))?;
    toml::from_str(&text).or_else(|toml_err| serde_json::from_str(&text).map_err(|_| toml_err)).map_err(
        |e: toml::de::Error| {
            // toml's own text draws the line in several; one line names where and what.
            let line = e.span().map(|s| text[..s.start.min(text.len())].lines().count().max(1));
            let at = line.map(|l| format!(" (line {l})")).unwrap_or_default();
            anyhow::anyhow!(
                "{} is not a plan written by `corelane plan`{at}: {}: write one with `corelane plan --output FILE`",
                path.display(),
                e.message().trim()
            )
        },
    )
}

fn show(list: &[Change]) {
    for c in list {
        outln!("  {}: {} -> {}", c.path.display(), c.from, c.to);
    }
}

/// The settings the kernel or the driver refused on the device, each with the reason.
fn show_skipped(skipped: &[Skipped]) {
    if skipped.is_empty() {
        return;
    }
    outln!("{} setting(s) skipped (refused on this device):", skipped.len());
    for s in skipped {
        outln!("  {}: {} skipped: {}", s.path.display(), s.to, s.reason);
    }
}

pub fn run_apply(args: ApplyArgs) -> anyhow::Result<ExitCode> {
    let plan = read_plan(&args.plan)?;
    let review = review(&plan, &args.root)?;
    let list = review.changes;
    let report = |changes: &[Change], skipped: &[Skipped], revert_file: Option<&Path>| {
        print_json(&ApplyReport {
            format: JSON_FORMAT,
            nic: &plan.device.nic,
            policy: &plan.policy,
            changes,
            skipped,
            applied: revert_file.is_some(),
            revert_file,
        })
    };
    if list.is_empty() || !args.yes {
        if args.json {
            report(&list, &review.skipped, None)?;
        } else if list.is_empty() {
            outln!("nothing to change: {} is already set as the plan says", plan.device.nic);
            show_skipped(&review.skipped);
        } else {
            outln!("{} change(s) for {} ({} policy):", list.len(), plan.device.nic, plan.policy);
            show(&list);
            show_skipped(&review.skipped);
            outln!("dry run: nothing was changed; add --yes to apply");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !args.json {
        outln!("{} change(s) for {} ({} policy):", list.len(), plan.device.nic, plan.policy);
        show(&list);
        show_skipped(&review.skipped);
    }
    let revert_file = args.revert.unwrap_or_else(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        PathBuf::from(format!("corelane-revert-{}-{secs}.json", plan.device.nic))
    });
    // The undo is saved before anything changes (and removed if the changes fail).
    let skipped = apply_saving_revert(&list, &args.root, &revert_file)?;
    if args.json {
        let made: Vec<Change> =
            list.into_iter().filter(|c| !skipped.iter().any(|s| s.path == c.path)).collect();
        let all_skipped: Vec<Skipped> = review.skipped.into_iter().chain(skipped).collect();
        report(&made, &all_skipped, Some(&revert_file))?;
        return Ok(ExitCode::SUCCESS);
    }
    show_skipped(&skipped);
    outln!("applied; undo with: corelane revert {}", revert_file.display());
    Ok(ExitCode::SUCCESS)
}

pub fn run_revert(args: RevertArgs) -> anyhow::Result<ExitCode> {
    let list = read_revert_file(&args.file, &args.root)?;
    // Only what differs from the saved values now is restored (and shown).
    let pending = pending_revert(&list, &args.root)?;
    let refused = if args.dry_run || pending.changes.is_empty() {
        Vec::new()
    } else {
        apply(&pending.changes, &args.root)?
    };
    let undone: Vec<Change> =
        pending.changes.into_iter().filter(|c| !refused.iter().any(|s| s.path == c.path)).collect();
    let skipped: Vec<Skipped> = pending.skipped.into_iter().chain(refused).collect();
    if args.json {
        let restored = !args.dry_run;
        print_json(&RevertReport {
            format: JSON_FORMAT,
            changes: &undone,
            skipped: &skipped,
            restored,
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    if undone.is_empty() {
        outln!(
            "nothing to restore: every setting of {} holds its saved value",
            args.file.display()
        );
    } else if args.dry_run {
        outln!("would restore {} setting(s) (dry run: nothing was changed):", undone.len());
    } else {
        outln!("restored {} setting(s):", undone.len());
    }
    for c in &undone {
        outln!("  {}: {} -> {}", c.path.display(), c.from, c.to);
    }
    show_skipped(&skipped);
    Ok(ExitCode::SUCCESS)
}

/// A plan's NIC settings applied for the length of a `corelane run` (at most 24 hours, the
/// keeper's longest life). A keeper (`corelane guard
/// --revert-on-close FILE`, started before anything changes, in its own process group so a
/// Ctrl-C meant for the program does not end it) restores them when its stdin closes: when
/// this is dropped, or when corelane run dies in any way. Spawned from a thread of its own so
/// that `corelane run`, waiting only for its main thread's children, never waits for it.
#[derive(Debug)]
pub struct RunKeeper {
    release: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for RunKeeper {
    fn drop(&mut self) {
        drop(self.release.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A fresh private directory for a run's revert file and the keeper that restores it if the
/// run is killed; from then on the keeper removes the directory when it lets go.
fn kept_revert_file() -> anyhow::Result<(PathBuf, RunKeeper)> {
    // The keeper removes exactly such a directory (`corelane-nic.` and 8 letters or digits).
    let dir = tempfile::Builder::new()
        .prefix("corelane-nic.")
        .rand_bytes(8)
        .tempdir_in("/tmp")
        .context("cannot make a private directory for the revert file")?;
    let revert_file = dir.path().join("revert.json");
    let keeper = start_keeper(revert_file.clone())?;
    let _ = dir.keep();
    Ok((revert_file, keeper))
}

fn start_keeper(revert_file: PathBuf) -> anyhow::Result<RunKeeper> {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().context("cannot find the corelane binary for the keeper")?;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<anyhow::Result<()>>();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let spawned = std::process::Command::new(exe)
            // No --life: the keeper holds as long as the run (it lets go when the run closes its
            // stdin), so a long run is never restored under its feet.
            .args(["guard", "--revert-on-close"])
            .arg(&revert_file)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                let _ =
                    ready_tx.send(Err(anyhow::Error::new(e).context("cannot start the keeper")));
                return;
            }
        };
        let mut line = String::new();
        let stdout = child.stdout.take().map(std::io::BufReader::new);
        let read = stdout.map(|mut out| out.read_line(&mut line));
        let ok = matches!(read, Some(Ok(n)) if n > 0);
        let _ = ready_tx.send(if ok {
            Ok(())
        } else {
            Err(anyhow::anyhow!("the keeper did not start"))
        });
        let _ = released.recv();
        drop(child.stdin.take());
        let _ = child.wait();
    });
    ready_rx.recv().context("the keeper thread ended")??;
    Ok(RunKeeper { release: Some(release), thread: Some(thread) })
}

/// Applies the plan's NIC settings for a run; `None` when there is nothing to change.
pub fn apply_for_run(plan_path: &Path) -> anyhow::Result<Option<RunKeeper>> {
    let plan = read_plan(plan_path)?;
    let root = Path::new("/");
    let review = review(&plan, root)?;
    show_skipped_to_stderr(&review.skipped);
    if review.changes.is_empty() {
        eprintln!("corelane run: {} is already set as the plan says", plan.device.nic);
        return Ok(None);
    }
    let (revert_file, keeper) = kept_revert_file()?;
    eprintln!("corelane run: {} change(s) for {}:", review.changes.len(), plan.device.nic);
    for c in &review.changes {
        eprintln!("  {}: {} -> {}", c.path.display(), c.from, c.to);
    }
    let skipped = apply_saving_revert(&review.changes, root, &revert_file)?;
    show_skipped_to_stderr(&skipped);
    eprintln!(
        "corelane run: applied {} change(s) to {} for the run (undone when it ends)",
        review.changes.len() - skipped.len(),
        plan.device.nic
    );
    Ok(Some(keeper))
}

fn show_skipped_to_stderr(skipped: &[Skipped]) {
    for s in skipped {
        eprintln!("corelane run: {}: {} skipped: {}", s.path.display(), s.to, s.reason);
    }
}

/// The interface settings preferred busy polling runs with, held for one `udp recv
/// --busy-poll`: restored through the descriptors that changed them when dropped (normal end,
/// Ctrl-C, SIGTERM), and by the keeper from the revert file if the run is killed.
#[derive(Debug)]
pub struct BusyPollRun {
    napi: corelane::tune::busy_poll::DeviceNapi,
    revert: corelane::fs::OutputFile,
    _keeper: RunKeeper,
}

impl Drop for BusyPollRun {
    fn drop(&mut self) {
        if let Err(e) = self.napi.restore() {
            // The revert file stays: the keeper tries again as it lets go.
            eprintln!(
                "corelane: cannot restore {}'s busy-poll settings: {e}",
                self.napi.interface()
            );
            return;
        }
        let _ = self.revert.remove();
    }
}

/// Sets `dev`'s napi_defer_hard_irqs and gro_flush_timeout for a run: a keeper is started and
/// the revert file saved before the first change.
/// `Ok(None)` where the settings cannot be changed here at all (a read-only `/sys`, a kernel
/// without them, no permission): the sockets still busy poll, and the run says so.
pub fn busy_poll_for_run(dev: &str, ifindex: u32) -> anyhow::Result<Option<BusyPollRun>> {
    let root = Path::new("/");
    let mut napi = match corelane::tune::busy_poll::DeviceNapi::open(root, dev, Some(ifindex)) {
        Ok(napi) => napi,
        Err(e) if unchangeable(&e) => {
            eprintln!(
                "note: {dev}'s napi_defer_hard_irqs and gro_flush_timeout cannot be changed here ({e}); the sockets busy poll with the device's own settings"
            );
            return Ok(None);
        }
        Err(e) => {
            return Err(anyhow::Error::new(e)
                .context(format!("cannot open {dev}'s busy-poll settings in /sys/class/net")))
        }
    };
    let (revert_file, keeper) = kept_revert_file()?;
    let revert = corelane::fs::OutputFile::open(&revert_file)
        .with_context(|| format!("cannot write {}", revert_file.display()))?;
    revert.write(&serde_json::to_vec_pretty(&napi.changes())?)?;
    if let Err(e) = napi.apply() {
        let _ = revert.remove();
        return Err(e.into());
    }
    let now: Vec<String> =
        napi.changes().iter().map(|c| format!("{} {}", file_name(&c.path), c.to)).collect();
    eprintln!("busy polling: {dev} {} for the run (restored after)", now.join(", "));
    Ok(Some(BusyPollRun { napi, revert, _keeper: keeper }))
}

/// Settings this machine does not let anyone change: read-only sysfs, missing files (a kernel
/// before 5.10), no permission.
fn unchangeable(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{NotFound, PermissionDenied, ReadOnlyFilesystem};
    matches!(e.kind(), ReadOnlyFilesystem | NotFound | PermissionDenied)
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned())
}
