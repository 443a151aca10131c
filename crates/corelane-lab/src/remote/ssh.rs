//! A connection to a remote host through the system's OpenSSH client. We drive the `ssh`
//! binary rather than a Rust SSH crate so that the user's ssh config, agent, keys, jump
//! hosts and known_hosts work exactly as they do for `ssh HOST` (the `openssh` crate does the
//! same, but is async-only; a thin synchronous wrapper is all the lab needs).
//!
//! One ControlMaster connection per host, opened once: every command after it rides the
//! same authenticated connection (no handshake per command), and closing it ends them all.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

use crate::workdir::WorkDir;
use crate::LabError;

/// `[USER@]HOST[:PORT]`, with an IPv6 address in brackets (`root@[fd00::2]:2222`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
    /// The key to log in with (`ssh -i`), from an inventory's `ansible_ssh_private_key_file`.
    pub identity_file: Option<PathBuf>,
}

impl SshTarget {
    /// A target from its parts, checked: ssh would read a leading '-' as an option and
    /// spaces or quotes as more arguments, so host and user are plain names.
    pub fn new(user: Option<String>, host: &str, port: Option<u16>) -> Result<Self, String> {
        let plain = |s: &str| {
            !s.is_empty()
                && !s.starts_with('-')
                && s.chars().all(|c| c.is_ascii_alphanumeric() || "._-:%".contains(c))
        };
        if !plain(host) {
            return Err("the host must be a name or an address".into());
        }
        if user.as_deref().is_some_and(|u| !plain(u)) {
            return Err("the user must be a plain name".into());
        }
        if port == Some(0) {
            return Err("bad port".into());
        }
        Ok(Self { user, host: host.to_string(), port, identity_file: None })
    }
}

impl FromStr for SshTarget {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("{text:?} is not [USER@]HOST[:PORT]: {why}");
        let (user, rest) = match text.rsplit_once('@') {
            Some((user, rest)) => (Some(user.to_string()), rest),
            None => (None, text),
        };
        let (host, port) = if let Some(inner) = rest.strip_prefix('[') {
            let (host, after) = inner.split_once(']').ok_or_else(|| bad("unclosed '['"))?;
            match after {
                "" => (host, None),
                _ => (host, Some(after.strip_prefix(':').ok_or_else(|| bad("junk after ']'"))?)),
            }
        } else {
            match rest.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (rest, None),
            }
        };
        let port = port
            .map(|p| p.parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(|| bad("bad port")))
            .transpose()?;
        Self::new(user, host, port).map_err(|why| bad(&why))
    }
}

impl std::fmt::Display for SshTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(user) = &self.user {
            write!(f, "{user}@")?;
        }
        match (self.host.contains(':'), self.port) {
            (true, Some(port)) => write!(f, "[{}]:{port}", self.host),
            (false, Some(port)) => write!(f, "{}:{port}", self.host),
            (_, None) => f.write_str(&self.host),
        }
    }
}

/// How to reach every remote host: the user's own ssh settings plus these.
#[derive(Debug, Clone, Default)]
pub struct SshOptions {
    /// `-F FILE` instead of ~/.ssh/config.
    pub config: Option<PathBuf>,
    /// Each passed as `-o KEY=VALUE`.
    pub options: Vec<String>,
    /// How long connecting may take before the host is named unreachable.
    pub connect_timeout: Duration,
}

/// An open ControlMaster connection to one host; closed (and every command on it ended)
/// when dropped.
#[derive(Debug)]
pub struct Session {
    target: SshTarget,
    options: SshOptions,
    master: Child,
    socket: PathBuf,
    _dir: WorkDir,
}

impl Session {
    /// Opens the connection, or says in one line why not: unreachable, authentication
    /// refused, or what ssh said.
    pub fn connect(target: &SshTarget, options: &SshOptions) -> Result<Self, LabError> {
        // Control-socket directories of killed runs (the socket itself died with its master).
        crate::workdir::remove_stale("ssh");
        let dir = WorkDir::create("ssh")?;
        let socket = dir.path().join("control");
        let timeout = options.connect_timeout.max(Duration::from_secs(1));
        let mut argv = vec!["ssh".to_string()];
        argv.extend(common_args(target, options, &socket));
        let mut master = crate::process::with_parent_death_signal(&argv);
        master
            .args(["-M", "-N", "-o", "ControlPersist=no"])
            .arg("-o")
            .arg(format!("ConnectTimeout={}", timeout.as_secs()))
            .arg(destination(target))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let master = master
            .spawn()
            .map_err(|e| LabError::io("cannot run ssh (install openssh-client)", e))?;
        let mut session =
            Self { target: target.clone(), options: options.clone(), master, socket, _dir: dir };
        session.wait_until_up(timeout + Duration::from_secs(2))?;
        Ok(session)
    }

    fn wait_until_up(&mut self, timeout: Duration) -> Result<(), LabError> {
        let end = Instant::now() + timeout;
        loop {
            if let Ok(Some(_)) = self.master.try_wait() {
                // ssh has exited: its stderr is at its end, and only its start is kept.
                let mut stderr = Vec::new();
                if let Some(pipe) = self.master.stderr.take() {
                    let _ = std::io::Read::read_to_end(
                        &mut std::io::Read::take(pipe, 64 << 10),
                        &mut stderr,
                    );
                }
                return Err(self.refused(&String::from_utf8_lossy(&stderr)));
            }
            if self.socket.exists() && self.check() {
                return Ok(());
            }
            if Instant::now() >= end {
                return Err(LabError::Remote {
                    host: self.target.to_string(),
                    problem: format!("no connection within {timeout:?}: is the host up and sshd listening? (try `ssh {}`)", self.target),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The one-line error for ssh's own message when the connection failed.
    fn refused(&self, stderr: &str) -> LabError {
        let said = stderr.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("ssh exited");
        let said = &corelane::child_output::printable(said, 500);
        let lower = said.to_ascii_lowercase();
        let fix = if lower.contains("permission denied") {
            "authentication refused: give a key the host accepts (ssh-agent, IdentityFile in --ssh-config, --ssh-option IdentityFile=PATH, or ansible_ssh_private_key_file in --inventory)"
        } else if lower.contains("host key verification") {
            "the host key is unknown or changed: connect once with `ssh` to accept it, or pass --ssh-option StrictHostKeyChecking=accept-new"
        } else if ["timed out", "no route", "refused", "could not resolve", "unreachable"]
            .iter()
            .any(|w| lower.contains(w))
        {
            "unreachable: check the address and port, and that sshd runs there"
        } else {
            "ssh could not connect"
        };
        LabError::Remote { host: self.target.to_string(), problem: format!("{fix} (ssh: {said})") }
    }

    /// Whether the master connection is up (`ssh -O check`).
    fn check(&self) -> bool {
        self.control("check")
    }

    /// Sends the master a control command (`ssh -O check|exit`); whether it succeeded.
    fn control(&self, command: &str) -> bool {
        Command::new("ssh")
            .args(common_args(&self.target, &self.options, &self.socket))
            .args(["-O", command])
            .arg(destination(&self.target))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    pub fn target(&self) -> &SshTarget {
        &self.target
    }

    /// The argv (from `ssh` on) that runs `program args…` on the host over this connection;
    /// the remote shell gets them quoted, so no argument is split or expanded there.
    pub fn argv(&self, program: &str, args: &[String]) -> Vec<String> {
        let mut argv = vec!["ssh".to_string()];
        argv.extend(common_args(&self.target, &self.options, &self.socket));
        argv.extend(["-T".into(), destination(&self.target), "--".into()]);
        let mut words = vec![program.to_string()];
        words.extend_from_slice(args);
        argv.push(shell_words::join(&words));
        argv
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.control("exit");
        let _ = self.master.kill();
        let _ = self.master.wait();
    }
}

/// Options every ssh invocation of a session shares: the control socket, no prompts, the
/// user's config file and options, the port and user, and a dead connection noticed in 15 s.
fn common_args(target: &SshTarget, options: &SshOptions, socket: &Path) -> Vec<String> {
    let mut args = vec!["-S".to_string(), socket.display().to_string()];
    for o in ["BatchMode=yes", "ServerAliveInterval=5", "ServerAliveCountMax=3", "LogLevel=ERROR"] {
        args.extend(["-o".into(), o.into()]);
    }
    if let Some(config) = &options.config {
        args.extend(["-F".into(), config.display().to_string()]);
    }
    for o in &options.options {
        args.extend(["-o".into(), o.clone()]);
    }
    if let Some(port) = target.port {
        args.extend(["-p".into(), port.to_string()]);
    }
    if let Some(user) = &target.user {
        args.extend(["-l".into(), user.clone()]);
    }
    if let Some(key) = &target.identity_file {
        args.extend(["-i".into(), key.display().to_string()]);
    }
    args
}

fn destination(target: &SshTarget) -> String {
    target.host.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_with_user_port_and_ipv6() {
        let t: SshTarget = "root@10.0.0.2:2222".parse().unwrap();
        assert_eq!(
            (t.user.as_deref(), t.host.as_str(), t.port),
            (Some("root"), "10.0.0.2", Some(2222))
        );
        let t: SshTarget = "[fd00::2]:22".parse().unwrap();
        assert_eq!((t.host.as_str(), t.port), ("fd00::2", Some(22)));
        assert_eq!(t.to_string(), "[fd00::2]:22");
        let t: SshTarget = "box".parse().unwrap();
        assert_eq!((t.user, t.port), (None, None));
    }

    /// A target is handed to ssh as one argument: nothing in it may read as an option or
    /// as a second argument.
    #[test]
    fn hostile_targets_are_refused() {
        for bad in ["-oProxyCommand=x", "a b", "h:0", "h:99999", "[::1", "u;rm@h", "", "@h", "h'"] {
            assert!(bad.parse::<SshTarget>().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn remote_arguments_are_quoted_for_the_remote_shell() {
        let words = ["a b".to_string(), "$(x)".into(), "it's".into()];
        let line = shell_words::join(&words);
        assert_eq!(shell_words::split(&line).unwrap(), words);
    }
}
