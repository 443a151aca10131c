#!/usr/bin/env python3
"""A/B CPU cost of two corelane binaries, interleaved in one run.

Measures, for each binary, the server lane's CPU per HTTP request (keep-alive and
Connection: close, wrk on CPU 0, server on CPU 1) and the UDP receive lane's CPU per
datagram (sender on CPU 0 capped at a fixed rate, receiver on CPU 1). CPU time is the
exact runtime from /proc/PID/task/TID/schedstat summed over the process's threads
between the start and the end of the load, not tick-sampled utime/stime.

Usage: ab-cpu.py OLD_BINARY NEW_BINARY [ROUNDS] [SECONDS]
Needs wrk and taskset; binds 127.0.0.1 ports 47080 and 47001.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import time

HTTP_PORT = 47080
UDP_PORT = 47001


def schedstat_ns(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            pass
    return total


def wait_ready(proc):
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"server exited before it was ready: {proc.stderr.read()}")


def http(binary, close, seconds):
    srv = subprocess.Popen(
        ["taskset", "-c", "1", binary, "serve", "http", "--addr", "127.0.0.1",
         "--port", str(HTTP_PORT), "--lanes", "1", "--pin", "1",
         "--duration", f"{seconds + 3}s", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_ready(srv)
    before = schedstat_ns(srv.pid)
    cmd = ["taskset", "-c", "0", "wrk", "-t1", "-c50", f"-d{seconds}s"]
    if close:
        cmd += ["-H", "Connection: close"]
    out = subprocess.run(cmd + [f"http://127.0.0.1:{HTTP_PORT}/"],
                         capture_output=True, text=True, check=True).stdout
    after = schedstat_ns(srv.pid)
    srv.terminate()
    srv.communicate()
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    return (after - before) / requests, requests / seconds


def udp(binary, seconds, rate):
    rx = subprocess.Popen(
        ["taskset", "-c", "1", binary, "udp", "recv", f"127.0.0.1:{UDP_PORT}", "--pin", "1",
         "--duration", f"{seconds + 2}s", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    before = schedstat_ns(rx.pid)
    subprocess.run(["taskset", "-c", "0", binary, "udp", "send", f"127.0.0.1:{UDP_PORT}",
                    "--pin", "0", "--rate", str(rate), "--duration", f"{seconds}s", "--json"],
                   capture_output=True, check=True)
    time.sleep(0.2)
    after = schedstat_ns(rx.pid)
    out, _ = rx.communicate()
    summary = json.loads(out.strip().splitlines()[-1])["summary"]
    return (after - before) / summary["datagrams"], summary["datagrams"] / seconds


def main():
    old, new = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    seconds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    tests = {
        "http keep-alive ns/request": lambda b: http(b, False, seconds),
        "http close ns/request": lambda b: http(b, True, seconds),
        "udp ns/datagram (150k/s offered)": lambda b: udp(b, seconds, 150_000),
    }
    results = {name: {"old": [], "new": []} for name in tests}
    for r in range(rounds):
        order = [("old", old), ("new", new)] if r % 2 == 0 else [("new", new), ("old", old)]
        for name, run in tests.items():
            for label, binary in order:
                cost, rate = run(binary)
                results[name][label].append(cost)
                print(f"round {r + 1} {name} {label}: {cost:.0f} ns at {rate:,.0f}/s", flush=True)
    print()
    for name, v in results.items():
        o, n = statistics.median(v["old"]), statistics.median(v["new"])
        print(f"{name}: old median {o:.0f} (min {min(v['old']):.0f}, max {max(v['old']):.0f}), "
              f"new median {n:.0f} (min {min(v['new']):.0f}, max {max(v['new']):.0f}), "
              f"new/old {n / o:.3f}")


if __name__ == "__main__":
    main()
