//! The Ansible collection (`ansible/`) run by a real `ansible-playbook` against three SSH
//! "hosts" (network namespaces running OpenSSH, the fixture of remote_hosts.rs): check mode
//! with diff (and without a corelane to run), apply, a corelane the role did not install, a
//! host that cannot be reached, re-apply, a second plan failing half-way on a read-only setting
//! and then applied (the revert file merged), a corrupt revert file, revert (from the values
//! the host holds now), a corelane too old or without `apply --json`, a newline in the service
//! command, and the role's service drop-in (checked by `systemd-analyze verify`, its ExecStart
//! split as systemd would and run, stopped with SIGTERM).
//! Needs root, sshd, ssh and ansible-playbook; skips with the reason otherwise.
//!
//! The hosts share this machine's file system, so each gets its own state directory, install
//! path and unit directory through the inventory (on real machines the role's defaults,
//! /var/lib/corelane, /usr/local/bin/corelane and /etc/systemd/system, are each host's own).
//! The install path and the service's command hold a space, `%`, `$`, quotes and a backslash.

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

/// Where the role installs corelane on host `h`: a directory with a space and a `%`.
fn install_path(hosts: &Hosts, h: &str) -> PathBuf {
    host_dir(hosts, h).join("b x%n/corelane")
}

/// nginx's configuration file on host `h`, a hostile word for the drop-in's ExecStart.
fn nginx_conf(hosts: &Hosts, h: &str) -> PathBuf {
    host_dir(hosts, h).join("ng \"q\" 'a' \\ $HOME %n;.conf")
}

/// The inventory: the three hosts by their management addresses with `vars(host)` added
/// (per-host variables: `-e` would override them), and a fourth that nothing answers at.
fn write_inventory(
    hosts: &Hosts,
    with_unreachable: bool,
    vars: impl Fn(&str) -> serde_json::Value,
) -> PathBuf {
    let mut list = serde_json::Map::new();
    for (i, h) in HOSTS.iter().enumerate() {
        let dir = host_dir(hosts, h);
        let d = dir.display();
        let mut host = serde_json::json!({
            "ansible_host": Hosts::address(i + 1),
            "corelane_state_dir": format!("{d}/lib"),
            "corelane_install_path": install_path(hosts, h),
            "corelane_unit_dir": format!("{d}/systemd"),
            "corelane_service_command": ["/usr/sbin/nginx", "-c", nginx_conf(hosts, h),
                "-g", "daemon off; master_process on;"],
        });
        if let serde_json::Value::Object(extra) = vars(h) {
            host.as_object_mut().unwrap().extend(extra);
        }
        list.insert(h.to_string(), host);
    }
    if with_unreachable {
        list.insert("h4".into(), serde_json::json!({"ansible_host": "10.210.9.2"}));
    }
    let inventory = serde_json::json!({"all": {
        "hosts": list,
        "vars": {"ansible_user": "root", "ansible_python_interpreter": "/usr/bin/python3"},
    }});
    let path = hosts.path("inventory.yml");
    std::fs::write(&path, serde_json::to_string_pretty(&inventory).unwrap()).unwrap();
    path
}

fn no_vars(_: &str) -> serde_json::Value {
    serde_json::json!({})
}

/// `program` (ansible-playbook or ansible) in the controller namespace, with the hosts' ssh
/// config and every file Ansible writes in the fixture's directory.
fn ansible(hosts: &Hosts, program: &str, args: &[&str]) -> (i32, String) {
    let d = hosts.dir.path().display().to_string();
    for sub in ["ansible-home", "ansible-local"] {
        std::fs::create_dir_all(hosts.path(sub)).unwrap();
    }
    std::fs::write(hosts.path("ansible.cfg"), "").unwrap();
    let out = Command::new("ip")
        .args(["netns", "exec", &hosts.names[0], program])
        .args(args)
        .env("HOME", hosts.path("ansible-home"))
        .env("ANSIBLE_HOME", hosts.path("ansible-home"))
        .env("ANSIBLE_CONFIG", hosts.path("ansible.cfg"))
        .env("ANSIBLE_COLLECTIONS_PATH", ansible_dir().join("collections"))
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
    eprintln!("$ {program} {}\n{text}", args.join(" "));
    (out.status.code().unwrap_or(-1), text)
}

/// `ansible-playbook -i INVENTORY ansible/partition.yml -e corelane_nic=d0 EXTRA`.
fn playbook(hosts: &Hosts, inventory: &Path, extra: &[&str]) -> (i32, String) {
    let playbook = ansible_dir().join("partition.yml");
    let controller_bin = format!("corelane_controller_bin={BIN}");
    let mut args = vec!["-i", inventory.to_str().unwrap(), playbook.to_str().unwrap()];
    args.extend(["-e", "corelane_nic=d0", "-e", &controller_bin]);
    args.extend(extra);
    ansible(hosts, "ansible-playbook", &args)
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

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn json_of(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&read(path)).unwrap()
}

/// `sh -c SCRIPT` in host `h`'s namespace.
fn on_host(hosts: &Hosts, h: &str, script: &str) {
    let ns = &hosts.names[HOSTS.iter().position(|x| *x == h).unwrap() + 1];
    let out = Command::new("ip").args(["netns", "exec", ns, "sh", "-c", script]).output().unwrap();
    assert!(out.status.success(), "{h}: {script}: {}", fleet::text(&out));
}

/// The only `fatal: [host]` line of a playbook run (`failed: [host]` of a loop, `host |
/// FAILED!` of an ad-hoc run); with a loop's item holding a newline, its last line.
fn fatal<'a>(out: &'a str, h: &str) -> &'a str {
    let starts = [format!("fatal: [{h}]"), format!("failed: [{h}]"), format!("{h} | FAILED!")];
    let lines: Vec<&str> =
        out.lines().filter(|l| starts.iter().any(|s| l.starts_with(s.as_str()))).collect();
    assert_eq!(lines.len(), 1, "{h}: {out}");
    lines[0]
}

#[test]
fn a_playbook_partitions_three_ssh_hosts_checks_diffs_reapplies_fails_alone_and_reverts() {
    if !have("ansible-playbook") {
        eprintln!("skipped: needs ansible-playbook (Debian's ansible-core; .ci/run installs it)");
        return;
    }
    let Some((_one, _copies, hosts)) = fixture_of(3) else { return };
    let started = Instant::now();
    // h2's rx-1 already holds the plan's RPS mask: the first plan leaves it, a second one
    // changes it for the first time (the revert file then gains an entry).
    on_host(&hosts, "h2", "echo 1 > /sys/class/net/d0/queues/rx-1/rps_cpus");
    let before = states(&hosts);
    check_mode(&hosts, &before);
    let applied = apply_refusing_a_foreign_corelane(&hosts, &before);
    second_plan(&hosts, &applied);
    revert(&hosts, &before);
    refused(&hosts);
    service(&hosts, &before);
    eprintln!("the fleet test took {:.1} s", started.elapsed().as_secs_f64());
}

/// Check mode with diff: h1 and h2 (given a corelane) show every RPS/XPS change and change
/// nothing; h3, with no corelane and none copied in check mode, fails saying so.
fn check_mode(hosts: &Hosts, before: &[String]) {
    let inventory = write_inventory(hosts, false, |h| {
        if h == "h3" {
            serde_json::json!({})
        } else {
            serde_json::json!({"corelane_bin": BIN})
        }
    });
    let (rc, out) = playbook(hosts, &inventory, &["--check", "--diff"]);
    assert_ne!(rc, 0, "{out}");
    let shown = task_output(&out, "Put the plan in force");
    for h in ["h1", "h2"] {
        let (_, block) =
            shown.iter().find(|(host, _)| host == h).unwrap_or_else(|| panic!("{h}: {out}"));
        assert!(block.contains("--- before: d0 now"), "{h}: {block}");
        assert!(block.contains("-/sys/class/net/d0/queues/rx-0/rps_cpus = "), "{h}: {block}");
        assert!(block.contains("+/sys/class/net/d0/queues/tx-1/xps_cpus = "), "{h}: {block}");
        assert!(block.contains(&format!("changed: [{h}]")), "{h}: {block}");
    }
    assert!(
        fatal(&out, "h3").contains("check mode copies nothing: pass -e corelane_bin="),
        "{out}"
    );
    for h in HOSTS {
        assert!(!host_dir(hosts, h).join("lib").exists(), "check mode made {h}'s state directory");
    }
    assert_eq!(states(hosts), before, "check mode changed a host");
}

/// Apply, the role copying the controller's corelane: h1 and h2 changed (their copy recorded);
/// h3, where a corelane the role did not install sits at the install path, fails naming it
/// and the fix, the file untouched; h4 cannot be reached. Then again, h3 with the fix
/// (`corelane_bin` = that file): h3 applied, h1 and h2 unchanged. Returns the states after.
fn apply_refusing_a_foreign_corelane(hosts: &Hosts, before: &[String]) -> Vec<String> {
    let foreign = install_path(hosts, "h3");
    std::fs::create_dir_all(foreign.parent().unwrap()).unwrap();
    std::fs::copy(BIN, &foreign).unwrap();
    let inode = || std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&foreign).unwrap());
    let foreign_inode = inode();
    let inventory = write_inventory(hosts, true, no_vars);
    let (rc, out) = playbook(hosts, &inventory, &["-e", "corelane_state=applied"]);
    assert_ne!(rc, 0, "{out}");
    let applied = states(hosts);
    for (i, h) in ["h1", "h2"].iter().enumerate() {
        assert_recap(&out, h, |c| c >= 2, 0, 0);
        assert_ne!(applied[i], before[i], "{h} was not changed");
        let plan = json_of(&host_dir(hosts, h).join("lib/plan-d0.json"));
        let rps = plan["rps_cpus"].as_str().unwrap().trim_start_matches('0');
        assert!(masks(&applied[i])[..2].iter().all(|m| m == rps), "{h}: {}", applied[i]);
        assert!(host_dir(hosts, h).join("lib/revert-d0.json").exists(), "{h}: no revert file");
        let record = json_of(&host_dir(hosts, h).join("lib/installed-corelane.json"));
        assert_eq!(record["path"], install_path(hosts, h).to_str().unwrap(), "{h}: {record}");
    }
    assert_recap(&out, "h3", |c| c == 0, 0, 1);
    let line = fatal(&out, "h3");
    assert!(line.contains("this role did not install"), "{line}");
    assert!(line.contains(&format!("-e corelane_bin={}", foreign.display())), "{line}");
    assert_eq!((inode(), &applied[2]), (foreign_inode, &before[2]), "h3 was changed");
    assert!(out.lines().any(|l| l.starts_with("fatal: [h4]: UNREACHABLE!")), "{out}");

    let inventory = write_inventory(hosts, false, |h| {
        if h == "h3" {
            serde_json::json!({"corelane_bin": install_path(hosts, "h3")})
        } else {
            serde_json::json!({})
        }
    });
    let (rc, out) = playbook(hosts, &inventory, &["-e", "corelane_state=applied", "--diff"]);
    assert_eq!(rc, 0, "{out}");
    assert_recap(&out, "h1", |c| c == 0, 0, 0);
    assert_recap(&out, "h2", |c| c == 0, 0, 0);
    assert_recap(&out, "h3", |c| c >= 1, 0, 0);
    let now = states(hosts);
    assert_eq!(now[..2], applied[..2], "re-applying the plan in force changed a host");
    assert_ne!(now[2], before[2], "h3 was not applied with its own corelane");
    assert_eq!(inode(), foreign_inode, "h3's own corelane was replaced");
    now
}

/// `corelane_partition` alone (ansible -m) on h1 and h2 with a second, different plan. First
/// h2's tx-1/xps_cpus is made read-only (a bind mount in its sshd's mount namespace) and h1's
/// revert file corrupt: h2 fails naming the setting, its settings, plan file and revert file
/// as they were; h1 fails naming the file, nothing written; h3, whose interface is missing,
/// fails naming it and is left as it was. Then h2 again: applied, the revert
/// file keeps every earlier entry as it was and gains rx-1's.
fn second_plan(hosts: &Hosts, applied: &[String]) {
    let lib = |h: &str| host_dir(hosts, h).join("lib");
    let mut plan = json_of(&lib("h2").join("plan-d0.json"));
    plan["rps_cpus"] = "2".into();
    plan["xps_cpus"] = serde_json::json!(["1", "1"]);
    let inventory = write_inventory(hosts, false, no_vars);
    let args = serde_json::json!({
        "nic": "d0", "plan": plan, "state": "applied",
        "bin": "{{ corelane_install_path }}", "state_dir": "{{ corelane_state_dir }}",
    })
    .to_string();
    let run = |limit: &str| {
        let inv = inventory.to_str().unwrap();
        let module = "corelane.cores.corelane_partition";
        ansible(hosts, "ansible", &["-o", "-i", inv, limit, "-m", module, "-a", &args])
    };
    let xps = "/sys/class/net/d0/queues/tx-1/xps_cpus";
    let ssh = |cmd: &str| {
        let out = hosts.ssh(&Hosts::address(2), cmd);
        assert!(out.status.success(), "{cmd}: {}", fleet::text(&out));
    };
    ssh(&format!("mount --bind {xps} {xps} && mount -o remount,bind,ro {xps}"));
    let saved =
        |h: &str| (read(&lib(h).join("plan-d0.json")), read(&lib(h).join("revert-d0.json")));
    let (h2_files, h1_revert) = (saved("h2"), read(&lib("h1").join("revert-d0.json")));
    std::fs::write(lib("h1").join("revert-d0.json"), b"[{\"path\": 7}").unwrap();
    let h1_plan = read(&lib("h1").join("plan-d0.json"));
    // h3 lacks the plan's interface (its d0 renamed d9 for this run): it fails alone, as it was.
    let h3_ns = &hosts.names[3];
    let ip = |args: &[&str]| {
        let ok = Command::new("ip").arg("-n").arg(h3_ns).args(args).status().unwrap().success();
        assert!(ok, "ip -n {h3_ns} {args:?}");
    };
    ip(&["link", "set", "d0", "down"]);
    ip(&["link", "set", "d0", "name", "d9"]);
    let h3_before = nic_state(hosts, "h3", "d9");
    let (rc, out) = run("h1,h2,h3");
    let h3_after = nic_state(hosts, "h3", "d9");
    ip(&["link", "set", "d9", "name", "d0"]);
    ip(&["link", "set", "d0", "up"]);
    let line = fatal(&out, "h3");
    assert!(line.contains("no network interface `d0`"), "{line}");
    assert_eq!(h3_after, h3_before, "h3, which lacks d0, was changed");
    assert_eq!(states_of(hosts, &["h3"])[0], applied[2], "h3 not as it was");
    ssh(&format!("umount {xps}"));
    assert_ne!(rc, 0, "{out}");
    let line = fatal(&out, "h2");
    assert!(line.contains("the host is as it was") && line.contains("tx-1/xps_cpus"), "{line}");
    assert!(!out.contains("Traceback"), "{out}");
    assert_eq!(states_of(hosts, &["h2"])[0], applied[1], "h2 not rolled back");
    assert_eq!(saved("h2"), h2_files, "h2's plan or revert file changed by a failed apply");
    assert!(!lib("h2").join(".revert-d0.next.json").exists(), "h2: .next left");
    let line = fatal(&out, "h1");
    assert!(line.contains("revert-d0.json is not a revert file corelane wrote"), "{line}");
    assert_eq!(read(&lib("h1").join("plan-d0.json")), h1_plan, "h1's plan changed");
    assert_eq!(states_of(hosts, &["h1"])[0], applied[0], "h1 changed");
    std::fs::write(lib("h1").join("revert-d0.json"), h1_revert).unwrap();

    let earlier: Vec<serde_json::Value> = serde_json::from_slice(&h2_files.1).unwrap();
    let (rc, out) = run("h2");
    assert_eq!(rc, 0, "{out}");
    assert!(out.lines().any(|l| l.starts_with("h2 | CHANGED")), "{out}");
    let merged: Vec<serde_json::Value> =
        serde_json::from_slice(&read(&lib("h2").join("revert-d0.json"))).unwrap();
    assert_eq!(merged[..earlier.len()], earlier[..], "an earlier entry changed");
    let rx1 = "/sys/class/net/d0/queues/rx-1/rps_cpus";
    assert!(!earlier.iter().any(|e| e["path"] == rx1), "{earlier:?}");
    assert!(merged.iter().any(|e| e["path"] == rx1 && e["to"] == "2"), "{merged:?}");
}

/// Revert: every host byte for byte as before. h1 holds another interface's plan, so the
/// corelane the role installed stays there; h2's goes; h3's own corelane stays. h1's rx-0 is
/// put back by hand first: its revert shows only the settings that still differ.
fn revert(hosts: &Hosts, before: &[String]) {
    std::fs::write(host_dir(hosts, "h1").join("lib/plan-d9.json"), "{}").unwrap();
    on_host(hosts, "h1", "echo 0 > /sys/class/net/d0/queues/rx-0/rps_cpus");
    let inventory = write_inventory(hosts, false, |h| {
        if h == "h3" {
            serde_json::json!({"corelane_bin": install_path(hosts, "h3")})
        } else {
            serde_json::json!({})
        }
    });
    let (rc, out) = playbook(hosts, &inventory, &["-e", "corelane_state=reverted", "--diff"]);
    assert_eq!(rc, 0, "{out}");
    let shown = task_output(&out, "Restore the values from before the plan");
    let (_, h1) = shown.iter().find(|(h, _)| h == "h1").unwrap();
    assert!(h1.contains("rx-1/rps_cpus") && !h1.contains("rx-0/rps_cpus"), "{h1}");
    for h in HOSTS {
        assert_recap(&out, h, |c| c >= 1, 0, 0);
        for f in ["lib/revert-d0.json", "lib/plan-d0.json", "lib/.revert-d0.next.json"] {
            assert!(!host_dir(hosts, h).join(f).exists(), "{h}: {f} left after revert");
        }
    }
    assert_eq!(states(hosts), before, "revert did not restore every host");
    assert!(install_path(hosts, "h1").exists(), "h1's corelane removed while plan-d9 needs it");
    assert!(!install_path(hosts, "h2").exists(), "h2's corelane left after revert");
    assert!(!host_dir(hosts, "h2").join("lib/installed-corelane.json").exists());
    assert!(install_path(hosts, "h3").exists(), "h3's own corelane removed");
    std::fs::remove_file(host_dir(hosts, "h1").join("lib/plan-d9.json")).unwrap();
}

/// A corelane too old (by version), a build without `apply --json` (the real corelane with
/// that option missing from its help) and a newline in the service command: each host fails
/// alone, in check mode, in one line saying what and the fix.
fn refused(hosts: &Hosts) {
    let old = hosts.script("old-corelane", "#!/bin/sh\necho 'corelane 0.1.0'\n");
    let lacking = hosts.script(
        "corelane-without-json",
        &format!("#!/bin/sh\nif [ \"$1 $2\" = 'apply --help' ]; then '{BIN}' apply --help | grep -v -- '--json'; exit 0; fi\nexec '{BIN}' \"$@\"\n"),
    );
    let inventory = write_inventory(hosts, false, |h| match h {
        "h1" => serde_json::json!({"corelane_bin": old}),
        "h2" => serde_json::json!({"corelane_bin": lacking}),
        _ => serde_json::json!({"corelane_bin": BIN, "corelane_service": "nginx",
            "corelane_service_command": ["/usr/sbin/nginx", "-g", "daemon off;\nExecStartPre=/bin/true"]}),
    });
    let (rc, out) = playbook(hosts, &inventory, &["--check"]);
    assert_ne!(rc, 0, "{out}");
    let line = fatal(&out, "h1");
    assert!(line.contains("is 0.1.0, older than 0.2.0"), "{line}");
    let line = fatal(&out, "h2");
    assert!(line.contains("has no `apply --json`") && line.contains("0.2.0 or newer"), "{line}");
    // The item holds a newline: the message is on the lines after `failed: [h3] (item=…`.
    assert!(fatal(&out, "h3").starts_with("failed: [h3] (item=daemon off;"), "{out}");
    let said = "\"msg\": \"a word of corelane_service_command holds a control character";
    assert!(out.contains(said), "{out}");
    assert_recap(&out, "h3", |c| c == 0, 0, 1);
}

/// The argv systemd makes of an ExecStart value (systemd.syntax(7)): words split at blanks,
/// double or single quotes keeping their contents together, backslash escapes unescaped
/// (inside double quotes and out), then specifiers (`%%` is `%`; any other is refused here,
/// the drop-in has none) and, past the program, `$$` as `$` (any other `$` refused).
fn systemd_words(line: &str) -> Vec<String> {
    let unescape = |c: Option<char>| match c.expect("a line ending in a backslash") {
        'n' => '\n',
        't' => '\t',
        c @ ('\\' | '"' | '\'' | ' ' | ';') => c,
        c => panic!("an escape \\{c} the drop-in never writes: {line}"),
    };
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            break;
        }
        let mut word = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
            match c {
                '"' | '\'' => loop {
                    match chars.next().expect("an unterminated quote") {
                        q if q == c => break,
                        '\\' => word.push(unescape(chars.next())),
                        other => word.push(other),
                    }
                },
                '\\' => word.push(unescape(chars.next())),
                other => word.push(other),
            }
        }
        words.push(word);
    }
    let resolve = |word: &str, marker: char| {
        let mut out = String::new();
        let mut it = word.chars();
        while let Some(c) = it.next() {
            if c == marker {
                let next = it.next();
                assert_eq!(next, Some(marker), "an unescaped {marker} in {word:?}: {line}");
            }
            out.push(c);
        }
        out
    };
    words
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let w = resolve(w, '%');
            if i == 0 {
                assert!(!w.contains('$'), "{line}");
                w
            } else {
                resolve(&w, '$')
            }
        })
        .collect()
}

#[test]
fn the_systemd_word_splitter_reads_quotes_escapes_specifiers_and_dollars() {
    let line = r#""/a b/x%%n" "-c" "q\"'\\ $$HOME %%n;" 'x y'"#;
    assert_eq!(systemd_words(line), ["/a b/x%n", "-c", "q\"'\\ $HOME %n;", "x y"]);
}

fn write_nginx_conf(hosts: &Hosts, h: &str, i: usize) {
    let dir = host_dir(hosts, h);
    let d = dir.display();
    std::fs::create_dir_all(dir.join("www")).unwrap();
    std::fs::write(nginx_conf(hosts, h), format!(
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
fn service(hosts: &Hosts, before: &[String]) {
    let inventory = &write_inventory(hosts, false, |h| {
        if h == "h3" {
            serde_json::json!({"corelane_bin": install_path(hosts, "h3")})
        } else {
            serde_json::json!({})
        }
    });
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
        assert_eq!(argv[0], install_path(hosts, h).to_str().unwrap(), "{exec}");
        assert!(argv.contains(&"--apply".to_string()), "{exec}");
        assert!(argv.contains(&nginx_conf(hosts, h).to_str().unwrap().to_string()), "{exec}");
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
        let dropins = host_dir(hosts, h).join("systemd/nginx.service.d");
        assert!(!dropins.exists(), "{h}: the drop-in (or its directory) left");
        assert!(!host_dir(hosts, h).join("lib/plan-d0.json").exists(), "{h}: plan left");
    }
    assert!(!install_path(hosts, "h1").exists(), "h1's corelane left, no plan needs it");
    assert!(install_path(hosts, "h3").exists(), "h3's own corelane removed");
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

fn states_of(hosts: &Hosts, names: &[&str]) -> Vec<String> {
    names.iter().map(|h| nic_state(hosts, h, "d0")).collect()
}
