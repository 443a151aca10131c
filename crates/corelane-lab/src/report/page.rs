//! One self-contained HTML page from saved runs: per experiment its charts (inline SVG; the
//! same figure of several runs side by side), its table, its findings and what was skipped,
//! then each run's machine, kernel, dates, corelane version and exact command. No script,
//! font or stylesheet is fetched, and the page's Content-Security-Policy forbids it; every
//! text from a run is escaped.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::chart::{self, run_tag, ChartError};
use super::figure::Figure;
use super::run::Run;

/// The runs of one experiment, in the order given, and its figures matched by id.
#[derive(Debug)]
pub struct Experiment<'a> {
    pub name: &'a str,
    pub runs: Vec<&'a Run>,
    pub figures: Vec<FigureSet<'a>>,
}

/// One figure (by id) in every run that has it: `(run index, figure)`.
#[derive(Debug)]
pub struct FigureSet<'a> {
    pub id: &'a str,
    pub members: Vec<(usize, &'a Figure)>,
}

impl FigureSet<'_> {
    /// Bars of several runs are one chart; any other kind is one chart per run.
    fn charts(&self) -> Vec<Vec<(usize, &Figure)>> {
        match self.members.first() {
            Some((_, Figure::Bars(_))) => vec![self.members.clone()],
            _ => self.members.iter().map(|m| vec![*m]).collect(),
        }
    }
}

/// Groups `runs` by experiment (in order of first appearance), matching figures by id.
pub fn experiments(runs: &[Run]) -> Vec<Experiment<'_>> {
    let mut out: Vec<Experiment<'_>> = Vec::new();
    for run in runs {
        let name = run.info.experiment.as_str();
        match out.iter_mut().find(|e| e.name == name) {
            Some(e) => e.runs.push(run),
            None => out.push(Experiment { name, runs: vec![run], figures: Vec::new() }),
        }
    }
    for e in &mut out {
        for (r, run) in e.runs.iter().enumerate() {
            for figure in &run.info.figures {
                let same_kind = |s: &FigureSet<'_>| {
                    s.id == figure.id()
                        && s.members.first().is_some_and(|m| {
                            std::mem::discriminant(m.1) == std::mem::discriminant(figure)
                        })
                };
                match e.figures.iter_mut().find(|s| same_kind(s)) {
                    Some(set) if !set.members.iter().any(|m| m.0 == r) => {
                        set.members.push((r, figure))
                    }
                    Some(_) => {}
                    None => {
                        e.figures.push(FigureSet { id: figure.id(), members: vec![(r, figure)] })
                    }
                }
            }
        }
    }
    out
}

/// Escapes text for HTML content and attribute values, control characters (but newlines and
/// tabs) becoming spaces (five characters; a crate for this would be a dependency for one
/// loop).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:'DejaVu Sans',sans-serif;margin:2em auto;max-width:1000px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{border-bottom:2px solid #3465a4;padding-bottom:.2em;margin-top:2em}
figure{margin:1.2em 0}figure svg{max-width:100%;height:auto;border:1px solid #ddd}
figcaption{font-size:.85em;color:#555}.row{display:flex;flex-wrap:wrap;gap:1em}
.row figure{flex:1 1 460px}.scroll{overflow-x:auto}
table{border-collapse:collapse;font-size:.8em;margin:.6em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}
th{background:#eef2f7}code{font-size:.9em;word-break:break-all}.skipped{color:#8f5902}";

/// The page for `runs` (each a file, named by `Run::source`).
pub fn render(runs: &[Run]) -> Result<String, ChartError> {
    let experiments = experiments(runs);
    let names: Vec<&str> = experiments.iter().map(|e| e.name).collect();
    let mut page = String::new();
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n\
         <title>corelane lab: {}</title>\n<style>{STYLE}</style></head>\n<body>\n<h1>corelane lab: {}</h1>\n\
         <p>Drawn by corelane {} from {} run(s). Bars are medians over trials, whiskers the trials' min–max; \
         peers (other tools measured in the same run) in orange.</p>\n",
        escape(&names.join(", ")),
        escape(&names.join(", ")),
        env!("CARGO_PKG_VERSION"),
        runs.len()
    );
    for e in &experiments {
        section(&mut page, e)?;
    }
    page.push_str("</body></html>\n");
    Ok(page)
}

/// One experiment: charts, tables, findings, skipped, runs.
fn section(page: &mut String, e: &Experiment<'_>) -> Result<(), ChartError> {
    let study = crate::EXPERIMENTS.iter().find(|x| x.name == e.name).map_or("", |x| x.study);
    let _ = write!(
        page,
        "<section class=\"experiment\" data-experiment=\"{0}\">\n<h2>{0}{1}</h2>\n",
        escape(e.name),
        if study.is_empty() { String::new() } else { format!(" — {}", escape(study)) }
    );
    if e.runs.len() > 1 {
        let _ = writeln!(
            page,
            "<p>{} runs compared; bars of B, C, … show their ratio to A.</p>",
            e.runs.len()
        );
    }
    for set in &e.figures {
        page.push_str("<div class=\"row\">\n");
        for chart in set.charts() {
            let named: Vec<(&str, &Figure)> =
                chart.iter().map(|(r, f)| (e.runs[*r].source.as_str(), *f)).collect();
            let tags: Vec<String> = chart.iter().map(|(r, _)| run_tag(*r)).collect();
            let svg = chart::svg(&named)?;
            let _ = write!(
                page,
                "<figure class=\"chart\" data-figure=\"{}\" data-runs=\"{}\">\n{}\n<figcaption>{}{}</figcaption></figure>\n",
                escape(set.id),
                tags.join(" "),
                svg.trim_start_matches(|c| c != '<').trim_start_matches("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"),
                escape(named[0].1.title()),
                if e.runs.len() > 1 { format!(" — {}", tags.join(", ")) } else { String::new() }
            );
        }
        page.push_str("</div>\n");
    }
    for (r, run) in e.runs.iter().enumerate() {
        results(page, r, run, e.runs.len() > 1);
    }
    runs_table(page, &e.runs);
    page.push_str("</section>\n");
    Ok(())
}

/// A run's table, findings and skipped rows.
fn results(page: &mut String, index: usize, run: &Run, tagged: bool) {
    let tag = run_tag(index);
    let whose = if tagged { format!(" — {tag}: {}", escape(&run.source)) } else { String::new() };
    let info = &run.info;
    let _ = write!(page, "<h3>Table{whose}</h3>\n<div class=\"scroll\"><table class=\"results\" data-run=\"{tag}\"><thead><tr>");
    for c in &info.table.columns {
        let _ = write!(page, "<th>{}</th>", escape(c));
    }
    page.push_str("</tr></thead><tbody>\n");
    for row in &info.table.rows {
        page.push_str("<tr>");
        for cell in row {
            let _ = write!(page, "<td>{}</td>", escape(cell));
        }
        page.push_str("</tr>\n");
    }
    page.push_str("</tbody></table></div>\n");
    if !info.findings.is_empty() {
        let _ = write!(page, "<h3>Findings{whose}</h3>\n<ul class=\"findings\">\n");
        for f in &info.findings {
            let _ = writeln!(page, "<li>{}</li>", escape(f));
        }
        page.push_str("</ul>\n");
    }
    if !info.skipped.is_empty() {
        let _ = write!(page, "<h3>Skipped{whose}</h3>\n<ul class=\"skipped\">\n");
        for s in &info.skipped {
            let _ = writeln!(page, "<li>{}</li>", escape(s));
        }
        page.push_str("</ul>\n");
    }
}

/// Where, when and how each run was made.
fn runs_table(page: &mut String, runs: &[&Run]) {
    page.push_str("<h3>Runs</h3>\n<table class=\"runs\"><thead><tr><th>run</th><th>file</th><th>machine</th><th>kernel</th><th>host</th><th>started</th><th>finished</th><th>corelane</th><th>command</th></tr></thead><tbody>\n");
    for (r, run) in runs.iter().enumerate() {
        let i = &run.info;
        let _ = writeln!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            run_tag(r),
            escape(&run.source),
            escape(&i.machine),
            escape(&i.kernel),
            escape(&i.hostname),
            escape(&i.started),
            escape(&i.finished),
            escape(&i.corelane_version),
            escape(&shell_words::join(&i.command))
        );
    }
    page.push_str("</tbody></table>\n");
}

/// Writes every chart of the page as a PNG in `dir` (`EXPERIMENT-FIGURE.png`, with the run's
/// letter when several runs have their own chart), returning the files written.
pub fn write_pngs(runs: &[Run], dir: &Path) -> Result<Vec<PathBuf>, ChartError> {
    let mut written = Vec::new();
    for e in experiments(runs) {
        for set in &e.figures {
            let charts = set.charts();
            for chart in &charts {
                let named: Vec<(&str, &Figure)> =
                    chart.iter().map(|(r, f)| (e.runs[*r].source.as_str(), *f)).collect();
                let mut name = format!("{}-{}", slug(e.name), slug(set.id));
                if charts.len() > 1 {
                    name.push('-');
                    name.push_str(&run_tag(chart[0].0));
                }
                let path = dir.join(format!("{name}.png"));
                chart::png(&named, &path)?;
                written.push(path);
            }
        }
    }
    Ok(written)
}

/// A file-name-safe form of an id: lowercase letters, digits and dashes.
fn slug(id: &str) -> String {
    let s: String = id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .take(60)
        .collect();
    if s.is_empty() {
        "figure".into()
    } else {
        s
    }
}
