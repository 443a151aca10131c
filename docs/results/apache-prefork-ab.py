#!/usr/bin/env python3
"""Apache prefork A/B across builds: none (no lane, first build) and the threads lane of each
build, interleaved. Usage: apache-prefork-ab.py ROUNDS REQUESTS PLACEMENTS name=BIN [name=BIN…]"""
import importlib.util, os, sys, statistics, tempfile
spec = importlib.util.spec_from_file_location("ap", os.path.join(os.path.dirname(os.path.abspath(__file__)), "apache-prefork.py"))
ap = importlib.util.module_from_spec(spec); spec.loader.exec_module(ap)
rounds = int(sys.argv[1]); reqs = int(sys.argv[2]); placements = sys.argv[3].split(",")
builds = dict(a.split("=", 1) for a in sys.argv[4:])
first = next(iter(builds.values()))
configs = [(p, "none") for p in placements] + [(p, b) for p in placements for b in builds]
seen = {c: [] for c in configs}
with tempfile.TemporaryDirectory() as d:
    os.chmod(d, 0o755); os.mkdir(f"{d}/www")
    open(f"{d}/www/file.bin", "wb").write(os.urandom(4096)); os.chmod(f"{d}/www/file.bin", 0o644)
    open(f"{d}/apache.conf", "w").write(ap.conf(d))
    for t in range(rounds):
        order = configs[t % len(configs):] + configs[:t % len(configs)]
        for p, b in order:
            binary, lane = (first, "none") if b == "none" else (builds[b], "threads")
            r = ap.trial(binary, d, p, lane, reqs)
            seen[(p, b)].append(r)
            print(f"r{t} {p} {b}: {r[0]:,.0f} req/s fail {r[1]} program {r[2]:.1f} carriers {r[3]:.1f} us/req, carried {r[6]}", flush=True)
print("\nplacement build | req/s (median) | vs none | program us/req | carriers us/req")
for p, b in configs:
    rows = seen[(p, b)]; rps = statistics.median(r[0] for r in rows)
    base = statistics.median(r[0] for r in seen[(p, "none")])
    print(f"{p} {b} | {rps:,.0f} | {rps/base:.2f}x | {statistics.median(r[2] for r in rows):.1f} | {statistics.median(r[3] for r in rows):.1f}")
