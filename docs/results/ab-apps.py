#!/usr/bin/env python3
"""A/B of `corelane run` under unmodified programs: two corelane binaries' `lab apps` NC rows,
interleaved in one run (the order alternates each round), the server CPU per request exact
(the lab's schedstat of every thread of the program's process tree, the lane's threads apart).

Usage: ab-apps.py OLD_BINARY NEW_BINARY [ROUNDS] [SECONDS] [APPS]
Each round runs `BINARY lab apps --placements NC --trials 1 --duration SECONDS` with every lane
(none, threads, uring) for each binary; prints per (app, lane) the medians over the rounds of
req/s and CPU per request, and new/old ratios. Needs root (the lab's namespaces) and the apps.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(binary, seconds, apps, out):
    cmd = [binary, "lab", "apps", "--placements", "NC", "--trials", "1",
           "--duration", f"{seconds}s", "--apps", apps, "--json", out]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)["rows"]


def main():
    old, new = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    seconds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    apps = sys.argv[5] if len(sys.argv) > 5 else "nginx,memcached,redis,apache"
    seen = {"old": {}, "new": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            order = [("old", old), ("new", new)] if r % 2 == 0 else [("new", new), ("old", old)]
            for name, binary in order:
                rows = run(binary, seconds, apps, os.path.join(tmp, f"{name}{r}.json"))
                for row in rows:
                    key = (row["app"], row["lane"])
                    carried = sum((row.get("delegated") or {}).values())
                    seen[name].setdefault(key, []).append(
                        (row["median_rps"], row["cpu_us_per_request"], row["lane_us_per_request"],
                         carried))
                    print(f"round {r} {name} {row['app']} {row['lane']}: {row['median_rps']:.0f} req/s, "
                          f"{row['cpu_us_per_request']:.2f} us/req (lane {row['lane_us_per_request']:.2f}), "
                          f"{carried} calls carried", flush=True)
    print("\napp lane | old req/s, us/req, carried | new req/s, us/req, carried | new/old req/s, us/req")
    for key in sorted(seen["old"]):
        if key not in seen["new"]:
            continue
        o, n = seen["old"][key], seen["new"][key]
        med = lambda xs, i: statistics.median(x[i] for x in xs)
        orps, ocpu, nrps, ncpu = med(o, 0), med(o, 1), med(n, 0), med(n, 1)
        print(f"{key[0]} {key[1]} | {orps:,.0f}, {ocpu:.2f}, {med(o, 3):,.0f} | "
              f"{nrps:,.0f}, {ncpu:.2f}, {med(n, 3):,.0f} | "
              f"{nrps / orps:.3f}, {ncpu / ocpu:.3f}")


if __name__ == "__main__":
    main()
