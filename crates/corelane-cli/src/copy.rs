//! `corelane copy`: one file or a tree, by the fastest method for the pair of file systems.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use corelane::copy::{
    copy_file, copy_tree, CopyError, CopyMethod, CopyOptions, CreateCall, NotKept, Preserve,
    Reflink,
};
use corelane::lane::StopSignal;
use corelane::topology::{CpuList, Topology};
use indicatif::{ProgressBar, ProgressStyle};

use crate::args::{outln, parse_size, stop_on_signals};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CreateArg {
    /// open(2) with O_CREAT|O_WRONLY|O_TRUNC.
    Open,
    /// creat(2).
    Creat,
}

#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The file or (with -r) directory to copy.
    src: PathBuf,
    /// Where to: a file path, or an existing directory to copy into.
    dst: PathBuf,
    /// Copy a directory tree (files spread over lanes; modes, times, symlinks and FIFOs kept;
    /// device nodes as root; sockets reported as skipped). Set-user/group-ID bits are dropped,
    /// since the copy belongs to whoever runs corelane.
    #[arg(short, long)]
    recursive: bool,
    /// Archive, as cp -a: -r plus --preserve=all (mode with set-id bits, ownership, times of
    /// files, directories and symlinks, hard links, xattrs and ACLs) and special files
    /// (FIFOs, sockets, device nodes); a source that is a symlink is copied as one. What the
    /// destination cannot keep is said once per kind
    /// and makes the exit status 1, unless that kind is excluded with --no-preserve.
    #[arg(short, long)]
    archive: bool,
    /// Keep mode, ownership and timestamps (cp -p).
    #[arg(short = 'p')]
    preserve_basic: bool,
    /// Keep these attributes too (comma-separated, cp's names): mode, ownership, timestamps,
    /// links, xattr (xattrs and ACLs; `context` is a synonym), all. Bare: mode,ownership,
    /// timestamps.
    #[arg(long, value_name = "LIST", num_args = 0..=1, require_equals = true,
          default_missing_value = "mode,ownership,timestamps")]
    preserve: Option<Preserve>,
    /// Do not keep these attributes (same names as --preserve); what cannot be kept of an
    /// excluded kind is neither reported nor an error.
    #[arg(long, value_name = "LIST", require_equals = true)]
    no_preserve: Option<Preserve>,
    /// Stay on the source's file system: directories on others (mount points) are created
    /// empty.
    #[arg(short = 'x', long)]
    one_file_system: bool,
    /// Share the source's extents (FICLONE) on btrfs, xfs, bcachefs: auto (share where
    /// possible, else copy), always (share or fail), never (always copy the data). Bare:
    /// always.
    #[arg(long, value_name = "WHEN", num_args = 0..=1, require_equals = true,
          default_value = "auto", default_missing_value = "always")]
    reflink: Reflink,
    /// auto, read-write, direct, sendfile, splice, copy-file-range or io-uring.
    #[arg(long, default_value = "auto")]
    method: String,
    /// Buffer for read-write, direct and io-uring (e.g. 4K, 1M, 1GiB); on the heap.
    #[arg(long, default_value = "1M", value_parser = parse_size)]
    buffer: usize,
    /// How the destination is created.
    #[arg(long, value_enum, default_value_t = CreateArg::Open)]
    create: CreateArg,
    /// Lanes (threads) for -r; default one per CPU.
    #[arg(long)]
    lanes: Option<usize>,
    /// Pin -r lanes round-robin to these CPUs.
    #[arg(long, value_name = "CPUS")]
    pin: Option<CpuList>,
    /// With -r: pass every file through a temporary file, so that even a crash never leaves a
    /// partial file under its name (slower on big trees). Without it, -r writes files that do
    /// not exist yet under their own names and removes them on any failure or Ctrl-C, like
    /// cp -r; existing files are always replaced atomically.
    #[arg(long)]
    atomic: bool,
    /// fsync each file before it replaces the destination.
    #[arg(long)]
    fsync: bool,
    /// Compare BLAKE3 checksums of source and copy before putting the copy in place.
    #[arg(long)]
    verify: bool,
    /// Copy into a destination directory that is a symlink (refused by default: as root, a
    /// symlink planted where a directory is expected would carry the copy anywhere).
    #[arg(long)]
    follow_dest_symlink: bool,
    /// Print a JSON summary instead of text.
    #[arg(long)]
    json: bool,
}

/// A progress bar that appears only on a terminal and only once a copy has taken a second.
struct LazyBar {
    started: Instant,
    bar: Option<ProgressBar>,
    enabled: bool,
}

impl LazyBar {
    fn new(enabled: bool) -> Self {
        Self {
            started: Instant::now(),
            bar: None,
            enabled: enabled && std::io::stderr().is_terminal(),
        }
    }

    fn update(&mut self, done: u64, total: u64) {
        if !self.enabled || self.started.elapsed() < Duration::from_secs(1) {
            return;
        }
        let bar = self.bar.get_or_insert_with(|| {
            let bar = ProgressBar::new(total);
            if let Ok(style) = ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
            ) {
                bar.set_style(style);
            }
            bar
        });
        bar.set_position(done);
    }

    fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

pub fn run(args: CopyArgs) -> anyhow::Result<ExitCode> {
    let opts = copy_options(&args)?;
    let stop = stop_on_signals()?;
    let result = if args.recursive || args.archive {
        let lanes = args
            .lanes
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        anyhow::ensure!(lanes >= 1, "--lanes must be at least 1");
        copy_and_report_tree(&args, &opts, lanes, &stop)
    } else {
        copy_and_report_file(&args, &opts, &stop)
    };
    match result {
        Ok(true) => Ok(ExitCode::SUCCESS),
        Ok(false) => Ok(ExitCode::FAILURE),
        Err(e @ CopyError::Interrupted(_)) => {
            eprintln!("corelane: {e}");
            Ok(ExitCode::from(130))
        }
        Err(e) => Err(e.into()),
    }
}

/// The library's options from the command line's, after checking them.
fn copy_options(args: &CopyArgs) -> anyhow::Result<CopyOptions> {
    let method = match args.method.as_str() {
        "auto" => None,
        name => Some(name.parse::<CopyMethod>().map_err(anyhow::Error::msg)?),
    };
    anyhow::ensure!(args.buffer > 0, "--buffer must be above 0");
    if let Some(pin) = &args.pin {
        Topology::read()?.check_pin(pin)?;
    }
    let recursive = args.recursive || args.archive;
    let mut preserve = if args.archive { Preserve::ALL } else { Preserve::DEFAULT };
    if args.preserve_basic {
        preserve = preserve.with(Preserve::BASIC);
    }
    if let Some(more) = args.preserve {
        preserve = preserve.with(more);
    }
    if let Some(less) = args.no_preserve {
        preserve = preserve.without(less);
    }
    Ok(CopyOptions {
        method,
        buffer: args.buffer,
        create: match args.create {
            CreateArg::Open => CreateCall::Open,
            CreateArg::Creat => CreateCall::Creat,
        },
        fsync: args.fsync,
        verify: args.verify,
        fresh_in_place: recursive && !args.atomic,
        follow_destination_symlink: args.follow_dest_symlink,
        preserve,
        reflink: args.reflink,
        one_file_system: args.one_file_system,
        sockets: args.archive,
        no_dereference: args.archive,
    })
}

/// Copies a tree over `lanes` lanes and prints what it did; true if nothing was lost.
fn copy_and_report_tree(
    args: &CopyArgs,
    opts: &CopyOptions,
    lanes: usize,
    stop: &StopSignal,
) -> Result<bool, CopyError> {
    let cpus: Vec<usize> = args.pin.as_ref().map(|p| p.cpus().to_vec()).unwrap_or_default();
    let r = copy_tree(&args.src, &args.dst, opts, lanes, &cpus, &|_, _| {}, stop)?;
    if args.json {
        outln!("{}", serde_json::to_string(&r).unwrap_or_default());
    } else {
        outln!(
            "copied {} files, {} directories, {} symlinks, {} special files ({} bytes) in {:.3}s with {} lanes: {:.2} GB/s",
            r.files, r.directories, r.symlinks, r.special_files, r.bytes, r.seconds, r.lanes, r.gb_per_sec
        );
        if r.hard_links > 0 {
            outln!("linked {} further names of hard-linked entries", r.hard_links);
        }
        if !r.skipped.is_empty() {
            outln!("skipped {} entries:", r.skipped.len());
            for s in &r.skipped {
                outln!("  {}: {}", s.path.display(), s.why);
            }
        }
    }
    say_not_kept(&r.not_kept);
    // cp -a fails on what it cannot recreate; -r lists it and succeeds, as before.
    Ok(r.not_kept.is_empty() && (!args.archive || r.skipped.is_empty()))
}

/// Copies one file, with a progress bar on a slow copy, and prints what it did; true if
/// nothing was lost.
fn copy_and_report_file(
    args: &CopyArgs,
    opts: &CopyOptions,
    stop: &StopSignal,
) -> Result<bool, CopyError> {
    let mut bar = LazyBar::new(!args.json);
    let result =
        copy_file(&args.src, &args.dst, opts, &mut |done, total| bar.update(done, total), stop);
    bar.finish();
    let r = result?;
    if args.json {
        outln!("{}", serde_json::to_string(&r).unwrap_or_default());
    } else {
        outln!(
            "copied {} bytes in {:.3}s ({:.2} GB/s) with {} in {} calls{}",
            r.bytes,
            r.seconds,
            r.gb_per_sec,
            r.method.name(),
            r.syscalls,
            if r.verified { ", checksums match" } else { "" }
        );
        if let Some(why) = &r.fallback {
            outln!("note: {why}");
        }
    }
    say_not_kept(&r.not_kept);
    Ok(r.not_kept.is_empty())
}

/// One line per kind the destination could not keep, on stderr (the JSON lists them too).
fn say_not_kept(not_kept: &[NotKept]) {
    for n in not_kept {
        eprintln!(
            "corelane: could not keep {} on {} entries (first: {:?}: {}); --no-preserve={} \
             accepts the loss",
            n.kind.name(),
            n.entries,
            // Quoted and escaped: a name is the source owner's to choose, control bytes too.
            n.example,
            n.why,
            n.kind.accepted_by(),
        );
    }
}
