//! Apache Spark as the MapReduce row runs it: pyspark in a virtual environment (which ships
//! Spark's jars and the driver's Python side), its JVMs started directly (`java -cp JARS
//! …Master|Worker`, never through Spark's daemon scripts, so the lab owns their PIDs), every
//! directory Spark writes — local and work directories, the JVMs' `java.io.tmpdir`, the
//! driver's temporary files — inside one per-trial directory of the lab's private
//! directory, and no JVM keeping `hsperfdata` in /tmp. The job's answer is computed here,
//! apart from Spark, to check the one the driver prints.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::host::Host;
use crate::LabError;

/// The pyspark version `.ci/spark.sh` installs (the lab runs whichever it finds, and names it).
pub const PINNED: &str = "4.0.1";

/// The driver program (a PySpark script), written into each trial's directory.
const JOB_SCRIPT: &str = include_str!("../../peers/spark_job.py");

/// What Spark's launcher adds to every JVM on Java 17 (`JavaModuleOptions`): Spark reaches
/// into these JDK internals. The driver's launcher and the workers add them to the driver and
/// executors themselves; the master and workers, started directly, need them here.
const MODULE_OPTIONS: [&str; 19] = [
    "-XX:+IgnoreUnrecognizedVMOptions",
    "--add-modules=jdk.incubator.vector",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.cs=ALL-UNNAMED",
    "--add-opens=java.base/sun.security.action=ALL-UNNAMED",
    "--add-opens=java.base/sun.util.calendar=ALL-UNNAMED",
    "--add-opens=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "-Djdk.reflect.useDirectMethodHandle=false",
    "-Dio.netty.tryReflectionSetAccessible=true",
];

/// Spark's log: warnings and errors only, on stderr (where the lab keeps a child's first
/// 16 KiB for its error messages).
const LOG4J: &str = "rootLogger.level = warn\nrootLogger.appenderRef.stderr.ref = console\n\
appender.console.type = Console\nappender.console.name = console\n\
appender.console.target = SYSTEM_ERR\nappender.console.layout.type = PatternLayout\n\
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex\n";

/// The workers, each with one executor of one core.
pub const WORKERS: usize = 2;
/// Map partitions and shuffle partitions of the job.
pub const PARTITIONS: usize = 8;
/// Heap of every JVM (master, workers, executors, driver): 5 JVMs stay within a few GiB.
const HEAP: &str = "768m";

/// A pyspark installation.
#[derive(Debug, Clone)]
pub struct Spark {
    /// The virtual environment's Python (the driver's).
    pub python: PathBuf,
    /// pyspark's directory: `SPARK_HOME` (it holds `jars/` and `bin/`).
    pub home: PathBuf,
    pub version: String,
    /// The Scala version of its jars (`spark-core_2.13-…`), which the workers' executor
    /// launcher asks for.
    scala: String,
}

/// Where the lab looks without `--spark-venv`: `target/spark/venv` beside the running binary
/// (`target/release/corelane`), where `.ci/spark.sh` puts it.
pub fn default_venv() -> Result<PathBuf, LabError> {
    let exe = crate::corelane_exe()?;
    let target = exe.parent().and_then(Path::parent).unwrap_or(Path::new("."));
    Ok(target.join("spark").join("venv"))
}

/// How to make the virtual environment, for the skip reason.
fn install_hint(venv: &Path) -> String {
    format!(
        ".ci/spark.sh makes one, or: python3 -m venv {0} && {0}/bin/pip install pyspark=={PINNED}; or name one with --spark-venv",
        venv.display()
    )
}

/// A `--spark-venv` the user named must be a virtual environment: refused before anything is
/// prepared (only the default place, when empty, makes the row a skip).
pub fn check_named_venv(venv: &Path) -> Result<(), LabError> {
    if venv.join("bin").join("python").is_file() {
        return Ok(());
    }
    Err(LabError::Options(format!(
        "--spark-venv {0}: no virtual environment there ({0}/bin/python is missing): make one with \
         python3 -m venv {0} && {0}/bin/pip install pyspark=={PINNED}, or leave the flag out for \
         the one .ci/spark.sh makes",
        venv.display()
    )))
}

impl Spark {
    /// pyspark in the virtual environment `venv`, or why it is not usable (one line).
    pub fn find(venv: &Path) -> Result<Spark, String> {
        let python = venv.join("bin").join("python");
        if !python.is_file() {
            return Err(format!(
                "no pyspark virtual environment at {} ({})",
                venv.display(),
                install_hint(venv)
            ));
        }
        let probe = "import os, pyspark; print(pyspark.__version__); print(os.path.dirname(pyspark.__file__))";
        let shown = python.display().to_string();
        let out = Host::Local
            .run(&shown, &["-c", probe])
            .map_err(|e| format!("{shown} cannot import pyspark: {e} ({})", install_hint(venv)))?;
        let mut lines = out.lines();
        let (Some(version), Some(home)) = (lines.next(), lines.next()) else {
            return Err(format!("{shown} printed no pyspark version and directory: {out:?}"));
        };
        let home = PathBuf::from(home.trim());
        let scala = scala_of(&home.join("jars"))?;
        Ok(Spark { python, home, version: version.trim().to_string(), scala })
    }

    fn jars(&self) -> String {
        format!("{}/jars/*", self.home.display())
    }
}

/// The Scala version in the name of `jars`' `spark-core_X-…jar`.
fn scala_of(jars: &Path) -> Result<String, String> {
    let entries = std::fs::read_dir(jars)
        .map_err(|e| format!("pyspark has no jars directory {}: {e}", jars.display()))?;
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let rest = name.strip_prefix("spark-core_")?;
            Some(rest.split('-').next()?.to_string())
        })
        .next()
        .ok_or_else(|| format!("no spark-core jar in {}", jars.display()))
}

/// A trial's own directory inside the lab's private one, with every directory Spark writes;
/// removed with everything in it when dropped (a trial's shuffle files never outlive it).
#[derive(Debug)]
pub struct TrialDir {
    path: PathBuf,
}

/// The directories of a trial, by who writes them.
const SUBDIRS: [&str; 9] = [
    "tmp",
    "conf",
    "local-master",
    "local-worker-1",
    "local-worker-2",
    "work-worker-1",
    "work-worker-2",
    "local-driver",
    "events",
];

impl TrialDir {
    /// Creates `parent/spark-TAG` (it must not exist) and its directories, the log
    /// configuration and the driver's script.
    pub fn create(parent: &Path, tag: &str) -> Result<Self, LabError> {
        let path = parent.join(format!("spark-{tag}"));
        std::fs::create_dir(&path)
            .map_err(|e| LabError::io(format!("cannot create {}", path.display()), e))?;
        let dir = TrialDir { path };
        for sub in SUBDIRS {
            let p = dir.path.join(sub);
            std::fs::create_dir(&p)
                .map_err(|e| LabError::io(format!("cannot create {}", p.display()), e))?;
        }
        super::programs::write_private(
            &dir.path.join("conf"),
            "log4j2.properties",
            LOG4J.as_bytes(),
        )?;
        super::programs::write_private(&dir.path, "spark_job.py", JOB_SCRIPT.as_bytes())?;
        Ok(dir)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file whose creation starts the measured job.
    pub fn go_file(&self) -> PathBuf {
        self.path.join("go")
    }
}

impl Drop for TrialDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Which JVM of the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Master,
    /// Worker 1 or 2.
    Worker(usize),
    Driver,
}

impl Role {
    pub fn name(&self) -> String {
        match self {
            Self::Master => "spark master".into(),
            Self::Worker(n) => format!("spark worker {n}"),
            Self::Driver => "spark driver".into(),
        }
    }

    fn local_dir(&self) -> String {
        match self {
            Self::Master => "local-master".into(),
            Self::Worker(n) => format!("local-worker-{n}"),
            Self::Driver => "local-driver".into(),
        }
    }
}

/// The environment of a JVM of `role` bound to `addr`, as `env` arguments: Spark's home and
/// Scala version, the address it binds, every directory it writes inside `dir`.
pub fn environment(spark: &Spark, dir: &TrialDir, role: Role, addr: IpAddr) -> Vec<String> {
    let d = dir.path().display();
    let java = format!(
        "JAVA_TOOL_OPTIONS=-XX:-UsePerfData -Djava.io.tmpdir={d}/tmp -Dlog4j2.configurationFile=file:{d}/conf/log4j2.properties"
    );
    let mut env = vec![
        format!("SPARK_HOME={}", spark.home.display()),
        format!("SPARK_SCALA_VERSION={}", spark.scala),
        format!("SPARK_CONF_DIR={d}/conf"),
        format!("SPARK_LOCAL_IP={addr}"),
        format!("SPARK_LOCAL_DIRS={d}/{}", role.local_dir()),
        format!("TMPDIR={d}/tmp"),
        java,
    ];
    if let Role::Worker(n) = role {
        env.push(format!("SPARK_WORKER_DIR={d}/work-worker-{n}"));
    }
    env
}

/// `java` and its arguments for the master (`Role::Master`) or a worker, listening on
/// `addr` (the master on `port`; the rest on ports the kernel picks).
pub fn jvm_command(
    spark: &Spark,
    java: &str,
    dir: &TrialDir,
    role: Role,
    addr: IpAddr,
    port: u16,
) -> Vec<String> {
    let mut argv = vec![java.to_string(), format!("-Xmx{HEAP}")];
    argv.extend(MODULE_OPTIONS.iter().map(|s| s.to_string()));
    argv.extend(["-cp".into(), spark.jars()]);
    let (addr, port) = (addr.to_string(), port.to_string());
    let words: Vec<String> = match role {
        Role::Master => ["org.apache.spark.deploy.master.Master", "--host", &addr, "--port", &port]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        Role::Worker(n) => {
            let master = format!("spark://{addr}:{port}");
            let work = format!("{}/work-worker-{n}", dir.path().display());
            let a = ["org.apache.spark.deploy.worker.Worker", &master, "--host", &addr];
            let b = ["--port", "0", "--cores", "1", "--memory", "1g", "--work-dir", &work];
            a.iter().chain(&b).map(|s| s.to_string()).collect()
        }
        Role::Driver => Vec::new(),
    };
    argv.extend(words);
    argv.extend(["--webui-port".into(), "0".into()]);
    argv
}

/// The driver's Python and arguments: the job over `records` records against the master
/// at `master:port`, the driver reachable at `driver`.
pub fn driver_command(
    spark: &Spark,
    dir: &TrialDir,
    master: IpAddr,
    port: u16,
    driver: IpAddr,
    records: u64,
) -> Vec<String> {
    let script = dir.path().join("spark_job.py");
    vec![
        spark.python.display().to_string(),
        script.display().to_string(),
        format!("spark://{master}:{port}"),
        driver.to_string(),
        records.to_string(),
        keys_for(records).to_string(),
        PARTITIONS.to_string(),
        WORKERS.to_string(),
        dir.go_file().display().to_string(),
    ]
}

/// The job's distinct keys: half the records, so nearly every key has two records, each
/// from another map partition, and little is combined before the shuffle.
pub fn keys_for(records: u64) -> u64 {
    (records / 2).max(1)
}

/// The job's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
pub struct Answer {
    pub groups: u64,
    pub records: u64,
    pub checksum: u64,
}

/// The answer computed here, as the driver's script defines the job: record `id` has key
/// `id * 2654435761 mod keys` and value `(id * 40503 + 17) mod 1000003`; per key its count
/// `c` and sum `s`; the checksum sums `(k mod 1009 + 1) * s + 7 * c` over the keys.
pub fn expected(records: u64) -> Answer {
    let keys = keys_for(records);
    let mut groups: Vec<(u64, u64)> = vec![(0, 0); keys as usize];
    for id in 0..records {
        let k = (id.wrapping_mul(2_654_435_761) % keys) as usize;
        let v = (id * 40503 + 17) % 1_000_003;
        groups[k].0 += 1;
        groups[k].1 += v;
    }
    let mut answer = Answer { groups: 0, records: 0, checksum: 0 };
    for (k, &(c, s)) in groups.iter().enumerate().filter(|g| g.1 .0 > 0) {
        answer.groups += 1;
        answer.records += c;
        answer.checksum += (k as u64 % 1009 + 1) * s + 7 * c;
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answer for a few records, worked out by hand from the job's definition.
    #[test]
    fn the_expected_answer_follows_the_jobs_definition() {
        // 4 records, 2 keys: id 0 → k 0, v 17; id 1 → k 1, v 40520; id 2 → k 0, v 81023;
        // id 3 → k 1, v 121526. Key 0: c 2, s 81040; key 1: c 2, s 162046.
        let a = expected(4);
        assert_eq!((a.groups, a.records), (2, 4));
        assert_eq!(a.checksum, 81040 + 14 + 2 * 162046 + 14);
        let big = expected(1_000_000);
        assert_eq!(big.records, 1_000_000);
        assert!(big.groups > 400_000 && big.groups <= 500_000, "{}", big.groups);
    }

    #[test]
    fn every_directory_spark_writes_is_inside_the_trials_directory_and_removed_with_it() {
        let parent = tempfile::tempdir().unwrap();
        let spark = Spark {
            python: "/v/bin/python".into(),
            home: "/v/pyspark".into(),
            version: PINNED.into(),
            scala: "2.13".into(),
        };
        let dir = TrialDir::create(parent.path(), "t").unwrap();
        let inside = dir.path().display().to_string();
        let addr: IpAddr = "10.0.0.2".parse().unwrap();
        for role in [Role::Master, Role::Worker(1), Role::Driver] {
            for var in environment(&spark, &dir, role, addr) {
                for path in
                    var.split(['=', ' ']).filter(|w| w.starts_with('/') || w.starts_with("file:/"))
                {
                    let path = path.trim_start_matches("file:");
                    assert!(path.starts_with(&inside) || path.starts_with("/v/"), "{var}");
                }
            }
        }
        let worker = jvm_command(&spark, "java", &dir, Role::Worker(2), addr, 7077).join(" ");
        assert!(worker.contains("spark://10.0.0.2:7077 --host 10.0.0.2"), "{worker}");
        assert!(worker.contains(&format!("--work-dir {inside}/work-worker-2")), "{worker}");
        assert!(
            TrialDir::create(parent.path(), "t").is_err(),
            "an existing directory is never adopted"
        );
        let path = dir.path().to_path_buf();
        drop(dir);
        assert!(!path.exists());
    }

    #[test]
    fn the_scala_version_is_read_from_the_jars() {
        let jars = tempfile::tempdir().unwrap();
        std::fs::write(jars.path().join("spark-core_2.13-4.0.1.jar"), b"").unwrap();
        assert_eq!(scala_of(jars.path()).unwrap(), "2.13");
        let empty = tempfile::tempdir().unwrap();
        assert!(scala_of(empty.path()).unwrap_err().contains("no spark-core jar"));
    }
}
