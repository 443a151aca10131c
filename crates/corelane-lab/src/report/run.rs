//! A saved lab run: the `corelane_run` section every `corelane lab … --json FILE` writes
//! beside the experiment's own fields (what ran, where, when, by which command and corelane,
//! its table, findings and figures), and reading it back — a file that is not a corelane
//! run, is of a format version this corelane cannot read, or is out of bounds is refused
//! with one line naming the file and the fix.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::figure::Figure;

/// What `format` says in every run's `corelane_run` section.
pub const FORMAT: &str = "corelane-lab-run";
/// The version of the `corelane_run` section this corelane writes and reads.
pub const VERSION: u32 = 1;

/// The largest run file read (the lab's largest, sched's, is about 100 KB).
pub const MAX_FILE_BYTES: u64 = 16 << 20;
/// Bounds on what one run may ask the page to draw.
const MAX_FIGURES: usize = 100;
const MAX_ITEMS: usize = 5_000;
const MAX_TABLE_CELLS: usize = 200_000;
/// Labels longer than this are cut (with an ellipsis) before they reach a chart or the page.
const MAX_LABEL_CHARS: usize = 160;

/// A run's identity and what its report shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub format: String,
    pub version: u32,
    /// The experiment's name (`udp`, `tcp`, …) and seed.
    pub experiment: String,
    pub seed: String,
    pub corelane_version: String,
    /// When the run started and ended (HTTP date format, UTC).
    pub started: String,
    pub finished: String,
    /// The command line that ran it, word by word.
    pub command: Vec<String>,
    pub hostname: String,
    /// CPUs and model.
    pub machine: String,
    pub kernel: String,
    pub table: Table,
    pub findings: Vec<String>,
    pub skipped: Vec<String>,
    pub figures: Vec<Figure>,
}

/// The experiment's CSV, as the page's table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// The file a run's JSON is: the identity section first, then the experiment's own fields.
#[derive(Debug, Serialize)]
pub struct Envelope<'a, R: Serialize> {
    pub corelane_run: &'a RunInfo,
    #[serde(flatten)]
    pub report: &'a R,
}

/// Where and how this process runs, for a run's identity.
#[derive(Debug, Clone)]
pub struct Host {
    pub command: Vec<String>,
    pub hostname: String,
    pub machine: String,
    pub kernel: String,
}

impl Host {
    /// This process's command line and this machine.
    pub fn here() -> Self {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default().trim().to_string();
        Self {
            command: std::env::args().collect(),
            hostname: read("/proc/sys/kernel/hostname"),
            machine: crate::machine(),
            kernel: read("/proc/sys/kernel/osrelease"),
        }
    }
}

/// A time as the page shows it: an HTTP date, always UTC.
pub fn date(at: std::time::SystemTime) -> String {
    httpdate::fmt_http_date(at)
}

/// A run read back from a file, named for the page.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The file it came from (or what wrote it).
    pub source: String,
    pub info: RunInfo,
}

/// Why a file cannot be drawn, in one line naming it and the fix.
#[derive(Debug, thiserror::Error)]
#[error("{source_name}: {problem}")]
pub struct RunError {
    pub source_name: String,
    pub problem: String,
}

impl RunError {
    fn new(source_name: &str, problem: impl Into<String>) -> Self {
        Self { source_name: source_name.to_string(), problem: problem.into() }
    }
}

const HOW: &str = "write one with `corelane lab NAME --json FILE`";

/// Reads a run from `path` (at most [`MAX_FILE_BYTES`]).
pub fn load(path: &Path) -> Result<Run, RunError> {
    use corelane::fs::ReadCappedError;
    let name = path.display().to_string();
    let bytes = corelane::fs::read_capped(path, MAX_FILE_BYTES).map_err(|e| match e {
        ReadCappedError::Io(e) => RunError::new(&name, e.to_string()),
        ReadCappedError::NotRegular => RunError::new(
            &name,
            format!("not a regular file or pipe, so not a corelane run; {HOW}"),
        ),
        e @ ReadCappedError::Silent(_) => RunError::new(&name, e.to_string()),
        ReadCappedError::TooLarge(_) => RunError::new(
            &name,
            format!("larger than {} MiB, so not a corelane run; {HOW}", MAX_FILE_BYTES >> 20),
        ),
    })?;
    parse(&name, &bytes)
}

/// Reads a run from the bytes of its JSON; `source` names it in errors and on the page.
pub fn parse(source: &str, bytes: &[u8]) -> Result<Run, RunError> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        RunError::new(source, format!("not JSON ({e}), so not a corelane run; {HOW}"))
    })?;
    let Some(section) = value.get("corelane_run") else {
        // The lab's JSON before it carried the section: its experiment fields alone.
        let older = ["machine", "findings", "rows"].iter().all(|k| value.get(k).is_some());
        let problem = if older {
            "a corelane lab run from before runs carried a `corelane_run` section, which this corelane draws from: run the experiment again".to_string()
        } else {
            format!("not a corelane run (no `corelane_run` section); {HOW}")
        };
        return Err(RunError::new(source, problem));
    };
    let format = section.get("format").and_then(|f| f.as_str());
    if format != Some(FORMAT) {
        return Err(RunError::new(
            source,
            format!("not a corelane run (its `corelane_run.format` is not \"{FORMAT}\"); {HOW}"),
        ));
    }
    let version = section.get("version").and_then(|v| v.as_u64());
    if version != Some(u64::from(VERSION)) {
        let wrote = section.get("corelane_version").and_then(|v| v.as_str()).unwrap_or("unknown");
        let shown = version.map_or("no number".to_string(), |v| v.to_string());
        return Err(RunError::new(
            source,
            format!(
                "a corelane run of format version {shown} (written by corelane {}); this corelane {} reads version {VERSION}: draw it with the corelane that wrote it, or run the experiment again",
                printable(wrote, 40),
                env!("CARGO_PKG_VERSION")
            ),
        ));
    }
    let info: RunInfo = serde_json::from_value(section.clone()).map_err(|e| {
        RunError::new(source, format!("its `corelane_run` section cannot be read ({e}); {HOW}"))
    })?;
    check(source, &info)?;
    Ok(Run { source: printable(source, MAX_LABEL_CHARS), info: clean(info) })
}

/// Refuses a run that asks for more than a page can hold, naming what is too large.
fn check(source: &str, info: &RunInfo) -> Result<(), RunError> {
    if info.figures.len() > MAX_FIGURES {
        return Err(RunError::new(
            source,
            format!("{} figures (at most {MAX_FIGURES}); {HOW}", info.figures.len()),
        ));
    }
    for figure in &info.figures {
        let items = match figure {
            Figure::Bars(f) => f.bars.len() + f.bars.iter().map(|b| b.trials.len()).sum::<usize>(),
            Figure::Stacked(f) => f.bars.len() * f.parts.len().max(1),
            Figure::Lines(f) => f.series.iter().map(|s| s.points.len() + 1).sum(),
            Figure::Scatter(f) => f.points.len(),
        };
        if items > MAX_ITEMS {
            return Err(RunError::new(
                source,
                format!(
                    "figure `{}` has {items} values (at most {MAX_ITEMS}); {HOW}",
                    printable(figure.id(), 40)
                ),
            ));
        }
        if let Figure::Stacked(f) = figure {
            if let Some(bar) = f.bars.iter().find(|b| b.values.len() != f.parts.len()) {
                return Err(RunError::new(
                    source,
                    format!(
                        "figure `{}`: bar `{}` has {} values for {} parts",
                        printable(&f.id, 40),
                        printable(&bar.label, 40),
                        bar.values.len(),
                        f.parts.len()
                    ),
                ));
            }
        }
    }
    let cells = info.table.rows.iter().map(Vec::len).sum::<usize>() + info.table.columns.len();
    if cells > MAX_TABLE_CELLS {
        return Err(RunError::new(
            source,
            format!("a table of {cells} cells (at most {MAX_TABLE_CELLS}); {HOW}"),
        ));
    }
    Ok(())
}

/// `text` without control characters, cut to `max` characters.
pub fn printable(text: &str, max: usize) -> String {
    let mut out: String =
        text.chars().map(|c| if c.is_control() { ' ' } else { c }).take(max).collect();
    if text.chars().count() > max {
        out.pop();
        out.push('…');
    }
    out
}

/// Every label a chart draws made printable and of bounded length (the page escapes them
/// too; this keeps a hostile label from taking over a chart's layout).
fn clean(mut info: RunInfo) -> RunInfo {
    let fix = |s: &mut String| *s = printable(s, MAX_LABEL_CHARS);
    for figure in &mut info.figures {
        match figure {
            Figure::Bars(f) => {
                [&mut f.id, &mut f.title, &mut f.unit].into_iter().for_each(fix);
                f.bars.iter_mut().for_each(|b| fix(&mut b.label));
                if let Some(c) = &mut f.ceiling {
                    fix(&mut c.label);
                }
            }
            Figure::Stacked(f) => {
                [&mut f.id, &mut f.title, &mut f.unit].into_iter().for_each(fix);
                f.parts.iter_mut().for_each(fix);
                f.bars.iter_mut().for_each(|b| fix(&mut b.label));
            }
            Figure::Lines(f) => {
                [&mut f.id, &mut f.title, &mut f.x_label, &mut f.y_label].into_iter().for_each(fix);
                f.series.iter_mut().for_each(|s| fix(&mut s.name));
            }
            Figure::Scatter(f) => {
                [&mut f.id, &mut f.title, &mut f.x_label, &mut f.y_label].into_iter().for_each(fix);
                f.points.iter_mut().for_each(|p| {
                    fix(&mut p.group);
                    fix(&mut p.label);
                });
            }
        }
    }
    info
}
