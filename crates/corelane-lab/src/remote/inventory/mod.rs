//! `--inventory FILE`: the lab's hosts from an Ansible inventory, read without Ansible. The
//! hosts of group `corelane_tx` send (the load is split over them), the one of `corelane_rx` receives (children groups count),
//! reached by their `ansible_host`, `ansible_user`, `ansible_port` and
//! `ansible_ssh_private_key_file`, with vars merged as Ansible merges them: `all` first, then
//! the other groups parent before child (by name within a level), then the host's own. Other
//! vars are ignored. The file is hostile input: read with a size cap, every name and used var
//! checked as ssh's `--tx-host` is, nesting and alias expansion bounded.

mod ini;
mod yaml;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::SshTarget;
use crate::LabError;

/// The largest inventory read: a fleet's address book, not a data set.
pub const MAX_BYTES: u64 = 1 << 20;
pub const TX_GROUP: &str = "corelane_tx";
pub const RX_GROUP: &str = "corelane_rx";

/// The most load hosts an inventory may name: each is a connection and a sender per row.
pub const MAX_LOAD_HOSTS: usize = 32;

/// The load hosts (none: this machine) and the receiver (`None`: this machine) an inventory
/// names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fleet {
    pub tx: Vec<SshTarget>,
    pub rx: Option<SshTarget>,
}

/// Reads, parses and resolves `path` (YAML for `.yml`, `.yaml` and `.json`, else INI); every
/// error names the file and, where it has one, the line, and the fix.
pub fn load(path: &Path) -> Result<Fleet, LabError> {
    let text = read_capped(path)?;
    let yaml = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| ["yml", "yaml", "json"].contains(&e.to_ascii_lowercase().as_str()));
    let parsed = if yaml { yaml::parse(&text) } else { ini::parse(&text) };
    parsed.and_then(|inventory| inventory.fleet()).map_err(|bad| {
        let file = path.display();
        LabError::Options(match bad.line {
            0 => format!("inventory {file}: {}", bad.problem),
            line => format!("inventory {file}:{line}: {}", bad.problem),
        })
    })
}

/// The file's text: a regular file or pipe (a device is refused before it is read from) of
/// at most [`MAX_BYTES`], in UTF-8.
fn read_capped(path: &Path) -> Result<String, LabError> {
    use corelane::fs::ReadCappedError;
    let file = path.display();
    let bytes = corelane::fs::read_capped(path, MAX_BYTES).map_err(|e| match e {
        ReadCappedError::Io(e) => LabError::io(format!("cannot read inventory {file}"), e),
        ReadCappedError::NotRegular => LabError::Options(format!(
            "inventory {file}: not a regular file or pipe: give the inventory file itself"
        )),
        e @ ReadCappedError::Silent(_) => LabError::Options(format!("inventory {file}: {e}")),
        ReadCappedError::TooLarge(_) => LabError::Options(format!(
            "inventory {file}: larger than {MAX_BYTES} bytes: give an inventory of the lab's hosts only"
        )),
    })?;
    String::from_utf8(bytes)
        .map_err(|_| LabError::Options(format!("inventory {file}: not UTF-8 text")))
}

/// A parse or resolve error: its line (0: the file as a whole) and what to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bad {
    line: usize,
    problem: String,
}

impl Bad {
    fn at(line: usize, problem: impl Into<String>) -> Self {
        Self { line, problem: problem.into() }
    }
}

/// A var's value (`None`: a list or mapping, which no var the lab uses can be) and its line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Var {
    value: Option<String>,
    line: usize,
}

#[derive(Debug, Default)]
struct Group {
    hosts: Vec<String>,
    children: Vec<String>,
    vars: BTreeMap<String, Var>,
    line: usize,
}

#[derive(Debug, Default)]
struct Host {
    vars: BTreeMap<String, Var>,
    line: usize,
}

/// Groups and hosts as the file states them, before vars are merged.
#[derive(Debug, Default)]
struct Inventory {
    groups: BTreeMap<String, Group>,
    hosts: BTreeMap<String, Host>,
}

/// A host or group name: plain (as ssh's targets are), and no host range (`web[01:03]`).
fn check_name(kind: &str, name: &str, line: usize) -> Result<(), Bad> {
    if name.contains('[') && name.contains(']') {
        return Err(Bad::at(
            line,
            format!(
                "{kind} {name:?}: host ranges are not supported: list each host on its own line"
            ),
        ));
    }
    let plain = !name.is_empty()
        && !name.starts_with('-')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "._-:%".contains(c));
    if !plain {
        return Err(Bad::at(
            line,
            format!(
                "{kind} {:?}: not a plain name (letters, digits, '.', '_', '-', ':', '%'; no leading '-')",
                corelane::child_output::printable(name, 100)
            ),
        ));
    }
    Ok(())
}

/// Up to five names, then how many more: an error line stays a line.
fn listed(names: &[String]) -> String {
    let shown = names.iter().take(5).map(String::as_str).collect::<Vec<_>>().join(", ");
    match names.len() {
        0..=5 => shown,
        n => format!("{shown} and {} more", n - 5),
    }
}

impl Inventory {
    fn group(&mut self, name: &str, line: usize) -> Result<&mut Group, Bad> {
        check_name("group", name, line)?;
        Ok(self
            .groups
            .entry(name.to_string())
            .or_insert_with(|| Group { line, ..Group::default() }))
    }

    fn add_host(&mut self, group: &str, name: &str, line: usize) -> Result<&mut Host, Bad> {
        check_name("host", name, line)?;
        // Repeats are kept (and skipped when read): a check here would cost a scan per line.
        self.group(group, line)?.hosts.push(name.to_string());
        Ok(self.hosts.entry(name.to_string()).or_insert_with(|| Host { line, ..Host::default() }))
    }

    fn add_child(&mut self, parent: &str, child: &str, line: usize) -> Result<(), Bad> {
        if parent == child {
            return Err(Bad::at(line, format!("group {child} cannot be a child of itself")));
        }
        self.group(child, line)?;
        self.group(parent, line)?.children.push(child.to_string());
        Ok(())
    }

    /// The load hosts and the receiver, checked: at most [`MAX_LOAD_HOSTS`] load hosts and one
    /// receiver, the vars
    /// the lab uses valid; hosts in neither group are not the lab's and are ignored.
    fn fleet(&self) -> Result<Fleet, Bad> {
        let depths = self.depths()?;
        let tx = self.members(TX_GROUP);
        let rx = self.members(RX_GROUP);
        // Other hosts (the rest of a fleet) are not the lab's: left alone, whatever they hold.
        if tx.is_empty() && rx.is_empty() {
            return Err(Bad::at(
                0,
                format!("no host in {TX_GROUP} or {RX_GROUP}: put the sender in group {TX_GROUP} and the receiver in group {RX_GROUP}"),
            ));
        }
        if tx.len() > MAX_LOAD_HOSTS {
            return Err(Bad::at(
                self.groups[TX_GROUP].line,
                format!("{TX_GROUP} holds {} hosts ({}), more than {MAX_LOAD_HOSTS} load hosts: keep at most {MAX_LOAD_HOSTS}", tx.len(), listed(&tx)),
            ));
        }
        if rx.len() > 1 {
            return Err(Bad::at(
                self.groups[RX_GROUP].line,
                format!(
                    "{RX_GROUP} holds {} hosts ({}): the lab runs one receiver: keep one",
                    rx.len(),
                    listed(&rx)
                ),
            ));
        }
        let tx = tx.iter().map(|name| self.target(name, &depths)).collect::<Result<_, _>>()?;
        let rx = rx.first().map(|name| self.target(name, &depths)).transpose()?;
        Ok(Fleet { tx, rx })
    }

    /// The hosts of `group` and of its children, each once, in the order first met.
    fn members(&self, group: &str) -> Vec<String> {
        let (mut hosts, mut seen, mut todo) = (Vec::new(), BTreeSet::new(), vec![group]);
        let mut met = BTreeSet::new();
        while let Some(name) = todo.pop() {
            let Some(g) = self.groups.get(name).filter(|_| seen.insert(name)) else { continue };
            for h in &g.hosts {
                if met.insert(h) {
                    hosts.push(h.clone());
                }
            }
            todo.extend(g.children.iter().rev().map(String::as_str));
        }
        hosts
    }

    /// Each group's depth below `all` (its longest path of parents, as Ansible counts it),
    /// or the group where children loop back on themselves.
    fn depths(&self) -> Result<BTreeMap<&str, usize>, Bad> {
        let mut parents: BTreeMap<&str, usize> =
            self.groups.keys().map(|g| (g.as_str(), 0)).collect();
        for g in self.groups.values() {
            for c in &g.children {
                *parents.get_mut(c.as_str()).expect("children are groups") += 1;
            }
        }
        let mut depth: BTreeMap<&str, usize> = BTreeMap::new();
        let mut ready: Vec<&str> =
            parents.iter().filter(|(_, &n)| n == 0).map(|(g, _)| *g).collect();
        for g in &ready {
            depth.insert(g, usize::from(*g != "all"));
        }
        let mut done = 0;
        while let Some(name) = ready.pop() {
            done += 1;
            let below = depth[name] + 1;
            for c in &self.groups[name].children {
                let d = depth.entry(c.as_str()).or_insert(0);
                *d = (*d).max(below);
                let n = parents.get_mut(c.as_str()).expect("children are groups");
                *n -= 1;
                if *n == 0 {
                    ready.push(c.as_str());
                }
            }
        }
        if done < self.groups.len() {
            let (name, g) = self
                .groups
                .iter()
                .find(|(name, _)| parents[name.as_str()] > 0)
                .expect("a group left is in a loop");
            return Err(Bad::at(
                g.line,
                format!("group {name} is its own ancestor through its children: break the loop"),
            ));
        }
        Ok(depth)
    }

    /// `name`'s vars, merged: `all`, then its groups by depth and name, then its own.
    fn vars_of(&self, name: &str, depths: &BTreeMap<&str, usize>) -> BTreeMap<&str, &Var> {
        let mut groups: BTreeSet<&str> = BTreeSet::new();
        let mut todo: Vec<&str> = self
            .groups
            .iter()
            .filter(|(_, g)| g.hosts.iter().any(|h| h == name))
            .map(|(n, _)| n.as_str())
            .collect();
        todo.push("all");
        let mut parents: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (parent, g) in &self.groups {
            for c in &g.children {
                parents.entry(c.as_str()).or_default().push(parent.as_str());
            }
        }
        while let Some(g) = todo.pop() {
            if groups.insert(g) {
                todo.extend(parents.get(g).into_iter().flatten());
            }
        }
        let mut ordered: Vec<&str> =
            groups.into_iter().filter(|g| self.groups.contains_key(*g)).collect();
        ordered.sort_by_key(|g| (depths.get(g).copied().unwrap_or(0), *g));
        let mut vars = BTreeMap::new();
        let own = self.hosts.get(name).map(|h| &h.vars);
        for set in ordered.iter().map(|g| &self.groups[*g].vars).chain(own) {
            vars.extend(set.iter().map(|(k, v)| (k.as_str(), v)));
        }
        vars
    }

    /// How ssh reaches host `name`, from its merged vars.
    fn target(&self, name: &str, depths: &BTreeMap<&str, usize>) -> Result<SshTarget, Bad> {
        let vars = self.vars_of(name, depths);
        let line = self.hosts.get(name).map_or(0, |h| h.line);
        // Each var under its name and its older `ansible_ssh_` spelling, which Ansible also
        // reads; both at once is refused rather than guessed.
        let scalar = |key: &str, old: &str| -> Result<Option<(&str, usize)>, Bad> {
            let found = match (vars.get(key), vars.get(old)) {
                (Some(a), Some(b)) if a.value != b.value => {
                    return Err(Bad::at(
                        a.line.max(b.line),
                        format!("host {name} has both {key} and {old}: keep one"),
                    ))
                }
                (Some(var), _) => Some((key, var)),
                (None, var) => var.map(|var| (old, var)),
            };
            match found {
                None => Ok(None),
                Some((_, Var { value: Some(v), line })) => Ok(Some((v.as_str(), *line))),
                Some((key, Var { value: None, line })) => Err(Bad::at(
                    *line,
                    format!("{key} for host {name} is a list or mapping: give one value"),
                )),
            }
        };
        let host = scalar("ansible_host", "ansible_ssh_host")?.unwrap_or((name, line));
        let user = scalar("ansible_user", "ansible_ssh_user")?;
        let port = match scalar("ansible_port", "ansible_ssh_port")? {
            None => None,
            Some((p, at)) => {
                Some(p.trim().parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(|| {
                    Bad::at(
                        at,
                        format!(
                            "ansible_port={p:?} for host {name} is not a port: give one in 1-65535"
                        ),
                    )
                })?)
            }
        };
        let mut target =
            SshTarget::new(user.map(|(u, _)| u.to_string()), host.0, port).map_err(|why| {
                Bad::at(
                    user.filter(|_| why.contains("user")).map_or(host.1, |u| u.1),
                    format!("host {name}: {why}"),
                )
            })?;
        if let Some((key, at)) = scalar("ansible_ssh_private_key_file", "ansible_private_key_file")?
        {
            if key.is_empty() || key.chars().any(char::is_control) {
                return Err(Bad::at(
                    at,
                    format!("ansible_ssh_private_key_file for host {name} is not a file path"),
                ));
            }
            target.identity_file = Some(PathBuf::from(key));
        }
        Ok(target)
    }
}

#[cfg(test)]
mod tests;
