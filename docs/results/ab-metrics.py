#!/usr/bin/env python3
"""A/B: what `--metrics` costs a long run, off against on and scraped every second.

Interleaved trials of `serve http` (one lane on CPU 1, `load http --rate` on CPU 0), `udp
recv` and `udp echo` (one lane on CPU 1; `udp send --rate` or `udp ping --mode under-load`
on CPU 0), each run twice per round: without --metrics, and with --metrics and a scraper
asking for /metrics once a second (OpenMetrics, as Prometheus asks). The figure is exact CPU
per request or datagram: the server process's threads' schedstat runtime (the metrics thread
included: that is the cost) over the load, divided by what the server's own JSON summary
counted. The order of off/on alternates per round.

Usage: ab-metrics.py BINARY [ROUNDS] [SECONDS] [TESTS]
TESTS: comma-separated names out of http,recv,echo (default: all). Binds 127.0.0.1 ports
47180 (HTTP), 47101 (UDP), 47102 (echo) and 47464 (metrics). Run it under
`flock /work/bench.lock` on a quiet machine; as root, `serve http` drops to nobody.
"""
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

HTTP_PORT, UDP_PORT, ECHO_PORT, METRICS_PORT = 47180, 47101, 47102, 47464
RATE = {"http": 5000, "recv": 50000, "echo": 20000}


def schedstat_ns(pid):
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def find(value, key):
    """The first number under `key` anywhere in a JSON value."""
    if isinstance(value, dict):
        if isinstance(value.get(key), (int, float)):
            return value[key]
        for v in value.values():
            found = find(v, key)
            if found is not None:
                return found
    return None


def scraper(stop, scrapes):
    url = f"http://127.0.0.1:{METRICS_PORT}/metrics"
    req = urllib.request.Request(url, headers={"Accept": "application/openmetrics-text;version=1.0.0"})
    while not stop.is_set():
        try:
            with urllib.request.urlopen(req, timeout=2) as r:
                r.read()
                scrapes.append(1)
        except OSError:
            pass
        stop.wait(1.0)


def server_cmd(binary, test, seconds):
    d = f"{seconds + 3}s"
    if test == "http":
        return [binary, "serve", "http", "--addr", "127.0.0.1", "--port", str(HTTP_PORT),
                "--lanes", "1", "--pin", "1", "--duration", d, "--json"], "requests"
    if test == "recv":
        return [binary, "udp", "recv", f"127.0.0.1:{UDP_PORT}", "--pin", "1",
                "--duration", d, "--json"], "datagrams"
    return [binary, "udp", "echo", f"127.0.0.1:{ECHO_PORT}", "--pin", "1",
            "--duration", d, "--json"], "datagrams"


def load_cmd(binary, test, seconds):
    rate, d = str(RATE[test]), f"{seconds}s"
    if test == "http":
        return [binary, "load", "http", f"http://127.0.0.1:{HTTP_PORT}/", "-c", "8",
                "--rate", rate, "-d", d, "--pin", "0"]
    if test == "recv":
        return [binary, "udp", "send", f"127.0.0.1:{UDP_PORT}", "--rate", rate,
                "--duration", d, "--pin", "0"]
    return ["taskset", "-c", "0", binary, "udp", "ping", f"127.0.0.1:{ECHO_PORT}",
            "--mode", "under-load", "--rate", rate, "-d", d, "--warmup", "0s"]


def trial(binary, test, metrics, seconds):
    cmd, key = server_cmd(binary, test, seconds)
    if metrics:
        cmd += ["--metrics", f"127.0.0.1:{METRICS_PORT}"]
    srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if not srv.stdout.readline():
        raise SystemExit(f"{test}: the server exited before it was ready")
    stop, scrapes = threading.Event(), []
    scraping = threading.Thread(target=scraper, args=(stop, scrapes)) if metrics else None
    if scraping:
        scraping.start()
    before = schedstat_ns(srv.pid)
    subprocess.run(load_cmd(binary, test, seconds), stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    cpu_ns = schedstat_ns(srv.pid) - before
    stop.set()
    if scraping:
        scraping.join()
    out, _ = srv.communicate(timeout=seconds + 30)
    summary = [json.loads(line) for line in out.splitlines() if '"summary"' in line][-1]
    units = find(summary, key) or 0
    return cpu_ns / max(units, 1), units, len(scrapes)


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    binary = os.path.abspath(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    seconds = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    tests = sys.argv[4].split(",") if len(sys.argv) > 4 else ["http", "recv", "echo"]
    results = {(t, m): [] for t in tests for m in (False, True)}
    for r in range(rounds):
        for test in tests:
            for metrics in ((False, True) if r % 2 == 0 else (True, False)):
                ns, units, scrapes = trial(binary, test, metrics, seconds)
                results[(test, metrics)].append(ns)
                print(f"round {r + 1} {test:5} metrics {'on ' if metrics else 'off'}: "
                      f"{ns:8.0f} ns/unit over {units} units, {scrapes} scrapes", flush=True)
    print(f"\nmedians over {rounds} rounds of {seconds} s (ns of server CPU per request/datagram):")
    for test in tests:
        off = statistics.median(results[(test, False)])
        on = statistics.median(results[(test, True)])
        print(f"  {test:5} off {off:8.0f}  on+scraped {on:8.0f}  ({(on / off - 1) * 100:+.1f} %)")


if __name__ == "__main__":
    main()
