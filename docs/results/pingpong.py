#!/usr/bin/env python3
"""Round trips, corelane and sockperf crossed, interleaved rounds on loopback: ping-pong, or
with RATE=N in the environment, open loop under load at N messages/s (corelane ping
--mode under-load, sockperf ul --mps; corelane's figure is from the scheduled send time,
sockperf's from the actual send, so both are printed for corelane's client).

Each round runs the four pairs (client -> server) in turn, 2 s each after a 0.5 s warm-up,
client pinned to CPU 0 and server to CPU 1: corelane ping -> corelane echo, sockperf pp ->
sockperf sr, corelane ping -> sockperf sr (client cost), sockperf pp -> corelane echo
(server cost). sockperf runs with --full-rtt, so every figure is a whole round trip (us).
Prints each round and the median of the rounds' p50 and p99 per pair.

Usage: pingpong.py CORELANE_BINARY [ROUNDS]   (run under `flock /work/bench.lock`)
"""
import json
import os
import re
import statistics
import subprocess
import sys
import time

EXE = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 4
RATE = int(os.environ.get("RATE", "0"))
PORT = 47311


def server(kind):
    if kind == "corelane":
        argv = ["taskset", "-c", "1", EXE, "udp", "echo", f"127.0.0.1:{PORT}", "--wire", "sockperf"]
    else:
        argv = ["taskset", "-c", "1", "sockperf", "sr", "-i", "127.0.0.1", "-p", str(PORT)]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return p


def client(kind):
    if kind == "corelane":
        load = ["--mode", "under-load", "--rate", str(RATE)] if RATE else []
        out = subprocess.run(
            [EXE, "udp", "ping", f"127.0.0.1:{PORT}", "--wire", "sockperf", "--pin", "0",
             "-d", "2s", "--warmup", "500ms", "--size", "64", "--json"] + load,
            capture_output=True, text=True, check=True).stdout
        s = json.loads(out.strip().splitlines()[-1])["summary"]
        return s["p50"], s["p99"]
    mode = ["ul", "--mps", str(RATE)] if RATE else ["pp"]
    out = subprocess.run(
        ["taskset", "-c", "0", "sockperf"] + mode + ["-i", "127.0.0.1", "-p", str(PORT), "-t",
         "2", "-m", "64", "--full-rtt"], capture_output=True, text=True, check=True).stdout
    pick = lambda q: float(re.search(rf"percentile {q} =\s+([0-9.]+)", out).group(1))
    return pick("50.000"), pick("99.000")


PAIRS = [("corelane", "corelane"), ("sockperf", "sockperf"), ("corelane", "sockperf"),
         ("sockperf", "corelane")]
results = {p: [] for p in PAIRS}
for r in range(ROUNDS):
    for pair in PAIRS[r % 4:] + PAIRS[:r % 4]:
        srv = server(pair[1])
        try:
            results[pair].append(client(pair[0]))
        finally:
            srv.terminate()
            srv.wait()
        print(f"round {r + 1} {pair[0]} -> {pair[1]}: p50 {results[pair][-1][0]:.1f} p99 {results[pair][-1][1]:.1f}", flush=True)
print("median over rounds (round trip, us):")
for pair, vals in results.items():
    p50 = statistics.median(v[0] for v in vals)
    p99 = statistics.median(v[1] for v in vals)
    print(f"  {pair[0]:>8} client -> {pair[1]:>8} server: p50 {p50:.1f}  p99 {p99:.1f}")
