#!/usr/bin/env python3
"""Import cycles between the modules of a Rust crate's src/ (issue 12's "no import circle").

Edges: a module names another through `crate::a::b` or `super::x` outside its `#[cfg(test)]`
part. Prints every strongly connected component of more than one module; exits 1 if any.

Folders too: an edge a::x::m -> a::y::n is also an edge between the siblings a::x and a::y (each
a folder or a file under a), so a folder that imports another which imports it back is a
cycle even when no two files form one (sched/ naming udp:: while udp/dispatch.rs uses sched).
Usage: import-cycles.py crates/corelane/src
       import-cycles.py --self-test   (a folder cycle no two files form is found; none is invented)
"""
import os
import re
import sys


def module_of(path):
    name = path[:-3]
    if name.endswith("/mod"):
        name = name[:-4]
    return name.replace("/", "::")


def edges_of(root):
    files = [os.path.relpath(os.path.join(d, f), root)
             for d, _, fs in os.walk(root) for f in fs if f.endswith(".rs")]
    mods = {module_of(f): f for f in files}
    edges = {}
    for m, f in mods.items():
        with open(os.path.join(root, f)) as fh:
            text = fh.read().split("#[cfg(test)]")[0]
        parent = "::".join(m.split("::")[:-1])
        deps = set()
        for prefix, pattern in (("", r"crate::([a-z_]+(?:::[a-z_]+)*)"),
                                (parent, r"super::([a-z_]+(?:::[a-z_]+)*)")):
            for path in re.findall(pattern, text):
                parts = path.split("::")
                for k in range(len(parts), 0, -1):
                    cand = "::".join(([prefix] if prefix else []) + parts[:k])
                    if cand in mods and cand != m:
                        deps.add(cand)
                        break
        edges[m] = deps
    return edges


def cycles(edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def folder_edges(edges):
    """The module graph with every subtree collapsed to its top under each common parent."""
    folders = {"::".join(m.split("::")[:k]) for m in edges for k in range(1, len(m.split("::")))}
    out = {}
    for m, deps in edges.items():
        a = m.split("::")
        for d in deps:
            b = d.split("::")
            k = 0
            while k < min(len(a), len(b)) and a[k] == b[k]:
                k += 1
            if k == len(a) or k == len(b):
                continue  # one contains the other (a folder's mod.rs and its files)
            x, y = "::".join(a[:k + 1]), "::".join(b[:k + 1])
            if x in folders or y in folders:
                out.setdefault(x, set()).add(y)
    return out


def self_test():
    """Two folders that import each other through different files: no module cycle, one
    folder cycle (as sched/ and udp/ were); a folder importing its parent's files is none."""
    import tempfile
    files = {
        "lib.rs": "",
        "sched/mod.rs": "",
        "sched/flowmap.rs": "const D: usize = crate::udp::sequence::MAX;",
        "udp/mod.rs": "",
        "udp/sequence.rs": "",
        "udp/dispatch.rs": "use crate::sched::flowmap;",
        "udp/backend/mod.rs": "use super::check::Tally;",
        "udp/check.rs": "use crate::udp::sequence::Tracker;",
    }
    with tempfile.TemporaryDirectory() as root:
        for name, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(name)), exist_ok=True)
            with open(os.path.join(root, name), "w") as fh:
                fh.write(text)
        graph = edges_of(root)
        assert cycles(graph) == [], cycles(graph)
        found = cycles(folder_edges(graph))
        assert found == [["sched", "udp"]], found
    print("self-test: the folder cycle is found, and only it")


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        sys.exit(0)
    graph = edges_of(sys.argv[1] if len(sys.argv) > 1 else "crates/corelane/src")
    found = cycles(graph)
    for comp in cycles(folder_edges(graph)):
        found.append(["folder " + c for c in comp])
    for comp in found:
        print("cycle: " + " <-> ".join(comp))
    print(f"{len(found)} import cycle(s)")
    sys.exit(1 if found else 0)
