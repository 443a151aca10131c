//! Figures drawn with plotters: as inline SVG for the page, as PNG for READMEs and issues.
//! One drawing function per figure kind, generic over the backend, so the SVG and the PNG of
//! a chart are the same drawing. Bars of several runs are drawn side by side, each labelled
//! with its ratio against the first run.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::figure::{Bars, Figure, Lines, Mark, Role, Scale, Scatter, Stacked};

/// Where the font that lays out and draws every chart comes from (Debian's
/// `fonts-dejavu-core`, which `.ci/run` installs).
pub const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
const FONT: &str = "sans-serif";
const WIDTH: u32 = 960;

/// A chart that could not be drawn, in one line.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct ChartError(pub String);

fn failed<E: std::fmt::Debug>(e: E) -> ChartError {
    ChartError(format!("cannot draw a chart: {e:?}"))
}

/// Loads the font once (plotters' ab_glyph wants it for the life of the process).
pub fn load_font() -> Result<(), ChartError> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let bytes = std::fs::read(FONT_PATH).map_err(|e| {
                format!("charts need the DejaVu Sans font at {FONT_PATH} ({e}): apt-get install fonts-dejavu-core")
            })?;
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font(FONT, FontStyle::Normal, bytes)
                .map_err(|_| format!("{FONT_PATH} is not a font the charts can use: reinstall fonts-dejavu-core"))
        })
        .clone()
        .map_err(ChartError)
}

/// One figure, or the same figure of several runs (`(run name, figure)`, the first the
/// reference), as an SVG document.
pub fn svg(runs: &[(&str, &Figure)]) -> Result<String, ChartError> {
    load_font()?;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size(runs)).into_drawing_area();
        draw(&root, runs)?;
        root.present().map_err(failed)?;
    }
    Ok(out)
}

/// The same drawing as [`svg`], written to `path` as a PNG: drawn into memory, encoded, then
/// written whole through [`corelane::fs::write_atomic`] (plotters' own file backend would
/// create the file by name and follow a symlink planted at it).
pub fn png(runs: &[(&str, &Figure)], path: &Path) -> Result<(), ChartError> {
    let bytes = png_bytes(runs)?;
    corelane::fs::write_atomic(path, &bytes)
        .map_err(|e| ChartError(format!("cannot write {}: {e}", path.display())))
}

/// The PNG file of [`png()`], in memory.
pub fn png_bytes(runs: &[(&str, &Figure)]) -> Result<Vec<u8>, ChartError> {
    load_font()?;
    let (width, height) = size(runs);
    let mut rgb = vec![0u8; width as usize * height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (width, height)).into_drawing_area();
        draw(&root, runs)?;
        root.present().map_err(failed)?;
    }
    let mut out = Vec::new();
    let mut encoder = ::png::Encoder::new(&mut out, width, height);
    encoder.set_color(::png::ColorType::Rgb);
    encoder.set_depth(::png::BitDepth::Eight);
    let encoded = encoder.write_header().and_then(|mut w| w.write_image_data(&rgb));
    encoded.map_err(|e| ChartError(format!("cannot encode a chart as PNG: {e}")))?;
    Ok(out)
}

/// Pixels of a chart: bars and stacked bars grow with their rows.
fn size(runs: &[(&str, &Figure)]) -> (u32, u32) {
    let rows = |n: usize, per: usize| (90 + n * (per * 16 + 8)).clamp(160, 4000) as u32;
    let first = runs.first().map(|r| r.1);
    let height = match first {
        Some(Figure::Bars(_)) => rows(bar_labels(runs).len(), runs.len()),
        Some(Figure::Stacked(f)) => rows(f.bars.len(), 1) + 20,
        _ => 420,
    };
    (WIDTH, height)
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    runs: &[(&str, &Figure)],
) -> Result<(), ChartError> {
    root.fill(&WHITE).map_err(failed)?;
    match runs.first().map(|r| r.1) {
        Some(Figure::Bars(_)) => bars(root, runs),
        Some(Figure::Stacked(f)) => stacked(root, f),
        Some(Figure::Lines(f)) => lines(root, f),
        Some(Figure::Scatter(f)) => scatter(root, f),
        None => Ok(()),
    }
}

/// The colour of a role; further runs get lighter shades of it.
fn colour(role: Role, run: usize) -> RGBColor {
    let base = match role {
        Role::Default => colours::GREY,
        Role::Config => colours::BLUE,
        Role::Peer => colours::ORANGE,
    };
    let mix = [0.0, 0.45, 0.7, 0.82][run.min(3)];
    let lift = |c: u8| (f64::from(c) + (255.0 - f64::from(c)) * mix) as u8;
    RGBColor(lift(base.0), lift(base.1), lift(base.2))
}

/// The charts' colours, each named once (apart from plotters' own).
mod colours {
    use plotters::style::RGBColor;

    pub const BLUE: RGBColor = RGBColor(52, 101, 164);
    pub const ORANGE: RGBColor = RGBColor(230, 112, 0);
    pub const GREEN: RGBColor = RGBColor(78, 154, 6);
    pub const PLUM: RGBColor = RGBColor(117, 80, 123);
    pub const RED: RGBColor = RGBColor(204, 0, 0);
    pub const TEAL: RGBColor = RGBColor(17, 160, 160);
    pub const BROWN: RGBColor = RGBColor(143, 89, 2);
    pub const GREY: RGBColor = RGBColor(85, 87, 83);
    pub const PINK: RGBColor = RGBColor(200, 80, 160);
    pub const OLIVE: RGBColor = RGBColor(128, 128, 0);
    pub const NAVY: RGBColor = RGBColor(30, 30, 120);
    pub const MUSTARD: RGBColor = RGBColor(196, 160, 0);
    pub const RUST: RGBColor = RGBColor(204, 60, 0);
    pub const SAND: RGBColor = RGBColor(233, 185, 110);
}

const PALETTE: [RGBColor; 8] = [
    colours::BLUE,
    colours::ORANGE,
    colours::GREEN,
    colours::PLUM,
    colours::RED,
    colours::TEAL,
    colours::BROWN,
    colours::GREY,
];

fn text(size: u32) -> TextStyle<'static> {
    (FONT, size).into_font().color(&BLACK)
}

/// A value for an axis or a label: 1.35M, 12.3k, 558, 0.057.
pub fn si(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        "—".to_string()
    } else if a >= 1e12 {
        format!("{v:.2e}")
    } else if a >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Values a chart can place: finite and within ±1e100 (so spans and ratios stay finite).
fn placeable(v: f64) -> Option<f64> {
    (v.is_finite() && v.abs() <= 1e100).then_some(v)
}

/// An axis range over `values` with room around it, never empty; `zero` includes 0.
fn span(values: impl IntoIterator<Item = f64>, zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.into_iter().filter_map(placeable) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return (0.0, 1.0);
    }
    if zero {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    let pad = if hi > lo { (hi - lo) * 0.05 } else { lo.abs().max(1.0) * 0.5 };
    (if zero && lo == 0.0 { 0.0 } else { lo - pad }, hi + pad)
}

/// A value axis with the ticks we choose (plotters' own f64 axis leaves their labels to a
/// formatter but must pick their places itself).
struct Ticked {
    inner: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ticked {
    fn new(lo: f64, hi: f64, ticks: Vec<f64>) -> Self {
        Self { inner: (lo..hi).into(), ticks }
    }
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
}

/// About `n` round tick positions over `lo..hi`.
fn ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    RangedCoordf64::from(lo..hi).key_points(n)
}

/// The chart every figure kind draws in: its title above, room for the legend on the right,
/// `y_labels` pixels for the y axis' labels, the axes over `x` and `y`.
fn frame<'a, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    title: &str,
    y_labels: u32,
    x: Ticked,
    y: Ticked,
) -> Result<ChartContext<'a, DB, Cartesian2d<Ticked, Ticked>>, ChartError> {
    ChartBuilder::on(root)
        .caption(title, text(17))
        .margin(10)
        .margin_right(170)
        .x_label_area_size(42)
        .y_label_area_size(y_labels)
        .build_cartesian_2d(x, y)
        .map_err(failed)
}

/// A label and how its axis' values read.
type AxisText<'a> = (&'a str, &'a dyn Fn(&f64) -> String);

/// The grid and the axes' labels: `x` below; `y` at the left, or no y grid for horizontal
/// bars (their labels are drawn beside each bar).
fn axes<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<Ticked, Ticked>>,
    x: AxisText<'_>,
    y: Option<AxisText<'_>>,
) -> Result<(), ChartError> {
    let mut mesh = chart.configure_mesh();
    mesh.x_label_formatter(x.1).x_desc(x.0).label_style(text(12));
    match y {
        Some((desc, read)) => mesh.y_label_formatter(read).y_desc(desc),
        None => mesh.disable_y_mesh(),
    };
    mesh.draw().map_err(failed)
}

/// The labels of a bar chart over all runs: the first run's order, then any label only a
/// later run has.
fn bar_labels<'a>(runs: &[(&str, &'a Figure)]) -> Vec<(&'a str, Role)> {
    let mut labels: Vec<(&str, Role)> = Vec::new();
    for (_, figure) in runs {
        if let Figure::Bars(f) = figure {
            for b in &f.bars {
                if !labels.iter().any(|l| l.0 == b.label) {
                    labels.push((&b.label, b.role));
                }
            }
        }
    }
    labels
}

/// Horizontal bars: each label's median per run with its min–max whisker, the gap against
/// the default row (one run) or the ratio against the first run (several), the fraction of
/// a ceiling where there is one.
fn bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    runs: &[(&str, &Figure)],
) -> Result<(), ChartError> {
    let figures: Vec<&Bars> = runs
        .iter()
        .filter_map(|r| if let Figure::Bars(b) = r.1 { Some(b) } else { None })
        .collect();
    let first = figures[0];
    let labels = bar_labels(runs);
    let k = figures.len();
    let slot = k as f64 + 0.6;
    let total = labels.len() as f64 * slot;
    let values = figures
        .iter()
        .flat_map(|f| f.bars.iter())
        .flat_map(|b| b.trials.iter().copied().chain([b.median]));
    let ceiling = first.ceiling.as_ref().and_then(|c| placeable(c.value).map(|v| (c, v)));
    let (lo, hi) = span(values.chain(ceiling.map(|c| c.1)), true);
    let label_width = labels
        .iter()
        .map(|l| root.estimate_text_size(l.0, &text(13)).map(|s| s.0).unwrap_or(0))
        .max()
        .unwrap_or(0)
        .clamp(40, 330)
        + 14;
    let (x, y) = (Ticked::new(lo, hi, ticks(lo, hi, 8)), Ticked::new(0.0, total, Vec::new()));
    let mut chart = frame(root, &first.title, label_width, x, y)?;
    axes(&mut chart, (&first.unit, &|v| si(*v)), None)?;
    let default = first.bars.iter().find(|b| b.role == Role::Default).map(|b| b.median);
    for (i, (label, role)) in labels.iter().enumerate() {
        let top = total - i as f64 * slot - 0.3;
        for (j, f) in figures.iter().enumerate() {
            let Some(bar) = f.bars.iter().find(|b| b.label == *label) else { continue };
            let (y0, y1) = (top - j as f64 - 0.92, top - j as f64 - 0.08);
            let y = (y0 + y1) / 2.0;
            let median = placeable(bar.median).unwrap_or(0.0);
            let rect =
                Rectangle::new([(0.0f64.max(lo), y0), (median, y1)], colour(*role, j).filled());
            chart.draw_series([rect]).map_err(failed)?;
            let trials: Vec<f64> = bar.trials.iter().copied().filter_map(placeable).collect();
            let (min, max) =
                trials.iter().fold((median, median), |(a, b), v| (a.min(*v), b.max(*v)));
            if trials.len() > 1 {
                let whisker = [
                    vec![(min, y), (max, y)],
                    vec![(min, y - 0.25), (min, y + 0.25)],
                    vec![(max, y - 0.25), (max, y + 0.25)],
                ];
                chart
                    .draw_series(
                        whisker.into_iter().map(|p| PathElement::new(p, BLACK.stroke_width(1))),
                    )
                    .map_err(failed)?;
            }
            let reference = if j == 0 {
                default.filter(|_| *role != Role::Default)
            } else {
                figures[0].bars.iter().find(|b| b.label == *label).map(|b| b.median)
            };
            let note = bar_note(bar.median, reference, j > 0, ceiling);
            let at = (max.max(median), y);
            chart
                .draw_series([EmptyElement::at(at)
                    + Text::new(note, (6, 0), text(12).pos(Pos::new(HPos::Left, VPos::Center)))])
                .map_err(failed)?;
        }
        let (x, y) = chart.backend_coord(&(lo, top - k as f64 / 2.0 - 0.5));
        let style = text(13).pos(Pos::new(HPos::Right, VPos::Center));
        root.draw(&Text::new(fit(label, 52), (x - 8, y), style)).map_err(failed)?;
    }
    if let Some((mark, value)) = ceiling {
        let line = PathElement::new(vec![(value, 0.0), (value, total)], RED.stroke_width(2));
        chart.draw_series([line]).map_err(failed)?;
        // Beside the line's foot, clear of the legend at the top.
        let (x, y) = chart.backend_coord(&(value, 0.0));
        let style = text(12).color(&RED).pos(Pos::new(HPos::Right, VPos::Bottom));
        let note = Text::new(format!("{} {}", mark.label, si(value)), (x - 4, y - 4), style);
        root.draw(&note).map_err(failed)?;
    }
    draw_legend(root, &bar_legend(&labels, runs))
}

/// One run: a swatch per role present; several: a shade and a letter per run.
fn bar_legend(labels: &[(&str, Role)], runs: &[(&str, &Figure)]) -> Vec<(String, RGBColor)> {
    if runs.len() > 1 {
        let tagged = runs.iter().enumerate();
        return tagged
            .map(|(j, (name, _))| {
                (format!("{} {}", run_tag(j), fit(name, 40)), colour(Role::Config, j))
            })
            .collect();
    }
    let names = [(Role::Default, "default"), (Role::Config, "corelane"), (Role::Peer, "peer")];
    names
        .into_iter()
        .filter(|(role, _)| labels.iter().any(|l| l.1 == *role))
        .map(|(role, name)| (name.to_string(), colour(role, 0)))
        .collect()
}

/// A run's letter in a comparison: A (the reference), B, C, …
pub fn run_tag(index: usize) -> String {
    char::from_u32('A' as u32 + (index % 26) as u32).unwrap_or('?').to_string()
}

/// What a bar's end says: its value, then its gap to the default row or its ratio to the
/// first run, or its fraction of the ceiling.
fn bar_note(
    value: f64,
    reference: Option<f64>,
    ratio: bool,
    ceiling: Option<(&Mark, f64)>,
) -> String {
    let mut note = si(value);
    match reference.and_then(placeable).filter(|r| *r != 0.0) {
        Some(r) if ratio => note.push_str(&format!("  ×{:.2}", value / r)),
        Some(r) => note.push_str(&format!("  {:+.1}%", (value / r - 1.0) * 100.0)),
        None => {}
    }
    if let Some((mark, c)) = ceiling.filter(|c| c.1 > 0.0) {
        note.push_str(&format!("  {:.0}% of {}", value / c * 100.0, fit(&mark.label, 20)));
    }
    note
}

/// `label` cut to `max` characters for an axis.
fn fit(label: &str, max: usize) -> String {
    super::run::printable(label, max)
}

/// A legend in the top-right corner: a swatch and a name per entry.
fn draw_legend<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    entries: &[(String, RGBColor)],
) -> Result<(), ChartError> {
    let x = WIDTH as i32 - 160;
    for (i, (name, c)) in entries.iter().enumerate() {
        let y = 34 + i as i32 * 18;
        root.draw(&Rectangle::new([(x, y), (x + 12, y + 12)], c.filled())).map_err(failed)?;
        root.draw(&Text::new(fit(name, 22), (x + 18, y), text(12))).map_err(failed)?;
    }
    Ok(())
}

/// Horizontal bars split into parts, one colour per part.
fn stacked<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    f: &Stacked,
) -> Result<(), ChartError> {
    let sums = f
        .bars
        .iter()
        .map(|b| b.values.iter().filter_map(|v| placeable(*v)).filter(|v| *v > 0.0).sum::<f64>());
    let (lo, hi) = span(sums, true);
    let total = f.bars.len() as f64;
    let (x, y) = (Ticked::new(lo, hi, ticks(lo, hi, 8)), Ticked::new(0.0, total, Vec::new()));
    let mut chart = frame(root, &f.title, 200, x, y)?;
    axes(&mut chart, (&f.unit, &|v| si(*v)), None)?;
    for (i, bar) in f.bars.iter().enumerate() {
        let (y0, y1) = (total - i as f64 - 0.9, total - i as f64 - 0.1);
        let mut x = 0.0;
        for (p, v) in bar.values.iter().enumerate() {
            let Some(v) = placeable(*v).filter(|v| *v > 0.0) else { continue };
            let rect = Rectangle::new([(x, y0), (x + v, y1)], PALETTE[p % PALETTE.len()].filled());
            chart.draw_series([rect]).map_err(failed)?;
            x += v;
        }
        let (px, py) = chart.backend_coord(&(lo, (y0 + y1) / 2.0));
        root.draw(&Text::new(
            fit(&bar.label, 30),
            (px - 8, py),
            text(13).pos(Pos::new(HPos::Right, VPos::Center)),
        ))
        .map_err(failed)?;
    }
    let legend: Vec<(String, RGBColor)> =
        f.parts.iter().enumerate().map(|(p, n)| (n.clone(), PALETTE[p % PALETTE.len()])).collect();
    draw_legend(root, &legend)
}

/// An axis: where a value goes, the range, the ticks and how a tick reads.
struct Axis {
    scale: Scale,
}

impl Axis {
    fn place(&self, v: f64) -> Option<f64> {
        let v = placeable(v)?;
        match self.scale {
            Scale::Linear => Some(v),
            Scale::Log => (v > 0.0).then(|| v.log10()),
            Scale::Percentile => (v > 0.0 && v < 100.0).then(|| -(1.0 - v / 100.0).log10()),
        }
    }

    fn read(&self, t: f64) -> String {
        match self.scale {
            Scale::Linear => si(t),
            Scale::Log => si(10f64.powf(t)),
            Scale::Percentile => {
                let p = 100.0 * (1.0 - 10f64.powf(-t));
                let text = format!("{p:.4}");
                let text = text.trim_end_matches('0').trim_end_matches('.');
                format!("p{text}")
            }
        }
    }

    /// The range and ticks over placed values `placed`.
    fn ticks(&self, placed: &[f64]) -> (f64, f64, Vec<f64>) {
        let (lo, hi) = span(placed.iter().copied(), self.scale == Scale::Linear);
        let ticks = match self.scale {
            Scale::Linear => ticks(lo, hi, 8),
            Scale::Log => {
                // Powers of ten, and 2× and 5× them when the axis spans few decades.
                let decades: Vec<f64> =
                    (lo.floor() as i64..=hi.ceil() as i64).take(40).map(|e| e as f64).collect();
                let steps: &[f64] = if decades.len() <= 4 { &[1.0, 2.0, 5.0] } else { &[1.0] };
                let all = decades.iter().flat_map(|d| steps.iter().map(move |m| d + m.log10()));
                all.filter(|t| *t >= lo && *t <= hi).collect()
            }
            Scale::Percentile => {
                let mut t: Vec<f64> = placed.to_vec();
                t.sort_by(f64::total_cmp);
                t.dedup();
                t.truncate(20);
                t
            }
        };
        (lo, hi, ticks)
    }
}

/// Curves, one colour per series (peers dashed-free but in the peer colour family).
fn lines<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, f: &Lines) -> Result<(), ChartError> {
    let (xa, ya) = (Axis { scale: f.x_scale }, Axis { scale: f.y_scale });
    let placed: Vec<Vec<(f64, f64)>> = f
        .series
        .iter()
        .map(|s| {
            s.points.iter().filter_map(|(x, y)| Some((xa.place(*x)?, ya.place(*y)?))).collect()
        })
        .collect();
    let xs: Vec<f64> = placed.iter().flatten().map(|p| p.0).collect();
    let ys: Vec<f64> = placed.iter().flatten().map(|p| p.1).collect();
    let (x0, x1, xt) = xa.ticks(&xs);
    let (y0, y1, yt) = ya.ticks(&ys);
    let mut chart = frame(root, &f.title, 70, Ticked::new(x0, x1, xt), Ticked::new(y0, y1, yt))?;
    axes(&mut chart, (&f.x_label, &|v| xa.read(*v)), Some((&f.y_label, &|v| ya.read(*v))))?;
    let mut legend = Vec::new();
    for (series, points) in f.series.iter().zip(&placed) {
        // Each series' place among those of its role picks its colour.
        let i = legend.iter().filter(|l: &&(String, RGBColor, Role)| l.2 == series.role).count();
        let c = series_colour(series.role, i);
        chart
            .draw_series(LineSeries::new(points.iter().copied(), c.stroke_width(2)))
            .map_err(failed)?;
        chart.draw_series(points.iter().map(|p| Circle::new(*p, 3, c.filled()))).map_err(failed)?;
        legend.push((series.name.clone(), c, series.role));
    }
    let legend: Vec<(String, RGBColor)> = legend.into_iter().map(|l| (l.0, l.1)).collect();
    draw_legend(root, &legend)
}

/// Series colours: the default row grey, corelane's in cool colours, peers in warm ones.
fn series_colour(role: Role, index: usize) -> RGBColor {
    const OURS: [RGBColor; 9] = [
        colours::BLUE,
        colours::GREEN,
        colours::PLUM,
        colours::TEAL,
        colours::BROWN,
        colours::RED,
        colours::PINK,
        colours::OLIVE,
        colours::NAVY,
    ];
    const THEIRS: [RGBColor; 5] =
        [colours::ORANGE, colours::BROWN, colours::MUSTARD, colours::RUST, colours::SAND];
    match role {
        Role::Default => colour(Role::Default, 0),
        Role::Peer => THEIRS[index % THEIRS.len()],
        Role::Config => OURS[index % OURS.len()],
    }
}

/// Points, one colour per group.
fn scatter<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    f: &Scatter,
) -> Result<(), ChartError> {
    let groups = Figure::Scatter(f.clone());
    let groups = groups.labels();
    let points: Vec<(usize, f64, f64)> = f
        .points
        .iter()
        .filter_map(|p| {
            let g = groups.iter().position(|g| *g == p.group)?;
            Some((g, placeable(p.x)?, placeable(p.y)?))
        })
        .collect();
    let (x0, x1) = span(points.iter().map(|p| p.1), true);
    let (y0, y1) = span(points.iter().map(|p| p.2), true);
    let (x, y) = (Ticked::new(x0, x1, ticks(x0, x1, 8)), Ticked::new(y0, y1, ticks(y0, y1, 8)));
    let mut chart = frame(root, &f.title, 70, x, y)?;
    axes(&mut chart, (&f.x_label, &|v| si(*v)), Some((&f.y_label, &|v| si(*v))))?;
    chart
        .draw_series(
            points
                .iter()
                .map(|(g, x, y)| Circle::new((*x, *y), 4, PALETTE[g % PALETTE.len()].filled())),
        )
        .map_err(failed)?;
    let legend: Vec<(String, RGBColor)> = groups
        .iter()
        .enumerate()
        .map(|(g, n)| (n.to_string(), PALETTE[g % PALETTE.len()]))
        .collect();
    draw_legend(root, &legend)
}
