//! What every lab report shares: a figure measured once per trial with its median (one
//! type for every row, its JSON keys named by its unit), and how a report ends (what could
//! not run here, what the figures say).

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use serde::ser::SerializeStruct;
use serde::Serialize;

use crate::median_of;
use crate::report::Outline;
use crate::testbed::TestbedReport;

/// The JSON keys of a per-trial figure: the list of trial values and their median.
pub trait Keys {
    /// The key of the per-trial values (`trials_rps`, say).
    const TRIALS: &'static str;
    /// The key of their median (`median_rps`, say).
    const MEDIAN: &'static str;
}

/// Declares a unit and the keys its figures keep in the JSON.
macro_rules! keys {
    ($($(#[$doc:meta])* $unit:ident: $trials:literal, $median:literal;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq)]
        pub struct $unit;
        impl Keys for $unit {
            const TRIALS: &'static str = $trials;
            const MEDIAN: &'static str = $median;
        }
    )*};
}

keys! {
    /// Requests per second.
    Rps: "trials_rps", "median_rps";
    /// Datagrams per second.
    Pps: "trials_pps", "median_pps";
    /// Seconds.
    Secs: "trials_secs", "median_secs";
    /// The round trip's p50, in µs.
    P50Us: "trials_p50_us", "p50_us";
    /// A rate whose unit the row names (`lab affinity`: datagrams/s or requests/s).
    Rate: "trials", "median";
}

/// One figure per trial and the median of them, serialized (flattened into its row) as
/// `U`'s two keys.
#[derive(Clone, PartialEq)]
pub struct Trials<U> {
    /// The figure of each trial, in the order they ran.
    pub each: Vec<f64>,
    /// Their median (0 with no trials).
    pub median: f64,
    unit: PhantomData<U>,
}

impl<U> Trials<U> {
    /// The figures of the trials, and their median.
    pub fn of(each: impl IntoIterator<Item = f64>) -> Self {
        let each: Vec<f64> = each.into_iter().collect();
        let median = median_of(each.iter().copied());
        Self { each, median, unit: PhantomData }
    }

    /// The trials' figures for a CSV cell: `decimals` places each, `;` between them.
    pub fn joined(&self, decimals: usize) -> String {
        self.each.iter().map(|x| format!("{x:.decimals$}")).collect::<Vec<_>>().join(";")
    }
}

impl<U: Keys> fmt::Debug for Trials<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trials")
            .field(U::TRIALS, &self.each)
            .field(U::MEDIAN, &self.median)
            .finish()
    }
}

impl<U: Keys> Serialize for Trials<U> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Trials", 2)?;
        s.serialize_field(U::TRIALS, &self.each)?;
        s.serialize_field(U::MEDIAN, &self.median)?;
        s.end()
    }
}

/// How a run measured: the trials of every configuration and each one's measured time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Schedule {
    pub trials: usize,
    pub duration_secs: f64,
}

impl Schedule {
    /// `trials` trials of `duration` each.
    pub fn of(trials: usize, duration: Duration) -> Self {
        Self { trials, duration_secs: duration.as_secs_f64() }
    }
}

impl fmt::Display for Schedule {
    /// `3 trial(s) of 5s`, as the reports' headings say it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} trial(s) of {:.0}s", self.trials, self.duration_secs)
    }
}

/// How every testbed experiment's report begins: where it ran and how it measured (flattened
/// into the report's JSON: `network`, …, `machine`, `trials`, `duration_secs`).
#[derive(Debug, Clone, Serialize)]
pub struct Header {
    #[serde(flatten)]
    pub testbed: TestbedReport,
    /// This machine's CPUs and model.
    pub machine: String,
    /// The trials of every configuration and each one's measured time.
    #[serde(flatten)]
    pub schedule: Schedule,
}

impl Header {
    /// A report measured on `testbed` from this machine, `trials` trials of `duration` each.
    pub fn of(testbed: TestbedReport, trials: usize, duration: Duration) -> Self {
        Self { testbed, machine: crate::machine(), schedule: Schedule::of(trials, duration) }
    }

    /// The report's outline: `title` on this header's machine and testbed, with `outcome`.
    pub fn outline<'a>(&'a self, title: &'a str, outcome: &'a Outcome) -> Outline<'a> {
        Outline::of(title, &self.machine, &outcome.findings)
            .on(&self.testbed)
            .skipping(&outcome.skipped)
    }
}

/// `value` against `base`, in % (+10: 10 % above it); `None` when there is no base above 0
/// to compare with (a row that did not run, a figure of 0).
pub fn change_pct(value: f64, base: f64) -> Option<f64> {
    (base > 0.0).then(|| (value / base - 1.0) * 100.0)
}

/// How a report ends: what could not run here, each with why, and the sentences computed
/// from the figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Outcome {
    pub skipped: Vec<String>,
    pub findings: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Row {
        config: &'static str,
        #[serde(flatten)]
        rps: Trials<Rps>,
        after: u32,
    }

    #[test]
    fn a_flattened_figure_keeps_its_units_keys_in_place() {
        let row = Row { config: "c", rps: Trials::of([3.0, 1.0, 2.0]), after: 7 };
        let json = serde_json::to_string(&row).unwrap();
        assert_eq!(json, r#"{"config":"c","trials_rps":[3.0,1.0,2.0],"median_rps":2.0,"after":7}"#);
    }

    #[test]
    fn no_trials_have_a_median_of_zero() {
        let none = Trials::<Pps>::of([]);
        assert!(none.each.is_empty());
        assert_eq!(none.median, 0.0);
        assert_eq!(none.joined(1), "");
    }

    #[test]
    fn a_schedule_reads_as_the_headings_say_it_and_keeps_its_keys() {
        let s = Schedule::of(3, Duration::from_millis(2500));
        assert_eq!(s.to_string(), "3 trial(s) of 2s");
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, r#"{"trials":3,"duration_secs":2.5}"#);
    }

    #[test]
    fn a_change_needs_a_base_above_zero() {
        assert_eq!(change_pct(150.0, 100.0), Some(50.0));
        assert_eq!(change_pct(50.0, 100.0), Some(-50.0));
        assert_eq!(change_pct(1.0, 0.0), None);
        assert_eq!(change_pct(1.0, -1.0), None);
    }

    #[test]
    fn joined_keeps_the_trials_order_and_places() {
        assert_eq!(Trials::<Secs>::of([1.26, 0.5]).joined(1), "1.3;0.5");
    }
}
