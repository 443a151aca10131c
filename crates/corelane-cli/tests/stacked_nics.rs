//! Stacked devices inside a network namespace the test makes (and always deletes): a VLAN on
//! a veth, a bond over two veths, a bridge over two and a macvlan on one. `plan` sends each
//! plan to the lower devices that own the queues, and `apply --yes` then `revert` leave every
//! queue mask and queue count exactly as it was. Needs root; a link type the kernel lacks
//! (8021q, bonding) skips its case with the reason.

mod common;

use std::process::{Command, Output};

use common::{is_root, stderr};

/// A network namespace, deleted when dropped (also when an assertion fails).
struct Netns(String);

impl Netns {
    /// A new namespace, or `None` (saying so) when not root.
    fn or_skip(tag: &str) -> Option<Self> {
        if !is_root() {
            eprintln!("skipped: creating a network namespace and its devices needs root");
            return None;
        }
        Some(Self::new(tag))
    }

    fn new(tag: &str) -> Self {
        let ns = Netns(format!("corelane-{}-{tag}", std::process::id()));
        assert!(ns.ip(&["netns", "add", &ns.0]), "cannot create namespace {}", ns.0);
        ns
    }

    /// Runs `ip ARGS` in the namespace (`ip netns …` as given); whether it worked.
    fn ip(&self, args: &[&str]) -> bool {
        let mut cmd = Command::new("ip");
        if args.first() != Some(&"netns") {
            cmd.args(["-n", &self.0]);
        }
        cmd.args(args).stderr(std::process::Stdio::null()).status().is_ok_and(|s| s.success())
    }

    /// `corelane ARGS` run in the namespace, which must succeed.
    fn corelane_ok(&self, args: &[&str]) -> Output {
        let out = self.corelane(args);
        assert!(out.status.success(), "corelane {}: {}", args.join(" "), stderr(&out));
        out
    }

    fn corelane(&self, args: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.0, env!("CARGO_BIN_EXE_corelane")])
            .args(args)
            .output()
            .unwrap()
    }

    /// A veth pair with four queues each way, so XPS applies (one TX queue refuses it).
    fn veth(&self, name: &str, peer: &str) {
        self.veth_with_queues(name, peer, "4");
    }

    /// A veth pair with `queues` queues each way (veth allocates one per possible CPU unless
    /// told).
    fn veth_with_queues(&self, name: &str, peer: &str, queues: &str) {
        let q = ["numrxqueues", queues, "numtxqueues", queues];
        let mut args = vec!["link", "add", name];
        args.extend(q);
        args.extend(["type", "veth", "peer", "name", peer]);
        args.extend(q);
        assert!(self.ip(&args), "ip link add {name} type veth");
    }

    /// Every queue mask and the queue count of `devices`, as `topo --json` shows them.
    fn snapshot(&self, devices: &[&str]) -> Vec<serde_json::Value> {
        let out = self.corelane_ok(&["topo", "--json"]);
        let topo: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let nics = topo["nics"].as_array().unwrap();
        devices
            .iter()
            .map(|d| {
                let nic = nics.iter().find(|n| n["name"] == *d).unwrap();
                serde_json::json!([nic["rx_queues"], nic["tx_queues"], nic["settings"]["channels"]])
            })
            .collect()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Plans `upper`, checks the plan names `lower`, applies it and reverts it; the lower
/// devices' masks and queue counts change and come back exactly.
fn round_trip(ns: &Netns, upper: &str, lower: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    let revert = dir.path().join("revert.json");
    let (plan, revert) = (plan.to_str().unwrap(), revert.to_str().unwrap());
    let before = ns.snapshot(lower);
    ns.corelane_ok(&["plan", "--nic", upper, "-o", plan]);
    let text = std::fs::read_to_string(plan).unwrap();
    let parsed: toml::Value = toml::from_str(&text).unwrap();
    let planned: Vec<&str> = parsed["lower"]
        .as_array()
        .unwrap_or_else(|| panic!("{upper}: no lower devices in {text}"))
        .iter()
        .map(|d| d["nic"].as_str().unwrap())
        .collect();
    assert_eq!(planned, lower, "{upper}: {text}");
    assert!(text.contains(&format!("{upper} is stacked on")), "{text}");
    ns.corelane_ok(&["apply", plan]);
    assert_eq!(ns.snapshot(lower), before, "{upper}: a dry run changed something");
    ns.corelane_ok(&["apply", plan, "--yes", "--revert", revert]);
    assert_ne!(ns.snapshot(lower), before, "{upper}: the plan changed nothing below it");
    ns.corelane_ok(&["revert", revert]);
    assert_eq!(ns.snapshot(lower), before, "{upper}: revert did not restore every value");
    eprintln!("{upper} over {lower:?}: planned, applied and reverted exactly");
}

/// A plan written before plans left XPS out on single-queue devices asks for it: `apply --yes`
/// makes the other changes, names the refused one as skipped, and revert restores the rest.
#[test]
fn a_setting_the_kernel_refuses_is_skipped_by_name_and_the_rest_applied() {
    let Some(ns) = Netns::or_skip("refused") else { return };
    ns.veth_with_queues("s0", "s1", "1");
    let dir = tempfile::tempdir().unwrap();
    let (plan, revert) = (dir.path().join("plan.toml"), dir.path().join("revert.json"));
    std::fs::write(
        &plan,
        "nic = \"s0\"\npolicy = \"spread\"\nirq_cpus = \"0\"\nsyscall_cpus = \"0\"\napp_cpus = \"0\"\nrps_cpus = \"1\"\nxps_cpus = [\"1\"]\nirqs = []\nnotes = []\n",
    )
    .unwrap();
    let before = ns.snapshot(&["s0"]);
    let (plan, revert) = (plan.to_str().unwrap(), revert.to_str().unwrap());
    let out = ns.corelane_ok(&["apply", plan, "--yes", "--revert", revert]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("tx-0/xps_cpus: 1 skipped: the kernel refuses XPS"), "{stdout}");
    assert_ne!(ns.snapshot(&["s0"]), before, "the RPS mask was not set");
    let saved = std::fs::read_to_string(revert).unwrap();
    assert!(!saved.contains("xps_cpus"), "a skipped setting has nothing to revert: {saved}");
    ns.corelane_ok(&["revert", revert]);
    assert_eq!(ns.snapshot(&["s0"]), before);
}

/// Two new veth pairs whose first ends are enslaved to a new device `master` of `kind` (its
/// `ip link add ... type` words); false, with nothing enslaved, if this kernel cannot make it.
fn master_of_two_veths(ns: &Netns, master: &str, kind: &[&str], pairs: [(&str, &str); 2]) -> bool {
    for (end, peer) in pairs {
        ns.veth(end, peer);
    }
    let add: Vec<&str> = ["link", "add", master, "type"].iter().chain(kind).copied().collect();
    if !ns.ip(&add) {
        return false;
    }
    for (end, _) in pairs {
        assert!(ns.ip(&["link", "set", end, "master", master]), "{end} into {master}");
    }
    true
}

#[test]
fn stacked_devices_plan_to_their_lower_devices_and_round_trip_exactly() {
    let Some(ns) = Netns::or_skip("stack") else { return };
    ns.veth("va", "vb");
    if ns.ip(&["link", "add", "link", "va", "name", "va.10", "type", "vlan", "id", "10"]) {
        round_trip(&ns, "va.10", &["va"]);
    } else {
        eprintln!(
            "skipped the VLAN case: this kernel cannot make a VLAN (8021q module unavailable)"
        );
    }
    if master_of_two_veths(
        &ns,
        "bond0",
        &["bond", "mode", "balance-xor"],
        [("c0", "d0"), ("c1", "d1")],
    ) {
        round_trip(&ns, "bond0", &["c0", "c1"]);
    } else {
        eprintln!(
            "skipped the bond case: this kernel cannot make a bond (bonding module unavailable)"
        );
    }
    if master_of_two_veths(&ns, "br0", &["bridge"], [("e0", "f0"), ("e1", "f1")]) {
        round_trip(&ns, "br0", &["e0", "e1"]);
    } else {
        eprintln!("skipped the bridge case: this kernel cannot make a bridge");
    }
    if ns.ip(&["link", "add", "link", "va", "name", "mv0", "type", "macvlan"]) {
        round_trip(&ns, "mv0", &["va"]);
    } else {
        eprintln!("skipped the macvlan case: this kernel cannot make a macvlan");
    }
}

/// A plan's `addresses` are added by `apply --yes` and removed by `revert`; a bad one is
/// refused before any change; an address already held is left alone (and kept by revert).
#[test]
fn plan_addresses_are_added_and_reverted() {
    let Some(ns) = Netns::or_skip("addr") else { return };
    ns.veth("a0", "a1");
    assert!(ns.ip(&["addr", "add", "10.77.0.1/24", "dev", "a0"]));
    let dir = tempfile::tempdir().unwrap();
    let plan_path = dir.path().join("plan.json");
    let revert = dir.path().join("revert.json");
    let addrs = || {
        let out =
            Command::new("ip").args(["-n", &ns.0, "-o", "addr", "show", "dev", "a0"]).output();
        String::from_utf8_lossy(&out.unwrap().stdout).into_owned()
    };
    let out = ns.corelane_ok(&["plan", "--nic", "a0", "--format", "json"]);
    let mut plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let write = |plan: &serde_json::Value| std::fs::write(&plan_path, plan.to_string()).unwrap();
    let path = plan_path.to_str().unwrap();

    plan["addresses"] = serde_json::json!(["10.77.0.9/24", "10.77.0.1/24"]);
    write(&plan);
    let shown = ns.corelane(&["apply", path]);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("address:a0/10.77.0.9/24"), "{text}");
    assert!(!text.contains("10.77.0.1/24"), "an address held already is no change: {text}");
    ns.corelane_ok(&["apply", path, "--yes", "--revert", revert.to_str().unwrap()]);
    assert!(addrs().contains("10.77.0.9/24"), "{}", addrs());
    ns.corelane_ok(&["revert", revert.to_str().unwrap()]);
    assert!(!addrs().contains("10.77.0.9/") && addrs().contains("10.77.0.1/24"), "{}", addrs());

    for bad in ["10.77.0.9", "10.77.0.9/33", "10.77.0.9/24 dev lo", "-6/24"] {
        plan["addresses"] = serde_json::json!([bad]);
        write(&plan);
        let before = addrs();
        let out = ns.corelane(&["apply", path, "--yes", "--revert", revert.to_str().unwrap()]);
        assert!(!out.status.success(), "{bad} was applied");
        assert!(stderr(&out).contains("such as 192.0.2.10/24"), "{bad}: {}", stderr(&out));
        assert_eq!(addrs(), before, "{bad}");
    }
}
