//! Ansible's INI inventory format, parsed here: it is not standard INI (a host line is
//! `NAME key=value ...` with shell quoting, sections are `[group]`, `[group:vars]` and
//! `[group:children]`), so no INI crate reads it.

use super::{Bad, Inventory, Var};

/// What the lines of the current section hold.
enum Section {
    Hosts(String),
    Vars(String),
    Children(String),
}

pub(super) fn parse(text: &str) -> Result<Inventory, Bad> {
    let mut inventory = Inventory::default();
    let mut section = Section::Hosts("ungrouped".into());
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if trimmed.starts_with('[') {
            section = header(trimmed, line)?;
            let (Section::Hosts(g) | Section::Vars(g) | Section::Children(g)) = &section;
            inventory.group(g, line)?;
            continue;
        }
        match &section {
            Section::Hosts(group) => host_line(&mut inventory, group, trimmed, line)?,
            Section::Vars(group) => {
                let (key, value) = var(trimmed, line)?;
                inventory.group(group, line)?.vars.insert(key, Var { value: Some(value), line });
            }
            Section::Children(group) => inventory.add_child(group, trimmed, line)?,
        }
    }
    Ok(inventory)
}

/// `[group]`, `[group:vars]` or `[group:children]`.
fn header(text: &str, line: usize) -> Result<Section, Bad> {
    let inner = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')).ok_or_else(|| {
        Bad::at(
            line,
            format!("{text:?}: a section header is [group], [group:vars] or [group:children]"),
        )
    })?;
    Ok(match inner.split_once(':') {
        None => Section::Hosts(inner.into()),
        Some((group, "vars")) => Section::Vars(group.into()),
        Some((group, "children")) => Section::Children(group.into()),
        Some((_, kind)) => {
            return Err(Bad::at(
                line,
                format!(
                "[...:{kind}]: unknown section kind: use [group], [group:vars] or [group:children]"
            ),
            ))
        }
    })
}

/// `NAME[:PORT] [key=value ...]`, quoted as a shell would, `#` starting a comment.
fn host_line(inventory: &mut Inventory, group: &str, text: &str, line: usize) -> Result<(), Bad> {
    let words = shell_words::split(text)
        .map_err(|_| Bad::at(line, "unclosed quote: close it or remove it"))?;
    let mut words = words.into_iter().take_while(|w| !w.starts_with('#'));
    let Some(first) = words.next() else { return Ok(()) };
    super::check_name("host", &first, line)?;
    // `name:port`, as Ansible reads it (an IPv6 address, with several ':', is a name).
    let (name, port) = match first.split_once(':') {
        Some((name, port)) if !port.contains(':') => (name.to_string(), Some(port.to_string())),
        _ => (first, None),
    };
    let host = inventory.add_host(group, &name, line)?;
    if let Some(port) = port {
        host.vars.insert("ansible_port".into(), Var { value: Some(port), line });
    }
    for word in words {
        let (key, value) =
            word.split_once('=').filter(|(k, _)| !k.is_empty()).ok_or_else(|| {
                Bad::at(
                    line,
                    format!("{word:?} after host {name}: host vars are written key=value"),
                )
            })?;
        host.vars.insert(key.into(), Var { value: Some(value.into()), line });
    }
    Ok(())
}

/// `key=value` of a `[group:vars]` section, the value unquoted.
fn var(text: &str, line: usize) -> Result<(String, String), Bad> {
    let (key, value) = text
        .split_once('=')
        .map(|(k, v)| (k.trim(), v.trim()))
        .filter(|(k, _)| !k.is_empty() && !k.contains(char::is_whitespace))
        .ok_or_else(|| Bad::at(line, format!("{text:?}: group vars are written key=value")))?;
    let unquoted = ['"', '\'']
        .iter()
        .find_map(|q| value.strip_prefix(*q).and_then(|v| v.strip_suffix(*q)))
        .unwrap_or(value);
    Ok((key.into(), unquoted.into()))
}
