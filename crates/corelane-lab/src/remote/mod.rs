//! A side of an experiment on another machine, reached over SSH: the connection
//! ([`ssh::Session`]), the corelane that runs there (found on PATH, given, or deployed for
//! the run and removed after it; refused when its version differs from ours), and the
//! [`guard`] every remote process runs under so that none outlives the run.

pub mod args;
pub mod clock;
pub mod guard;
pub mod inventory;
pub mod ssh;

use std::process::{Command, Stdio};
use std::time::Duration;

use corelane::child_output::{self, printable, Limits, OutputError};

pub use args::{RemoteArgs, RemoteSpec};
pub use ssh::{SshOptions, SshTarget};

use crate::LabError;

/// Where the corelane on a remote host comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteCorelane {
    /// `corelane` on the remote user's PATH.
    OnPath,
    /// A path on the remote host.
    At(String),
    /// This binary, copied over the connection into a private temporary directory and
    /// removed at the end.
    Deploy,
}

/// A connected remote host with a corelane of our version on it.
#[derive(Debug)]
pub struct Remote {
    session: ssh::Session,
    corelane: String,
    /// The remote `sh` that removes the deployed binary's directory when its stdin closes:
    /// on drop, or when the lab (and with it this ssh client) dies.
    janitor: Option<std::process::Child>,
    /// The deployed copy's directory, removed directly at the end of a normal run.
    deployed_dir: Option<String>,
}

/// The caps on deploying: a reply's bytes, and time for a large binary over a slow link.
const DEPLOY: Limits = Limits { time: Duration::from_secs(1800), ..Limits::REPLY };

/// The longest any remote process may live (the guard ends it then, whatever the lab does).
pub const MAX_LIFE: Duration = Duration::from_secs(900);

impl Remote {
    /// Connects, finds or deploys corelane, and checks its version against ours.
    pub fn connect(
        target: &SshTarget,
        options: &SshOptions,
        corelane: &RemoteCorelane,
    ) -> Result<Self, LabError> {
        let session = ssh::Session::connect(target, options)?;
        let mut remote =
            Self { session, corelane: "corelane".into(), janitor: None, deployed_dir: None };
        match corelane {
            RemoteCorelane::OnPath => {}
            RemoteCorelane::At(path) => remote.corelane = path.clone(),
            RemoteCorelane::Deploy => remote.deploy()?,
        }
        remote.check_version()?;
        Ok(remote)
    }

    fn host(&self) -> String {
        self.session.target().to_string()
    }

    /// Copies this binary into `mktemp -d` on the host (mode 0700) over the connection.
    fn deploy(&mut self) -> Result<(), LabError> {
        let exe = crate::corelane_exe()?;
        let bytes = std::fs::read(&exe)
            .map_err(|e| LabError::io(format!("cannot read {}", exe.display()), e))?;
        let script = "umask 077; d=$(mktemp -d /tmp/corelane-deploy.XXXXXXXX) || exit 1; \
                      cat > \"$d/corelane\" && chmod 700 \"$d/corelane\" && echo \"$d\"";
        let argv = self.session.argv("sh", &["-c".into(), script.into()]);
        let out = child_output::run(Command::new(&argv[0]).args(&argv[1..]), Some(bytes), &DEPLOY)
            .map_err(|e| self.reply_error("sh -c 'cat > corelane'", e))?;
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.stdin_error.is_some() || !out.status.success() || !is_deploy_dir(&dir) {
            return Err(LabError::Remote {
                host: self.host(),
                problem: format!(
                    "cannot deploy corelane into a temporary directory ({}): is /tmp writable there?",
                    printable(&String::from_utf8_lossy(&out.stderr), 2000)
                ),
            });
        }
        self.corelane = format!("{dir}/corelane");
        self.deployed_dir = Some(dir.clone());
        let script = "cat > /dev/null; rm -rf -- \"$1\"";
        let argv = self.session.argv("sh", &["-c".into(), script.into(), "sh".into(), dir]);
        let janitor = crate::process::with_parent_death_signal(&argv)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| LabError::io("cannot run ssh", e))?;
        self.janitor = Some(janitor);
        Ok(())
    }

    /// Refuses a remote corelane whose `--version` differs from ours, naming both.
    fn check_version(&self) -> Result<(), LabError> {
        let ours = format!("corelane {}", env!("CARGO_PKG_VERSION"));
        let theirs = self.run(&self.corelane, &["--version"]).map_err(|e| match e {
            e @ LabError::Remote { .. } => e,
            e => LabError::Remote {
                host: self.host(),
                problem: format!(
                    "cannot run {} there ({e}): install corelane on its PATH, give --remote-corelane PATH, or pass --deploy",
                    self.corelane
                ),
            },
        })?;
        let theirs = theirs.trim();
        if theirs != ours {
            return Err(LabError::Remote {
                host: self.host(),
                problem: format!(
                    "runs {:?} but this is {ours:?}: install the same version there, or pass --deploy",
                    printable(theirs, 200)
                ),
            });
        }
        Ok(())
    }

    /// The path of corelane on the host.
    pub fn corelane(&self) -> &str {
        &self.corelane
    }

    /// The argv that runs `program args…` on the host, under the guard (ended when the
    /// lab closes its stdin, or after [`MAX_LIFE`]).
    pub fn guarded_argv(&self, program: &str, args: &[String]) -> Vec<String> {
        self.guarded_argv_at(program, args, None)
    }

    /// Like [`guarded_argv`](Self::guarded_argv), the program started at `start_at_ns`
    /// (nanoseconds since the epoch on the host's own clock) rather than at once.
    pub fn guarded_argv_at(
        &self,
        program: &str,
        args: &[String],
        start_at_ns: Option<u64>,
    ) -> Vec<String> {
        let mut guarded =
            vec!["guard".to_string(), "--life".into(), format!("{}s", MAX_LIFE.as_secs())];
        if let Some(at) = start_at_ns {
            guarded.extend(["--start-at".into(), at.to_string()]);
        }
        guarded.extend(["--".into(), program.into()]);
        guarded.extend_from_slice(args);
        self.session.argv(&self.corelane, &guarded)
    }

    /// The argv that runs `program args…` on the host over the connection (no guard).
    pub fn session_argv(&self, program: &str, args: &[String]) -> Vec<String> {
        self.session.argv(program, args)
    }

    /// Runs `program args…` on the host to completion; its stdout, or the command and its
    /// stderr as the error.
    pub fn run(&self, program: &str, args: &[&str]) -> Result<String, LabError> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let argv = self.session.argv(program, &args);
        let shown =
            shell_words::join(std::iter::once(program).chain(args.iter().map(String::as_str)));
        let out = child_output::run(Command::new(&argv[0]).args(&argv[1..]), None, &Limits::REPLY)
            .map_err(|e| self.reply_error(&shown, e))?;
        // 255 is ssh's own failure (it could not connect, or lost the connection): one line
        // naming the host, as when a running child's connection is lost.
        if out.status.code() == Some(255) {
            return Err(LabError::Remote {
                host: self.host(),
                problem: format!(
                    "the connection was lost while `{}` ran ({}); the host restores what the lab changed there when its sessions end: check the network and sshd",
                    printable(&shown, 200),
                    printable(&String::from_utf8_lossy(&out.stderr), 500)
                ),
            });
        }
        if !out.status.success() {
            return Err(LabError::Command {
                command: format!("{} on {}", printable(&shown, 200), self.host()),
                stderr: printable(&String::from_utf8_lossy(&out.stderr), 2000),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The one-line error for a command whose reply went past the caps (or could not run).
    fn reply_error(&self, shown: &str, error: OutputError) -> LabError {
        match error {
            OutputError::Spawn(e) => LabError::io("cannot run ssh", e),
            e => LabError::Remote {
                host: self.host(),
                problem: format!(
                    "`{}` there: {e}: run it there by hand to see why",
                    printable(shown, 200)
                ),
            },
        }
    }

    pub fn target(&self) -> &SshTarget {
        self.session.target()
    }
}

/// Two connections are the same host when they reach the same target.
impl PartialEq for Remote {
    fn eq(&self, other: &Self) -> bool {
        self.target() == other.target()
    }
}

impl Eq for Remote {}

impl Drop for Remote {
    fn drop(&mut self) {
        // Removed here, before the lab exits; the janitor is for a lab that never gets here.
        if let Some(dir) = self.deployed_dir.take() {
            let _ = self.run("rm", &["-rf", "--", &dir]);
        }
        if let Some(mut janitor) = self.janitor.take() {
            drop(janitor.stdin.take());
            let _ = janitor.wait();
        }
    }
}

/// A deployed copy's directory: the only kind the end of a run removes.
fn is_deploy_dir(dir: &str) -> bool {
    guard::is_mktemp_dir(dir, guard::DEPLOY_DIR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_mktemp_directory_is_ever_removed() {
        assert!(is_deploy_dir("/tmp/corelane-deploy.Ab3dE5g7"));
        for bad in
            ["/", "/tmp", "/tmp/corelane-deploy.", "/tmp/corelane-deploy.ab/../..", "/home/x"]
        {
            assert!(!is_deploy_dir(bad), "{bad}");
        }
    }
}
