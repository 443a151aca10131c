//! `lab copy`'s tables and CSV.

use comfy_table::Cell;

use super::{CopyLabReport, CopyRow};
use crate::experiment::Report;
use crate::report;

/// Seed 002's table: one line per configuration.
const COLUMNS: [report::Column<CopyRow>; 8] = [
    ("section", |r| Cell::new(&r.section)),
    ("configuration", |r| Cell::new(&r.config)),
    ("ran", |r| Cell::new(&r.ran)),
    ("seconds", |r| report::right(format!("{:.3}", r.secs.median))),
    ("% of 1K", |r| report::right(r.pct_of_baseline.map_or(String::new(), |p| format!("{p:.1}%")))),
    ("GB/s", |r| report::right(format!("{:.2}", r.gb_per_sec))),
    ("of memcpy", |r| report::right(format!("{:.0}%", r.fraction_of_memcpy * 100.0))),
    ("calls/GiB", |r| {
        report::right(r.syscalls_per_gib.map_or(String::new(), |c| format!("{c:.0}")))
    }),
];

/// The CSV: one record per configuration.
const CSV_COLUMNS: [report::CsvColumn<CopyRow>; 9] = [
    ("section", |r| r.section.clone()),
    ("config", |r| r.config.clone()),
    ("ran", |r| r.ran.clone()),
    ("median_secs", |r| format!("{:.4}", r.secs.median)),
    ("pct_of_baseline", |r| r.pct_of_baseline.map_or(String::new(), |p| format!("{p:.2}"))),
    ("gb_per_sec", |r| format!("{:.3}", r.gb_per_sec)),
    ("fraction_of_memcpy", |r| format!("{:.3}", r.fraction_of_memcpy)),
    ("syscalls_per_gib", |r| r.syscalls_per_gib.map_or(String::new(), |c| format!("{c:.0}"))),
    ("trials_secs", |r| r.secs.joined(4)),
];

impl Report for CopyLabReport {
    /// Seed 002's tables, the modern methods, the trees and the findings, as text.
    fn body(&self, out: &mut String) {
        out.push_str(&format!("scratch: {}\nhuge pages: {}\n", self.scratch, self.huge_scratch));
        out.push_str(&format!(
            "file: {} MiB; {} trial(s) per row, medians; memcpy of the same bytes: {:.2} GB/s\n\n",
            self.size_bytes >> 20,
            self.trials,
            self.memcpy_gb_per_sec
        ));
        out.push_str(&report::table_of(&COLUMNS, &self.rows).to_string());
        out.push('\n');
        for row in self.rows.iter().filter(|row| row.note.is_some()) {
            out.push_str(&format!(
                "note ({}): {}\n",
                row.config,
                row.note.as_deref().unwrap_or("")
            ));
        }
    }

    fn figures(&self) -> Vec<crate::report::figure::Figure> {
        super::figures::figures(self)
    }

    fn csv_table(&self) -> report::Csv {
        report::Csv::of(&CSV_COLUMNS, &self.rows)
    }

    fn outline(&self) -> report::Outline<'_> {
        report::Outline::of("copy — large-file duplication", &self.machine, &self.findings)
    }
}
