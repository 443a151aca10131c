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

use crate::testbed::TestbedReport;
use crate::LabError;

/// What every experiment's report has around its tables (written once, here): the heading —
/// which experiment ran on which machine and testbed — what could not run, and the findings.
#[derive(Debug, Clone, Copy)]
pub struct Outline<'a> {
    /// What follows `corelane lab` in the heading: the experiment and its seed.
    pub title: &'a str,
    pub machine: &'a str,
    /// The testbed, for experiments that run on one.
    pub testbed: Option<&'a TestbedReport>,
    /// What could not run here, each with why.
    pub skipped: &'a [String],
    /// Sentences computed from the figures.
    pub findings: &'a [String],
}

impl<'a> Outline<'a> {
    /// The outline of a report titled `title` (what follows `corelane lab`: the experiment
    /// and its seed), measured on `machine`, with no testbed and nothing skipped.
    pub fn of(title: &'a str, machine: &'a str, findings: &'a [String]) -> Self {
        Self { title, machine, testbed: None, skipped: &[], findings }
    }

    /// Run on `testbed`.
    pub fn on(self, testbed: &'a TestbedReport) -> Self {
        Self { testbed: Some(testbed), ..self }
    }

    /// With `skipped`: what could not run here, each with why.
    pub fn skipping(self, skipped: &'a [String]) -> Self {
        Self { skipped, ..self }
    }

    /// The heading's lines: `corelane lab TITLE on MACHINE`, then the testbed's.
    pub fn heading(&self) -> String {
        let mut out = format!("corelane lab {} on {}\n", self.title, self.machine);
        if let Some(testbed) = self.testbed {
            out.push_str(&testbed.lines());
        }
        out
    }

    /// Whether the run only showed what it would change (nothing measured, no tables).
    pub fn is_dry_run(&self) -> bool {
        self.testbed.is_some_and(TestbedReport::is_dry_run)
    }
}

/// A table in the lab's style.
pub(crate) fn table() -> Table {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table
}

/// One CSV column of `R` rows: its name, and its value for a row.
pub(crate) type CsvColumn<R> = (&'static str, fn(&R) -> String);

/// An experiment's CSV: the column names, and one record per row, each as long.
#[derive(Debug, Clone, PartialEq)]
pub struct Csv {
    pub header: Vec<&'static str>,
    pub records: Vec<Vec<String>>,
}

impl Csv {
    /// One record per row, a value per column: each name sits beside its value.
    pub(crate) fn of<'r, R: 'r>(
        columns: &[CsvColumn<R>],
        rows: impl IntoIterator<Item = &'r R>,
    ) -> Self {
        Self {
            header: columns.iter().map(|(name, _)| *name).collect(),
            records: rows
                .into_iter()
                .map(|row| columns.iter().map(|(_, value)| value(row)).collect())
                .collect(),
        }
    }

    /// These records under `header` (comma separated): for a CSV whose records are of
    /// several kinds, each filling the columns it has.
    pub(crate) fn with_header(header: &'static str, records: Vec<Vec<String>>) -> Self {
        Self { header: header.split(',').collect(), records }
    }

    /// The CSV file: the header, then every record.
    pub fn to_bytes(&self) -> Result<Vec<u8>, LabError> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(&self.header)?;
        for record in &self.records {
            w.write_record(record)?;
        }
        w.into_inner().map_err(|e| LabError::Csv(e.into_error().into()))
    }
}

/// One column of a table of `R` rows: its heading, and its cell for a row.
pub(crate) type Column<R> = (&'static str, fn(&R) -> Cell);

/// A table in the lab's style with these columns, one line per row: each heading sits
/// beside the cell it heads, so the two cannot drift apart.
pub(crate) fn table_of<'r, R: 'r>(
    columns: &[Column<R>],
    rows: impl IntoIterator<Item = &'r R>,
) -> Table {
    let mut table = table();
    table.set_header(columns.iter().map(|(heading, _)| *heading));
    for row in rows {
        table.add_row(columns.iter().map(|(_, cell)| cell(row)));
    }
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

    /// The heading is the one place a report's first lines are written; a dry run's text
    /// stops under it.
    #[test]
    fn the_heading_names_the_run_and_a_dry_run_stops_there() {
        let findings = vec!["a finding".to_string()];
        let bare = Outline::of("x — a study", "2 CPUs", &findings);
        assert_eq!(bare.heading(), "corelane lab x — a study on 2 CPUs\n");
        assert!(!bare.is_dry_run());
        let mut testbed = TestbedReport { network: "veth".into(), ..Default::default() };
        assert_eq!(bare.on(&testbed).heading(), format!("{}testbed: veth\n", bare.heading()));
        testbed.dry_run = Some(Vec::new());
        let dry = bare.on(&testbed);
        assert!(dry.is_dry_run() && dry.heading().contains("dry run"), "{}", dry.heading());
    }

    #[test]
    fn a_missing_directory_is_named() {
        let err =
            check_writable(Path::new("/nonexistent-corelane/out.csv")).unwrap_err().to_string();
        assert!(err.contains("/nonexistent-corelane does not exist"), "{err}");
    }
}
