//! Seed 003's placements on this machine's CPUs, each with and without the syscall lane, and
//! how a program is started so placed: under `corelane run` where this build has it, under
//! `taskset` (placement only, no lane) where it does not.
//!
//! The seed had many cores: interrupts on core 0 of the NIC's package, system calls and
//! bottom halves on cores sharing its LLC, applications on the rest. Here there are two
//! CPUs, so every placement is named by where the application runs relative to the
//! *softirq CPU* (the one RPS steers receive processing to, standing in for the NIC's
//! interrupt core):
//! - NS: the application on the softirq CPU; the load generator alone on the other CPU. With
//!   a lane, the syscall threads share that CPU too (the messaging's cost, no gain possible).
//! - NC: the application on the other CPU, beside the load generator; bottom halves and, with
//!   a lane, the syscall threads on the softirq CPU: the seed's partition, with the load
//!   generator where the seed had spare application cores.
//! - NZ: the application unpinned (the scheduler places it on either CPU); bottom halves and
//!   syscall threads on the softirq CPU; the load generator on the other CPU.

use corelane::topology::CpuList;
use serde::Serialize;

/// Where the application runs relative to the softirq CPU (by its `id` in rows and tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CoreKind {
    #[serde(rename = "NS")]
    Ns,
    #[serde(rename = "NC")]
    Nc,
    #[serde(rename = "NZ")]
    Nz,
}

/// How the program's network system calls are made (by its `id` in rows and tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Lane {
    /// By the program's own threads (no syscall lane).
    None,
    /// By `cl-sys-N` syscall threads on the syscall CPUs (the seed's design).
    Threads,
    /// Through an io_uring whose SQPOLL thread runs on the syscall CPUs.
    Uring,
}

/// The two CPUs every placement is made of.
#[derive(Debug, Clone)]
pub struct Cpus {
    /// The CPU receive processing is steered to.
    pub softirq: usize,
    /// The other one.
    pub other: usize,
    /// Every online CPU (an unpinned program's).
    pub online: CpuList,
}

impl CoreKind {
    pub const ALL: [CoreKind; 3] = [CoreKind::Ns, CoreKind::Nc, CoreKind::Nz];

    pub fn id(&self) -> &'static str {
        match self {
            Self::Ns => "NS",
            Self::Nc => "NC",
            Self::Nz => "NZ",
        }
    }

    /// The application's CPUs.
    pub fn app_cpus(&self, cpus: &Cpus) -> CpuList {
        match self {
            Self::Ns => CpuList::new(vec![cpus.softirq]),
            Self::Nc => CpuList::new(vec![cpus.other]),
            Self::Nz => cpus.online.clone(),
        }
    }

    /// The syscall threads' CPUs: beside the bottom halves, as the seed placed them.
    pub fn syscall_cpus(&self, cpus: &Cpus) -> CpuList {
        CpuList::new(vec![cpus.softirq])
    }

    /// The load generator's CPU: never the softirq CPU.
    pub fn load_cpu(&self, cpus: &Cpus) -> usize {
        cpus.other
    }

    /// What the placement means on this machine, for the report.
    pub fn meaning(&self, cpus: &Cpus) -> String {
        let (s, o) = (cpus.softirq, cpus.other);
        match self {
            Self::Ns => format!(
                "NS: application, its bottom halves and (with a lane) its syscall threads all on the softirq CPU {s}; load generator alone on CPU {o}"
            ),
            Self::Nc => format!(
                "NC: application on CPU {o} beside the load generator; bottom halves and (with a lane) syscall threads on the softirq CPU {s} (the core-partitioning study's partition, without its spare cores)"
            ),
            Self::Nz => format!(
                "NZ: application unpinned (CPUs {}); bottom halves and (with a lane) syscall threads on the softirq CPU {s}; load generator on CPU {o}",
                cpus.online
            ),
        }
    }
}

impl std::fmt::Display for CoreKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

impl std::fmt::Display for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

impl Lane {
    pub const ALL: [Lane; 3] = [Lane::None, Lane::Threads, Lane::Uring];

    /// The lane `name`s (`none` is the row without a lane, not "no rows"), or an error
    /// listing the choices.
    pub fn named(name: &str) -> Result<Lane, crate::LabError> {
        Self::ALL.into_iter().find(|l| l.id() == name).ok_or_else(|| {
            crate::LabError::Options(format!(
                "unknown lane `{name}`: choose from none, threads, uring"
            ))
        })
    }

    pub fn id(&self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Threads => "threads",
            Self::Uring => "uring",
        }
    }
}

/// How programs are started placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launcher {
    /// `corelane run` of this build, and whether its help offers the uring lane.
    Run { exe: String, uring: bool },
    /// `taskset -c` (this build has no `corelane run`): placement only, rows without a lane.
    Taskset,
}

/// Why lane rows are skipped when this build has no `corelane run`.
pub const NO_RUN: &str = "corelane run is not available in this build";
/// Why uring rows are skipped when its `corelane run` offers no uring lane.
pub const NO_URING: &str = "this build's corelane run offers no uring lane";

impl Launcher {
    /// `corelane run` if `exe run --help` works (with the uring lane if its help names
    /// it), `taskset` otherwise.
    pub fn detect(exe: &str) -> Self {
        let help = std::process::Command::new(exe)
            .args(["run", "--help"])
            .stdin(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|out| out.status.success());
        match help {
            Some(out) => {
                let uring = String::from_utf8_lossy(&out.stdout).contains("uring");
                Self::Run { exe: exe.to_string(), uring }
            }
            None => Self::Taskset,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::Run { .. } => "corelane run",
            Self::Taskset => "taskset",
        }
    }

    /// Whether rows with `lane` can run; otherwise why not.
    pub fn runs(&self, lane: Lane) -> Result<(), &'static str> {
        match (self, lane) {
            (Self::Taskset, Lane::Threads | Lane::Uring) => Err(NO_RUN),
            (Self::Run { uring: false, .. }, Lane::Uring) => Err(NO_URING),
            _ => Ok(()),
        }
    }

    /// The command that starts `program args` with its threads on `app` and, with a lane,
    /// its network system calls on `syscall`; `corelane run` writes its summary to `json`.
    pub fn command(
        &self,
        app: &CpuList,
        lane: Lane,
        syscall: &CpuList,
        json: &std::path::Path,
        program: &str,
        args: &[String],
    ) -> (String, Vec<String>) {
        match self {
            Self::Run { exe, .. } => {
                let mut argv = vec!["run".to_string(), "--app-cpus".into(), app.to_string()];
                if lane != Lane::None {
                    argv.extend(["--syscall-cpus".into(), syscall.to_string()]);
                    argv.extend(["--syscall-lane".into(), lane.id().into()]);
                }
                argv.extend(["--json".into(), json.display().to_string(), "--".into()]);
                argv.push(program.into());
                argv.extend_from_slice(args);
                (exe.clone(), argv)
            }
            Self::Taskset => {
                let mut argv = vec!["-c".to_string(), app.to_string(), program.to_string()];
                argv.extend_from_slice(args);
                ("taskset".into(), argv)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus() -> Cpus {
        Cpus { softirq: 1, other: 0, online: CpuList::new(vec![0, 1]) }
    }

    #[test]
    fn placements_map_to_two_cpus_and_never_load_the_softirq_cpu() {
        let c = cpus();
        assert_eq!(CoreKind::Ns.app_cpus(&c).cpus(), [1]);
        assert_eq!(CoreKind::Nc.app_cpus(&c).cpus(), [0]);
        assert_eq!(CoreKind::Nz.app_cpus(&c).cpus(), [0, 1]);
        for p in CoreKind::ALL {
            assert_eq!(p.syscall_cpus(&c).cpus(), [1]);
            assert_eq!(p.load_cpu(&c), 0);
        }
    }

    #[test]
    fn commands_place_the_program_as_asked() {
        let c = cpus();
        let run = Launcher::Run { exe: "/x/corelane".into(), uring: false };
        let json = std::path::Path::new("/d/run.json");
        let (exe, argv) = run.command(
            &CoreKind::Nc.app_cpus(&c),
            Lane::Threads,
            &CoreKind::Nc.syscall_cpus(&c),
            json,
            "nginx",
            &["-c".into(), "n.conf".into()],
        );
        assert_eq!(exe, "/x/corelane");
        let want = "run --app-cpus 0 --syscall-cpus 1 --syscall-lane threads --json /d/run.json -- nginx -c n.conf";
        assert_eq!(argv.join(" "), want);
        let (_, plain) = run.command(&c.online, Lane::None, &c.online, json, "redis-server", &[]);
        assert_eq!(plain.join(" "), "run --app-cpus 0-1 --json /d/run.json -- redis-server");
        let (exe, argv) = Launcher::Taskset.command(
            &CpuList::new(vec![1]),
            Lane::None,
            &c.online,
            json,
            "a",
            &[],
        );
        assert_eq!((exe.as_str(), argv.join(" ").as_str()), ("taskset", "-c 1 a"));
        assert_eq!(Launcher::Taskset.runs(Lane::Uring), Err(NO_RUN));
        assert!(Launcher::Taskset.runs(Lane::None).is_ok());
        assert_eq!(run.runs(Lane::Uring), Err(NO_URING));
        assert!(run.runs(Lane::Threads).is_ok());
    }

    /// `--lanes none` is the row without a lane (the lab's other `none`s mean "no rows").
    #[test]
    fn lane_names_include_none_as_a_row() {
        assert_eq!(Lane::named("none").unwrap(), Lane::None);
        assert_eq!(Lane::named("uring").unwrap(), Lane::Uring);
        let err = Lane::named("sqpoll").unwrap_err().to_string();
        assert!(err.contains("unknown lane `sqpoll`: choose from none, threads, uring"), "{err}");
    }
}
