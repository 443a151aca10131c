//! `corelane copy`: one file or a tree, by the fastest method for the pair of file systems.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use corelane::copy::{copy_file, copy_tree, CopyError, CopyMethod, CopyOptions, CreateCall};
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
    let method = match args.method.as_str() {
        "auto" => None,
        name => Some(name.parse::<CopyMethod>().map_err(anyhow::Error::msg)?),
    };
    anyhow::ensure!(args.buffer > 0, "--buffer must be above 0");
    if let Some(pin) = &args.pin {
        Topology::read()?.check_pin(pin)?;
    }
    let opts = CopyOptions {
        method,
        buffer: args.buffer,
        create: match args.create {
            CreateArg::Open => CreateCall::Open,
            CreateArg::Creat => CreateCall::Creat,
        },
        fsync: args.fsync,
        verify: args.verify,
        fresh_in_place: args.recursive && !args.atomic,
        follow_destination_symlink: args.follow_dest_symlink,
    };
    let stop = stop_on_signals()?;
    let result = if args.recursive {
        let lanes = args
            .lanes
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        anyhow::ensure!(lanes >= 1, "--lanes must be at least 1");
        let cpus: Vec<usize> = args.pin.as_ref().map(|p| p.cpus().to_vec()).unwrap_or_default();
        copy_tree(&args.src, &args.dst, &opts, lanes, &cpus, &|_, _| {}, &stop).map(|r| {
            if args.json {
                outln!("{}", serde_json::to_string(&r).unwrap_or_default());
            } else {
                outln!(
                    "copied {} files, {} directories, {} symlinks, {} special files ({} bytes) in {:.3}s with {} lanes: {:.2} GB/s",
                    r.files, r.directories, r.symlinks, r.special_files, r.bytes, r.seconds, r.lanes, r.gb_per_sec
                );
                if !r.skipped.is_empty() {
                    outln!("skipped {} entries:", r.skipped.len());
                    for s in &r.skipped {
                        outln!("  {}: {}", s.path.display(), s.why);
                    }
                }
            }
        })
    } else {
        let mut bar = LazyBar::new(!args.json);
        let result = copy_file(
            &args.src,
            &args.dst,
            &opts,
            &mut |done, total| bar.update(done, total),
            &stop,
        );
        bar.finish();
        result.map(|r| {
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
        })
    };
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e @ CopyError::Interrupted(_)) => {
            eprintln!("corelane: {e}");
            Ok(ExitCode::from(130))
        }
        Err(e) => Err(e.into()),
    }
}
