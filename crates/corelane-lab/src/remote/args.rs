//! The options that put an experiment's sides on other machines: `--tx-host`, `--rx-host`,
//! how to reach them, which corelane runs there, and where the traffic goes.

use std::net::{IpAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{RemoteCorelane, SshOptions, SshTarget};
use crate::LabError;

/// Remote sides of an experiment (without `--tx-host`/`--rx-host`: the namespace testbed).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RemoteArgs {
    /// Take the senders and receiver from this Ansible inventory instead of --tx-host and
    /// --rx-host (INI, or YAML for .yml/.yaml): the hosts of group corelane_tx send (the load
    /// split over them), the host of corelane_rx receives (children groups count; one). Of the host and group vars
    /// (host over group, child group over parent) only ansible_host, ansible_user, ansible_port
    /// and ansible_ssh_private_key_file are used (or their older ansible_ssh_* spellings); other
    /// vars are ignored. Ansible is not needed.
    #[arg(long, value_name = "FILE", help_heading = "Remote hosts")]
    pub inventory: Option<PathBuf>,
    /// Run the sender on this host over SSH (`[USER@]HOST[:PORT]`); default: this machine.
    /// Repeat for several load hosts: each row's load is split over them (the rate and
    /// flows of UDP, the connections of HTTP) and started on all at one agreed time, each
    /// host's clock measured first.
    #[arg(long, value_name = "[USER@]HOST[:PORT]", help_heading = "Remote hosts")]
    pub tx_host: Vec<SshTarget>,
    /// Run the receiver (server) on this host over SSH; default: this machine.
    #[arg(long, value_name = "[USER@]HOST[:PORT]", help_heading = "Remote hosts")]
    pub rx_host: Option<SshTarget>,
    /// The rx host's address the sender targets (repeat for several); default: the address
    /// used to reach the rx host. Management (SSH) and data may be different networks.
    #[arg(long, value_name = "IP", help_heading = "Remote hosts")]
    pub rx_addr: Vec<IpAddr>,
    /// The rx host's interface the rows change (default: the one holding the first
    /// --rx-addr, found over SSH).
    #[arg(long, value_name = "IFACE", help_heading = "Remote hosts")]
    pub rx_nic: Option<String>,
    /// An address to add on the rx NIC for the run (repeatable), for the rows that target
    /// several receiver IPs; removed at the end (also if the lab dies). It must be free on
    /// the data network and reachable from the sender (e.g. in --rx-addr's subnet).
    #[arg(long, value_name = "ADDR/PREFIX", help_heading = "Remote hosts")]
    pub rx_add_addr: Vec<String>,
    /// An ssh config file to use instead of ~/.ssh/config (ssh -F).
    #[arg(long, value_name = "FILE", help_heading = "Remote hosts")]
    pub ssh_config: Option<PathBuf>,
    /// An ssh option KEY=VALUE (ssh -o), repeatable.
    #[arg(long, value_name = "KEY=VALUE", help_heading = "Remote hosts")]
    pub ssh_option: Vec<String>,
    /// corelane's path on the remote hosts (default: corelane on their PATH).
    #[arg(long, value_name = "PATH", help_heading = "Remote hosts", conflicts_with = "deploy")]
    pub remote_corelane: Option<String>,
    /// Copy this corelane to each remote host for the run (a private temporary directory,
    /// removed at the end).
    #[arg(long, help_heading = "Remote hosts")]
    pub deploy: bool,
    /// Connect, check, and print the changes each row would make on the rx host (as
    /// `corelane apply` shows them there); change and measure nothing.
    #[arg(long, help_heading = "Remote hosts")]
    pub dry_run: bool,
}

/// Where each side runs and how to reach it, checked.
#[derive(Debug, Clone)]
pub struct RemoteSpec {
    /// The load hosts, in order (empty: this machine).
    pub tx: Vec<SshTarget>,
    pub rx: Option<SshTarget>,
    pub rx_addrs: Vec<IpAddr>,
    /// The rx host's interface the rows change; found from the first address when `None`.
    pub rx_nic: Option<String>,
    /// Addresses (`ADDR/PREFIX`) added on the rx NIC for the rows that steer receive work.
    pub rx_add_addrs: Vec<(IpAddr, u8)>,
    pub ssh: SshOptions,
    pub corelane: RemoteCorelane,
    /// Show each row's changes on the rx host; measure nothing.
    pub dry_run: bool,
}

impl RemoteArgs {
    /// The remote setup asked for, or `None` for the namespace testbed.
    pub fn spec(&self) -> Result<Option<RemoteSpec>, LabError> {
        let (tx_host, rx_host) = self.hosts()?;
        if tx_host.is_empty() && rx_host.is_none() {
            let stray = !self.rx_addr.is_empty()
                || self.ssh_config.is_some()
                || !self.ssh_option.is_empty()
                || self.remote_corelane.is_some()
                || self.rx_nic.is_some()
                || !self.rx_add_addr.is_empty()
                || self.deploy
                || self.dry_run;
            if stray {
                return Err(LabError::Options(
                    "--rx-addr, --rx-nic, --rx-add-addr, --ssh-*, --remote-corelane, --deploy and --dry-run need --tx-host, --rx-host or --inventory"
                        .into(),
                ));
            }
            return Ok(None);
        }
        for o in &self.ssh_option {
            if !o.contains('=') || o.starts_with('=') {
                return Err(LabError::Options(format!(
                    "--ssh-option {o:?}: write it as KEY=VALUE, e.g. --ssh-option Port=2222"
                )));
            }
        }
        let rx_addrs = match (&self.rx_addr[..], &rx_host) {
            ([], Some(rx)) => vec![resolve(rx)?],
            ([], None) if self.inventory.is_some() => {
                return Err(LabError::Options(format!(
                    "inventory {}: no host in corelane_rx: put the receiver in group corelane_rx, or give --rx-addr for a receiver on this machine",
                    self.inventory.as_deref().map(Path::display).expect("checked")
                )))
            }
            ([], None) => {
                return Err(LabError::Options(
                    "the receiver runs here (no --rx-host): give --rx-addr, this machine's address the remote sender targets".into(),
                ))
            }
            (given, _) => given.to_vec(),
        };
        if let Some(nic) = &self.rx_nic {
            corelane::tune::IfName::parse(nic)
                .map_err(|e| LabError::Options(format!("--rx-nic {nic:?}: {e}")))?;
        }
        let mut rx_add_addrs = Vec::new();
        for cidr in &self.rx_add_addr {
            let parsed = corelane::tune::parse_cidr(cidr).ok_or_else(|| {
                LabError::Options(format!(
                    "--rx-add-addr {cidr:?}: give an address with its prefix length, such as 192.0.2.11/24"
                ))
            })?;
            if rx_host.is_none() {
                return Err(LabError::Options(
                    "--rx-add-addr adds addresses on a remote rx host: give --rx-host".into(),
                ));
            }
            if rx_addrs.contains(&parsed.0) || rx_add_addrs.iter().any(|(a, _)| *a == parsed.0) {
                return Err(LabError::Options(format!("{} is given twice", parsed.0)));
            }
            rx_add_addrs.push(parsed);
        }
        Ok(Some(RemoteSpec {
            tx: tx_host,
            rx: rx_host,
            rx_addrs,
            rx_nic: self.rx_nic.clone(),
            rx_add_addrs,
            ssh: SshOptions {
                config: self.ssh_config.clone(),
                options: self.ssh_option.clone(),
                connect_timeout: Duration::from_secs(10),
            },
            corelane: match (&self.remote_corelane, self.deploy) {
                (Some(path), _) => RemoteCorelane::At(path.clone()),
                (None, true) => RemoteCorelane::Deploy,
                (None, false) => RemoteCorelane::OnPath,
            },
            dry_run: self.dry_run,
        }))
    }
}

impl RemoteArgs {
    /// The load hosts and receiver: from --inventory, or --tx-host and --rx-host; a load
    /// host given twice is refused (it would get two shares of the load).
    fn hosts(&self) -> Result<(Vec<SshTarget>, Option<SshTarget>), LabError> {
        let (tx, rx) = match &self.inventory {
            None => (self.tx_host.clone(), self.rx_host.clone()),
            Some(file) => self.inventory_hosts(file)?,
        };
        if tx.len() > super::inventory::MAX_LOAD_HOSTS {
            return Err(LabError::Options(format!(
                "{} load hosts: give at most {}",
                tx.len(),
                super::inventory::MAX_LOAD_HOSTS
            )));
        }
        for (i, t) in tx.iter().enumerate() {
            if tx[..i].iter().any(|u| u.host == t.host && u.port == t.port) {
                return Err(LabError::Options(format!(
                    "load host {t} is given twice: give each load host once"
                )));
            }
        }
        Ok((tx, rx))
    }

    fn inventory_hosts(
        &self,
        file: &Path,
    ) -> Result<(Vec<SshTarget>, Option<SshTarget>), LabError> {
        if !self.tx_host.is_empty() || self.rx_host.is_some() {
            return Err(LabError::Options(format!(
                "--inventory {} names the hosts: drop --tx-host/--rx-host, or the inventory",
                file.display()
            )));
        }
        let fleet = super::inventory::load(file)?;
        Ok((fleet.tx, fleet.rx))
    }
}

/// The address the rx host is reached by: its own if it is one, else what its name resolves
/// to here.
fn resolve(target: &SshTarget) -> Result<IpAddr, LabError> {
    if let Ok(ip) = target.host.parse() {
        return Ok(ip);
    }
    (target.host.as_str(), 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(|a| a.ip())
        .ok_or_else(|| {
            LabError::Options(format!(
                "cannot resolve {} here: give --rx-addr, the rx host's address the sender targets",
                target.host
            ))
        })
}
