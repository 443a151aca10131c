//! `corelane lab apps`: seed 003's applications — unmodified nginx, memcached, redis and
//! Apache (event and prefork MPMs) from their Debian packages, and MapReduce as Apache
//! Spark's standalone cluster running a shuffle-heavy job (`spark`, `job`) — under its
//! placements (NS, NC, NZ; see `placement`), each with and without the syscall lane (`corelane run --syscall-lane threads|uring`),
//! driven by the load generators people use with them (wrk, memcaslap, redis-benchmark),
//! every row's answers checked; and the seed's micro-benchmark side-effect check, a UDP
//! ping-pong through the lane and without it.
//!
//! Requests/s on two CPUs mostly shows who shares a CPU with whom (the load generator is on
//! the machine too), so every row also carries the server's exact CPU per request
//! (schedstat of every thread of its process tree, the syscall lane's threads apart), and
//! the findings turn those into a per-core model of a machine with a spare core near the NIC.

mod figures;
mod job;
mod model;
pub mod placement;
pub mod programs;
mod report;
mod rows;
mod scratch;
pub mod spark;
mod table;
pub mod threads;
mod trial;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use corelane::lane::StopSignal;
use corelane::topology::CpuList;

use placement::{CoreKind, Cpus, Lane, Launcher};
use programs::App;
pub use report::AppsLabReport;
pub use rows::{AppRow, PingRow};
use trial::{PingTrial, Placed, ServeTrial};

use crate::experiment::{self, Experiment, Measured, Options, Prepare, Progress};
use crate::testbed::{Network, Testbed};
use crate::workdir::{Remover, WorkDir};
use crate::LabError;

/// `corelane lab apps` in the list of experiments.
pub const ENTRY: experiment::Entry = experiment::Entry::of::<AppsArgs>(
    "apps",
    "003",
    "core partitioning and syscall threads",
    "unmodified nginx, memcached, redis, Apache (event and prefork) and a Spark MapReduce job placed NS/NC/NZ, with and without the syscall lane (corelane run); ping-pong side-effect check",
    "the testbed, every program it started (every JVM of the Spark cluster too) and their private directory were removed",
);

/// `corelane lab apps`'s options.
#[derive(Debug, Clone, clap::Args)]
pub struct AppsArgs {
    #[command(flatten)]
    pub run: experiment::TrialArgs,
    /// Programs to serve with: nginx, memcached, redis, apache, apache-prefork, mapreduce, or none
    /// (default: every one installed; `apt-get install nginx-light wrk curl memcached
    /// libmemcached-tools redis-server redis-tools apache2 openjdk-17-jre-headless`, and
    /// pyspark in a virtual environment: see `--spark-venv`).
    #[arg(long, value_delimiter = ',', value_name = "APPS")]
    pub apps: Option<Vec<String>>,
    /// Placements: NS, NC, NZ (default all three; NC alone with --quick).
    #[arg(long, value_delimiter = ',', value_name = "PLACEMENTS")]
    pub placements: Option<Vec<String>>,
    /// Syscall lanes: none (the program makes its own calls), threads, uring (default all
    /// three; mapreduce with --quick: none and threads).
    #[arg(long, value_delimiter = ',', value_name = "LANES")]
    pub lanes: Option<Vec<String>>,
    /// Load-generator connections.
    #[arg(long, default_value_t = 16, value_parser = corelane::units::parse_count)]
    pub connections: usize,
    /// Size of the file the web servers serve (generated, random bytes).
    #[arg(long, default_value = "4K", value_parser = corelane::units::parse_size)]
    pub file_size: usize,
    /// Records of the MapReduce job (default 6000000; 1000000 with --quick).
    #[arg(long, value_parser = corelane::units::parse_count)]
    pub records: Option<usize>,
    /// The virtual environment holding pyspark (default: target/spark/venv beside this
    /// binary, where `.ci/spark.sh` installs it).
    #[arg(long, value_name = "DIR")]
    pub spark_venv: Option<PathBuf>,
}

/// Largest `--file-size`: the file is held in memory to compare what is served.
const MAX_FILE: usize = 64 << 20;
/// Most `--records`: the answer is computed here with a table of half as many keys.
const MAX_RECORDS: usize = 50_000_000;

impl experiment::Trials for AppsLabOptions {
    fn trials(&self) -> usize {
        self.trials
    }
}

impl Options for AppsArgs {
    type Settings = AppsLabOptions;
    type Lab<'s> = AppsLab<'s>;
    type Report = AppsLabReport;
    /// The settings these arguments describe.
    fn settings(self) -> Result<AppsLabOptions, LabError> {
        let mut opts =
            if self.run.quick { AppsLabOptions::quick() } else { AppsLabOptions::full() };
        self.run.apply(&mut opts.trials, &mut opts.duration, Duration::from_secs(1))?;
        opts.duration = Duration::from_secs(opts.duration.as_secs().max(1));
        opts.apps =
            crate::parse_names(self.apps.as_deref(), &App::ALL.map(|a| (a.id(), a)), "program")?;
        if self.placements.is_some() {
            let known = CoreKind::ALL.map(|p| (p.id(), p));
            opts.placements = crate::parse_names(self.placements.as_deref(), &known, "placement")?;
        }
        if let Some(names) = &self.lanes {
            opts.lanes = names.iter().map(|n| Lane::named(n)).collect::<Result<_, _>>()?;
            opts.job_lanes = opts.lanes.clone();
        }
        if self.connections == 0 {
            return Err(LabError::Options("--connections must be above 0".into()));
        }
        opts.connections = self.connections;
        if self.file_size == 0 || self.file_size > MAX_FILE {
            return Err(LabError::Options(format!(
                "--file-size must be 1 byte to {} MiB",
                MAX_FILE >> 20
            )));
        }
        opts.file_size = self.file_size;
        if let Some(records) = self.records {
            if records == 0 || records > MAX_RECORDS {
                return Err(LabError::Options(format!(
                    "--records must be 1 to {MAX_RECORDS} (the answer is checked against a table of half as many keys)"
                )));
            }
            opts.records = records as u64;
        }
        if let Some(venv) = &self.spark_venv {
            spark::check_named_venv(venv)?;
        }
        opts.spark_venv = self.spark_venv;
        Ok(opts)
    }
}

/// How to run the experiment.
#[derive(Debug, Clone)]
pub struct AppsLabOptions {
    pub trials: usize,
    /// Load time per measurement (whole seconds: the load generators take seconds).
    pub duration: Duration,
    pub apps: Vec<App>,
    pub placements: Vec<CoreKind>,
    pub lanes: Vec<Lane>,
    pub connections: usize,
    pub file_size: usize,
    /// The lanes of the MapReduce rows (JVMs are slow to start: with --quick, none and
    /// threads only).
    pub job_lanes: Vec<Lane>,
    /// Records of the MapReduce job.
    pub records: u64,
    /// Where pyspark is (`None`: `spark::default_venv`).
    pub spark_venv: Option<PathBuf>,
}

impl AppsLabOptions {
    pub fn full() -> Self {
        Self {
            trials: 3,
            duration: Duration::from_secs(5),
            apps: App::ALL.to_vec(),
            placements: CoreKind::ALL.to_vec(),
            lanes: Lane::ALL.to_vec(),
            connections: 16,
            file_size: 4096,
            job_lanes: Lane::ALL.to_vec(),
            records: 6_000_000,
            spark_venv: None,
        }
    }

    /// A short run for CI: NC only (the seed's partition), one trial of two seconds.
    pub fn quick() -> Self {
        Self {
            trials: 1,
            duration: Duration::from_secs(2),
            placements: vec![CoreKind::Nc],
            job_lanes: vec![Lane::None, Lane::Threads],
            records: 1_000_000,
            ..Self::full()
        }
    }
}

/// One configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    Serve {
        app: App,
        placement: CoreKind,
        lane: Lane,
    },
    /// The side-effect check, placed NC.
    Ping {
        lane: Lane,
    },
}

/// What one trial of a [`Case`] measured.
#[derive(Debug, Clone)]
pub enum CaseTrial {
    Serve(ServeTrial),
    Ping(PingTrial),
}

/// The prepared stage.
#[derive(Debug)]
pub struct AppsLab<'a> {
    opts: &'a AppsLabOptions,
    testbed: Testbed,
    cpus: Cpus,
    launcher: Launcher,
    /// Configurations, the served file, the compiled echo, run summaries (mode 0711: the
    /// web servers' worker users traverse it to `www/`; nothing in it is writable by them).
    dir: WorkDir,
    /// Removes `dir` if the lab is killed (dropped after it, so it never races the lab's own
    /// removal).
    _remover: Option<Remover>,
    file: Vec<u8>,
    echo: Option<PathBuf>,
    /// pyspark, once the MapReduce rows found it.
    spark: Option<spark::Spark>,
    skipped: Vec<String>,
}

impl<'a> Prepare<'a> for AppsLab<'a> {
    type Settings = AppsLabOptions;

    fn prepare(opts: &'a AppsLabOptions, progress: Progress<'_>) -> Result<Self, LabError> {
        let testbed = Testbed::create();
        testbed.announce(progress);
        let online = testbed.rx().online_cpus()?;
        let other = online.cpus()[0];
        let softirq = *online.cpus().last().unwrap_or(&other);
        let cpus = Cpus { softirq, other, online };
        let mut skipped = Vec::new();
        if softirq == other {
            skipped.push("one CPU only: every placement is the same CPU".into());
        }
        let launcher = Launcher::detect(&crate::corelane_exe()?.display().to_string());
        for stale in crate::workdir::remove_stale_trees("apps") {
            progress(&format!("removed a killed run's directory: {}", stale.display()));
        }
        let dir = scratch::private_dir()?;
        let _remover = dir.remover();
        let file = scratch::generated_file(opts.file_size);
        let www = dir.path().join("www");
        scratch::make_www(&www)?;
        programs::write_private(&www, programs::FILE_NAME, &file)?;
        let echo = match scratch::build_echo(dir.path()) {
            Ok(bin) => Some(bin),
            Err(why) => {
                skipped.push(format!("ping-pong side-effect check: {why}"));
                None
            }
        };
        progress(&format!("[apps] programs start under {}", launcher.name()));
        let spark = None;
        Ok(Self { opts, testbed, cpus, launcher, dir, _remover, file, echo, spark, skipped })
    }
}

impl<'a> AppsLab<'a> {
    fn port(&self, app: App) -> Result<u16, LabError> {
        match self.testbed.network {
            Network::Loopback { .. } => crate::stage::free_tcp_port(),
            _ => Ok(app.namespace_port()),
        }
    }

    /// Whether every program `app` needs is installed; if not, says what to install.
    fn installed(&mut self, app: App) -> bool {
        let (rx, tx) = (self.testbed.rx(), self.testbed.tx());
        let missing: Vec<(&str, &str)> = app
            .needs()
            .iter()
            .enumerate()
            .filter(|(i, (program, _))| {
                let host = if *i == 0 { &rx } else { &tx };
                host.find_program(program).is_none()
            })
            .map(|(_, need)| *need)
            .collect();
        if missing.is_empty() {
            return app != App::Mapreduce || self.found_spark();
        }
        let programs: Vec<&str> = missing.iter().map(|m| m.0).collect();
        let mut packages: Vec<&str> = missing.iter().map(|m| m.1).collect();
        packages.dedup();
        self.skipped.push(format!(
            "{}: {} not installed (apt-get install {})",
            app.id(),
            programs.join(", "),
            packages.join(" ")
        ));
        false
    }

    /// Whether pyspark is where `--spark-venv` (or the default) says; if not, says why.
    fn found_spark(&mut self) -> bool {
        let venv = match &self.opts.spark_venv {
            Some(dir) => dir.clone(),
            None => match spark::default_venv() {
                Ok(dir) => dir,
                Err(e) => {
                    self.skipped.push(format!("mapreduce: {e}"));
                    return false;
                }
            },
        };
        match spark::Spark::find(&venv) {
            Ok(found) => {
                self.spark = Some(found);
                true
            }
            Err(why) => {
                self.skipped.push(format!("mapreduce: {why}"));
                false
            }
        }
    }

    fn placed(&self, placement: CoreKind, lane: Lane, tag: String) -> Placed<'_> {
        Placed {
            launcher: &self.launcher,
            app_cpus: placement.app_cpus(&self.cpus),
            syscall_cpus: placement.syscall_cpus(&self.cpus),
            lane,
            tag,
        }
    }

    fn serve(
        &self,
        app: App,
        placement: CoreKind,
        lane: Lane,
        (index, stop): (usize, &StopSignal),
    ) -> Result<ServeTrial, LabError> {
        let (rx, tx) = (self.testbed.rx(), self.testbed.tx());
        let stage = programs::Stage {
            rx: &rx,
            tx: &tx,
            addr: self.testbed.rx_addrs()[0],
            port: self.port(app)?,
            connections: self.opts.connections,
            duration: self.opts.duration,
            dir: self.dir.path(),
            file: &self.file,
            load_cpu: placement.load_cpu(&self.cpus),
        };
        // memccapable takes seconds: once per lane variant, on the first placement's first trial.
        let suite =
            app == App::Memcached && index == 0 && self.opts.placements.first() == Some(&placement);
        let tag = format!("{}-{}-{}-{index}", app.id(), placement.id(), lane.id());
        let placed = self.placed(placement, lane, tag);
        if app == App::Mapreduce {
            return self.job(&stage, &placed, stop);
        }
        trial::serve(app, &stage, &placed, suite, index)
    }

    /// One MapReduce trial on the stage a server would have.
    fn job(
        &self,
        stage: &programs::Stage<'_>,
        placed: &Placed<'_>,
        stop: &StopSignal,
    ) -> Result<ServeTrial, LabError> {
        let spark = self.spark.as_ref().ok_or_else(|| LabError::Options("no pyspark".into()))?;
        let driver = self.testbed.tx_addr().ok_or_else(|| {
            LabError::Options("mapreduce runs on this machine's testbed only".into())
        })?;
        let at = job::JobStage {
            rx: stage.rx,
            tx: stage.tx,
            cluster: stage.addr,
            driver,
            port: stage.port,
            dir: stage.dir,
            records: self.opts.records,
            driver_cpu: stage.load_cpu,
            spark,
            java: &programs::locate(stage.rx, "java", "openjdk-17-jre-headless")?,
            stop,
        };
        job::run(&at, placed)
    }

    fn ping(&self, lane: Lane, index: usize) -> Result<PingTrial, LabError> {
        let echo = self.echo.clone().ok_or_else(|| LabError::Options("no echo".into()))?;
        let (rx, tx) = (self.testbed.rx(), self.testbed.tx());
        let port = crate::stage::udp_port(&self.testbed)?;
        let at = trial::PingStage {
            rx: &rx,
            tx: &tx,
            target: SocketAddr::new(self.testbed.rx_addrs()[0], port),
            echo,
            client_cpu: self.cpus.other,
            duration: self.opts.duration,
            dir: self.dir.path(),
        };
        let tag = format!("ping-{}-{index}", lane.id());
        trial::ping(&at, &self.placed(CoreKind::Nc, lane, tag))
    }
}

impl Experiment for AppsLab<'_> {
    type Config = Case;
    type Trial = CaseTrial;
    type Report = AppsLabReport;

    fn configurations(&mut self) -> Result<Vec<Case>, LabError> {
        let lanes: Vec<Lane> = self.opts.lanes.clone();
        let mut runnable = Vec::new();
        let mut refused: Vec<(&str, &str)> = Vec::new();
        for lane in lanes {
            match self.launcher.runs(lane) {
                Ok(()) => runnable.push(lane),
                Err(why) => refused.push((lane.id(), why)),
            }
        }
        for why in [placement::NO_RUN, placement::NO_URING] {
            let ids: Vec<&str> = refused.iter().filter(|r| r.1 == why).map(|r| r.0).collect();
            if !ids.is_empty() {
                self.skipped.push(format!("{} lane rows: {why}", ids.join(" and ")));
            }
        }
        let mut cases = Vec::new();
        for app in self.opts.apps.clone() {
            if !self.installed(app) {
                continue;
            }
            let lanes: Vec<Lane> = if app == App::Mapreduce {
                runnable.iter().copied().filter(|l| self.opts.job_lanes.contains(l)).collect()
            } else {
                runnable.clone()
            };
            for &placement in &self.opts.placements {
                cases.extend(lanes.iter().map(|&lane| Case::Serve { app, placement, lane }));
            }
        }
        if self.echo.is_some() {
            cases.extend(runnable.iter().map(|&lane| Case::Ping { lane }));
        }
        Ok(cases)
    }

    fn label(&self, case: &Case) -> String {
        match case {
            Case::Serve { app, placement, lane } => {
                format!("{} {} lane {}", app.id(), placement.id(), lane.id())
            }
            Case::Ping { lane } => format!("ping-pong lane {}", lane.id()),
        }
    }

    fn trial(
        &mut self,
        case: &Case,
        index: usize,
        stop: &StopSignal,
    ) -> Result<CaseTrial, LabError> {
        // Receive processing on the softirq CPU, as every placement assumes.
        self.testbed.steer_receive_where_possible(&CpuList::new(vec![self.cpus.softirq]))?;
        match *case {
            Case::Serve { app, placement, lane } => {
                self.serve(app, placement, lane, (index, stop)).map(CaseTrial::Serve)
            }
            Case::Ping { lane } => self.ping(lane, index).map(CaseTrial::Ping),
        }
    }

    fn describe(&self, trial: &CaseTrial) -> String {
        match trial {
            CaseTrial::Serve(t @ ServeTrial { job: Some(j), .. }) => format!(
                "job {:.1} s, {:.0} MB shuffled, CPU {:.2} us/record ({:.2} of it the lane's) over {} JVMs, {}",
                j.job_secs,
                j.shuffle_write_bytes as f64 / 1e6,
                t.program_us_per_request + t.lane_us_per_request,
                t.lane_us_per_request,
                j.jvms,
                t.checked
            ),
            CaseTrial::Serve(t) => format!(
                "{:.0} req/s, server CPU {:.2} us/request ({:.2} of it the lane's), {}",
                t.rps,
                t.program_us_per_request + t.lane_us_per_request,
                t.lane_us_per_request,
                t.checked
            ),
            CaseTrial::Ping(t) => format!(
                "round trip p50 {:.1} us, p99 {:.1} us, echo CPU {:.2} us per round trip",
                t.p50_us,
                t.p99_us,
                t.program_us_per_round_trip + t.lane_us_per_round_trip
            ),
        }
    }

    fn report(self, measured: Vec<Measured<Case, CaseTrial>>) -> Result<AppsLabReport, LabError> {
        let _ = self.testbed.steer_receive_where_possible(&CpuList::new(Vec::new()));
        let placements = self.opts.placements.iter().map(|p| p.meaning(&self.cpus)).collect();
        Ok(report::build(report::Inputs {
            testbed: self
                .testbed
                .report(Some(format!("RPS steering receive work to CPU {}", self.cpus.softirq))),
            cpus: self.cpus.clone(),
            launcher: self.launcher.name().into(),
            placements,
            opts: self.opts,
            skipped: self.skipped,
            measured,
        }))
    }
}
