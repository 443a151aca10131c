//! `corelane report RUN.json... -o report.html`: saved lab runs as one self-contained HTML
//! page of charts (and, with `--png DIR`, each chart as a PNG). Also what `corelane lab …
//! --report FILE --png DIR` writes at the end of a run.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use corelane_lab::report::{page, run};

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Runs written by `corelane lab NAME --json FILE` (several runs of one experiment are
    /// compared side by side, with ratios against the first).
    #[arg(required = true, value_name = "RUN.json")]
    runs: Vec<PathBuf>,
    /// The HTML page to write.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Also write each chart as a PNG into this directory.
    #[arg(long, value_name = "DIR")]
    png: Option<PathBuf>,
}

pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    check_outputs(&args.output, args.png.as_deref())?;
    let runs = args.runs.iter().map(|p| run::load(p)).collect::<Result<Vec<_>, _>>()?;
    write(&runs, &args.output, args.png.as_deref())?;
    Ok(ExitCode::SUCCESS)
}

/// Checks before any work that the page's directory and the PNG directory exist.
pub fn check_outputs(page: &Path, png: Option<&Path>) -> anyhow::Result<()> {
    corelane_lab::report::check_writable(page)?;
    if let Some(dir) = png {
        anyhow::ensure!(
            dir.is_dir(),
            "--png {}: no such directory (create it or choose another)",
            dir.display()
        );
    }
    Ok(())
}

/// Draws the page (and the PNGs) of `runs`; the page is written whole or not at all.
pub fn write(runs: &[run::Run], output: &Path, png: Option<&Path>) -> anyhow::Result<()> {
    write_page(&page::render(runs)?, output)?;
    if let Some(dir) = png {
        write_pngs(runs, dir)?;
    }
    Ok(())
}

pub fn write_page(html: &str, output: &Path) -> anyhow::Result<()> {
    corelane::fs::write_atomic(output, html.as_bytes())
        .with_context(|| format!("cannot write {}", output.display()))?;
    eprintln!("wrote {}", output.display());
    Ok(())
}

pub fn write_pngs(runs: &[run::Run], dir: &Path) -> anyhow::Result<()> {
    let written = page::write_pngs(runs, dir)?;
    eprintln!("wrote {} charts as PNG in {}", written.len(), dir.display());
    Ok(())
}
