//! The two-host testbed: a sender namespace and a receiver namespace joined by a veth pair
//! whose receiving end has several RX queues and two addresses. RPS masks on those queues
//! stand in for RSS queue→CPU steering and IRQ affinity, which veth does not have.
//!
//! Namespaces are named `corelane-<pid>-tx|rx`, so a later run can find those of a killed run
//! (their PID is gone) and remove them. Without root, or where namespaces cannot be made,
//! the testbed falls back to loopback and says why.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use corelane::topology::CpuList;

use crate::host::Host;
use crate::remote::clock::{self, ClockOffset};
use crate::remote::{Remote, RemoteSpec};
use crate::rx_nic::{NicCounters, RemoteNic};
use crate::topo::{self, HostTopology};
use crate::LabError;

const PREFIX: &str = "corelane-";
/// RX (and TX) queues on each veth end.
pub const QUEUES: usize = 2;
/// Addresses inside the namespaces this testbed creates; never routed anywhere else.
const TX_ADDR: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 1);
const RX_ADDRS: [Ipv4Addr; 2] = [Ipv4Addr::new(10, 201, 0, 2), Ipv4Addr::new(10, 201, 0, 3)];

/// The receiving end of the namespace testbed's veth pair.
pub const RX_DEV: &str = "vrx";

/// Where the testbed's traffic flows.
/// The testbed as a report records it (flattened into the report's JSON).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TestbedReport {
    pub network: String,
    /// Why the namespace testbed could not be built, if it could not (loopback instead).
    pub fallback_reason: Option<String>,
    /// Namespaces a killed run left behind, removed before this one.
    pub removed_stale_namespaces: Vec<String>,
    /// Each remote side's machine as `corelane topo --json` saw it there (remote runs only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostReport>,
    /// A dry run's changes, per row that changes the rx host's NIC (nothing was measured).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<Vec<PlannedChange>>,
    /// A dry run's peer rows: what each would run on each host (nothing was started).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub peer_steps: Vec<PeerStep>,
    /// A remote run's load hosts, in order: each one's clock and what the lab does there.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub load_hosts: Vec<LoadHostReport>,
    /// A dry run's XDP rows: the receiver each would run on the rx host, whose XDP program
    /// is attached to the rx NIC for the row (nothing was started).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub xdp_steps: Vec<PeerStep>,
}

/// One command a peer row runs on one host (per trial, under `corelane guard` on a remote
/// host; the C loop's compilation once).
#[derive(Debug, Clone, serde::Serialize)]
pub struct PeerStep {
    pub row: String,
    pub host: String,
    pub command: String,
}

/// A load host as the report records it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadHostReport {
    pub host: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockOffset>,
    /// What the lab does there (shown by a dry run).
    pub steps: String,
}

/// What one row would change on the rx host, as `corelane apply` (dry run) showed it there.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PlannedChange {
    pub rows: String,
    pub host: String,
    pub nic: String,
    pub receive_cpus: String,
    pub shown: String,
}

/// One side of a remote run: which role, which host, and its topology.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HostReport {
    /// `tx` or `rx`.
    pub role: String,
    pub host: String,
    /// `corelane topo --json` there, as printed.
    pub topology: serde_json::Value,
    /// What the lab reads of it.
    #[serde(skip)]
    pub machine: HostTopology,
}

impl TestbedReport {
    /// The lines under a report's title: the network, and why it fell back if it did.
    pub fn lines(&self) -> String {
        let mut out = format!("testbed: {}\n", self.network);
        if let Some(reason) = &self.fallback_reason {
            out.push_str(&format!("note: {reason}\n"));
        }
        if self.is_dry_run() {
            out.push_str("dry run: nothing was changed or measured; the load hosts only run senders (no settings)\n");
            for l in &self.load_hosts {
                let clock = l.clock.map_or(String::new(), |c| {
                    format!(
                        " (clock {:+.1} ms, ±{:.1})",
                        c.offset_ns as f64 / 1e6,
                        c.rtt_ns as f64 / 2e6
                    )
                });
                out.push_str(&format!("\nload host {}{clock}: {}\n", l.host, l.steps));
            }
        }
        for p in self.dry_run.iter().flatten() {
            out.push_str(&format!(
                "\n{} — on {} ({}), receive work to CPUs {}:\n{}\n",
                p.rows,
                p.host,
                p.nic,
                p.receive_cpus,
                p.shown.trim_end()
            ));
        }
        for (i, step) in self.xdp_steps.iter().enumerate() {
            if i == 0 {
                out.push_str("\nXDP rows, each receiver under `corelane guard` on the rx host; its XDP program (a bpf_link) goes with the process:\n");
            }
            out.push_str(&format!("{} on {}: {}\n", step.row, step.host, step.command));
        }
        let mut row = None;
        for step in &self.peer_steps {
            if row.is_none() {
                out.push_str("\nrows' commands per host (lab udp: the peer rows; lab tcp: the peer, scale and file rows; lab latency: every pair), each under `corelane guard` on a remote host, ended by PID when the row ends:\n");
            }
            if row != Some(&step.row) {
                out.push_str(&format!("{}\n", step.row));
                row = Some(&step.row);
            }
            out.push_str(&format!("  on {}: {}\n", step.host, step.command));
        }
        out
    }

    /// Whether this report is a dry run's (the rx host's changes shown, nothing measured).
    pub fn is_dry_run(&self) -> bool {
        self.dry_run.is_some()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// Two namespaces and a veth pair (`tx`, `rx` are namespace names).
    Namespaces { tx: String, rx: String },
    /// Everything on this host's loopback; `reason` says why namespaces were not used.
    Loopback { reason: String },
    /// Sides on other machines over SSH (or one of them here); the sender targets `rx_addrs`,
    /// which the rx host was checked to hold.
    Remote { tx: Host, rx: Host, rx_addrs: Vec<IpAddr> },
}

/// A testbed; removed (namespaces and veth) when dropped.
#[derive(Debug)]
pub struct Testbed {
    pub network: Network,
    /// The stale namespaces of killed runs that were removed at start.
    pub removed_stale: Vec<String>,
    /// Each remote side's topology, for the report.
    hosts: Vec<HostReport>,
    /// A remote rx host's NIC, changed for rows through `corelane apply` there.
    rx_nic: Option<std::sync::Mutex<RemoteNic>>,
    /// That NIC as found, for the report.
    rx_nic_found: Option<String>,
    /// A dry run's changes (see [`preview`](Self::preview)); `None`: a measuring run.
    planned: Option<Vec<PlannedChange>>,
    /// A remote run's load hosts with their clocks (empty elsewhere: the one sender side).
    load: Vec<LoadHost>,
}

impl LoadHost {
    fn report(&self) -> LoadHostReport {
        let corelane = self.host.corelane().unwrap_or_else(|_| "corelane".into());
        LoadHostReport {
            host: self.host.name(),
            clock: self.clock,
            steps: format!(
                "connected over SSH, {corelane} checked (or deployed, removed at the end), topology read, clock measured over {} round trips; per row it runs `{corelane} guard --life {}s --start-at T -- {corelane} udp send …` (lab udp: its share of the rate and flows) or `… load http …` (lab tcp, lab affinity's HTTP rows: its share of the connections), or lab latency's clients (`… udp ping`, `sockperf pp|ul`, `… load http --rate`: ping-pong from the first load host only, under load each host its share of the offered rate and connections), T the agreed start in its clock, and the guard ends it when the lab lets go; it changes no setting there",
                crate::remote::clock::SAMPLES,
                crate::remote::MAX_LIFE.as_secs()
            ),
        }
    }
}

/// One of the hosts a row's load comes from.
#[derive(Debug, Clone)]
pub struct LoadHost {
    pub host: Host,
    /// Its clock against this machine's (`None`: this machine, or the namespace testbed).
    pub clock: Option<ClockOffset>,
}

fn ip(args: &[&str]) -> Result<(), String> {
    Host::Local.run("ip", args).map(drop).map_err(|e| e.to_string())
}

/// The MAC address of `dev` in namespace `ns`.
fn mac_of(ns: &str, dev: &str) -> Result<String, String> {
    let text =
        Host::Local.run("ip", &["-n", ns, "-o", "link", "show", dev]).map_err(|e| e.to_string())?;
    let mut words = text.split_whitespace();
    words
        .by_ref()
        .find(|w| *w == "link/ether")
        .and_then(|_| words.next())
        .map(str::to_owned)
        .ok_or_else(|| format!("no MAC address for {dev} in {ns}"))
}

fn netns_names() -> Vec<String> {
    Host::Local
        .run("ip", &["netns", "list"])
        .map(|out| {
            out.lines().filter_map(|l| l.split_whitespace().next().map(str::to_owned)).collect()
        })
        .unwrap_or_default()
}

/// Removes `corelane-<pid>-*` namespaces whose process is gone; returns their names.
pub fn remove_stale_namespaces() -> Vec<String> {
    netns_names()
        .into_iter()
        .filter(|name| {
            let Some(rest) = name.strip_prefix(PREFIX) else { return false };
            let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
            pid.is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
        })
        .filter(|name| ip(&["netns", "del", name]).is_ok())
        .collect()
}

impl Testbed {
    /// The testbed a run measures on: the hosts of `remote`, or the namespace testbed when
    /// `None`; announced through `progress`, each load host's clock checked against a trial
    /// of `trial`.
    pub fn prepare(
        remote: Option<&RemoteSpec>,
        trial: std::time::Duration,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Self, LabError> {
        let testbed = match remote {
            Some(spec) => Self::remote(spec)?,
            None => Self::create(),
        };
        testbed.announce(progress);
        testbed.check_clocks(trial)?;
        Ok(testbed)
    }

    /// Builds the namespace testbed, or a loopback one with the reason it had to.
    pub fn create() -> Self {
        if !rustix::process::geteuid().is_root() {
            return Self::loopback(
                "not root: network namespaces need root (run with sudo for the full lab)",
            );
        }
        let removed_stale = remove_stale_namespaces();
        // The counter keeps two testbeds of one process (parallel tests) apart.
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let pid = std::process::id();
        let (tx, rx) = (format!("{PREFIX}{pid}-{n}-tx"), format!("{PREFIX}{pid}-{n}-rx"));
        let mut bed = Self {
            network: Network::Namespaces { tx: tx.clone(), rx: rx.clone() },
            removed_stale,
            hosts: Vec::new(),
            rx_nic: None,
            rx_nic_found: None,
            planned: None,
            load: Vec::new(),
        };
        if let Err(reason) = bed.build(&tx, &rx) {
            let removed_stale = std::mem::take(&mut bed.removed_stale);
            drop(bed); // removes whatever part was built
            let reason = format!("could not build the namespace testbed: {reason}");
            let mut fallback = Self::loopback(&reason);
            fallback.removed_stale = removed_stale;
            return fallback;
        }
        bed
    }

    /// The sides on the hosts `spec` names (this machine for a side it leaves out), after
    /// checking that the rx host holds every address the senders will target, with each
    /// remote load host's clock measured.
    pub fn remote(spec: &RemoteSpec) -> Result<Self, LabError> {
        let connect = |t| -> Result<Host, LabError> {
            Ok(Host::Remote(Arc::new(Remote::connect(t, &spec.ssh, &spec.corelane)?)))
        };
        let load: Vec<Host> = match spec.tx.is_empty() {
            true => vec![Host::Local],
            false => spec.tx.iter().map(connect).collect::<Result<_, _>>()?,
        };
        let rx = spec.rx.as_ref().map_or(Ok(Host::Local), connect)?;
        let tx = load[0].clone();
        let held = rx.run("ip", &["-o", "addr", "show"])?;
        for addr in &spec.rx_addrs {
            if !holds(&held, *addr) {
                return Err(LabError::Remote {
                    host: rx.name(),
                    problem: format!(
                        "does not hold {addr}: the sender only targets the rx host's own addresses (give --rx-addr with one `ip addr` lists there)"
                    ),
                });
            }
        }
        let mut tx_held = Vec::new();
        if !spec.rx_add_addrs.is_empty() {
            for host in &load {
                tx_held.push((host.name(), host.run("ip", &["-o", "addr", "show"])?));
            }
        }
        for (addr, _) in &spec.rx_add_addrs {
            if let Some((name, _)) = tx_held.iter().find(|(_, held)| holds(held, *addr)) {
                return Err(LabError::Remote {
                    host: name.clone(),
                    problem: format!(
                        "holds {addr}: --rx-add-addr must be an address no host uses (pick a free one in the rx host's subnet)"
                    ),
                });
            }
            if holds(&held, *addr) {
                return Err(LabError::Remote {
                    host: rx.name(),
                    problem: format!(
                        "holds {addr} already: give it as --rx-addr (--rx-add-addr is for addresses the lab adds)"
                    ),
                });
            }
        }
        let (rx_nic, rx_nic_found) = match &rx {
            Host::Remote(remote) => {
                let name = match &spec.rx_nic {
                    Some(name) => name.clone(),
                    None => nic_holding(&rx.name(), &held, spec.rx_addrs[0])?,
                };
                let script = "cd \"/sys/class/net/$1/queues\" || exit 1; for q in rx-*; do printf '%s=%s ' \"$q\" \"$(cat \"$q/rps_cpus\")\"; done";
                let masks = rx.run("sh", &["-c", script, "sh", &name]).map_err(|_| LabError::Remote {
                    host: rx.name(),
                    problem: format!("has no interface {name} with RX queues: give --rx-nic with one `ip link` lists"),
                })?;
                let found = format!("{name} as found: RPS {}", rps_masks(&rx.name(), &masks)?);
                let nic = RemoteNic::open(&rx, remote, &name, &spec.rx_add_addrs)?;
                (Some(std::sync::Mutex::new(nic)), Some(found))
            }
            _ => (None, None),
        };
        let mut hosts = Vec::new();
        for (role, host) in load.iter().map(|h| ("tx", h)).chain([("rx", &rx)]) {
            if let Host::Remote(remote) = host {
                let reply = topo::read(host, remote.corelane())?;
                hosts.push(HostReport {
                    role: role.into(),
                    host: host.name(),
                    topology: reply.document,
                    machine: reply.topology,
                });
            }
        }
        let mut rx_addrs = spec.rx_addrs.clone();
        rx_addrs.extend(spec.rx_add_addrs.iter().map(|(addr, _)| *addr));
        let mut load_hosts = Vec::new();
        for host in load {
            let clock = match &host {
                Host::Remote(remote) => Some(clock::measure(remote)?),
                _ => None,
            };
            load_hosts.push(LoadHost { host, clock });
        }
        let network = Network::Remote { tx, rx, rx_addrs };
        Ok(Self {
            network,
            removed_stale: Vec::new(),
            hosts,
            rx_nic,
            rx_nic_found,
            planned: None,
            load: load_hosts,
        })
    }

    /// The hosts a row's load comes from: a remote run's load hosts in order, elsewhere the
    /// one sender side.
    pub fn load_hosts(&self) -> Vec<LoadHost> {
        match self.load.is_empty() {
            true => vec![LoadHost { host: self.tx(), clock: None }],
            false => self.load.clone(),
        }
    }

    /// Refuses the first load host whose clock is further off than a trial of `trial`
    /// tolerates (see [`clock::check`]).
    pub fn check_clocks(&self, trial: std::time::Duration) -> Result<(), LabError> {
        for load in &self.load {
            if let Some(offset) = &load.clock {
                clock::check(&load.host.name(), offset, trial)?;
            }
        }
        Ok(())
    }

    /// Why receive steering (RPS) cannot be changed on this testbed, if it cannot.
    pub fn rps_unavailable(&self) -> Option<&'static str> {
        match self.network {
            Network::Namespaces { .. } => None,
            Network::Loopback { .. } => Some("needs RPS on the namespace testbed (root)"),
            Network::Remote { .. } if self.rx_nic.is_some() => None,
            Network::Remote { .. } => Some(
                "the receiver runs on this machine (no --rx-host): the lab changes no NIC of the controller",
            ),
        }
    }

    fn loopback(reason: &str) -> Self {
        Self {
            network: Network::Loopback { reason: reason.into() },
            removed_stale: Vec::new(),
            hosts: Vec::new(),
            rx_nic: None,
            rx_nic_found: None,
            planned: None,
            load: Vec::new(),
        }
    }

    fn build(&self, tx: &str, rx: &str) -> Result<(), String> {
        let q = QUEUES.to_string();
        ip(&["netns", "add", tx])?;
        ip(&["netns", "add", rx])?;
        ip(&[
            "link",
            "add",
            "vtx",
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "netns",
            tx,
            "type",
            "veth",
            "peer",
            "name",
            RX_DEV,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "netns",
            rx,
        ])?;
        ip(&["-n", tx, "link", "set", "lo", "up"])?;
        ip(&["-n", rx, "link", "set", "lo", "up"])?;
        ip(&["-n", tx, "addr", "add", &format!("{TX_ADDR}/24"), "dev", "vtx"])?;
        for addr in RX_ADDRS {
            ip(&["-n", rx, "addr", "add", &format!("{addr}/24"), "dev", RX_DEV])?;
        }
        ip(&["-n", tx, "link", "set", "vtx", "up"])?;
        ip(&["-n", rx, "link", "set", RX_DEV, "up"])?;
        // Permanent neighbour entries: without them the first datagrams of every trial wait
        // for ARP and are flushed from the neighbour queue while later ones overtake them,
        // which would show as reordering that no receiver configuration caused.
        let (tx_mac, rx_mac) = (mac_of(tx, "vtx")?, mac_of(rx, RX_DEV)?);
        for addr in RX_ADDRS {
            let addr = addr.to_string();
            ip(&[
                "-n",
                tx,
                "neigh",
                "replace",
                &addr,
                "lladdr",
                &rx_mac,
                "dev",
                "vtx",
                "nud",
                "permanent",
            ])?;
        }
        let tx_addr = TX_ADDR.to_string();
        ip(&[
            "-n",
            rx,
            "neigh",
            "replace",
            &tx_addr,
            "lladdr",
            &tx_mac,
            "dev",
            RX_DEV,
            "nud",
            "permanent",
        ])?;
        // The client side opens tens of thousands of connections a second in the TCP lab:
        // let it reuse ports in TIME_WAIT (safe with timestamps) and use the whole port range,
        // so one row's closed connections cannot slow the next row's connects.
        let tx = Host::Namespace(tx.to_string());
        tx.write_file("/proc/sys/net/ipv4/tcp_tw_reuse", "1").map_err(|e| e.to_string())?;
        tx.write_file("/proc/sys/net/ipv4/ip_local_port_range", "1024 65535")
            .map_err(|e| e.to_string())
    }

    fn teardown(&self) {
        if let Network::Namespaces { tx, rx } = &self.network {
            // Deleting a namespace removes its end of the veth pair, and with it the pair.
            let _ = ip(&["netns", "del", tx]);
            let _ = ip(&["netns", "del", rx]);
        }
    }

    pub fn is_namespaced(&self) -> bool {
        matches!(self.network, Network::Namespaces { .. })
    }

    /// Where the sender side runs.
    pub fn tx(&self) -> Host {
        match &self.network {
            Network::Namespaces { tx, .. } => Host::Namespace(tx.clone()),
            Network::Loopback { .. } => Host::Local,
            Network::Remote { tx, .. } => tx.clone(),
        }
    }

    /// Where the receiver (server) side runs.
    pub fn rx(&self) -> Host {
        match &self.network {
            Network::Namespaces { rx, .. } => Host::Namespace(rx.clone()),
            Network::Loopback { .. } => Host::Local,
            Network::Remote { rx, .. } => rx.clone(),
        }
    }

    /// How reports name the network.
    pub fn describe(&self) -> String {
        match &self.network {
            Network::Namespaces { tx, rx } => {
                format!("network namespaces {tx} → {rx} over veth ({QUEUES} RX queues)")
            }
            Network::Loopback { .. } => "loopback (127.0.0.1)".into(),
            Network::Remote { rx, rx_addrs, .. } => {
                let addrs: Vec<String> = rx_addrs.iter().map(ToString::to_string).collect();
                let load: Vec<String> = self.load_hosts().iter().map(|l| l.host.name()).collect();
                format!(
                    "{} → {} over SSH, data to {}",
                    load.join(" + "),
                    rx.name(),
                    addrs.join(" ")
                )
            }
        }
    }

    /// Why the namespace testbed could not be built, if it could not.
    pub fn fallback_reason(&self) -> Option<String> {
        match &self.network {
            Network::Namespaces { .. } | Network::Remote { .. } => None,
            Network::Loopback { reason } => Some(reason.clone()),
        }
    }

    /// What a report says of the testbed; `detail` (e.g. where RPS steers) follows the
    /// network's description.
    pub fn report(&self, detail: Option<String>) -> TestbedReport {
        let network = match detail {
            Some(detail) => format!("{}, {detail}", self.describe()),
            None => self.describe(),
        };
        let network = match &self.rx_nic_found {
            Some(found) => format!("{network}; {found}"),
            None => network,
        };
        TestbedReport {
            network,
            fallback_reason: self.fallback_reason(),
            removed_stale_namespaces: self.removed_stale.clone(),
            hosts: self.hosts.clone(),
            dry_run: self.planned.clone(),
            peer_steps: Vec::new(),
            load_hosts: self.load.iter().map(LoadHost::report).collect(),
            xdp_steps: Vec::new(),
        }
    }

    /// Progress lines for what building the testbed did: stale namespaces removed, a
    /// fallback to loopback and why.
    pub fn announce(&self, progress: &mut dyn FnMut(&str)) {
        for name in &self.removed_stale {
            progress(&format!("removed a stale namespace of a killed run: {name}"));
        }
        if let Some(reason) = self.fallback_reason() {
            progress(&format!("falling back to loopback: {reason}"));
        }
    }

    /// The receiver's two addresses (loopback: 127.0.0.1 and 127.0.0.2, both on `lo`).
    pub fn rx_addrs(&self) -> Vec<IpAddr> {
        match &self.network {
            Network::Namespaces { .. } => RX_ADDRS.map(IpAddr::V4).to_vec(),
            Network::Loopback { .. } => {
                [Ipv4Addr::new(127, 0, 0, 1), Ipv4Addr::new(127, 0, 0, 2)].map(IpAddr::V4).to_vec()
            }
            Network::Remote { rx_addrs, .. } => rx_addrs.clone(),
        }
    }

    /// The sending side's address on this machine's testbed (loopback: 127.0.0.1); `None`
    /// for remote hosts, whose own addresses the lab does not choose.
    pub fn tx_addr(&self) -> Option<IpAddr> {
        match &self.network {
            Network::Namespaces { .. } => Some(IpAddr::V4(TX_ADDR)),
            Network::Loopback { .. } => Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            Network::Remote { .. } => None,
        }
    }

    /// Steers receive processing of every RX queue of the receiver's veth to `cpus` (RPS);
    /// an empty list turns RPS off, so the sender's CPU does the receive work in its softirq.
    pub fn steer_receive(&self, cpus: &CpuList) -> Result<(), LabError> {
        if let Some(nic) = &self.rx_nic {
            return nic.lock().unwrap_or_else(|e| e.into_inner()).steer_receive(cpus);
        }
        if !self.is_namespaced() {
            return Err(LabError::NeedsNamespaces { what: "steering receive work (RPS)" });
        }
        let mask = cpus.to_mask();
        let rx = self.rx();
        for q in 0..QUEUES {
            // The namespace's own sysfs, where its end of the veth pair is.
            rx.write_file(&format!("/sys/class/net/vrx/queues/rx-{q}/rps_cpus"), &mask)?;
        }
        Ok(())
    }

    /// A dry run: records what steering receive work to each `(rows, cpus)` would change on
    /// the remote rx NIC (an empty list: the NIC as found, nothing to show), changing nothing.
    pub fn preview(&mut self, rows: &[(String, CpuList)]) -> Result<(), LabError> {
        let Some(nic) = &self.rx_nic else {
            return Err(LabError::Options(
                "--dry-run shows the changes on a remote rx host's NIC: give --rx-host".into(),
            ));
        };
        let nic = nic.lock().unwrap_or_else(|e| e.into_inner());
        let mut planned = Vec::new();
        for (rows, cpus) in rows.iter().filter(|(_, cpus)| !cpus.is_empty()) {
            planned.push(PlannedChange {
                rows: rows.clone(),
                host: self.rx().name(),
                nic: nic.name().to_string(),
                receive_cpus: cpus.to_string(),
                shown: nic.preview(cpus)?,
            });
        }
        drop(nic);
        self.planned = Some(planned);
        Ok(())
    }

    /// The remote rx host's private directory for the run (`mktemp -d` there, mode 0700),
    /// removed at the end, and by the NIC keeper when the lab dies or loses the connection;
    /// `None` without a remote rx host.
    pub fn rx_run_dir(&self) -> Option<String> {
        let nic = self.rx_nic.as_ref()?;
        Some(nic.lock().unwrap_or_else(|e| e.into_inner()).dir().to_string())
    }

    /// The interface the AF_XDP rows attach to on the rx side: the namespace testbed's
    /// receiving veth, or a remote rx host's NIC; `None` on loopback and with the receiver
    /// on the controller (the lab attaches no program to the controller's own NIC).
    pub fn rx_xdp_dev(&self) -> Option<String> {
        match (&self.network, &self.rx_nic) {
            (Network::Namespaces { .. }, _) => Some(RX_DEV.to_string()),
            (Network::Remote { .. }, Some(nic)) => {
                Some(nic.lock().unwrap_or_else(|e| e.into_inner()).name().to_string())
            }
            _ => None,
        }
    }

    /// Whether this is a dry run (see [`preview`](Self::preview)).
    pub fn is_dry_run(&self) -> bool {
        self.planned.is_some()
    }

    /// A remote rx NIC's receive counters (`None` on the lab's own veth and loopback).
    pub fn rx_nic_counters(&self) -> Result<Option<NicCounters>, LabError> {
        match &self.rx_nic {
            Some(nic) => nic.lock().unwrap_or_else(|e| e.into_inner()).counters().map(Some),
            None => Ok(None),
        }
    }

    /// Puts a remote rx NIC back as found (a no-op elsewhere: namespaces are removed whole).
    pub fn restore_receive(&self) -> Result<(), LabError> {
        match &self.rx_nic {
            Some(nic) => nic.lock().unwrap_or_else(|e| e.into_inner()).restore(),
            None => Ok(()),
        }
    }

    /// Like [`steer_receive`](Self::steer_receive) where this testbed can steer: a no-op on
    /// loopback and with the receiver on the controller; on a remote rx NIC an empty list
    /// means the NIC as found (the lab only ever changes a real NIC for a row).
    pub fn steer_receive_where_possible(&self, cpus: &CpuList) -> Result<(), LabError> {
        if self.rx_nic.is_some() && cpus.is_empty() {
            return self.restore_receive();
        }
        if self.rps_unavailable().is_none() {
            self.steer_receive(cpus)
        } else {
            Ok(())
        }
    }
}

/// The interface `ip -o addr show` output on `host` lists `addr` on (`3: d0    inet
/// 10.0.0.2/24 …`), checked as a name the user gave would be.
fn nic_holding(host: &str, ip_addr_output: &str, addr: IpAddr) -> Result<String, LabError> {
    let refused = |problem: String| LabError::Remote { host: host.into(), problem };
    let line = ip_addr_output
        .lines()
        .find(|line| holds(line, addr))
        .ok_or_else(|| refused(format!("no interface holds {addr}: give --rx-nic")))?;
    let mut words = line.split_whitespace().skip(1);
    let (name, family) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
    let name = name.split('@').next().unwrap_or_default().trim_end_matches(':');
    if !matches!(family, "inet" | "inet6") {
        return Err(refused(format!(
            "`ip -o addr show` there printed {:?}, not `N: NAME inet ADDR`: give --rx-nic",
            corelane::child_output::printable(line, 200)
        )));
    }
    crate::rx_nic::check_name(name).map_err(|e| {
        refused(format!(
            "`ip -o addr show` there names the interface holding {addr} {e}: give --rx-nic"
        ))
    })?;
    Ok(name.to_string())
}

/// The `rx-N=MASK ` words the RPS script prints, as they are (`None` for anything else).
fn rps_masks(host: &str, text: &str) -> Result<String, LabError> {
    let plain = |w: &str| {
        w.split_once('=').is_some_and(|(q, mask)| {
            q.strip_prefix("rx-").is_some_and(|n| n.parse::<u32>().is_ok())
                && mask.chars().all(|c| c.is_ascii_hexdigit() || c == ',')
        })
    };
    let text = text.trim();
    if text.len() > 64 << 10 || !text.split(' ').all(plain) {
        return Err(LabError::Remote {
            host: host.into(),
            problem: format!(
                "the RPS masks read {:?}, not `rx-N=MASK …`",
                corelane::child_output::printable(text, 200)
            ),
        });
    }
    Ok(text.to_string())
}

/// Whether `ip -o addr show` output lists `addr` as one of the host's addresses.
fn holds(ip_addr_output: &str, addr: IpAddr) -> bool {
    ip_addr_output.split_whitespace().any(|word| {
        word.split_once('/').is_some_and(|(a, _)| a.parse::<IpAddr>().is_ok_and(|a| a == addr))
    })
}

impl Drop for Testbed {
    fn drop(&mut self) {
        self.teardown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Creating a testbed removes stale namespaces, so these tests must not overlap.
    static NETNS: Mutex<()> = Mutex::new(());

    /// The namespace tests' turn, when root; otherwise `None`, saying why the test skips.
    fn namespaces(what: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: {what} needs root");
            return None;
        }
        Some(NETNS.lock().unwrap_or_else(|e| e.into_inner()))
    }

    #[test]
    fn odd_interface_names_from_a_remote_are_refused() {
        let addr: IpAddr = "10.0.0.2".parse().unwrap();
        for name in ["../x", "a/b", "-oProxyCommand", "abcdefghijklmnopqrst", "a\0b", "a b", ".."] {
            let line = format!("3: {name}    inet 10.0.0.2/24 brd 10.0.0.255 scope global");
            let err = nic_holding("root@h2", &line, addr).unwrap_err().to_string();
            assert!(err.starts_with("root@h2: ") && !err.contains('\n'), "{name:?}: {err}");
            assert!(err.ends_with("give --rx-nic"), "{err}");
        }
        let line = "3: d0@if4    inet 10.0.0.2/24 brd 10.0.0.255 scope global d0";
        assert_eq!(nic_holding("h", line, addr).unwrap(), "d0");
        assert!(nic_holding("h", "3: d0    inet 10.0.0.3/24", addr).is_err());
    }

    #[test]
    fn rps_masks_are_read_only_as_masks() {
        assert_eq!(
            rps_masks("h", "rx-0=00000003 rx-1=0,00000001 \n").unwrap(),
            "rx-0=00000003 rx-1=0,00000001"
        );
        for bad in ["rx-0=\x1b[2J", "rx-0", "tx-0=1", "rx-0=1 junk"] {
            let err = rps_masks("root@h2", bad).unwrap_err().to_string();
            assert!(
                err.starts_with("root@h2: the RPS masks read") && !err.contains('\x1b'),
                "{err}"
            );
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Any `ip -o addr show` reply: a checked name or an error naming the host.
        #[test]
        fn any_ip_addr_reply_gives_a_checked_name_or_an_error(
            lines in proptest::collection::vec("[0-9]{1,3}: [ -~\\x00\u{80}-\u{10ffff}]{0,24} (inet|inet6|x) 10\\.0\\.0\\.2/24[ a-z]{0,10}", 0..4),
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
        ) {
            let text = format!("{}\n{}", lines.join("\n"), String::from_utf8_lossy(&junk));
            let addr: IpAddr = "10.0.0.2".parse().unwrap();
            match nic_holding("h", &text, addr) {
                Ok(name) => proptest::prop_assert!(crate::rx_nic::check_name(&name).is_ok()),
                Err(e) => proptest::prop_assert!(e.to_string().starts_with("h: ")),
            }
            let _ = rps_masks("h", &text);
        }
    }

    #[test]
    fn builds_and_removes_its_namespaces_when_root() {
        let Some(_serial) = namespaces("building network namespaces") else { return };
        let bed = Testbed::create();
        let Network::Namespaces { tx, rx } = bed.network.clone() else {
            panic!("root but no namespaces: {:?}", bed.network);
        };
        assert!(netns_names().contains(&tx) && netns_names().contains(&rx));
        bed.steer_receive(&CpuList::new(vec![0])).unwrap();
        let mask = bed.rx().read_file("/sys/class/net/vrx/queues/rx-1/rps_cpus").unwrap();
        assert_eq!(mask.trim().trim_start_matches('0'), "1");
        drop(bed);
        let left = netns_names();
        assert!(!left.contains(&tx) && !left.contains(&rx), "namespaces left behind: {left:?}");
    }

    #[test]
    fn stale_namespaces_of_dead_runs_are_removed() {
        let Some(_serial) = namespaces("creating network namespaces") else { return };
        // PID 0x7fffffff cannot be running: pid_max is at most 2^22.
        let stale = format!("{PREFIX}2147483647-rx");
        ip(&["netns", "add", &stale]).unwrap();
        let removed = remove_stale_namespaces();
        assert!(removed.contains(&stale), "{removed:?}");
        assert!(!netns_names().contains(&stale));
    }
}
