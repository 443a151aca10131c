//! Reports. Here: what every experiment's tables share (number formats, right-aligned cells,
//! the findings list, and the check that a report file can be written before a long run
//! starts); each experiment renders its own tables and CSV (its `table` part, beside its
//! rows). Below, the page `corelane report` draws from saved runs: `figure` (what a chart
//! shows, as data each experiment returns), `run` (a run's identity section, read back and
//! checked), `chart` (figures drawn with plotters, as SVG or PNG) and `page` (one
//! self-contained HTML file).

pub mod chart;
pub mod figure;
pub mod page;
pub mod run;

use std::path::Path;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};

use crate::LabError;

/// A table in the lab's style.
pub(crate) fn table() -> Table {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table
}

pub(crate) fn mpps(pps: f64) -> String {
    format!("{:.3}M", pps / 1e6)
}

/// Appends a report's findings, one bullet each, under a heading.
pub(crate) fn push_findings(out: &mut String, findings: &[String]) {
    if !findings.is_empty() {
        out.push_str("\nfindings:\n");
        for f in findings {
            out.push_str(&format!("- {f}\n"));
        }
    }
}

pub(crate) fn right(text: String) -> Cell {
    Cell::new(text).set_alignment(CellAlignment::Right)
}

/// Checks up front that a report can be written to `path` (its directory exists).
pub fn check_writable(path: &Path) -> Result<(), LabError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(LabError::Report {
            path: path.to_owned(),
            problem: format!(
                "directory {} does not exist (create it or choose another path)",
                dir.display()
            ),
        });
    }
    Ok(())
}

pub(crate) fn pct(value: Option<f64>) -> String {
    value.map_or("—".to_string(), |g| format!("{g:+.1}%"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_directory_is_named() {
        let err =
            check_writable(Path::new("/nonexistent-corelane/out.csv")).unwrap_err().to_string();
        assert!(err.contains("/nonexistent-corelane does not exist"), "{err}");
    }
}
