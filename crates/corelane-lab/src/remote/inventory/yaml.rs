//! Ansible's YAML inventory format, read with `saphyr-parser` (maintained, pure Rust, an
//! event stream with line and column of every node; `serde_yaml` is unmaintained and its
//! values carry no lines). The tree is built here from the events with bounds: nesting depth,
//! and nodes counted with every alias expansion, so a "billion laughs" file stops early.

use std::collections::BTreeMap;
use std::rc::Rc;

use saphyr_parser::{Event, Parser, ScalarStyle};

use super::{Bad, Inventory, Var};

/// The deepest nesting accepted (an inventory needs a few levels per children group).
pub(super) const MAX_DEPTH: usize = 64;
/// The most nodes a file may amount to, aliases expanded.
pub(super) const MAX_NODES: usize = 100_000;

#[derive(Debug)]
enum Value {
    Null,
    Scalar(String),
    /// A list: no part of an inventory the lab reads is one (its size is counted).
    Seq,
    Map(Vec<Entry>),
}

/// A mapping's key and value.
type Entry = (Rc<Node>, Rc<Node>);

#[derive(Debug)]
struct Node {
    value: Value,
    line: usize,
    /// This node and all below it, aliases expanded.
    size: usize,
}

pub(super) fn parse(text: &str) -> Result<Inventory, Bad> {
    let root = tree(text)?;
    let mut inventory = Inventory::default();
    match &root.value {
        Value::Null => {}
        Value::Map(groups) => {
            for (name, group) in groups {
                let name = scalar(name, "a group name")?;
                inventory.group(&name, group.line)?;
                read_group(&mut inventory, &name, group, 0)?;
            }
        }
        _ => {
            return Err(Bad::at(
                root.line,
                "the top level is a mapping of groups (all:, corelane_tx:, ...)",
            ))
        }
    }
    Ok(inventory)
}

/// Builds the document's tree from the parser's events, within [`MAX_DEPTH`] and
/// [`MAX_NODES`].
fn tree(text: &str) -> Result<Rc<Node>, Bad> {
    // Open collections: their start line, anchor, kind, and items so far (a mapping's keys
    // and values alternate).
    struct Open {
        line: usize,
        anchor: usize,
        map: bool,
        items: Vec<Rc<Node>>,
    }
    let mut stack: Vec<Open> = Vec::new();
    let mut anchors: BTreeMap<usize, Rc<Node>> = BTreeMap::new();
    let (mut nodes, mut root, mut documents) = (0usize, None, 0);
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| {
            Bad::at(
                e.marker().line(),
                format!("column {}: {}: fix the YAML", e.marker().col() + 1, e.info()),
            )
        })?;
        let line = span.start.line();
        let done = match event {
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(Bad::at(line, "a second YAML document: an inventory is one"));
                }
                None
            }
            Event::MappingStart(anchor, _) | Event::SequenceStart(anchor, _) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(Bad::at(line, format!("nested deeper than {MAX_DEPTH} levels")));
                }
                let map = matches!(event, Event::MappingStart(..));
                stack.push(Open { line, anchor, map, items: Vec::new() });
                None
            }
            Event::MappingEnd | Event::SequenceEnd => {
                let open = stack
                    .pop()
                    .ok_or_else(|| Bad::at(line, "a collection ends that never began"))?;
                let size = open.items.iter().fold(1, |sum: usize, n| sum.saturating_add(n.size));
                let value = if open.map {
                    let mut items = open.items.into_iter();
                    let mut pairs = Vec::new();
                    while let (Some(k), Some(v)) = (items.next(), items.next()) {
                        pairs.push((k, v));
                    }
                    Value::Map(pairs)
                } else {
                    Value::Seq
                };
                Some((Rc::new(Node { value, line: open.line, size }), open.anchor, 1))
            }
            Event::Scalar(text, style, anchor, _) => {
                let null = style == ScalarStyle::Plain
                    && ["", "~", "null", "Null", "NULL"].contains(&&*text);
                let value = if null { Value::Null } else { Value::Scalar(text.into_owned()) };
                Some((Rc::new(Node { value, line, size: 1 }), anchor, 1))
            }
            Event::Alias(id) => {
                let node = anchors
                    .get(&id)
                    .cloned()
                    .ok_or_else(|| Bad::at(line, "an alias to no anchor"))?;
                let size = node.size;
                Some((node, 0, size))
            }
            _ => None,
        };
        // A new node counts once (its items were counted as they closed), an alias all of
        // what it repeats.
        let Some((node, anchor, added)) = done else { continue };
        nodes = nodes.saturating_add(added);
        if nodes > MAX_NODES {
            return Err(Bad::at(line, format!("more than {MAX_NODES} nodes (aliases expanded): an inventory of the lab's hosts is far smaller")));
        }
        if anchor > 0 {
            anchors.insert(anchor, node.clone());
        }
        match stack.last_mut() {
            Some(open) => open.items.push(node),
            None => root = Some(node),
        }
    }
    Ok(root.unwrap_or_else(|| Rc::new(Node { value: Value::Null, line: 1, size: 1 })))
}

/// A scalar's text, or an error saying `what` it should be.
fn scalar(node: &Node, what: &str) -> Result<String, Bad> {
    match &node.value {
        Value::Scalar(s) => Ok(s.clone()),
        _ => Err(Bad::at(node.line, format!("expected {what} here"))),
    }
}

/// The entries of a mapping that may be empty (`hosts:` with nothing under it).
fn entries<'a>(node: &'a Node, what: &str) -> Result<&'a [Entry], Bad> {
    match &node.value {
        Value::Null => Ok(&[]),
        Value::Map(pairs) => Ok(pairs),
        _ => Err(Bad::at(
            node.line,
            format!("{what} is a mapping (name: ...), not a list or a value"),
        )),
    }
}

/// Group `name`'s `hosts`, `vars` and `children` (each child a group in turn).
fn read_group(
    inventory: &mut Inventory,
    name: &str,
    group: &Node,
    depth: usize,
) -> Result<(), Bad> {
    if depth > MAX_DEPTH {
        return Err(Bad::at(group.line, format!("children nested deeper than {MAX_DEPTH} levels")));
    }
    for (key, value) in entries(group, &format!("group {name}"))? {
        match scalar(key, "hosts, vars or children")?.as_str() {
            "hosts" => {
                for (host, vars) in entries(value, "hosts")? {
                    let host_name = scalar(host, "a host name")?;
                    let host = inventory.add_host(name, &host_name, host.line)?;
                    read_vars(&mut host.vars, vars, &format!("host {host_name}"))?;
                }
            }
            "vars" => read_vars(&mut inventory.group(name, value.line)?.vars, value, "vars")?,
            "children" => {
                for (child, body) in entries(value, "children")? {
                    let child = scalar(child, "a group name")?;
                    inventory.add_child(name, &child, body.line)?;
                    read_group(inventory, &child, body, depth + 1)?;
                }
            }
            other => {
                return Err(Bad::at(
                    key.line,
                    format!("{other:?} in group {name}: a group holds hosts:, vars: and children:"),
                ))
            }
        }
    }
    Ok(())
}

/// A vars mapping into `vars`; a merge key (`<<: *defaults`) fills what the mapping leaves
/// unset, as YAML merges do.
fn read_vars(vars: &mut BTreeMap<String, Var>, node: &Node, what: &str) -> Result<(), Bad> {
    let (mut own, mut merged) = (BTreeMap::new(), BTreeMap::new());
    for (key_node, value) in entries(node, what)? {
        let key = scalar(key_node, "a var name")?;
        let value = match &value.value {
            Value::Map(_) if key == "<<" => {
                read_vars(&mut merged, value, "<<")?;
                continue;
            }
            _ if key == "<<" => {
                return Err(Bad::at(
                    key_node.line,
                    "merge one mapping here (<<: *name), not a list",
                ))
            }
            Value::Scalar(s) => Some(s.clone()),
            Value::Null => Some(String::new()),
            _ => None,
        };
        own.insert(key, Var { value, line: key_node.line });
    }
    merged.extend(own);
    vars.extend(merged);
    Ok(())
}
