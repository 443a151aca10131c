//! The Ansible collection (`ansible/`) run by a real `ansible-playbook` against three SSH
//! "hosts" (network namespaces running OpenSSH, the fixture of remote_hosts.rs): check mode
//! with diff, apply, re-apply, a host that cannot be applied and one that cannot be reached,
//! a corelane too old for the modules, revert, and the role's service drop-in (checked by
//! `systemd-analyze verify`, its ExecStart run as systemd would, stopped with SIGTERM).
//! Needs root, sshd, ssh and ansible-playbook; skips with the reason otherwise.
//!
//! The hosts share this machine's file system, so each gets its own state directory, install
//! path and unit directory through the inventory (on real machines the role's defaults,
//! /var/lib/corelane, /usr/local/bin/corelane and /etc/systemd/system, are each host's own).

#[path = "common/fleet.rs"]
mod fleet;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use fleet::{fixture_of, Hosts};

const BIN: &str = env!("CARGO_BIN_EXE_corelane");
const HOSTS: [&str; 3] = ["h1", "h2", "h3"];

fn ansible_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ansible")
}

fn have(program: &str) -> bool {
    Command::new(program).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// One host's directory: its state directory, install path, unit directory and nginx files.
fn host_dir(hosts: &Hosts, h: &str) -> PathBuf {
    hosts.path(h)
}

/// The inventory: the three hosts by their management addresses, and a fourth that nothing
/// answers at (added for the failure run).
fn write_inventory(hosts: &Hosts, with_unreachable: bool) -> PathBuf {
    let mut list = serde_json::Map::new();
    for (i, h) in HOSTS.iter().enumerate() {
        let dir = host_dir(hosts, h);
        let d = dir.display();
        list.insert(
            h.to_string(),
            serde_json::json!({
                "ansible_host": Hosts::address(i + 1),
                "corelane_state_dir": format!("{d}/lib"),
                "corelane_install_path": format!("{d}/bin/corelane"),
                "corelane_unit_dir": format!("{d}/systemd"),
                "corelane_service_command":
                    format!("/usr/sbin/nginx -c {d}/nginx.conf -g 'daemon off; master_process on;'"),
            }),
        );
    }
    if with_unreachable {
        list.insert("h4".into(), serde_json::json!({"ansible_host": "10.210.9.2"}));
    }
    let inventory = serde_json::json!({"all": {
        "hosts": list,
        "vars": {"ansible_user": "root", "ansible_python_interpreter": "/usr/bin/python3"},
    }});
    let path = hosts.path(if with_unreachable { "inventory-4.yml" } else { "inventory.yml" });
    std::fs::write(&path, serde_json::to_string_pretty(&inventory).unwrap()).unwrap();
    path
}

/// `ansible-playbook ansible/partition.yml` from the controller namespace, with the hosts'
/// ssh config and every file Ansible writes in the fixture's directory.
fn playbook(hosts: &Hosts, inventory: &Path, extra: &[&str]) -> (i32, String) {
    let d = hosts.dir.path().display().to_string();
    for sub in ["ansible-home", "ansible-local"] {
        std::fs::create_dir_all(hosts.path(sub)).unwrap();
    }
    std::fs::write(hosts.path("ansible.cfg"), "").unwrap();
    let out = Command::new("ip")
        .args(["netns", "exec", &hosts.names[0], "ansible-playbook", "-i"])
        .arg(inventory)
        .arg(ansible_dir().join("partition.yml"))
        .args(["-e", "corelane_nic=d0", "-e", &format!("corelane_controller_bin={BIN}")])
        .args(extra)
        .env("HOME", hosts.path("ansible-home"))
        .env("ANSIBLE_HOME", hosts.path("ansible-home"))
        .env("ANSIBLE_CONFIG", hosts.path("ansible.cfg"))
        .env("ANSIBLE_LOCAL_TEMP", hosts.path("ansible-local"))
        .env("ANSIBLE_REMOTE_TEMP", format!("{d}/ansible-remote"))
        .env("ANSIBLE_HOST_KEY_CHECKING", "False")
        .env("ANSIBLE_PIPELINING", "True")
        // The hosts' sshd has no sftp subsystem: files go through the ssh session itself.
        .env("ANSIBLE_SSH_TRANSFER_METHOD", "piped")
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_TIMEOUT", "5")
        .env(
            "ANSIBLE_SSH_ARGS",
            format!("-F {d}/config -o BatchMode=yes -o ControlMaster=auto -o ControlPersist=30s -o ControlPath={d}/cp-%C"),
        )
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // Shown with --nocapture (and on failure): the runs the README quotes.
    eprintln!(
        "$ ansible-playbook -i inventory.yml ansible/partition.yml -e corelane_nic=d0 {}\n{text}",
        extra.join(" ")
    );
    (out.status.code().unwrap_or(-1), text)
}

/// A host's line of the play recap: ok, changed, unreachable, failed.
fn recap(output: &str, host: &str) -> [u64; 4] {
    let line = output
        .lines()
        .skip_while(|l| !l.starts_with("PLAY RECAP"))
        .find(|l| l.split_whitespace().next() == Some(host))
        .unwrap_or_else(|| panic!("no recap line for {host}:\n{output}"));
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|f| f.strip_prefix(&format!("{name}="))?.parse().ok())
            .unwrap_or_else(|| panic!("no {name}= in {line}"))
    };
    [field("ok"), field("changed"), field("unreachable"), field("failed")]
}

/// What one task printed for each host: the lines (a diff among them) before its result line.
fn task_output(output: &str, task: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut current = String::new();
    let mut inside = false;
    for line in output.lines() {
        if line.starts_with("TASK [") || line.starts_with("PLAY RECAP") {
            inside = line.contains(task);
            current.clear();
            continue;
        }
        if !inside {
            continue;
        }
        let result = ["ok: [", "changed: [", "fatal: [", "skipping: ["]
            .iter()
            .find_map(|p| line.strip_prefix(p).and_then(|r| r.split(']').next()));
        match result {
            Some(host) => {
                blocks.push((host.to_string(), format!("{current}{line}\n")));
                current.clear();
            }
            None => current.push_str(&format!("{line}\n")),
        }
    }
    blocks
}

/// What `corelane topo --json` reads of d0 (or `nic`) on host `h`: queues' masks, channels.
fn nic_state(hosts: &Hosts, h: &str, nic: &str) -> String {
    let ns = &hosts.names[HOSTS.iter().position(|x| *x == h).unwrap() + 1];
    let out =
        Command::new("ip").args(["netns", "exec", ns, BIN, "topo", "--json"]).output().unwrap();
    assert!(out.status.success(), "topo on {h}: {}", String::from_utf8_lossy(&out.stderr));
    let topo: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let found = topo["nics"].as_array().unwrap().iter().find(|n| n["name"] == nic).cloned();
    serde_json::to_string(&found.unwrap_or_else(|| panic!("no {nic} on {h}"))).unwrap()
}

fn states(hosts: &Hosts) -> Vec<String> {
    HOSTS.iter().map(|h| nic_state(hosts, h, "d0")).collect()
}

/// The RPS and XPS masks of a NIC state, without leading zeros.
fn masks(state: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(state).unwrap();
    let q = |k: &str| {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|q| q["mask"].as_str().unwrap().trim_start_matches(['0', ',']).to_string())
            .collect::<Vec<_>>()
    };
    [q("rx_queues"), q("tx_queues")].concat()
}

fn assert_recap(
    output: &str,
    host: &str,
    changed: impl Fn(u64) -> bool,
    unreachable: u64,
    failed: u64,
) {
    let [_, c, u, f] = recap(output, host);
    assert!(
        changed(c) && u == unreachable && f == failed,
        "{host}: changed={c} unreachable={u} failed={f}\n{output}"
    );
}

#[test]
fn a_playbook_partitions_three_ssh_hosts_checks_diffs_reapplies_fails_alone_and_reverts() {
    if !have("ansible-playbook") {
        eprintln!("skipped: needs ansible-playbook (Debian's ansible-core; .ci/run installs it)");
        return;
    }
    let Some((_one, _copies, hosts)) = fixture_of(3) else { return };
    let started = Instant::now();
    let inventory = write_inventory(&hosts, false);
    let before = states(&hosts);
    let binary = format!("corelane_bin={BIN}");

    // Check mode with diff: every host's RPS/XPS changes shown, nothing changed, no file made.
    let (rc, out) = playbook(&hosts, &inventory, &["--check", "--diff", "-e", &binary]);
    assert_eq!(rc, 0, "{out}");
    let shown = task_output(&out, "Put the plan in force");
    for h in HOSTS {
        let (_, block) =
            shown.iter().find(|(host, _)| host == h).unwrap_or_else(|| panic!("{h}: {out}"));
        assert!(
            block.starts_with("--- before: d0 now") || block.contains("--- before: d0 now"),
            "{h}: {block}"
        );
        assert!(block.contains("-/sys/class/net/d0/queues/rx-0/rps_cpus = "), "{h}: {block}");
        assert!(block.contains("+/sys/class/net/d0/queues/tx-1/xps_cpus = "), "{h}: {block}");
        assert!(block.contains(&format!("changed: [{h}]")), "{h}: {block}");
        assert!(!host_dir(&hosts, h).join("lib").exists(), "check mode made {h}'s state directory");
    }
    assert_eq!(states(&hosts), before, "check mode changed a host");

    // Apply, the role copying the controller's corelane: every host changed.
    let (rc, out) = playbook(&hosts, &inventory, &["-e", "corelane_state=applied"]);
    assert_eq!(rc, 0, "{out}");
    let applied = states(&hosts);
    for (i, h) in HOSTS.iter().enumerate() {
        assert_recap(&out, h, |c| c >= 2, 0, 0);
        assert_ne!(applied[i], before[i], "{h} was not changed");
        let plan: serde_json::Value = serde_json::from_slice(
            &std::fs::read(host_dir(&hosts, h).join("lib/plan-d0.json")).unwrap(),
        )
        .unwrap();
        let rps = plan["rps_cpus"].as_str().unwrap().trim_start_matches('0');
        assert!(
            masks(&applied[i])[..2].iter().all(|m| m == rps),
            "{h}: {} vs plan {rps}",
            applied[i]
        );
        assert!(host_dir(&hosts, h).join("lib/revert-d0.json").exists(), "{h}: no revert file");
        assert!(host_dir(&hosts, h).join("bin/corelane").exists(), "{h}: corelane not copied");
    }

    // Again: the plan is in force, nothing changes anywhere.
    let (rc, out) = playbook(&hosts, &inventory, &["-e", "corelane_state=applied", "--diff"]);
    assert_eq!(rc, 0, "{out}");
    for h in HOSTS {
        assert_recap(&out, h, |c| c == 0, 0, 0);
    }
    assert_eq!(states(&hosts), applied);

    // Revert: every host byte for byte as before, the role's files gone.
    let (rc, out) = playbook(&hosts, &inventory, &["-e", "corelane_state=reverted", "--diff"]);
    assert_eq!(rc, 0, "{out}");
    for h in HOSTS {
        assert_recap(&out, h, |c| c >= 2, 0, 0);
        for f in ["lib/revert-d0.json", "lib/plan-d0.json", "bin/corelane"] {
            assert!(!host_dir(&hosts, h).join(f).exists(), "{h}: {f} left after revert");
        }
    }
    assert_eq!(states(&hosts), before, "revert did not restore every host");

    fails_alone(&hosts, &before);
    too_old(&hosts, &inventory);
    service(&hosts, &inventory, &before);
    eprintln!("the fleet test took {:.1} s", started.elapsed().as_secs_f64());
}

/// h3 without d0 and an unreachable h4: each fails alone, the others are applied, h3 is as it
/// was; then the revert restores h1 and h2.
fn fails_alone(hosts: &Hosts, before: &[String]) {
    let h3 = &hosts.names[3];
    let ip = |args: &[&str]| {
        assert!(Command::new("ip").args(args).status().unwrap().success(), "ip {args:?}")
    };
    ip(&["-n", h3, "link", "set", "d0", "down"]);
    ip(&["-n", h3, "link", "set", "d0", "name", "d9"]);
    let h3_before = nic_state(hosts, "h3", "d9");
    let inventory = write_inventory(hosts, true);
    let binary = format!("corelane_bin={BIN}");
    let (rc, out) = playbook(hosts, &inventory, &["-e", "corelane_state=applied", "-e", &binary]);
    assert_ne!(rc, 0, "{out}");
    assert_recap(&out, "h1", |c| c >= 1, 0, 0);
    assert_recap(&out, "h2", |c| c >= 1, 0, 0);
    assert_recap(&out, "h3", |c| c == 0, 0, 1);
    assert_recap(&out, "h4", |c| c == 0, 1, 0);
    let fatal: Vec<&str> = out.lines().filter(|l| l.starts_with("fatal: [h3]")).collect();
    assert!(fatal.len() == 1 && fatal[0].contains("no network interface `d0` here"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("fatal: [h4]: UNREACHABLE!")), "{out}");
    assert_eq!(nic_state(hosts, "h3", "d9"), h3_before, "the failed host was changed");
    for f in ["lib/revert-d0.json", "lib/plan-d0.json"] {
        assert!(!host_dir(hosts, "h3").join(f).exists(), "the failed host got {f}");
    }
    assert_ne!(states_of(hosts, &["h1", "h2"]), before[..2], "h1 and h2 were not applied");
    let (_, out) = playbook(hosts, &inventory, &["-e", "corelane_state=reverted", "-e", &binary]);
    assert_recap(&out, "h1", |c| c >= 1, 0, 0);
    assert_recap(&out, "h2", |c| c >= 1, 0, 0);
    assert_recap(&out, "h3", |c| c == 0, 0, 0);
    assert_eq!(states_of(hosts, &["h1", "h2"]), before[..2], "revert after a failed host");
    ip(&["-n", h3, "link", "set", "d9", "name", "d0"]);
    ip(&["-n", h3, "link", "set", "d0", "up"]);
}

fn states_of(hosts: &Hosts, names: &[&str]) -> Vec<String> {
    names.iter().map(|h| nic_state(hosts, h, "d0")).collect()
}

/// A corelane older than the modules need: the host fails in one line naming both versions.
/// (An executable answering `--version` as a 0.0.9 release would: no older build exists here.)
fn too_old(hosts: &Hosts, inventory: &Path) {
    let old = hosts.script("old-corelane", "#!/bin/sh\necho 'corelane 0.0.9'\n");
    let (rc, out) = playbook(
        hosts,
        inventory,
        &["--check", "--limit", "h1", "-e", &format!("corelane_bin={old}")],
    );
    assert_ne!(rc, 0, "{out}");
    let fatal: Vec<&str> = out.lines().filter(|l| l.starts_with("fatal: [h1]")).collect();
    assert!(fatal.len() == 1 && fatal[0].contains("is 0.0.9, older than 0.1.0"), "{out}");
}

/// The argv systemd makes of an ExecStart value: words split at blanks, single or double
/// quotes keeping their contents together (all this drop-in uses).
fn systemd_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for ch in line.chars() {
        match (quote, ch) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(ch);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (None, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        words.push(word);
    }
    words
}

fn write_nginx_conf(hosts: &Hosts, h: &str, i: usize) {
    let dir = host_dir(hosts, h);
    let d = dir.display();
    std::fs::create_dir_all(dir.join("www")).unwrap();
    std::fs::write(dir.join("nginx.conf"), format!(
        "pid {d}/nginx.pid;\nerror_log {d}/nginx-error.log;\nworker_processes 2;\nevents {{ worker_connections 64; }}\n\
         http {{ access_log off; client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fastcgi;\n\
         uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
         server {{ listen {}:8080; root {d}/www; }} }}\n", fleet::data_addr(i + 1))).unwrap();
}

/// nginx's processes under a `corelane run` (its children and theirs).
fn nginx_pids(ns: &str) -> Vec<String> {
    let pids = Command::new("ip").args(["netns", "pids", ns]).output().unwrap();
    String::from_utf8_lossy(&pids.stdout)
        .lines()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "nginx")
        })
        .map(str::to_string)
        .collect()
}

fn status_field(pid: &str, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix(field)).unwrap_or_default().trim().to_string()
}

/// The role's drop-in: verified by systemd-analyze, its ExecStart run on each host as systemd
/// would (its environment, stdin /dev/null), nginx placed as the plan says and the NIC as
/// planned while it runs; SIGTERM ends nginx and restores the NIC; the revert removes it.
fn service(hosts: &Hosts, inventory: &Path, before: &[String]) {
    let vars = ["-e", "corelane_service=nginx", "-e", "corelane_service_holds_nic=true"];
    let (rc, out) =
        playbook(hosts, inventory, &[&["-e", "corelane_state=applied"][..], &vars].concat());
    assert_eq!(rc, 0, "{out}");
    assert_eq!(
        states(hosts),
        before,
        "the service holds the NIC: nothing is applied before it starts"
    );
    let mut runs = Vec::new();
    for (i, h) in HOSTS.iter().enumerate() {
        let units = host_dir(hosts, h).join("systemd");
        let dropin = std::fs::read_to_string(units.join("nginx.service.d/corelane.conf")).unwrap();
        verify_unit(&units, h);
        let exec = dropin
            .lines()
            .filter_map(|l| l.strip_prefix("ExecStart="))
            .rfind(|v| !v.is_empty())
            .unwrap();
        let argv = systemd_words(exec);
        assert!(argv.contains(&"--apply".to_string()), "{exec}");
        write_nginx_conf(hosts, h, i);
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &hosts.names[i + 1],
                "env",
                "-i",
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "LANG=C.UTF-8",
                &format!("INVOCATION_ID={:032x}", i + 1),
            ])
            .args(&argv)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(host_dir(hosts, h).join("service.log")).unwrap())
            .spawn()
            .unwrap();
        runs.push(child);
    }
    let end = Instant::now() + Duration::from_secs(15);
    for (i, h) in HOSTS.iter().enumerate() {
        let ns = &hosts.names[i + 1];
        while nginx_pids(ns).len() < 3 {
            let log =
                std::fs::read_to_string(host_dir(hosts, h).join("service.log")).unwrap_or_default();
            assert!(Instant::now() < end, "{h}: nginx did not start under corelane run: {log}");
            std::thread::sleep(Duration::from_millis(100));
        }
        let plan: serde_json::Value = serde_json::from_slice(
            &std::fs::read(host_dir(hosts, h).join("lib/plan-d0.json")).unwrap(),
        )
        .unwrap();
        let app = plan["app_cpus"].as_str().unwrap();
        for pid in nginx_pids(ns) {
            assert_eq!(
                status_field(&pid, "Cpus_allowed_list:"),
                app,
                "{h}: nginx {pid} is not on the plan's application CPUs"
            );
            let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
            assert!(
                maps.contains("corelane"),
                "{h}: nginx {pid} runs without corelane's syscall library"
            );
        }
        assert_ne!(nic_state(hosts, h, "d0"), before[i], "{h}: the service did not apply the plan");
    }
    for (i, mut child) in runs.into_iter().enumerate() {
        let h = HOSTS[i];
        assert!(Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap()
            .success());
        let end = Instant::now() + Duration::from_secs(20);
        while child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < end, "{h}: corelane run did not end on SIGTERM");
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(
            nginx_pids(&hosts.names[i + 1]),
            Vec::<String>::new(),
            "{h}: nginx left running"
        );
        assert_eq!(nic_state(hosts, h, "d0"), before[i], "{h}: the stop did not revert the plan");
    }
    let (rc, out) =
        playbook(hosts, inventory, &[&["-e", "corelane_state=reverted"][..], &vars].concat());
    assert_eq!(rc, 0, "{out}");
    for h in HOSTS {
        assert!(
            !host_dir(hosts, h).join("systemd/nginx.service.d/corelane.conf").exists(),
            "{h}: drop-in left"
        );
        assert!(!host_dir(hosts, h).join("lib/plan-d0.json").exists(), "{h}: plan left");
    }
}

/// `systemd-analyze verify nginx.service` with the host's unit directory first in the search
/// path (so the drop-in applies to the packaged unit).
fn verify_unit(units: &Path, h: &str) {
    if !Path::new("/lib/systemd/system/nginx.service").exists() || !have("systemd-analyze") {
        eprintln!(
            "{h}: systemd-analyze verify skipped: needs systemd-analyze and nginx's packaged unit"
        );
        return;
    }
    let out: Output = Command::new("systemd-analyze")
        .args(["verify", "nginx.service"])
        .env("SYSTEMD_UNIT_PATH", format!("{}:", units.display()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !err.contains("corelane"),
        "{h}: systemd-analyze verify: {err}"
    );
}

/// The collection's playbook and role pass ansible-lint's production profile.
#[test]
fn the_collection_passes_ansible_lint() {
    if !have("ansible-lint") {
        eprintln!("skipped: needs ansible-lint (Debian's ansible-lint; .ci/run installs it)");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let out = Command::new("ansible-lint")
        .args([
            "--offline",
            "--nocolor",
            "-p",
            "partition.yml",
            "collections/ansible_collections/corelane/cores/roles/partition",
        ])
        .current_dir(ansible_dir())
        .env("HOME", home.path())
        .env("ANSIBLE_HOME", home.path())
        .env("ANSIBLE_COLLECTIONS_PATH", ansible_dir().join("collections"))
        .output()
        .unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("Passed"), "{text}");
}
