//! `serve http` started as root gives up root once its port is bound (`--user`, default
//! nobody), as nginx, lighttpd and Apache do: a file only root may read under `--root` is
//! 403, every thread of the server (lanes and io_uring's SQPOLL thread included) runs as the
//! user with no capability, and an unknown user is refused before anything is bound.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};

/// Root is what this file is about; without it there is nothing to give up.
fn is_root() -> bool {
    let root = rustix::process::geteuid().is_root();
    if !root {
        eprintln!("skipped: serve http gives up root only when started as root");
    }
    root
}

/// A running `corelane serve http --json` and its ready line.
struct Served {
    child: Child,
    ready: serde_json::Value,
}

impl Served {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_corelane"))
            .args([
                "serve",
                "http",
                "--addr",
                "127.0.0.1",
                "--port",
                "0",
                "--json",
                "--duration",
                "20s",
            ])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let ready: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("no ready line ({e}): {line:?}"));
        Self { child, ready }
    }

    fn get(&self, path: &str) -> u16 {
        let mut s = TcpStream::connect(self.ready["addr"].as_str().unwrap()).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
    }

    /// (name, real/effective/saved/fs uids, CapEff) of every thread of the server.
    fn threads(&self) -> Vec<(String, String, String)> {
        let tasks = format!("/proc/{}/task", self.child.id());
        let mut out = Vec::new();
        for task in std::fs::read_dir(tasks).unwrap() {
            let status = std::fs::read_to_string(task.unwrap().path().join("status")).unwrap();
            let field = |name: &str| {
                let line = status.lines().find(|l| l.starts_with(name)).unwrap();
                line[name.len()..].split_whitespace().collect::<Vec<_>>().join(" ")
            };
            out.push((field("Name:"), field("Uid:"), field("CapEff:")));
        }
        out
    }

    fn stop(mut self) -> String {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_child(&self.child),
            rustix::process::Signal::INT,
        );
        let mut err = String::new();
        self.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        let _ = self.child.wait();
        err
    }
}

/// A directory anyone may enter with a root-only file and a world-readable one.
fn www() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let write = |name: &str, mode: u32| {
        let path = dir.path().join(name);
        std::fs::write(&path, name).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    write("secret", 0o600);
    write("public", 0o644);
    dir
}

fn nobody_uid() -> String {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let line = passwd.lines().find(|l| l.starts_with("nobody:")).expect("a nobody user");
    line.split(':').nth(2).unwrap().to_string()
}

/// Started as root, the server served a 0600 root file under --root to anyone.
#[test]
fn a_root_only_file_is_forbidden_unless_user_root_is_asked_for() {
    if !is_root() {
        return;
    }
    let dir = www();
    let root = dir.path().to_str().unwrap();
    let served = Served::start(&["--root", root, "--lanes", "2"]);
    assert_eq!(served.ready["user"]["user"], "nobody", "{}", served.ready);
    assert_eq!(served.get("/secret"), 403, "a file only root may read");
    assert_eq!(served.get("/public"), 200, "a file nobody may read");
    let uid = nobody_uid();
    let threads = served.threads();
    assert_eq!(threads.len(), 3, "main and two lanes: {threads:?}");
    for (name, uids, caps) in &threads {
        assert_eq!(*uids, [uid.as_str(); 4].join(" "), "thread {name}");
        assert_eq!(caps, "0000000000000000", "thread {name}");
    }
    served.stop();

    let served = Served::start(&["--root", root, "--user", "root"]);
    assert_eq!(served.get("/secret"), 200);
    assert_eq!(served.ready["user"]["root"], true);
    assert!(served.ready["warning"].as_str().unwrap().contains("root"), "{}", served.ready);
    let err = served.stop();
    assert!(err.contains("WARNING: serving as root"), "{err}");
}

/// The io_uring backend: its rings (and the SQPOLL kernel thread, which submits with the
/// credentials of the ring's creator) are made after root is given up.
#[test]
fn the_uring_backend_and_its_sqpoll_thread_run_as_the_user() {
    if !is_root() {
        return;
    }
    let served = Served::start(&["--backend", "uring", "--sqpoll", "0", "--lanes", "2"]);
    if !served.ready["backend"].as_str().unwrap().starts_with("uring") {
        eprintln!("skipped: io_uring unavailable here ({})", served.ready["notes"]);
        return;
    }
    assert_eq!(served.get("/"), 200);
    let uid = nobody_uid();
    let threads = served.threads();
    let sqpoll = threads.iter().filter(|t| t.0.starts_with("iou-sqp")).count();
    if served.ready["backend"] == "uring+sqpoll" {
        assert!(sqpoll > 0, "no SQPOLL thread: {threads:?}");
    }
    for (name, uids, caps) in &threads {
        assert_eq!(*uids, [uid.as_str(); 4].join(" "), "thread {name}");
        assert_eq!(caps, "0000000000000000", "thread {name}");
    }
    served.stop();
}

/// An unknown user is one clear line, and the port is never bound.
#[test]
fn an_unknown_user_is_refused_before_the_bind() {
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port().to_string()
    };
    let out = Command::new(env!("CARGO_BIN_EXE_corelane"))
        .args(["serve", "http", "--addr", "127.0.0.1", "--port", &port])
        .args(["--user", "no-such-user-corelane", "--duration", "5s"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--user no-such-user-corelane: no such user"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(out.stdout.is_empty());
    assert!(std::net::TcpListener::bind(format!("127.0.0.1:{port}")).is_ok());
}
