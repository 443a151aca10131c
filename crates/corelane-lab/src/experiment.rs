//! The shape every experiment has, and the one runner that drives them all.
//!
//! An experiment prepares its stage (testbed, scratch files, peers), lists its
//! configurations, runs one trial of one configuration at a time, and turns all the trials
//! into a report: rows, a table, CSV and findings computed from the figures. The runner
//! interleaves the configurations — trial 1 of every one before any trial 2 — and rotates
//! their order every trial, because on a small machine a fixed order skewed a configuration
//! by up to 30 % (the one after a large copy, say, or after a server that left TIME_WAIT
//! sockets), and drift over a run must fall on every configuration alike.

use corelane::lane::StopSignal;

use crate::report::run::{self, Envelope, Host, RunInfo};
use crate::report::Outline;
use crate::LabError;

/// Where an experiment's progress lines go (the CLI prints them; tests collect them).
pub type Progress<'a> = &'a mut dyn FnMut(&str);

/// One experiment on its prepared stage.
pub trait Experiment {
    /// One configuration: a row of the table, or a peer pairing.
    type Config;
    /// What one trial of one configuration measured.
    type Trial;
    type Report: Report;

    /// Every configuration to measure, in the table's order (those that cannot run here
    /// are left out, and the experiment keeps the reason for its report).
    fn configurations(&mut self) -> Result<Vec<Self::Config>, LabError>;
    /// How progress lines name a configuration.
    fn label(&self, config: &Self::Config) -> String;
    /// Runs trial `index` (0-based) of `config`.
    fn trial(
        &mut self,
        config: &Self::Config,
        index: usize,
        stop: &StopSignal,
    ) -> Result<Self::Trial, LabError>;
    /// One trial's figures for its progress line.
    fn describe(&self, trial: &Self::Trial) -> String;
    /// The report: every configuration with its trials, in `configurations()` order.
    fn report(
        self,
        measured: Vec<Measured<Self::Config, Self::Trial>>,
    ) -> Result<Self::Report, LabError>;
}

/// A configuration and its trials, in the order they ran.
#[derive(Debug)]
pub struct Measured<C, T> {
    pub config: C,
    pub trials: Vec<T>,
}

/// What people read of an experiment: JSON (from `Serialize`), a table, CSV, findings.
pub trait Report: serde::Serialize {
    /// What every report has around its tables: which experiment ran on which machine and
    /// testbed, what could not run here, the findings.
    fn outline(&self) -> Outline<'_>;
    /// Writes the table(s) in the seed's shape, with their notes, under the heading (a dry
    /// run, which measured nothing, has none).
    fn body(&self, out: &mut String);
    /// The CSV: its columns, and one record per configuration.
    fn csv_table(&self) -> crate::report::Csv;
    /// What `corelane report` draws of it: its rows as charts (none by default; the page
    /// still shows the table and findings).
    fn figures(&self) -> Vec<crate::report::figure::Figure> {
        Vec::new()
    }

    /// The heading, the body, what was skipped, and the findings.
    fn text(&self) -> String {
        let outline = self.outline();
        let mut out = outline.heading();
        if !outline.is_dry_run() {
            self.body(&mut out);
        }
        for s in outline.skipped {
            out.push_str(&format!("skipped: {s}\n"));
        }
        crate::report::push_findings(&mut out, outline.findings);
        out
    }

    /// The CSV file: the header, then every record.
    fn csv(&self) -> Result<Vec<u8>, LabError> {
        self.csv_table().to_bytes()
    }
}

/// Runs every configuration of `experiment` `trials` times, interleaved and rotated (trial t
/// starts at configuration t mod n), and returns its report.
pub fn run<E: Experiment>(
    mut experiment: E,
    trials: usize,
    stop: &StopSignal,
    progress: Progress<'_>,
) -> Result<E::Report, LabError> {
    let configs = experiment.configurations()?;
    let n = configs.len();
    let mut results: Vec<Vec<E::Trial>> = (0..n).map(|_| Vec::with_capacity(trials)).collect();
    for t in 0..trials {
        for (step, i) in rotation(n, t).enumerate() {
            if stop.is_stopped() {
                return Err(LabError::Interrupted);
            }
            let trial = experiment.trial(&configs[i], t, stop)?;
            progress(&format!(
                "{} {} trial {}/{trials}: {}",
                step_prefix(t * n + step + 1, n * trials),
                experiment.label(&configs[i]),
                t + 1,
                experiment.describe(&trial)
            ));
            results[i].push(trial);
        }
    }
    let measured =
        configs.into_iter().zip(results).map(|(config, trials)| Measured { config, trials });
    experiment.report(measured.collect())
}

/// How a progress line of the runner starts: `[3/20]`, the trial done of all of them.
fn step_prefix(done: usize, total: usize) -> String {
    format!("[{done}/{total}]")
}

/// The trials done and in all of a runner's progress line (`[3/20] …`), for a progress bar;
/// `None` for any other line (an experiment's own notes).
pub fn step_of(line: &str) -> Option<(usize, usize)> {
    let inner = line.strip_prefix('[')?.split(']').next()?;
    let (done, total) = inner.split_once('/')?;
    Some((done.parse().ok()?, total.parse().ok()?))
}

/// An experiment's command-line options (`corelane lab NAME --help`): parsed by clap, they
/// settle into the experiment's settings, the settings [prepare](Prepare) its stage, and the
/// [runner](fn@run) measures there. Each experiment states its settings; [`Options::run`] is
/// the one way they are put together.
pub trait Options: clap::Args + clap::FromArgMatches {
    /// How the experiment runs: its quick or full defaults with the options over them.
    type Settings: Trials;
    /// The experiment on its prepared stage, reading its settings.
    type Lab<'s>: Prepare<'s, Settings = Self::Settings> + Experiment<Report = Self::Report>
    where
        Self::Settings: 's;
    type Report: Report;

    /// The settings these options describe; an option out of range is refused here, before
    /// anything is prepared.
    fn settings(self) -> Result<Self::Settings, LabError>;

    /// Runs the experiment these options describe: settles the settings, prepares the stage
    /// and runs every configuration [`Trials::trials`] times.
    fn run(self, stop: &StopSignal, progress: Progress<'_>) -> Result<Self::Report, LabError> {
        let settings = self.settings()?;
        let lab = Self::Lab::prepare(&settings, progress)?;
        run(lab, settings.trials(), stop, progress)
    }
}

/// An experiment's settings, as far as the runner reads them.
pub trait Trials {
    /// Trials per configuration.
    fn trials(&self) -> usize;
}

/// An experiment prepared on its stage (testbed, scratch, peers) from its settings.
pub trait Prepare<'s>: Sized {
    type Settings: 's;
    /// Prepares the stage `settings` describe, with progress lines.
    fn prepare(settings: &'s Self::Settings, progress: Progress<'_>) -> Result<Self, LabError>;
}

/// The options every measuring experiment shares: how long and how often.
#[derive(Debug, Clone, clap::Args)]
pub struct TrialArgs {
    /// A short run for CI: 1 trial per configuration, short measurements.
    #[arg(long)]
    pub quick: bool,
    /// Trials per configuration (default 3, 1 with --quick).
    #[arg(long, value_parser = corelane::units::parse_count)]
    pub trials: Option<usize>,
    /// Time per measurement (default 5s, shorter with --quick; UDP and affinity need at
    /// least 3s, TCP 1s).
    #[arg(long, value_parser = corelane::units::parse_duration)]
    pub duration: Option<std::time::Duration>,
}

impl TrialArgs {
    /// `trials` and `duration` over the experiment's defaults; a duration under `min` is
    /// refused, naming it.
    pub fn apply(
        &self,
        trials: &mut usize,
        duration: &mut std::time::Duration,
        min: std::time::Duration,
    ) -> Result<(), LabError> {
        *trials = self.trials.unwrap_or(*trials);
        if let Some(d) = self.duration {
            if d < min {
                return Err(LabError::Options(format!("--duration must be at least {min:?}")));
            }
            *duration = d;
        }
        Ok(())
    }
}

/// What every testbed experiment with peers and configurations chooses: which peers, which
/// of its configurations, and the hosts it runs on. Each experiment names its own peers and
/// configurations in the help of `--vs` and `--configs` (`mut_arg` on its options).
#[derive(Debug, Clone, clap::Args)]
pub struct SelectArgs {
    /// Peers to measure beside corelane, or none (default: every one installed).
    #[arg(long, value_delimiter = ',', value_name = "PEERS")]
    pub vs: Option<Vec<String>>,
    /// Only these configurations, or none (peers only).
    #[arg(long, value_delimiter = ',', value_name = "CONFIGS")]
    pub configs: Option<Vec<String>>,
    #[command(flatten)]
    pub remote: crate::remote::RemoteArgs,
}

impl SelectArgs {
    /// The peers named (of `peers`: name and peer), the configurations (of `configs`; all
    /// when `None`) and the remote hosts (the namespace testbed when `None`).
    #[allow(clippy::type_complexity)]
    pub fn choose<P: Copy>(
        self,
        peers: &[(&str, P)],
        configs: &[&str],
    ) -> Result<(Vec<P>, Option<Vec<String>>, Option<crate::remote::RemoteSpec>), LabError> {
        Ok((
            crate::parse_names(self.vs.as_deref(), peers, "peer")?,
            crate::only_configs(self.configs, configs)?,
            self.remote.spec()?,
        ))
    }
}

/// How an [`Entry`] runs its experiment from parsed options.
pub type RunFn =
    fn(&Entry, &clap::ArgMatches, &StopSignal, Progress<'_>) -> Result<Published, LabError>;

/// An experiment as `corelane lab` lists and runs it: the one list of them is
/// [`EXPERIMENTS`](crate::EXPERIMENTS), from which the CLI's subcommands, `lab all` and CI's
/// quick runs are all derived.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub name: &'static str,
    /// The study's number, kept only as the `seed` value of the JSON run (readers match on it);
    /// users see [`Entry::study`].
    pub seed: &'static str,
    /// The study it reproduces, in the user's words (the lab's list, `--help`, headings).
    pub study: &'static str,
    pub about: &'static str,
    /// What an interrupted run removed, for the line Ctrl-C prints.
    pub cleaned: &'static str,
    /// Its options, as a clap command named `name`.
    pub command: fn() -> clap::Command,
    /// Parses `matches` (from `command`) and runs it (call it through [`Entry::conduct`]).
    pub run: RunFn,
}

impl Entry {
    /// The entry of an experiment whose options are `O`.
    pub const fn of<O: Options>(
        name: &'static str,
        seed: &'static str,
        study: &'static str,
        about: &'static str,
        cleaned: &'static str,
    ) -> Self {
        let (command, run) = (command_of::<O>, run_from_matches::<O>);
        Self { name, seed, study, about, cleaned, command, run }
    }

    /// Parses `matches` (from `command`), runs the experiment and formats its report.
    pub fn conduct(
        &self,
        matches: &clap::ArgMatches,
        stop: &StopSignal,
        progress: Progress<'_>,
    ) -> Result<Published, LabError> {
        (self.run)(self, matches, stop, progress)
    }
}

fn command_of<O: Options>() -> clap::Command {
    O::augment_args(clap::Command::new("experiment"))
}

fn run_from_matches<O: Options>(
    entry: &Entry,
    matches: &clap::ArgMatches,
    stop: &StopSignal,
    progress: Progress<'_>,
) -> Result<Published, LabError> {
    let options = O::from_arg_matches(matches).map_err(|e| LabError::Options(e.to_string()))?;
    let started = std::time::SystemTime::now();
    let report = options.run(stop, progress)?;
    Published::of(&report, entry, started, &Host::here())
}

/// A report formatted every way it is printed or written, before anything is written, so a
/// formatting failure leaves no file behind.
#[derive(Debug, Clone)]
pub struct Published {
    pub text: String,
    /// The experiment's fields under its `corelane_run` section (`run`).
    pub json: Vec<u8>,
    pub csv: Vec<u8>,
    /// What the run was and what its report draws, as written in `json`.
    pub run: RunInfo,
}

impl Published {
    /// `report` of `entry`'s experiment, started at `started` on `host`.
    pub fn of<R: Report>(
        report: &R,
        entry: &Entry,
        started: std::time::SystemTime,
        host: &Host,
    ) -> Result<Self, LabError> {
        let csv = report.csv()?;
        let mut table = csv::ReaderBuilder::new().flexible(true).from_reader(csv.as_slice());
        let columns = table.headers()?.iter().map(str::to_string).collect();
        let rows = table
            .records()
            .map(|r| r.map(|r| r.iter().map(str::to_string).collect()))
            .collect::<Result<_, _>>()?;
        let run = RunInfo {
            format: run::FORMAT.to_string(),
            version: run::VERSION,
            experiment: entry.name.to_string(),
            seed: entry.seed.to_string(),
            corelane_version: env!("CARGO_PKG_VERSION").to_string(),
            started: run::date(started),
            finished: run::date(std::time::SystemTime::now()),
            command: host.command.clone(),
            hostname: host.hostname.clone(),
            machine: host.machine.clone(),
            kernel: host.kernel.clone(),
            table: run::Table { columns, rows },
            findings: report.outline().findings.to_vec(),
            skipped: report.outline().skipped.to_vec(),
            figures: report.figures(),
        };
        let json = serde_json::to_vec_pretty(&Envelope { corelane_run: &run, report })?;
        Ok(Self { text: report.text(), json, csv, run })
    }
}

/// The order of trial `t` over `n` configurations: `t mod n`, `t+1 mod n`, …
pub fn rotation(n: usize, t: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |k| (k + t) % n.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the order trials ran in.
    struct Recorder {
        configs: usize,
        ran: Vec<(usize, usize)>,
    }

    #[derive(serde::Serialize)]
    struct Ran(Vec<(usize, usize)>, Vec<String>);

    impl Report for Ran {
        fn outline(&self) -> Outline<'_> {
            Outline::of("recorder", "test", &self.1)
        }
        fn body(&self, _: &mut String) {}
        fn csv_table(&self) -> crate::report::Csv {
            let records = self.0.iter().map(|(c, t)| vec![c.to_string(), t.to_string()]);
            crate::report::Csv::with_header("config,trial", records.collect())
        }
    }

    impl Experiment for Recorder {
        type Config = usize;
        type Trial = usize;
        type Report = Ran;
        fn configurations(&mut self) -> Result<Vec<usize>, LabError> {
            Ok((0..self.configs).collect())
        }
        fn label(&self, config: &usize) -> String {
            config.to_string()
        }
        fn trial(
            &mut self,
            config: &usize,
            index: usize,
            _: &StopSignal,
        ) -> Result<usize, LabError> {
            self.ran.push((*config, index));
            Ok(index)
        }
        fn describe(&self, _: &usize) -> String {
            String::new()
        }
        fn report(self, measured: Vec<Measured<usize, usize>>) -> Result<Ran, LabError> {
            for (i, m) in measured.iter().enumerate() {
                assert_eq!(m.config, i);
                assert_eq!(m.trials, (0..m.trials.len()).collect::<Vec<_>>());
            }
            Ok(Ran(self.ran, Vec::new()))
        }
    }

    #[test]
    fn every_trial_1_runs_before_any_trial_2_and_the_order_rotates() {
        let mut lines = Vec::new();
        let ran = run(Recorder { configs: 3, ran: Vec::new() }, 3, &StopSignal::new(), &mut |l| {
            lines.push(l.to_string())
        })
        .unwrap()
        .0;
        let order: Vec<usize> = ran.iter().map(|r| r.0).collect();
        assert_eq!(order, [0, 1, 2, 1, 2, 0, 2, 0, 1]);
        let trial_of: Vec<usize> = ran.iter().map(|r| r.1).collect();
        assert_eq!(trial_of, [0, 0, 0, 1, 1, 1, 2, 2, 2]);
        assert_eq!(lines.len(), 9);
        assert!(lines[8].starts_with("[9/9] 1 trial 3/3"), "{}", lines[8]);
        assert_eq!(step_of(&lines[8]), Some((9, 9)));
        assert_eq!(step_of(&lines[0]), Some((1, 9)));
        assert_eq!(step_of("[udp] building the testbed"), None);
        assert_eq!(step_of("peer skipped"), None);
    }

    #[test]
    fn a_stop_ends_the_run() {
        let stop = StopSignal::new();
        stop.stop();
        let err = run(Recorder { configs: 2, ran: Vec::new() }, 1, &stop, &mut |_| {});
        assert!(matches!(err, Err(LabError::Interrupted)));
    }
}
