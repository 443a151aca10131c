//! `corelane lab`: list the experiments, or run one (or all) and print its table. The
//! subcommands are built from the lab's one list of experiments (`corelane_lab::EXPERIMENTS`),
//! each with its own options plus `--json` and `--csv`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Arg, ArgAction, ArgMatches, Command, FromArgMatches};
use corelane_lab::experiment::Published;
use corelane_lab::report::{self, run};
use corelane_lab::{Entry, LabError, EXPERIMENTS};

use crate::args::{outln, stop_on_signals};

/// `corelane lab [NAME [OPTIONS]]`, its subcommands derived from the list of experiments.
#[derive(Debug)]
pub struct LabArgs {
    chosen: Option<(String, ArgMatches)>,
}

impl FromArgMatches for LabArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(Self { chosen: matches.subcommand().map(|(name, m)| (name.to_string(), m.clone())) })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl clap::Args for LabArgs {
    fn augment_args(cmd: Command) -> Command {
        let experiments = EXPERIMENTS.iter().map(|e| {
            (e.command)()
                .name(e.name)
                .about(format!("{}: {}", e.study, e.about))
                .args(report_args())
        });
        let all = Command::new("all")
            .about("Every experiment, one after the other (--json r.json writes r.udp.json, r.tcp.json, …)")
            .arg(Arg::new("quick").long("quick").action(ArgAction::SetTrue).help(
                "Each experiment's short run for CI",
            ))
            .arg(
                Arg::new("skip")
                    .long("skip")
                    .value_name("NAMES")
                    .value_delimiter(',')
                    .value_parser(EXPERIMENTS.iter().map(|e| e.name).collect::<Vec<_>>())
                    .help("Leave these experiments out (comma-separated), e.g. one already run on its own"),
            )
            .args(report_args());
        cmd.subcommands(experiments).subcommand(all).args_conflicts_with_subcommands(true)
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// `--json FILE`, `--csv FILE`, `--report FILE` and `--png DIR`, on every experiment.
fn report_args() -> [Arg; 4] {
    [
        path_arg("json", "FILE", "Write the full results as JSON to FILE"),
        path_arg("csv", "FILE", "Write one CSV row per configuration to FILE"),
        path_arg(
            "report",
            "FILE",
            "Write the results as one self-contained HTML page of charts to FILE",
        ),
        path_arg("png", "DIR", "With --report, also write each chart as a PNG into DIR")
            .requires("report"),
    ]
}

/// `--name VALUE`, a path.
fn path_arg(name: &'static str, value_name: &'static str, help: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .value_name(value_name)
        .value_parser(clap::value_parser!(PathBuf))
        .help(help)
}

/// Where the reports go.
#[derive(Debug, Clone, Default)]
struct Outputs {
    json: Option<PathBuf>,
    csv: Option<PathBuf>,
    report: Option<PathBuf>,
    png: Option<PathBuf>,
}

impl Outputs {
    fn of(matches: &ArgMatches) -> Self {
        Self {
            json: matches.get_one::<PathBuf>("json").cloned(),
            csv: matches.get_one::<PathBuf>("csv").cloned(),
            report: matches.get_one::<PathBuf>("report").cloned(),
            png: matches.get_one::<PathBuf>("png").cloned(),
        }
    }

    /// FILE.json → FILE.NAME.json (and so for CSV and the page), for `lab all`; the PNGs of
    /// every experiment share DIR (their names start with the experiment's).
    fn for_experiment(&self, name: &str) -> Self {
        let own = |p: &Option<PathBuf>, ext: &str| {
            p.as_ref().map(|p| p.with_extension(format!("{name}.{ext}")))
        };
        Self {
            json: own(&self.json, "json"),
            csv: own(&self.csv, "csv"),
            report: own(&self.report, "html"),
            png: self.png.clone(),
        }
    }

    fn paths(&self) -> impl Iterator<Item = &Path> {
        [&self.json, &self.csv].into_iter().flatten().map(PathBuf::as_path)
    }
}

pub fn run(args: LabArgs) -> anyhow::Result<ExitCode> {
    let Some((name, matches)) = args.chosen else {
        outln!("experiments (run one with `corelane lab NAME`, or `corelane lab all`):");
        for e in EXPERIMENTS {
            outln!("  {:<8} {}\n           {}", e.name, e.study, e.about);
        }
        return Ok(ExitCode::SUCCESS);
    };
    let outputs = Outputs::of(&matches);
    if name == "all" {
        let skip: Vec<&String> = matches.get_many::<String>("skip").into_iter().flatten().collect();
        return run_all(matches.get_flag("quick"), &skip, &outputs);
    }
    let entry =
        EXPERIMENTS.iter().find(|e| e.name == name).expect("clap only accepts listed names");
    conduct(entry, &matches, &outputs)
}

/// Every experiment in turn (but those in `skip`) with its defaults (from its own options, so
/// nothing is repeated here), each writing its own report files; stops at the first that
/// does not succeed.
fn run_all(quick: bool, skip: &[&String], outputs: &Outputs) -> anyhow::Result<ExitCode> {
    for entry in EXPERIMENTS.iter().filter(|e| !skip.iter().any(|s| *s == e.name)) {
        let argv: Vec<&str> = if quick { vec![entry.name, "--quick"] } else { vec![entry.name] };
        let matches = (entry.command)().try_get_matches_from(argv)?;
        let code = conduct(entry, &matches, &outputs.for_experiment(entry.name))?;
        if code != ExitCode::SUCCESS {
            return Ok(code);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Checks that the reports can be written, runs the experiment (Ctrl-C stops it and says
/// what was cleaned up), then prints its table and writes its JSON and CSV.
fn conduct(entry: &Entry, matches: &ArgMatches, outputs: &Outputs) -> anyhow::Result<ExitCode> {
    for path in outputs.paths() {
        report::check_writable(path)?;
    }
    if let Some(page) = &outputs.report {
        crate::report::check_outputs(page, outputs.png.as_deref())?;
        corelane_lab::report::chart::load_font()?;
    }
    let stop = stop_on_signals()?;
    let mut progress = crate::progress::Progress::for_stderr(entry.name);
    let result = entry.conduct(matches, &stop, &mut |line| progress.line(line));
    drop(progress);
    let published = match result {
        Ok(p) => p,
        Err(LabError::Interrupted) => {
            eprintln!("corelane: interrupted; {}", entry.cleaned);
            return Ok(ExitCode::from(130));
        }
        Err(e) => return Err(e.into()),
    };
    publish(outputs, published)
}

/// Prints the table and writes the JSON and CSV reports asked for. Everything was formatted
/// before this is called, so a formatting failure writes neither file.
fn publish(outputs: &Outputs, published: Published) -> anyhow::Result<ExitCode> {
    // The page is drawn from the JSON as written, exactly as `corelane report` would, and
    // before any file is written.
    let page = match &outputs.report {
        Some(path) => {
            let source = outputs.json.as_ref().map_or_else(
                || format!("corelane lab {}", published.run.experiment),
                |p| p.display().to_string(),
            );
            let run = run::parse(&source, &published.json)?;
            Some((path, report::page::render(std::slice::from_ref(&run))?, run))
        }
        None => None,
    };
    crate::args::out(published.text.trim_end_matches('\n'));
    for (path, bytes) in [(&outputs.json, published.json), (&outputs.csv, published.csv)] {
        if let Some(path) = path {
            corelane::fs::write_atomic(path, &bytes)
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
    }
    if let Some((path, html, run)) = page {
        crate::report::write_page(&html, path)?;
        if let Some(dir) = &outputs.png {
            crate::report::write_pngs(&[run], dir)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
