//! The fleet fixture the SSH tests share: network namespaces as "hosts", each running a real
//! OpenSSH server with its own config, host key and a per-run client key, joined to a
//! controller namespace by management links and to each other by a data network (a bridge in a
//! namespace of its own). Needs root, sshd and ssh (`skip_reason` says which is missing).
//! Every namespace (and with it every process and link) is removed when the fixture is dropped.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const SSHD: &str = "/usr/sbin/sshd";

pub fn skip_reason() -> Option<&'static str> {
    if !rustix::process::geteuid().is_root() {
        return Some("needs root (network namespaces)");
    }
    if !Path::new(SSHD).exists() {
        return Some("needs openssh-server (.ci/run installs it)");
    }
    if !Command::new("ssh").arg("-V").output().is_ok_and(|o| o.status.success()) {
        return Some("needs the ssh client");
    }
    None
}

/// Controller `ctl` (`names[0]`), hosts `h1` (sender) and `h2` (receiver) and any more
/// (`names[1..=n]`), each running sshd, and the data network's switch (the last name).
pub struct Hosts {
    pub names: Vec<String>,
    pub dir: tempfile::TempDir,
    pub sshd: Vec<std::process::Child>,
}

pub const H1: &str = "10.210.1.2";
pub const H2: &str = "10.210.2.2";
/// A third host, a second load host beside h1.
pub const H3: &str = "10.210.4.2";

/// Host `i`'s (1-based) management subnet, `10.210.N.0/24`: 3 is the data network's.
pub fn management_net(i: usize) -> usize {
    if i <= 2 {
        i
    } else {
        i + 1
    }
}

/// Host `i`'s address on the data network (10.210.3.3 is left free for --rx-add-addr).
pub fn data_addr(i: usize) -> String {
    format!("10.210.3.{}", if i <= 2 { i } else { 10 + i })
}
pub const DATA_H2: &str = "10.210.3.2";
/// The address the lab adds on h2's data link for the rows that target two receiver IPs.
pub const ADDED_H2: &str = "10.210.3.3";

/// The fixtures share /tmp (the "hosts" are namespaces of one machine), where a deployed
/// corelane lives: one test at a time, so "nothing left in /tmp" is about this test.
pub static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn deployed_copies() -> Vec<PathBuf> {
    std::fs::read_dir("/tmp")
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("corelane-deploy."))
        .collect()
}

/// The two hosts, one test at a time, and the deployed copies in /tmp before the test; `None`
/// (with the reason printed) where the test cannot run.
pub fn fixture() -> Option<(OneAtATime, Vec<PathBuf>, Hosts)> {
    fixture_of(2)
}

/// Like [`fixture`], with `n` hosts (2 to 4).
pub fn fixture_of(n: usize) -> Option<(OneAtATime, Vec<PathBuf>, Hosts)> {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return None;
    }
    let one = OneAtATime::take();
    Some((one, deployed_copies(), Hosts::new(n)))
}

/// One fleet test at a time on this machine: this process's tests by a mutex, and other
/// processes' (another checkout's run of this file) by a lock file, since every fleet test
/// checks that no deployed copy is left in the machine's /tmp.
pub struct OneAtATime {
    _here: std::sync::MutexGuard<'static, ()>,
    _machine: std::fs::File,
}

impl OneAtATime {
    pub fn take() -> Self {
        use std::os::unix::fs::OpenOptionsExt;
        let here = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let machine = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .mode(0o600)
            .open(std::env::temp_dir().join("corelane-fleet-tests.lock"))
            .expect("the fleet tests' lock file");
        rustix::fs::flock(&machine, rustix::fs::FlockOperation::LockExclusive)
            .expect("the fleet tests' lock");
        Self { _here: here, _machine: machine }
    }
}

impl Hosts {
    /// Nothing of the lab is left: no process on either host, no deployed copy in /tmp.
    pub fn assert_clean(&self, copies_before: &[PathBuf], what: &str) {
        for ns in self.hosts() {
            assert_eq!(self.strays(ns), Vec::<String>::new(), "{what}: left running on {ns}");
        }
        assert_eq!(deployed_copies(), copies_before, "{what}: a deployed copy was left in /tmp");
    }

    /// The hosts' namespaces (not the controller's, not the switch's).
    pub fn hosts(&self) -> &[String] {
        &self.names[1..self.names.len() - 1]
    }

    pub fn new(n: usize) -> Self {
        assert!((2..=4).contains(&n), "2 to 4 hosts");
        // Tests of this file run in parallel: each fixture has its own names.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let pid = std::process::id();
        let mut names = vec![format!("corelane-{pid}-ssh{k}ctl")];
        names.extend((1..=n).map(|i| format!("corelane-{pid}-ssh{k}h{i}")));
        names.push(format!("corelane-{pid}-ssh{k}sw"));
        let mut hosts = Hosts { names, dir: tempfile::tempdir().unwrap(), sshd: Vec::new() };
        for ns in &hosts.names {
            run("ip", &["netns", "add", ns]);
        }
        let (ctl, sw) = (hosts.names[0].clone(), hosts.names[n + 1].clone());
        run("ip", &["-n", &sw, "link", "add", "br0", "type", "bridge"]);
        run("ip", &["-n", &sw, "link", "set", "br0", "up"]);
        for i in 1..=n {
            let h = hosts.names[i].clone();
            let (c, p) = (format!("c{i}"), format!("p{i}"));
            run(
                "ip",
                &["link", "add", &c, "netns", &ctl, "type", "veth", "peer", "m0", "netns", &h],
            );
            let q = ["numtxqueues", "2", "numrxqueues", "2"];
            let mut data = vec!["link", "add", "d0"];
            data.extend(q);
            data.extend(["netns", &h, "type", "veth", "peer", &p, "netns", &sw]);
            run("ip", &data);
            run("ip", &["-n", &sw, "link", "set", &p, "master", "br0", "up"]);
            let m = management_net(i);
            for (ns, dev, addr) in [
                (&ctl, c.as_str(), format!("10.210.{m}.1/24")),
                (&h, "m0", format!("10.210.{m}.2/24")),
                (&h, "d0", format!("{}/24", data_addr(i))),
            ] {
                run("ip", &["-n", ns, "addr", "add", &addr, "dev", dev]);
                run("ip", &["-n", ns, "link", "set", dev, "up"]);
            }
        }
        for ns in &hosts.names {
            run("ip", &["-n", ns, "link", "set", "lo", "up"]);
        }
        hosts.start_sshd();
        hosts
    }

    /// Host `i`'s (1-based) management address, which ssh reaches it by.
    pub fn address(i: usize) -> String {
        format!("10.210.{}.2", management_net(i))
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// An executable shell script `name` in the hosts' directory, holding `text`: its path.
    pub fn script(&self, name: &str, text: &str) -> String {
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        run("chmod", &["755", &path.display().to_string()]);
        path.display().to_string()
    }

    pub fn start_sshd(&mut self) {
        let d = self.dir.path().display().to_string();
        for key in ["hostkey", "id", "other"] {
            run("ssh-keygen", &["-q", "-t", "ed25519", "-N", "", "-f", &format!("{d}/{key}")]);
        }
        std::fs::copy(self.path("id.pub"), self.path("authorized_keys")).unwrap();
        std::fs::write(
            self.path("sshd_config"),
            format!(
                "HostKey {d}/hostkey\nAuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile none\n"
            ),
        )
        .unwrap();
        for (key, name) in [("id", "config"), ("other", "wrong-key")] {
            std::fs::write(
                self.path(name),
                format!(
                    "Host *\n  IdentityFile {d}/{key}\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
                ),
            )
            .unwrap();
        }
        std::fs::create_dir_all("/run/sshd").unwrap();
        for ns in self.hosts().to_vec() {
            self.spawn_sshd(&ns, &self.path("sshd_config"));
        }
        for host in (1..=self.hosts().len()).map(Hosts::address) {
            self.wait_for_sshd(&[], &host, &format!("sshd on {host}"));
        }
    }

    /// Starts an sshd in namespace `ns` with `config`; it is ended with the hosts.
    pub fn spawn_sshd(&mut self, ns: &str, config: &Path) {
        let child = Command::new("ip")
            .args(["netns", "exec", ns, SSHD, "-D", "-e", "-f"])
            .arg(config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.sshd.push(child);
    }

    /// Waits until a session to `host` (with ssh `options`, a port say) works from the
    /// controller, failing with `what` after 10 s.
    pub fn wait_for_sshd(&self, options: &[&str], host: &str, what: &str) {
        let end = Instant::now() + Duration::from_secs(10);
        while !self.ssh_with(options, host, "true").status.success() {
            assert!(Instant::now() < end, "{what} did not come up");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn ssh(&self, host: &str, command: &str) -> Output {
        self.ssh_with(&[], host, command)
    }

    /// `ssh OPTIONS root@HOST COMMAND` from the controller, with the hosts' ssh config.
    pub fn ssh_with(&self, options: &[&str], host: &str, command: &str) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.names[0], "ssh", "-F"])
            .arg(self.path("config"))
            .args(["-o", "BatchMode=yes"])
            .args(options)
            .args([&format!("root@{host}"), command])
            .output()
            .unwrap()
    }

    /// `corelane ARGS` run in the controller namespace.
    pub fn corelane(&self, args: &[&str]) -> Output {
        self.corelane_cmd(args).output().unwrap()
    }

    pub fn corelane_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.names[0], env!("CARGO_BIN_EXE_corelane")]).args(args);
        cmd
    }

    pub fn wait_for(&self, end: Instant, what: &str, until: impl Fn(&[String]) -> bool) {
        loop {
            let left: Vec<String> = self.hosts().iter().flat_map(|ns| self.strays(ns)).collect();
            if until(&left) {
                return;
            }
            assert!(Instant::now() < end, "{what}: {left:?}, copies {:?}", deployed_copies());
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until the rx NIC is as found (its RPS masks `masks_before`, the row's added
    /// Processes in a host's namespace other than its sshd.
    pub fn strays(&self, ns: &str) -> Vec<String> {
        let pids = Command::new("ip").args(["netns", "pids", ns]).output().unwrap();
        String::from_utf8_lossy(&pids.stdout)
            .lines()
            .filter_map(|pid| {
                let cmd = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).ok()?;
                let cmd = cmd.replace('\0', " ");
                (!cmd.contains("sshd")).then_some(cmd)
            })
            .collect()
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for child in &mut self.sshd {
            let _ = child.kill();
            let _ = child.wait();
        }
        for ns in &self.names {
            let pids = Command::new("ip").args(["netns", "pids", ns]).output();
            for pid in String::from_utf8_lossy(&pids.map(|o| o.stdout).unwrap_or_default()).lines()
            {
                let _ = Command::new("kill").args(["-9", pid]).status();
            }
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

pub fn run(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

pub fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}
