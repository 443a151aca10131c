//! `corelane lab copy`: seed 002's Tables 2 and 3 on a private tmpfs, then the modern methods,
//! `auto`, a `huge=always` tmpfs, and trees copied with 1 and N lanes — beside `cp`, `cp -r`
//! and `dd bs=1M` on the same files in the same run, and a plain memcpy of the same size as
//! the physical ceiling every figure can be read against.

mod scratch;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use corelane::copy::{copy_file, copy_tree, CopyError, CopyMethod, CopyOptions, CreateCall};
use corelane::lane::StopSignal;
use corelane::stats::median;
use serde::Serialize;

pub use scratch::{remove_stale_mounts, Scratch};

use crate::LabError;

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
}

impl CopyLabOptions {
    pub fn full() -> Self {
        Self {
            size: 1 << 30,
            trials: 3,
            large_files: (1000, 1 << 20),
            small_files: (20_000, 4096),
            lanes: std::thread::available_parallelism().map_or(2, |n| n.get()),
        }
    }

    /// A short run for CI.
    pub fn quick() -> Self {
        Self {
            size: 64 << 20,
            trials: 1,
            large_files: (64, 1 << 20),
            small_files: (2000, 4096),
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
    pub trials_secs: Vec<f64>,
    pub median_secs: f64,
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
    let mut file = std::fs::File::create(path)
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
    // 1,000 files per directory, like a real tree, and so no single directory lock dominates.
    for i in 0..files {
        let dir = root.join(format!("d{}", i / 1000));
        if i % 1000 == 0 {
            std::fs::create_dir_all(&dir)
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
        e => LabError::Testbed(e.to_string()),
    }
}

fn run_peer(program: &str, args: &[&str]) -> Result<f64, LabError> {
    let t = Instant::now();
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| LabError::io(format!("cannot run {program}"), e))?;
    if !out.status.success() {
        return Err(LabError::Child(format!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(t.elapsed().as_secs_f64())
}

/// What one timed configuration is.
enum Job<'a> {
    File {
        method: Option<CopyMethod>,
        buffer: usize,
        create: CreateCall,
    },
    Tree {
        lanes: usize,
    },
    /// A peer command; `shown` is how the table names it (without the scratch paths).
    Peer {
        program: &'a str,
        args: Vec<String>,
        shown: &'a str,
    },
}

struct Timed {
    secs: f64,
    syscalls: Option<u64>,
    ran: String,
    note: Option<String>,
}

fn time_once(job: &Job<'_>, src: &Path, dst: &Path, stop: &StopSignal) -> Result<Timed, LabError> {
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
        Job::Tree { lanes } => {
            // What `corelane copy -r` does by default.
            let tree_opts = CopyOptions { fresh_in_place: true, ..CopyOptions::default() };
            let r = copy_tree(src, dst, &tree_opts, *lanes, &[], &|_, _| {}, stop)
                .map_err(copy_failed)?;
            Timed {
                secs: r.seconds,
                syscalls: Some(r.syscalls),
                ran: format!("copy_tree, {} lane(s)", r.lanes),
                note: None,
            }
        }
        Job::Peer { program, args, shown } => {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let secs = run_peer(program, &args)?;
            Timed { secs, syscalls: None, ran: shown.to_string(), note: None }
        }
    };
    remove(dst);
    Ok(result)
}

struct Runner<'a> {
    opts: &'a CopyLabOptions,
    stop: &'a StopSignal,
    progress: &'a mut dyn FnMut(&str),
    memcpy_gbps: f64,
    rows: Vec<CopyRow>,
}

impl Runner<'_> {
    /// Times every configuration of a section, interleaved trial by trial (A B C, then B C A,
    /// then C A B), so that drift in the machine and the after-effects of the previous copy
    /// hit them alike.
    fn section(
        &mut self,
        section: &str,
        configs: Vec<(String, Job<'_>)>,
        src: &Path,
        dst: &Path,
        bytes: u64,
    ) -> Result<(), LabError> {
        let labelled =
            configs.into_iter().map(|(config, job)| (section.to_string(), config, job)).collect();
        self.interleaved(labelled, src, dst, bytes)
    }

    /// Like [`section`](Self::section), for configurations that belong to different sections
    /// of the table but must be measured side by side (seed 002's creat and open tables).
    fn interleaved(
        &mut self,
        configs: Vec<(String, String, Job<'_>)>,
        src: &Path,
        dst: &Path,
        bytes: u64,
    ) -> Result<(), LabError> {
        let mut secs: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
        let mut last: Vec<Option<Timed>> = configs.iter().map(|_| None).collect();
        for t in 0..self.opts.trials {
            // Rotate the order every trial: a copy right after another one's large file was
            // freed measured up to 30% slower here, so no configuration may always follow the
            // same neighbour.
            let n = configs.len();
            for i in (0..n).map(|k| (k + t) % n) {
                let (section, config, job) = &configs[i];
                if self.stop.is_stopped() {
                    return Err(LabError::Interrupted);
                }
                let timed = time_once(job, src, dst, self.stop)?;
                (self.progress)(&format!(
                    "[{section}] {config} trial {}/{}: {:.3}s ({:.2} GB/s)",
                    t + 1,
                    self.opts.trials,
                    timed.secs,
                    bytes as f64 / timed.secs / 1e9
                ));
                secs[i].push(timed.secs);
                last[i] = Some(timed);
            }
        }
        let gib = bytes as f64 / (1u64 << 30) as f64;
        let first_new = self.rows.len();
        for (((section, config, _), secs), last) in configs.into_iter().zip(secs).zip(last) {
            let last = last.expect("at least one trial");
            let median_secs = median(&secs).unwrap_or(0.0);
            let gb_per_sec = if median_secs > 0.0 { bytes as f64 / median_secs / 1e9 } else { 0.0 };
            self.rows.push(CopyRow {
                section,
                config,
                ran: last.ran,
                trials_secs: secs,
                median_secs,
                pct_of_baseline: None,
                gb_per_sec,
                syscalls_per_gib: last.syscalls.map(|c| c as f64 / gib.max(1e-9)),
                fraction_of_memcpy: if self.memcpy_gbps > 0.0 {
                    gb_per_sec / self.memcpy_gbps
                } else {
                    0.0
                },
                note: last.note,
            });
        }
        // Measured interleaved, shown grouped: a stable sort keeps each section's order.
        self.rows[first_new..].sort_by(|a, b| a.section.cmp(&b.section));
        Ok(())
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Runs the experiment.
pub fn run(
    opts: &CopyLabOptions,
    stop: &StopSignal,
    progress: &mut dyn FnMut(&str),
) -> Result<CopyLabReport, LabError> {
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
    let dir = &scratch.path;
    let (src, dst) = (dir.join("src"), dir.join("dst"));
    progress(&format!("writing a {} MiB source file on {}", opts.size >> 20, describe(&scratch)));
    write_source(&src, opts.size)?;
    let memcpy_gbps = {
        let secs: Vec<f64> =
            (0..opts.trials.max(3)).map(|_| memcpy_secs(opts.size as usize)).collect();
        opts.size as f64 / median(&secs).unwrap_or(1.0) / 1e9
    };
    progress(&format!("memcpy ceiling: {memcpy_gbps:.2} GB/s"));
    let mut r = Runner { opts, stop, progress, memcpy_gbps, rows: Vec::new() };
    let size = opts.size;
    let kib = |k: usize| k << 10;
    let file = |method: Option<CopyMethod>, buffer: usize, create: CreateCall| Job::File {
        method,
        buffer,
        create,
    };
    // Seed 002's Tables 2 (creat) and 3 (open), measured interleaved so that their
    // difference is the call's, not the machine's drift between two blocks of trials.
    let mut tables = Vec::new();
    for (label, k) in [("1K", 1), ("4K", 4), ("8K", 8), ("1M", 1024), ("8M", 8192)] {
        let read_write = |create| file(Some(CopyMethod::ReadWrite), kib(k), create);
        tables.push((
            "table 2: creat()".to_string(),
            format!("read/write {label}"),
            read_write(CreateCall::Creat),
        ));
        if k <= 1024 {
            tables.push((
                "table 3: open()".to_string(),
                format!("read/write {label}"),
                read_write(CreateCall::Open),
            ));
        }
    }
    r.interleaved(tables, &src, &dst, size)?;
    r.section(
        "O_DIRECT",
        vec![("direct 1M".into(), file(Some(CopyMethod::Direct), kib(1024), CreateCall::Open))],
        &src,
        &dst,
        size,
    )?;
    let kernel_side =
        [CopyMethod::Sendfile, CopyMethod::Splice, CopyMethod::CopyFileRange, CopyMethod::IoUring]
            .into_iter()
            .map(|m| (m.name().to_string(), file(Some(m), kib(1024), CreateCall::Open)))
            .collect();
    r.section("kernel-side", kernel_side, &src, &dst, size)?;
    let (s, d) = (src.to_string_lossy().into_owned(), dst.to_string_lossy().into_owned());
    let (ifs, ofs) = (format!("if={s}"), format!("of={d}"));
    r.section(
        "one file",
        vec![
            ("corelane copy (auto)".into(), file(None, kib(1024), CreateCall::Open)),
            (
                "cp".into(),
                Job::Peer { program: "cp", args: strings(&[&s, &d]), shown: "cp SRC DST" },
            ),
            (
                "dd bs=1M".into(),
                Job::Peer {
                    program: "dd",
                    args: strings(&[&ifs, &ofs, "bs=1M", "status=none"]),
                    shown: "dd bs=1M",
                },
            ),
        ],
        &src,
        &dst,
        size,
    )?;

    let huge = Scratch::mount(2 * opts.size + (64 << 20), "huge=always")?;
    let huge_desc = describe(&huge);
    if huge.mounted {
        let (hs, hd) = (huge.path.join("src"), huge.path.join("dst"));
        write_source(&hs, size)?;
        let (hs_s, hd_s) = (hs.to_string_lossy().into_owned(), hd.to_string_lossy().into_owned());
        r.section(
            "huge=always tmpfs",
            vec![
                ("corelane copy (auto)".into(), file(None, kib(1024), CreateCall::Open)),
                (
                    "cp".into(),
                    Job::Peer {
                        program: "cp",
                        args: strings(&[&hs_s, &hd_s]),
                        shown: "cp SRC DST",
                    },
                ),
            ],
            &hs,
            &hd,
            size,
        )?;
    } else {
        (r.progress)("skipping the huge=always rows: no private tmpfs could be mounted");
    }
    drop(huge);
    remove(&src);

    for (name, (n, each)) in [("large files", opts.large_files), ("small files", opts.small_files)]
    {
        let tree = dir.join(format!("tree-{}", name.replace(' ', "-")));
        let out = dir.join("tree-copy");
        (r.progress)(&format!("writing a tree of {n} files of {each} bytes"));
        write_tree(&tree, n, each)?;
        let (ts, os) = (tree.to_string_lossy().into_owned(), out.to_string_lossy().into_owned());
        let configs = vec![
            ("corelane copy -r, 1 lane".to_string(), Job::Tree { lanes: 1 }),
            (format!("corelane copy -r, {} lanes", opts.lanes), Job::Tree { lanes: opts.lanes }),
            (
                "cp -r".to_string(),
                Job::Peer {
                    program: "cp",
                    args: strings(&["-r", &ts, &os]),
                    shown: "cp -r SRC DST",
                },
            ),
        ];
        r.section(&format!("tree: {n} × {}", human(each)), configs, &tree, &out, n as u64 * each)?;
        remove(&tree);
    }
    let mut rows = r.rows;
    if let Some(base) = rows.first().map(|b| b.median_secs).filter(|b| *b > 0.0) {
        for row in rows.iter_mut().filter(|row| {
            row.section.starts_with("table")
                || row.section == "O_DIRECT"
                || row.section == "kernel-side"
                || row.section == "one file"
        }) {
            row.pct_of_baseline = Some(row.median_secs / base * 100.0);
        }
    }
    let findings = findings(&rows, memcpy_gbps);
    Ok(CopyLabReport {
        machine: crate::machine(),
        scratch: describe(&scratch),
        huge_scratch: huge_desc,
        size_bytes: opts.size,
        trials: opts.trials,
        memcpy_gb_per_sec: memcpy_gbps,
        rows,
        findings,
        removed_stale_mounts,
    })
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

fn findings(rows: &[CopyRow], memcpy_gbps: f64) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some(k1), Some(m1)) =
        (find(rows, "table 2", "read/write 1K"), find(rows, "table 2", "read/write 1M"))
    {
        out.push(format!(
            "Buffer size: 1 KiB takes {:.2}s, 1 MiB {:.2}s ({:.1}x faster; seed 002: 2.28s vs 0.36s): {:.0} vs {:.0} system calls per GiB.",
            k1.median_secs, m1.median_secs, k1.median_secs / m1.median_secs.max(1e-9),
            k1.syscalls_per_gib.unwrap_or(0.0), m1.syscalls_per_gib.unwrap_or(0.0)
        ));
    }
    if let (Some(c), Some(o)) =
        (find(rows, "table 2", "read/write 1M"), find(rows, "table 3", "read/write 1M"))
    {
        let diff = (o.median_secs / c.median_secs.max(1e-9) - 1.0) * 100.0;
        let verdict = if diff.abs() < 10.0 {
            "within the noise: creat(2) is open(2) with O_CREAT|O_WRONLY|O_TRUNC in the kernel, as the seed found"
        } else {
            "a gap this large between two spellings of one kernel call is this machine's run-to-run noise; compare the other buffer sizes"
        };
        out.push(format!(
            "creat() vs open(): {:.3}s vs {:.3}s at 1 MiB ({:+.1}%): {verdict}.",
            c.median_secs, o.median_secs, diff
        ));
    }
    if let (Some(d), Some(rw)) =
        (find(rows, "O_DIRECT", "direct 1M"), find(rows, "table 3", "read/write 1M"))
    {
        match &d.note {
            Some(note) => out.push(format!("O_DIRECT: {note}; ran {} instead.", d.ran)),
            None => out.push(format!(
                "O_DIRECT ran on tmpfs: {:.3}s vs {:.3}s buffered at 1 MiB ({:+.1}%). tmpfs has no device behind its page cache, so the flag bypasses nothing here; on a disk file system it trades the page cache for device-sized I/O.",
                d.median_secs,
                rw.median_secs,
                (d.median_secs / rw.median_secs.max(1e-9) - 1.0) * 100.0
            )),
        }
    }
    if let (Some(auto), Some(cp)) =
        (find(rows, "one file", "corelane copy (auto)"), find(rows, "one file", "cp"))
    {
        out.push(format!(
            "One file: corelane copy (auto, ran {}) {:.3}s vs cp {:.3}s ({:.2}x cp's time); both reach {:.0}% of a memcpy ({memcpy_gbps:.1} GB/s).",
            auto.ran, auto.median_secs, cp.median_secs, auto.median_secs / cp.median_secs.max(1e-9), auto.fraction_of_memcpy * 100.0
        ));
    }
    if let (Some(small), Some(huge)) = (
        find(rows, "one file", "corelane copy (auto)"),
        find(rows, "huge=always", "corelane copy (auto)"),
    ) {
        out.push(format!(
            "Page allocation is the limit on tmpfs: the same copy on a huge=always tmpfs takes {:.3}s vs {:.3}s ({:.1}x faster), with the same method and data.",
            huge.median_secs, small.median_secs, small.median_secs / huge.median_secs.max(1e-9)
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
            .min_by(|a, b| a.median_secs.total_cmp(&b.median_secs));
        if let (Some(cp), Some(best)) = (cp, best) {
            out.push(format!(
                "{section}: {} {:.3}s vs cp -r {:.3}s ({:.2}x cp's time).",
                best.config,
                best.median_secs,
                cp.median_secs,
                best.median_secs / cp.median_secs.max(1e-9)
            ));
        }
    }
    out
}
