#!/usr/bin/env python3
"""A/B of two corelane builds on `serve http`, `udp recv` and `udp echo` (no --metrics):
ab-metrics.py's trials (one lane on CPU 1, the load on CPU 0, exact server CPU per request or
datagram from schedstat over the load), the two builds' servers interleaved, the order
alternating per round; the load generator is always NEW's, so only the server differs.

Usage: ab-builds.py OLD NEW [ROUNDS] [SECONDS] [TESTS]   (TESTS: http,recv,echo)
"""
import importlib.util
import os
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("abm", os.path.join(here, "ab-metrics.py"))
abm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(abm)


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    old, new = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    seconds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    tests = sys.argv[5].split(",") if len(sys.argv) > 5 else ["http", "recv", "echo"]
    load = abm.load_cmd
    abm.load_cmd = lambda _binary, test, secs: load(new, test, secs)
    seen = {(t, b): [] for t in tests for b in ("old", "new")}
    for r in range(rounds):
        for test in tests:
            order = [("old", old), ("new", new)] if r % 2 == 0 else [("new", new), ("old", old)]
            for name, binary in order:
                ns, units, _ = abm.trial(binary, test, False, seconds)
                seen[(test, name)].append(ns)
                print(f"round {r + 1} {test:5} {name}: {ns:8.0f} ns/unit over {units} units",
                      flush=True)
    print(f"\nmedians over {rounds} rounds of {seconds} s (ns of server CPU per request/datagram):")
    for test in tests:
        o = statistics.median(seen[(test, "old")])
        n = statistics.median(seen[(test, "new")])
        print(f"  {test:5} old {o:8.0f}  new {n:8.0f}  ({(n / o - 1) * 100:+.1f} %)")


if __name__ == "__main__":
    main()
