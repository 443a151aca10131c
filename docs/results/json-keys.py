#!/usr/bin/env python3
"""Compare the JSON keys (and CSV headers) two builds of corelane print for the same inputs.

Usage: json-keys.py OLD NEW        each a file of the command's stdout (JSON lines, one JSON
                                   document, or CSV); prints the key paths only one side has
                                   and exits 1 if any.

A key path is the chain of object keys from the top (`lanes[].cpu`, `xdp.xsk.rx_dropped`);
each line's paths are kept apart by its `type` when it has one, so a `ready` line is compared
with a `ready` line. Values are not compared: the figures differ from run to run.
"""
import csv
import io
import json
import sys


def paths(value, prefix=""):
    out = set()
    if isinstance(value, dict):
        for k, v in value.items():
            p = f"{prefix}.{k}" if prefix else k
            out.add(p)
            out |= paths(v, p)
    elif isinstance(value, list):
        for v in value:
            out |= paths(v, prefix + "[]")
    return out


def keys_of(text):
    text = text.strip()
    try:
        docs = [json.loads(text)]
    except json.JSONDecodeError:
        docs = []
        for line in text.splitlines():
            try:
                docs.append(json.loads(line))
            except json.JSONDecodeError:
                docs = None
                break
    if docs is None:  # CSV: its header
        header = next(csv.reader(io.StringIO(text)), [])
        return {f"csv:{h}" for h in header}
    out = set()
    for d in docs:
        kind = d.get("type", "") if isinstance(d, dict) else ""
        out |= {f"{kind}:{p}" for p in paths(d)}
    return out


def main():
    old, new = (keys_of(open(f).read()) for f in sys.argv[1:3])
    only_old, only_new = sorted(old - new), sorted(new - old)
    for p in only_old:
        print(f"only old: {p}")
    for p in only_new:
        print(f"only new: {p}")
    print(f"{len(old & new)} key paths alike, {len(only_old)} only old, {len(only_new)} only new")
    return 1 if only_old or only_new else 0


if __name__ == "__main__":
    sys.exit(main())
