//! What a report draws, as data: each experiment turns its rows into these figures
//! (`Report::figures`), the lab writes them into the run's JSON, and `corelane report` draws
//! them (`chart.rs`) without knowing the experiment. A new experiment gets charts by
//! returning figures; the page, the comparison of runs and the PNGs follow.

use serde::{Deserialize, Serialize};

/// One chart's data. `id` is stable across runs of one experiment, so the same figure of two
/// runs is drawn side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Figure {
    /// Horizontal bars: each row's median with its trials' min–max whisker.
    Bars(Bars),
    /// Horizontal bars split into parts (per-CPU user / system / softirq / idle).
    Stacked(Stacked),
    /// Curves: latency percentiles, latency against offered load.
    Lines(Lines),
    /// Points: one trade-off against another (throughput against reordering).
    Scatter(Scatter),
}

impl Figure {
    pub fn id(&self) -> &str {
        self.id_and_title().0
    }

    pub fn title(&self) -> &str {
        self.id_and_title().1
    }

    /// What every kind of figure has: its id and its title.
    fn id_and_title(&self) -> (&str, &str) {
        match self {
            Figure::Bars(f) => (&f.id, &f.title),
            Figure::Stacked(f) => (&f.id, &f.title),
            Figure::Lines(f) => (&f.id, &f.title),
            Figure::Scatter(f) => (&f.id, &f.title),
        }
    }

    /// Every label the chart shows for its data: bar, series, group or part names.
    pub fn labels(&self) -> Vec<&str> {
        match self {
            Figure::Bars(f) => f.bars.iter().map(|b| b.label.as_str()).collect(),
            Figure::Stacked(f) => f.bars.iter().map(|b| b.label.as_str()).collect(),
            Figure::Lines(f) => f.series.iter().map(|s| s.name.as_str()).collect(),
            Figure::Scatter(f) => {
                let mut groups: Vec<&str> = Vec::new();
                for p in &f.points {
                    if !groups.contains(&p.group.as_str()) {
                        groups.push(&p.group);
                    }
                }
                groups
            }
        }
    }
}

/// What a bar or series is: the row others are compared against, one of corelane's
/// configurations, or a peer (another tool measured in the same run), drawn in a contrasting
/// colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Default,
    Config,
    Peer,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bars {
    pub id: String,
    pub title: String,
    /// The value axis, with its unit ("datagrams/s").
    pub unit: String,
    pub bars: Vec<Bar>,
    /// A limit drawn across the bars, each bar labelled with its fraction of it (copy's
    /// memcpy ceiling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<Mark>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bar {
    pub label: String,
    pub role: Role,
    /// The row's median, as its table shows it.
    pub median: f64,
    /// Every trial's value (the whisker spans their min and max).
    pub trials: Vec<f64>,
}

impl Bar {
    pub fn new(label: impl Into<String>, role: Role, median: f64, trials: &[f64]) -> Self {
        Self { label: label.into(), role, median, trials: trials.to_vec() }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mark {
    pub label: String,
    pub value: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stacked {
    pub id: String,
    pub title: String,
    pub unit: String,
    /// The parts' names, in stacking order.
    pub parts: Vec<String>,
    pub bars: Vec<StackedBar>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackedBar {
    pub label: String,
    /// One value per part.
    pub values: Vec<f64>,
}

/// How an axis maps values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scale {
    Linear,
    Log,
    /// Percentiles (50, 90, 99, 99.9) spaced by their nines: −log10(1 − p/100).
    Percentile,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lines {
    pub id: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x_scale: Scale,
    pub y_scale: Scale,
    pub series: Vec<Series>,
}

impl Lines {
    /// Latency percentiles: `y_label` (µs) on a log axis over a percentile axis, one curve
    /// per series.
    pub fn percentiles(id: String, title: String, y_label: &str, series: Vec<Series>) -> Self {
        let (x_label, y_label) = ("percentile".into(), y_label.into());
        Self {
            id,
            title,
            x_label,
            y_label,
            x_scale: Scale::Percentile,
            y_scale: Scale::Log,
            series,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Series {
    pub name: String,
    pub role: Role,
    /// (x, y) in the axes' units, in drawing order.
    pub points: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scatter {
    pub id: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub points: Vec<Point>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The legend entry (colour) the point belongs to.
    pub group: String,
    /// What the point is within its group.
    pub label: String,
    pub x: f64,
    pub y: f64,
}
