#!/usr/bin/env python3
"""Apache prefork under `corelane run`: one process per connection slot, each with its own
carriers, so many carriers share the syscall CPU. Interleaved trials without and with a lane.

Usage: apache-prefork.py CORELANE [TRIALS] [REQUESTS] [PLACEMENTS] [LANES]
  PLACEMENTS: comma list of NC (program and client on CPU 0, carriers alone on CPU 1) and
              CS (the client on CPU 1, the syscall CPU, instead); default NC,CS
  LANES: comma list of none, threads, uring; default none,threads
Apache 2.4 with mpm_prefork, StartServers/MinSpareServers/MaxSpareServers/MaxRequestWorkers 8,
one 4 KiB file, no keep-alive; `ab -n REQUESTS -c 8` (no -k) on loopback. Per row: median
req/s over the trials, and CPU per request (exact: schedstat of every thread of the server's
process tree, carriers apart, and of ab). Needs root (Apache's User/Group) and apache2, ab.
"""
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

MODULES = "/usr/lib/apache2/modules"
PORT = 18091


def conf(d):
    return f"""ServerRoot {d}
Listen 127.0.0.1:{PORT}
PidFile {d}/apache.pid
ErrorLog {d}/apache-error.log
DefaultRuntimeDir {d}
LoadModule mpm_prefork_module {MODULES}/mod_mpm_prefork.so
LoadModule authz_core_module {MODULES}/mod_authz_core.so
User daemon
Group daemon
ServerName corelane-prefork
DocumentRoot {d}/www
StartServers 8
MinSpareServers 8
MaxSpareServers 8
ServerLimit 8
MaxRequestWorkers 8
MaxConnectionsPerChild 0
KeepAlive Off
<Directory {d}/www>
  Require all granted
</Directory>
"""


def tree(root):
    """Every process of the tree under `root` (root included)."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    text = f.read()
                parent[int(entry)] = int(text[text.rindex(")") + 2:].split()[1])
            except (OSError, ValueError):
                pass
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo.extend(p for p, pp in parent.items() if pp == pid and p not in found)
    return found


def cpu_ns(pids):
    """(program ns, carriers ns) summed over every thread of `pids`, from schedstat."""
    program = carriers = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    ns = int(f.read().split()[0])
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    comm = f.read().strip()
            except (OSError, ValueError):
                continue
            if comm.startswith(("cl-sys-", "iou-sqp-")):
                carriers += ns
            else:
                program += ns
    return program, carriers


def wait_port():
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", PORT), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def ab(cpu, n):
    start = time.monotonic_ns()
    out = subprocess.run(
        ["taskset", "-c", str(cpu), "ab", "-q", "-r", "-n", str(n), "-c", "8",
         f"http://127.0.0.1:{PORT}/file.bin"],
        capture_output=True, text=True, timeout=300)
    wall = time.monotonic_ns() - start
    rps = float(re.search(r"Requests per second:\s+([\d.]+)", out.stdout).group(1))
    failed = int(re.search(r"Failed requests:\s+(\d+)", out.stdout).group(1))
    return rps, failed, wall


def trial(corelane, d, placement, lane, requests):
    cmd = [corelane, "run", "--app-cpus", "0", "--json", f"{d}/summary.json"]
    if lane != "none":
        cmd += ["--syscall-cpus", "1", "--syscall-lane", lane]
    cmd += ["--", "/usr/sbin/apache2", "-f", f"{d}/apache.conf", "-DFOREGROUND"]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_port():
            raise RuntimeError("apache did not listen")
        client_cpu = 0 if placement == "NC" else 1
        ab(client_cpu, 2000)  # warm up: every child forked, every lane started
        pids = tree(server.pid)
        before = cpu_ns(pids)
        rps, failed, wall = ab(client_cpu, requests)
        after = cpu_ns(pids | tree(server.pid))
        program = (after[0] - before[0]) / requests / 1000
        carriers = (after[1] - before[1]) / requests / 1000
        result = [rps, failed, program, carriers, (after[1] - before[1]) / wall]
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        time.sleep(0.5)
    with open(f"{d}/summary.json") as f:
        summary = json.load(f)
    # The lane's own figures over the whole run (warm-up included): calls carried, CPU.
    carried = sum(summary["delegated"].values())
    return result + [len(summary.get("lane_off", [])), carried,
                     summary["syscall_threads"]["cpu_ns"] / 1e6]


def main():
    corelane = sys.argv[1]
    trials = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    requests = int(sys.argv[3]) if len(sys.argv) > 3 else 20000
    placements = (sys.argv[4] if len(sys.argv) > 4 else "NC,CS").split(",")
    lanes = (sys.argv[5] if len(sys.argv) > 5 else "none,threads").split(",")
    configs = [(p, l) for p in placements for l in lanes]
    seen = {c: [] for c in configs}
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)
        os.mkdir(f"{d}/www")
        with open(f"{d}/www/file.bin", "wb") as f:
            f.write(os.urandom(4096))
        os.chmod(f"{d}/www/file.bin", 0o644)
        with open(f"{d}/apache.conf", "w") as f:
            f.write(conf(d))
        for t in range(trials):
            order = configs[t % len(configs):] + configs[:t % len(configs)]
            for placement, lane in order:
                r = trial(corelane, d, placement, lane, requests)
                seen[(placement, lane)].append(r)
                print(f"trial {t} {placement} {lane}: {r[0]:,.0f} req/s, failed {r[1]}, "
                      f"program {r[2]:.1f} us/req, carriers {r[3]:.1f} us/req "
                      f"({r[4] * 100:.1f} % of a CPU), lanes off {r[5]}; whole run: {r[6]} calls carried, "
                      f"carriers {r[7]:.0f} ms", flush=True)
    print("\nplacement lane | req/s (median) | vs none | program us/req | carriers us/req")
    for placement, lane in configs:
        rows = seen[(placement, lane)]
        rps = statistics.median(r[0] for r in rows)
        base = statistics.median(r[0] for r in seen.get((placement, "none"), rows))
        print(f"{placement} {lane} | {rps:,.0f} | {rps / base:.2f}x | "
              f"{statistics.median(r[2] for r in rows):.1f} | "
              f"{statistics.median(r[3] for r in rows):.1f}")


if __name__ == "__main__":
    main()
