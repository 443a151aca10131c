#!/usr/bin/env python3
"""A/B CPU cost of two corelane binaries, interleaved in one run.

Measures, for each binary, the server lane's CPU per HTTP request (keep-alive and
Connection: close, wrk on CPU 0, server on CPU 1; and a 4 KiB static file from --root),
the UDP receive lane's CPU per datagram (sender on CPU 0 capped at a fixed rate, receiver
on CPU 1), the echo lane's CPU per answered datagram (each binary's own `udp ping` open
loop on CPU 0, echo on CPU 1) and `copy -r` of 20,000 files of 4 KiB on tmpfs (CPU per
file). CPU time is the exact runtime from /proc/PID/task/TID/schedstat summed over the
process's threads between the start and the end of the load, not tick-sampled utime/stime;
for the copy, which is a whole process, the exit's rusage (user + system), which Linux
derives from the same exact runtime (cputime_adjust scales the ticks' split to it).

Usage: ab-cpu.py OLD_BINARY NEW_BINARY [ROUNDS] [SECONDS] [TESTS]
TESTS: comma-separated names out of keepalive,close,static,udp,echo,copy (default: all).
Needs wrk and taskset; binds 127.0.0.1 ports 47080, 47001 and 47002; as root, the static
file's directory is world-readable, since a root server drops to `nobody` after binding.
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HTTP_PORT = 47080
UDP_PORT = 47001
ECHO_PORT = 47002


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


def http(binary, close, seconds, root=None):
    served = ["--root", root] if root else []
    srv = subprocess.Popen(
        ["taskset", "-c", "1", binary, "serve", "http", "--addr", "127.0.0.1",
         "--port", str(HTTP_PORT), "--lanes", "1", "--pin", "1",
         "--duration", f"{seconds + 3}s", "--json"] + served,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_ready(srv)
    before = schedstat_ns(srv.pid)
    cmd = ["taskset", "-c", "0", "wrk", "-t1", "-c50", f"-d{seconds}s"]
    if close:
        cmd += ["-H", "Connection: close"]
    path = "/file.bin" if root else "/"
    out = subprocess.run(cmd + [f"http://127.0.0.1:{HTTP_PORT}{path}"],
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


def echo(binary, seconds, rate):
    srv = subprocess.Popen(
        ["taskset", "-c", "1", binary, "udp", "echo", f"127.0.0.1:{ECHO_PORT}", "--pin", "1",
         "--duration", f"{seconds + 4}s", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_ready(srv)
    before = schedstat_ns(srv.pid)
    out = subprocess.run(["taskset", "-c", "0", binary, "udp", "ping", f"127.0.0.1:{ECHO_PORT}",
                          "--pin", "0", "--mode", "under-load", "--rate", str(rate),
                          "--warmup", "0s", "--duration", f"{seconds}s", "--json"],
                         capture_output=True, text=True, check=True).stdout
    time.sleep(0.2)
    after = schedstat_ns(srv.pid)
    srv.terminate()
    srv.communicate()
    replies = json.loads(out.strip().splitlines()[-1])["summary"]["received"]
    return (after - before) / replies, replies / seconds


def make_tree(top, files, size):
    src = os.path.join(top, "src")
    os.mkdir(src)
    block = os.urandom(size)
    for d in range(files // 1000):
        sub = os.path.join(src, f"d{d:03}")
        os.mkdir(sub)
        for f in range(1000):
            with open(os.path.join(sub, f"f{f:04}"), "wb") as out:
                out.write(block)
    return src


def copy(binary, top, src):
    dst = os.path.join(top, "dst")
    shutil.rmtree(dst, ignore_errors=True)
    os.mkdir(dst)
    started = time.monotonic()
    proc = subprocess.Popen(["taskset", "-c", "0-1", binary, "copy", "-r", src, dst],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    if status != 0:
        raise SystemExit(f"copy failed: {proc.stderr.read().decode()}")
    files = sum(len(names) for _, _, names in os.walk(dst))
    return (usage.ru_utime + usage.ru_stime) * 1e9 / files, files / wall


def main():
    old, new = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    seconds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    chosen = sys.argv[5].split(",") if len(sys.argv) > 5 else None
    scratch = tempfile.mkdtemp(prefix="corelane-ab-", dir="/dev/shm")
    os.chmod(scratch, 0o755)
    with open(os.path.join(scratch, "file.bin"), "wb") as f:
        f.write(os.urandom(4096))
    os.chmod(os.path.join(scratch, "file.bin"), 0o644)
    trees = tempfile.mkdtemp(prefix="corelane-ab-tree-", dir="/dev/shm")
    src = make_tree(trees, 20_000, 4096) if chosen is None or "copy" in chosen else None
    every = {
        "keepalive": ("http keep-alive ns/request", lambda b: http(b, False, seconds)),
        "close": ("http close ns/request", lambda b: http(b, True, seconds)),
        "static": ("http static 4 KiB file ns/request", lambda b: http(b, False, seconds, scratch)),
        "udp": ("udp ns/datagram (150k/s offered)", lambda b: udp(b, seconds, 150_000)),
        "echo": ("udp echo ns/answer (50k/s offered)", lambda b: echo(b, seconds, 50_000)),
        "copy": ("copy -r 20,000 x 4 KiB ns/file", lambda b: copy(b, trees, src)),
    }
    tests = dict(v for k, v in every.items() if chosen is None or k in chosen)
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
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.rmtree(trees, ignore_errors=True)


if __name__ == "__main__":
    main()
