//! `corelane lab copy`: seed 002's Tables 2 and 3 on a private tmpfs, then the modern methods,
//! `auto`, a `huge=always` tmpfs, and trees copied with 1 and N lanes — beside `cp`, `cp -r`
//! and `dd bs=1M` on the same files in the same run, and a plain memcpy of the same size as
//! the physical ceiling every figure can be read against. A real tree (/usr/share by default,
//! staged on the scratch tmpfs) is copied with `corelane copy -a` beside `cp -a` and
//! `rsync -aHAX`, and the two archive copies are compared entry by entry.

mod compare;
mod figures;
mod scratch;
mod table;

use std::path::{Path, PathBuf};
use std::time::Instant;

use corelane::copy::{copy_file, copy_tree, CopyError, CopyMethod, CopyOptions, CreateCall};
use corelane::lane::StopSignal;
use corelane::stats::median;
use serde::Serialize;

pub use compare::{compare, Comparison};
pub use scratch::{remove_stale_mounts, Scratch};

use crate::experiment::{self, Experiment, Measured, Options, Prepare, Progress};
use crate::host::Host;
use crate::process::strings;
use crate::summary::{Secs, Trials};
use crate::LabError;

/// `corelane lab copy` in the list of experiments.
pub const ENTRY: experiment::Entry = experiment::Entry::of::<CopyArgs>(
    "copy",
    "002",
    "large-file duplication",
    "file duplication: buffer sizes, creat vs open, O_DIRECT, kernel-side methods, huge pages, trees over lanes; vs cp, cp -r, dd and memcpy",
    "the scratch tmpfs was unmounted and removed",
);

/// `corelane lab copy`'s options.
#[derive(Debug, Clone, clap::Args)]
pub struct CopyArgs {
    /// A short run for CI: 64 MiB files, small trees, 1 trial.
    #[arg(long)]
    pub quick: bool,
    /// Size of the single-file copies (default 1GiB, 64MiB with --quick).
    #[arg(long, value_parser = corelane::units::parse_size)]
    pub size: Option<usize>,
    /// Trials per configuration (default 3, 1 with --quick).
    #[arg(long, value_parser = corelane::units::parse_count)]
    pub trials: Option<usize>,
    /// A real tree to stage on the scratch tmpfs and copy with `corelane copy -a`, `cp -a` and
    /// `rsync -aHAX` (default /usr/share in a full run, none with --quick; `none` skips it).
    #[arg(long, value_name = "DIR")]
    pub real_tree: Option<PathBuf>,
}

impl experiment::Trials for CopyLabOptions {
    fn trials(&self) -> usize {
        self.trials
    }
}

impl Options for CopyArgs {
    type Settings = CopyLabOptions;
    type Lab<'s> = CopyLab<'s>;
    type Report = CopyLabReport;
    fn settings(self) -> Result<CopyLabOptions, LabError> {
        let mut opts = if self.quick { CopyLabOptions::quick() } else { CopyLabOptions::full() };
        if let Some(size) = self.size {
            if size < 1 << 20 {
                return Err(LabError::Options("--size must be at least 1M".into()));
            }
            opts.size = size as u64;
        }
        opts.trials = self.trials.unwrap_or(opts.trials);
        match self.real_tree {
            Some(dir) if dir == Path::new("none") => opts.real_tree = None,
            Some(dir) => opts.real_tree = Some(dir),
            None => {}
        }
        Ok(opts)
    }
}

/// How to run the experiment.
#[derive(Debug, Clone)]
pub struct CopyLabOptions {
    /// Bytes of the single-file copies (seed 002: 1 GiB).
    pub size: u64,
    pub trials: usize,
    /// The tree of large files: count and size of each.
    pub large_files: (usize, u64),
    /// The tree of small files.
    pub small_files: (usize, u64),
    /// Lanes for the parallel tree rows.
    pub lanes: usize,
    /// A real tree for the archive rows (`copy -a` vs `cp -a`), staged on the scratch tmpfs.
    pub real_tree: Option<PathBuf>,
}

impl CopyLabOptions {
    pub fn full() -> Self {
        Self {
            size: 1 << 30,
            trials: 3,
            large_files: (1000, 1 << 20),
            small_files: (20_000, 4096),
            lanes: std::thread::available_parallelism().map_or(2, |n| n.get()),
            real_tree: Some(PathBuf::from("/usr/share")).filter(|p| p.is_dir()),
        }
    }

    /// A short run for CI.
    pub fn quick() -> Self {
        Self {
            size: 64 << 20,
            trials: 1,
            large_files: (64, 1 << 20),
            small_files: (2000, 4096),
            real_tree: None,
            ..Self::full()
        }
    }
}

/// One configuration, over all trials.
#[derive(Debug, Clone, Serialize)]
pub struct CopyRow {
    pub section: String,
    pub config: String,
    /// What ran (a corelane method, or the peer command).
    pub ran: String,
    /// Per trial and their median.
    #[serde(flatten)]
    pub secs: Trials<Secs>,
    /// Time as a % of the 1 KiB creat() baseline (seed 002's presentation).
    pub pct_of_baseline: Option<f64>,
    pub gb_per_sec: f64,
    /// Data-moving system calls per GiB (corelane rows only).
    pub syscalls_per_gib: Option<f64>,
    /// This row's GB/s as a fraction of a plain memcpy of the same bytes.
    pub fraction_of_memcpy: f64,
    pub note: Option<String>,
}

/// Everything `corelane lab copy` measured.
#[derive(Debug, Clone, Serialize)]
pub struct CopyLabReport {
    pub machine: String,
    pub scratch: String,
    pub huge_scratch: String,
    pub size_bytes: u64,
    pub trials: usize,
    pub memcpy_gb_per_sec: f64,
    pub rows: Vec<CopyRow>,
    pub findings: Vec<String>,
    pub removed_stale_mounts: Vec<String>,
    /// The real tree of the archive rows and how `corelane copy -a`'s result compared with
    /// `cp -a`'s, when one was staged.
    pub real_tree: Option<RealTree>,
}

/// The real tree the archive rows copy.
#[derive(Debug, Clone, Serialize)]
pub struct RealTree {
    pub source: PathBuf,
    pub staged_at: PathBuf,
    pub entries: u64,
    pub bytes: u64,
    /// `corelane copy -a`'s copy against `cp -a`'s, entry by entry.
    pub metadata: Comparison,
}

fn describe(s: &Scratch) -> String {
    match &s.note {
        Some(note) => format!("{} ({note})", s.path.display()),
        None => format!("private tmpfs at {} ({})", s.path.display(), s.options),
    }
}

/// Writes `len` bytes of non-repeating content (a xorshift stream, written 1 MiB at a time).
fn write_source(path: &Path, len: u64) -> Result<(), LabError> {
    use std::io::Write;
    let mut file = corelane::fs::create_new(path)
        .map_err(|e| LabError::io(format!("cannot create {}", path.display()), e))?;
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ len;
    let mut block = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        for chunk in block.chunks_exact_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            chunk.copy_from_slice(&state.to_le_bytes());
        }
        let n = left.min(block.len() as u64) as usize;
        file.write_all(&block[..n])
            .map_err(|e| LabError::io(format!("cannot write {}", path.display()), e))?;
        left -= n as u64;
    }
    Ok(())
}

fn write_tree(root: &Path, files: usize, size: u64) -> Result<(), LabError> {
    // Fresh directories only (the scratch is private): nothing already there is adopted.
    std::fs::create_dir(root)
        .map_err(|e| LabError::io(format!("cannot create {}", root.display()), e))?;
    // 1,000 files per directory, like a real tree, and so no single directory lock dominates.
    for i in 0..files {
        let dir = root.join(format!("d{}", i / 1000));
        if i % 1000 == 0 {
            std::fs::create_dir(&dir)
                .map_err(|e| LabError::io(format!("cannot create {}", dir.display()), e))?;
        }
        write_source(&dir.join(format!("f{i}")), size)?;
    }
    Ok(())
}

/// Seconds a plain memcpy of `len` bytes takes between two already-faulted buffers.
fn memcpy_secs(len: usize) -> f64 {
    let src = vec![1u8; len];
    let mut dst = vec![0u8; len];
    dst.copy_from_slice(&src); // fault the pages in first
    let t = Instant::now();
    dst.copy_from_slice(&src);
    let secs = t.elapsed().as_secs_f64();
    std::hint::black_box(&dst);
    secs
}

fn remove(path: &Path) {
    if path.is_dir() {
        let _ = std::fs::remove_dir_all(path);
    } else {
        let _ = std::fs::remove_file(path);
    }
}

/// A failed copy inside the lab: Ctrl-C stays an interruption, anything else is reported.
fn copy_failed(e: CopyError) -> LabError {
    match e {
        CopyError::Interrupted(_) => LabError::Interrupted,
        e => LabError::Copy(e),
    }
}

fn run_peer(program: &str, args: &[&str]) -> Result<f64, LabError> {
    let t = Instant::now();
    Host::Local.run(program, args)?;
    Ok(t.elapsed().as_secs_f64())
}

/// What one timed configuration is.
#[derive(Debug, Clone)]
enum Job {
    File {
        method: Option<CopyMethod>,
        buffer: usize,
        create: CreateCall,
    },
    /// `corelane copy -r`, or `-a` with `archive`.
    Tree {
        lanes: usize,
        archive: bool,
    },
    /// A peer command; `shown` is how the table names it (without the scratch paths).
    Peer {
        program: &'static str,
        args: Vec<String>,
        shown: String,
    },
}

impl Job {
    /// `cp FLAGS SRC DST`, shown with SRC and DST for the scratch paths.
    fn cp(flags: &[&str], src: &Path, dst: &Path) -> Job {
        let mut args = strings(flags);
        args.extend([path_text(src), path_text(dst)]);
        let shown = [&["cp"], flags, &["SRC", "DST"]].concat().join(" ");
        Job::Peer { program: "cp", args, shown }
    }
}

/// One row of the tables: what is copied, from where to where.
#[derive(Debug, Clone)]
pub struct Case {
    section: String,
    config: String,
    job: Job,
    src: PathBuf,
    dst: PathBuf,
    bytes: u64,
}

/// What one trial of a [`Case`] timed.
#[derive(Debug, Clone)]
pub struct Timed {
    secs: f64,
    syscalls: Option<u64>,
    ran: String,
    note: Option<String>,
}

fn time_once(job: &Job, src: &Path, dst: &Path, stop: &StopSignal) -> Result<Timed, LabError> {
    remove(dst);
    let result = match job {
        Job::File { method, buffer, create } => {
            let opts = CopyOptions {
                method: *method,
                buffer: *buffer,
                create: *create,
                ..CopyOptions::default()
            };
            let r = copy_file(src, dst, &opts, &mut |_, _| {}, stop).map_err(copy_failed)?;
            Timed {
                secs: r.seconds,
                syscalls: Some(r.syscalls),
                ran: r.method.name().into(),
                note: r.fallback,
            }
        }
        Job::Tree { lanes, archive } => {
            // What `corelane copy -a` or, by default, `corelane copy -r` does.
            let (opts, flag) = if *archive {
                (CopyOptions::archive(), " -a")
            } else {
                (CopyOptions { fresh_in_place: true, ..CopyOptions::default() }, "")
            };
            let r =
                copy_tree(src, dst, &opts, *lanes, &[], &|_, _| {}, stop).map_err(copy_failed)?;
            let note = (!r.not_kept.is_empty()).then(|| format!("not kept: {:?}", r.not_kept));
            Timed {
                secs: r.seconds,
                syscalls: Some(r.syscalls),
                ran: format!("copy_tree{flag}, {} lane(s)", r.lanes),
                note,
            }
        }
        Job::Peer { program, args, shown } => {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let secs = run_peer(program, &args)?;
            Timed { secs, syscalls: None, ran: shown.clone(), note: None }
        }
    };
    remove(dst);
    Ok(result)
}

/// Entries and bytes of regular files below `root` (the staging tmpfs is sized from them).
fn tree_size(root: &Path) -> Result<(u64, u64), LabError> {
    let (mut entries, mut bytes) = (0u64, 0u64);
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let list = std::fs::read_dir(&dir)
            .map_err(|e| LabError::io(format!("cannot list {}", dir.display()), e))?;
        for entry in list.flatten() {
            entries += 1;
            match entry.metadata() {
                Ok(m) if m.is_dir() => pending.push(entry.path()),
                Ok(m) if m.is_file() => bytes += m.len(),
                _ => {}
            }
        }
    }
    Ok((entries, bytes))
}

fn path_text(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The prepared stage: a private tmpfs holding the source file and trees, a huge-page tmpfs
/// when one can be mounted, and the memcpy ceiling.
#[derive(Debug)]
pub struct CopyLab<'a> {
    opts: &'a CopyLabOptions,
    scratch: Scratch,
    huge: Scratch,
    memcpy_gbps: f64,
    removed_stale_mounts: Vec<String>,
    trees: Vec<(String, PathBuf, usize, u64)>,
    /// The staged real tree, its scratch tmpfs and what the comparison found.
    real: Option<(Scratch, RealTree)>,
}

impl<'a> Prepare<'a> for CopyLab<'a> {
    type Settings = CopyLabOptions;

    fn prepare(opts: &'a CopyLabOptions, progress: Progress<'_>) -> Result<Self, LabError> {
        let removed_stale_mounts = remove_stale_mounts();
        for m in &removed_stale_mounts {
            progress(&format!("unmounted a stale scratch tmpfs of a killed run: {m}"));
        }
        let (large_n, large_size) = opts.large_files;
        let (small_n, small_size) = opts.small_files;
        let tree_bytes = large_n as u64 * large_size + small_n as u64 * small_size.max(4096);
        // Source and copy of the file and of both trees, plus room for metadata.
        let scratch = Scratch::mount(2 * opts.size + 2 * tree_bytes + (256 << 20), "")?;
        if let Some(note) = &scratch.note {
            progress(note);
        }
        progress(&format!(
            "writing a {} MiB source file on {}",
            opts.size >> 20,
            describe(&scratch)
        ));
        write_source(&scratch.path.join("src"), opts.size)?;
        let memcpy_gbps = {
            let secs: Vec<f64> =
                (0..opts.trials.max(3)).map(|_| memcpy_secs(opts.size as usize)).collect();
            opts.size as f64 / median(&secs).unwrap_or(1.0) / 1e9
        };
        progress(&format!("memcpy ceiling: {memcpy_gbps:.2} GB/s"));
        let huge = Scratch::mount(2 * opts.size + (64 << 20), "huge=always")?;
        if huge.mounted {
            write_source(&huge.path.join("src"), opts.size)?;
        } else {
            progress("skipping the huge=always rows: no private tmpfs could be mounted");
        }
        let mut trees = Vec::new();
        for (name, (n, each)) in [("large", opts.large_files), ("small", opts.small_files)] {
            let tree = scratch.path.join(format!("tree-{name}"));
            progress(&format!("writing a tree of {n} files of {each} bytes"));
            write_tree(&tree, n, each)?;
            trees.push((format!("tree: {n} × {}", human(each)), tree, n, each));
        }
        let real = match &opts.real_tree {
            Some(dir) => Self::stage_real_tree(dir, opts.lanes, progress)?,
            None => None,
        };
        Ok(Self { opts, scratch, huge, memcpy_gbps, removed_stale_mounts, trees, real })
    }
}

impl<'a> CopyLab<'a> {
    /// Stages `dir` on its own scratch tmpfs with `cp -a`, then copies it once with
    /// `corelane copy -a` and once with `cp -a` and compares the two entry by entry.
    fn stage_real_tree(
        dir: &Path,
        lanes: usize,
        progress: Progress<'_>,
    ) -> Result<Option<(Scratch, RealTree)>, LabError> {
        if !dir.is_dir() {
            progress(&format!("skipping the real-tree rows: {} is not a directory", dir.display()));
            return Ok(None);
        }
        let (entries, bytes) = tree_size(dir)?;
        // The staged source and two copies, tmpfs's per-entry cost, and room to spare.
        let scratch = Scratch::mount(3 * bytes + 3 * entries * 4096 + (256 << 20), "")?;
        let staged = scratch.path.join("real-src");
        progress(&format!(
            "staging {} ({entries} entries, {} MiB) with cp -a on {}",
            dir.display(),
            bytes >> 20,
            describe(&scratch)
        ));
        Host::Local.run("cp", &["-a", &path_text(dir), &path_text(&staged)])?;
        let (by_cp, by_corelane) =
            (scratch.path.join("check-cp"), scratch.path.join("check-corelane"));
        Host::Local.run("cp", &["-a", &path_text(&staged), &path_text(&by_cp)])?;
        let stop = StopSignal::new();
        copy_tree(&staged, &by_corelane, &CopyOptions::archive(), lanes, &[], &|_, _| {}, &stop)
            .map_err(copy_failed)?;
        let metadata = compare(&by_cp, &by_corelane)?;
        progress(&format!(
            "copy -a vs cp -a on {}: {} entries, {} differing, hard-link groups {}",
            dir.display(),
            metadata.entries,
            metadata.differing,
            if metadata.same_hard_link_groups { "the same" } else { "different" }
        ));
        remove(&by_cp);
        remove(&by_corelane);
        let tree = RealTree { source: dir.into(), staged_at: staged, entries, bytes, metadata };
        Ok(Some((scratch, tree)))
    }

    /// `corelane copy -a` beside `cp -a` and (when installed) `rsync -aHAX` on the real tree.
    fn real_tree_cases(&self) -> Vec<Case> {
        let Some((scratch, tree)) = &self.real else { return Vec::new() };
        let (src, out) = (&tree.staged_at, scratch.path.join("real-copy"));
        let lanes = self.opts.lanes;
        let mut jobs = vec![
            (format!("corelane copy -a, {lanes} lanes"), Job::Tree { lanes, archive: true }),
            ("cp -a".to_string(), Job::cp(&["-a"], src, &out)),
        ];
        if crate::process::on_path("rsync") {
            // -HAX: hard links, ACLs and xattrs, what cp -a keeps and plain -a does not.
            let args = strings(&["-aHAX", &format!("{}/", path_text(src)), &path_text(&out)]);
            let shown = "rsync -aHAX SRC/ DST".into();
            jobs.push(("rsync -aHAX".into(), Job::Peer { program: "rsync", args, shown }));
        }
        let section = format!("real tree: {}", tree.source.display());
        cases(&section, src, &out, tree.bytes, jobs)
    }

    /// Seed 002's Tables 2 (creat) and 3 (open), O_DIRECT, the kernel-side methods, and
    /// corelane's choice beside cp and dd, all on the same source file.
    fn file_cases(&self) -> Vec<Case> {
        let (src, dst) = (self.scratch.path.join("src"), self.scratch.path.join("dst"));
        let file = |method, k: usize, create| Job::File { method, buffer: k << 10, create };
        let sizes = [("1K", 1), ("4K", 4), ("8K", 8), ("1M", 1024), ("8M", 8192)];
        let mut sections: Vec<(&str, Vec<(String, Job)>)> = Vec::new();
        for (table, create, largest) in [
            ("table 2: creat()", CreateCall::Creat, 8192),
            ("table 3: open()", CreateCall::Open, 1024),
        ] {
            let read_write = sizes.into_iter().filter(|(_, k)| *k <= largest).map(|(label, k)| {
                (format!("read/write {label}"), file(Some(CopyMethod::ReadWrite), k, create))
            });
            sections.push((table, read_write.collect()));
        }
        let direct = file(Some(CopyMethod::Direct), 1024, CreateCall::Open);
        sections.push(("O_DIRECT", vec![("direct 1M".into(), direct)]));
        let kernel = [
            CopyMethod::Sendfile,
            CopyMethod::Splice,
            CopyMethod::CopyFileRange,
            CopyMethod::IoUring,
        ]
        .map(|m| (m.name().to_string(), file(Some(m), 1024, CreateCall::Open)));
        sections.push(("kernel-side", kernel.into()));
        let (ifs, ofs) = (format!("if={}", path_text(&src)), format!("of={}", path_text(&dst)));
        let dd_args = strings(&[&ifs, &ofs, "bs=1M", "status=none"]);
        sections.push((
            "one file",
            vec![
                ("corelane copy (auto)".into(), file(None, 1024, CreateCall::Open)),
                ("cp".into(), Job::cp(&[], &src, &dst)),
                (
                    "dd bs=1M".into(),
                    Job::Peer { program: "dd", args: dd_args, shown: "dd bs=1M".into() },
                ),
            ],
        ));
        let size = self.opts.size;
        sections
            .into_iter()
            .flat_map(|(section, jobs)| cases(section, &src, &dst, size, jobs))
            .collect()
    }

    /// The huge=always tmpfs rows and the trees over 1 and N lanes beside `cp -r`.
    fn huge_and_tree_cases(&self) -> Vec<Case> {
        let mut all = Vec::new();
        if self.huge.mounted {
            let (src, dst) = (self.huge.path.join("src"), self.huge.path.join("dst"));
            let auto = Job::File { method: None, buffer: 1 << 20, create: CreateCall::Open };
            let jobs = vec![
                ("corelane copy (auto)".into(), auto),
                ("cp".into(), Job::cp(&[], &src, &dst)),
            ];
            all.extend(cases("huge=always tmpfs", &src, &dst, self.opts.size, jobs));
        }
        let out = self.scratch.path.join("tree-copy");
        let lanes = self.opts.lanes;
        for (section, tree, n, each) in &self.trees {
            let jobs = vec![
                ("corelane copy -r, 1 lane".to_string(), Job::Tree { lanes: 1, archive: false }),
                (format!("corelane copy -r, {lanes} lanes"), Job::Tree { lanes, archive: false }),
                ("cp -r".to_string(), Job::cp(&["-r"], tree, &out)),
            ];
            all.extend(cases(section, tree, &out, *n as u64 * each, jobs));
        }
        all
    }
}

/// The cases of one section, one per configuration and its job, each copying `src` to `dst`
/// (`bytes` of data).
fn cases(section: &str, src: &Path, dst: &Path, bytes: u64, jobs: Vec<(String, Job)>) -> Vec<Case> {
    jobs.into_iter()
        .map(|(config, job)| Case {
            section: section.into(),
            config,
            job,
            src: src.to_path_buf(),
            dst: dst.to_path_buf(),
            bytes,
        })
        .collect()
}

impl Experiment for CopyLab<'_> {
    type Config = Case;
    type Trial = Timed;
    type Report = CopyLabReport;

    fn configurations(&mut self) -> Result<Vec<Case>, LabError> {
        let mut cases = self.file_cases();
        cases.extend(self.huge_and_tree_cases());
        cases.extend(self.real_tree_cases());
        Ok(cases)
    }

    fn label(&self, case: &Case) -> String {
        format!("[{}] {}", case.section, case.config)
    }

    fn trial(&mut self, case: &Case, _: usize, stop: &StopSignal) -> Result<Timed, LabError> {
        time_once(&case.job, &case.src, &case.dst, stop)
    }

    fn describe(&self, t: &Timed) -> String {
        format!("{:.3}s", t.secs)
    }

    fn report(self, measured: Vec<Measured<Case, Timed>>) -> Result<CopyLabReport, LabError> {
        let mut rows: Vec<CopyRow> = measured.into_iter().map(|m| self.row(m)).collect();
        if let Some(base) = rows.first().map(|b| b.secs.median).filter(|b| *b > 0.0) {
            let relative = |s: &str| {
                s.starts_with("table") || ["O_DIRECT", "kernel-side", "one file"].contains(&s)
            };
            for row in rows.iter_mut().filter(|row| relative(&row.section)) {
                row.pct_of_baseline = Some(row.secs.median / base * 100.0);
            }
        }
        let mut findings = findings(&rows, self.memcpy_gbps);
        if let Some((_, tree)) = &self.real {
            findings.push(real_tree_finding(&rows, tree));
        }
        Ok(CopyLabReport {
            machine: crate::machine(),
            scratch: describe(&self.scratch),
            huge_scratch: describe(&self.huge),
            size_bytes: self.opts.size,
            trials: self.opts.trials,
            memcpy_gb_per_sec: self.memcpy_gbps,
            rows,
            findings,
            removed_stale_mounts: self.removed_stale_mounts,
            real_tree: self.real.map(|(_, tree)| tree),
        })
    }
}

impl CopyLab<'_> {
    /// A case's row: median time, GB/s, calls per GiB, the fraction of a memcpy.
    fn row(&self, m: Measured<Case, Timed>) -> CopyRow {
        let secs = Trials::of(m.trials.iter().map(|t| t.secs));
        let last = m.trials.last();
        let gib = m.config.bytes as f64 / (1u64 << 30) as f64;
        let gb_per_sec =
            if secs.median > 0.0 { m.config.bytes as f64 / secs.median / 1e9 } else { 0.0 };
        CopyRow {
            section: m.config.section,
            config: m.config.config,
            ran: last.map_or(String::new(), |t| t.ran.clone()),
            secs,
            pct_of_baseline: None,
            gb_per_sec,
            syscalls_per_gib: last.and_then(|t| t.syscalls).map(|c| c as f64 / gib.max(1e-9)),
            fraction_of_memcpy: if self.memcpy_gbps > 0.0 {
                gb_per_sec / self.memcpy_gbps
            } else {
                0.0
            },
            note: last.and_then(|t| t.note.clone()),
        }
    }
}

fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

fn find<'a>(rows: &'a [CopyRow], section: &str, config: &str) -> Option<&'a CopyRow> {
    rows.iter().find(|r| r.section.starts_with(section) && r.config == config)
}

/// The archive rows in one sentence: times against cp -a and whether the results match.
fn real_tree_finding(rows: &[CopyRow], tree: &RealTree) -> String {
    let section = format!("real tree: {}", tree.source.display());
    let ours = rows.iter().find(|r| r.section == section && r.config.starts_with("corelane"));
    let cp = rows.iter().find(|r| r.section == section && r.config == "cp -a");
    let times = match (ours, cp) {
        (Some(o), Some(c)) => format!(
            "{} {:.3}s vs cp -a {:.3}s ({:.2}x cp's time)",
            o.config,
            o.secs.median,
            c.secs.median,
            o.secs.median / c.secs.median.max(1e-9)
        ),
        _ => "not timed".into(),
    };
    let m = &tree.metadata;
    let verdict = if m.identical() {
        format!("identical metadata over {} entries (hard-link groups included)", m.entries)
    } else {
        format!(
            "{} of {} entries differ from cp -a's copy (first: {})",
            m.differing,
            m.entries,
            m.differences.first().map_or("hard-link groups", String::as_str)
        )
    };
    format!("{section} ({} entries, {} MiB): {times}; {verdict}.", tree.entries, tree.bytes >> 20)
}

fn findings(rows: &[CopyRow], memcpy_gbps: f64) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some(k1), Some(m1)) =
        (find(rows, "table 2", "read/write 1K"), find(rows, "table 2", "read/write 1M"))
    {
        out.push(format!(
            "Buffer size: 1 KiB takes {:.2}s, 1 MiB {:.2}s ({:.1}x faster; the large-file study: 2.28s vs 0.36s): {:.0} vs {:.0} system calls per GiB.",
            k1.secs.median, m1.secs.median, k1.secs.median / m1.secs.median.max(1e-9),
            k1.syscalls_per_gib.unwrap_or(0.0), m1.syscalls_per_gib.unwrap_or(0.0)
        ));
    }
    if let (Some(c), Some(o)) =
        (find(rows, "table 2", "read/write 1M"), find(rows, "table 3", "read/write 1M"))
    {
        let diff = (o.secs.median / c.secs.median.max(1e-9) - 1.0) * 100.0;
        let verdict = if diff.abs() < 10.0 {
            "within the noise: creat(2) is open(2) with O_CREAT|O_WRONLY|O_TRUNC in the kernel, as the large-file study found"
        } else {
            "a gap this large between two spellings of one kernel call is this machine's run-to-run noise; compare the other buffer sizes"
        };
        out.push(format!(
            "creat() vs open(): {:.3}s vs {:.3}s at 1 MiB ({:+.1}%): {verdict}.",
            c.secs.median, o.secs.median, diff
        ));
    }
    if let (Some(d), Some(rw)) =
        (find(rows, "O_DIRECT", "direct 1M"), find(rows, "table 3", "read/write 1M"))
    {
        match &d.note {
            Some(note) => out.push(format!("O_DIRECT: {note}; ran {} instead.", d.ran)),
            None => out.push(format!(
                "O_DIRECT ran on tmpfs: {:.3}s vs {:.3}s buffered at 1 MiB ({:+.1}%). tmpfs has no device behind its page cache, so the flag bypasses nothing here; on a disk file system it trades the page cache for device-sized I/O.",
                d.secs.median,
                rw.secs.median,
                (d.secs.median / rw.secs.median.max(1e-9) - 1.0) * 100.0
            )),
        }
    }
    if let (Some(auto), Some(cp)) =
        (find(rows, "one file", "corelane copy (auto)"), find(rows, "one file", "cp"))
    {
        out.push(format!(
            "One file: corelane copy (auto, ran {}) {:.3}s vs cp {:.3}s ({:.2}x cp's time); both reach {:.0}% of a memcpy ({memcpy_gbps:.1} GB/s).",
            auto.ran, auto.secs.median, cp.secs.median, auto.secs.median / cp.secs.median.max(1e-9), auto.fraction_of_memcpy * 100.0
        ));
    }
    if let (Some(small), Some(huge)) = (
        find(rows, "one file", "corelane copy (auto)"),
        find(rows, "huge=always", "corelane copy (auto)"),
    ) {
        out.push(format!(
            "Page allocation is the limit on tmpfs: the same copy on a huge=always tmpfs takes {:.3}s vs {:.3}s ({:.1}x faster), with the same method and data.",
            huge.secs.median, small.secs.median, small.secs.median / huge.secs.median.max(1e-9)
        ));
    }
    let mut sections: Vec<&str> = rows
        .iter()
        .filter(|r| r.section.starts_with("tree: "))
        .map(|r| r.section.as_str())
        .collect();
    sections.dedup();
    for section in sections {
        let in_section: Vec<&CopyRow> = rows.iter().filter(|r| r.section == section).collect();
        let cp = in_section.iter().find(|r| r.config == "cp -r");
        let best = in_section
            .iter()
            .filter(|r| r.config.starts_with("corelane"))
            .min_by(|a, b| a.secs.median.total_cmp(&b.secs.median));
        if let (Some(cp), Some(best)) = (cp, best) {
            out.push(format!(
                "{section}: {} {:.3}s vs cp -r {:.3}s ({:.2}x cp's time).",
                best.config,
                best.secs.median,
                cp.secs.median,
                best.secs.median / cp.secs.median.max(1e-9)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(mounted: bool) -> Scratch {
        let path = tempfile::tempdir().unwrap().keep();
        Scratch { path, mounted, note: None, options: String::new() }
    }

    /// What each case runs, as text: its label, the bytes it copies, and its job (a peer's
    /// command line with the scratch paths as `S/`, `H/` and `R/`).
    fn described(lab: &CopyLab<'_>, cases: &[Case]) -> Vec<String> {
        let short = |text: &str| {
            text.replace(&path_text(&lab.scratch.path), "S")
                .replace(&path_text(&lab.huge.path), "H")
                .replace(&path_text(&lab.real.as_ref().unwrap().0.path), "R")
        };
        cases
            .iter()
            .map(|c| {
                let job = match &c.job {
                    Job::File { method, buffer, create } => {
                        format!("file {} {buffer} {create:?}", method.map_or("auto", |m| m.name()))
                    }
                    Job::Tree { lanes, archive } => format!("tree {lanes} archive {archive}"),
                    Job::Peer { program, args, shown } => {
                        format!("{program} {} ({shown})", short(&args.join(" ")))
                    }
                };
                let (src, dst) = (short(&path_text(&c.src)), short(&path_text(&c.dst)));
                format!("[{}] {}: {src} -> {dst}, {} B: {job}", c.section, c.config, c.bytes)
            })
            .collect()
    }

    /// Every row the tables list, with what it runs: the cases are built from one list per
    /// section, so a row that loses its peer's arguments or its section shows up here.
    #[test]
    fn the_cases_are_seed_002s_tables_the_trees_and_the_real_tree() {
        let opts = CopyLabOptions { lanes: 2, ..CopyLabOptions::quick() };
        let (real_scratch, staged) = (scratch(false), PathBuf::from("/staged"));
        let metadata = Comparison {
            entries: 0,
            differences: vec![],
            differing: 0,
            same_hard_link_groups: true,
        };
        let real =
            RealTree { source: "/usr/x".into(), staged_at: staged, entries: 3, bytes: 7, metadata };
        let mut lab = CopyLab {
            opts: &opts,
            scratch: scratch(false),
            huge: scratch(true),
            memcpy_gbps: 1.0,
            removed_stale_mounts: vec![],
            trees: vec![("tree: 2 × 4 KiB".into(), PathBuf::from("/t"), 2, 4096)],
            real: Some((real_scratch, real)),
        };
        let cases = lab.configurations().unwrap();
        let got = described(&lab, &cases);
        lab.huge.mounted = false; // never mounted: dropped as a plain directory
        let rsync = crate::process::on_path("rsync");
        let size = 64 << 20;
        let mut want: Vec<String> = Vec::new();
        for (table, create, sizes) in [
            ("table 2: creat()", "Creat", &[1, 4, 8, 1024, 8192][..]),
            ("table 3: open()", "Open", &[1, 4, 8, 1024]),
        ] {
            for k in sizes {
                let label = if *k >= 1024 { format!("{}M", k / 1024) } else { format!("{k}K") };
                want.push(format!(
                    "[{table}] read/write {label}: S/src -> S/dst, {size} B: file read-write {} {create}",
                    k << 10
                ));
            }
        }
        want.push(format!(
            "[O_DIRECT] direct 1M: S/src -> S/dst, {size} B: file direct 1048576 Open"
        ));
        for m in ["sendfile", "splice", "copy-file-range", "io-uring"] {
            want.push(format!(
                "[kernel-side] {m}: S/src -> S/dst, {size} B: file {m} 1048576 Open"
            ));
        }
        for line in [
            "[one file] corelane copy (auto): S/src -> S/dst, 67108864 B: file auto 1048576 Open",
            "[one file] cp: S/src -> S/dst, 67108864 B: cp S/src S/dst (cp SRC DST)",
            "[one file] dd bs=1M: S/src -> S/dst, 67108864 B: dd if=S/src of=S/dst bs=1M status=none (dd bs=1M)",
            "[huge=always tmpfs] corelane copy (auto): H/src -> H/dst, 67108864 B: file auto 1048576 Open",
            "[huge=always tmpfs] cp: H/src -> H/dst, 67108864 B: cp H/src H/dst (cp SRC DST)",
            "[tree: 2 × 4 KiB] corelane copy -r, 1 lane: /t -> S/tree-copy, 8192 B: tree 1 archive false",
            "[tree: 2 × 4 KiB] corelane copy -r, 2 lanes: /t -> S/tree-copy, 8192 B: tree 2 archive false",
            "[tree: 2 × 4 KiB] cp -r: /t -> S/tree-copy, 8192 B: cp -r /t S/tree-copy (cp -r SRC DST)",
            "[real tree: /usr/x] corelane copy -a, 2 lanes: /staged -> R/real-copy, 7 B: tree 2 archive true",
            "[real tree: /usr/x] cp -a: /staged -> R/real-copy, 7 B: cp -a /staged R/real-copy (cp -a SRC DST)",
        ] {
            want.push(line.into());
        }
        if rsync {
            want.push("[real tree: /usr/x] rsync -aHAX: /staged -> R/real-copy, 7 B: rsync -aHAX /staged/ R/real-copy (rsync -aHAX SRC/ DST)".into());
        }
        assert_eq!(got, want);
    }
}
