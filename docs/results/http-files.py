#!/usr/bin/env python3
"""`serve http` as a file server and at scale, beside nginx, interleaved in one run.

Two measurements, each server on CPU 1 and its client on CPU 0 (loopback):

1. Idle keep-alive connections: the RSS growth of all server processes (VmRSS summed over
   the process and, for nginx, its workers) while CONNS connections each make one request
   and then stay open, per connection; then one new request must still be answered.
2. Static files: server CPU per request for a 4 KiB and a 1 MiB file (wrk -t1 -c16 -d SECONDS),
   CPU exact from /proc/PID/task/TID/schedstat summed over every thread of the server's
   processes between the start and the end of the load; and the client's (wrk's whole CPU
   time from wait4's rusage), because on loopback the receive work of a segment runs on
   whichever side's CPU happens to process it: how a server sends moves CPU between the two,
   so only the sum compares servers that send differently.

Servers: corelane epoll, corelane io_uring (both `serve http --root`, one lane), nginx (one
worker, sendfile on, access_log off) and nginx-nopush (the same with `tcp_nopush on`, the
usual production pairing with sendfile). Rounds alternate the servers' order.

Usage: http-files.py CORELANE [ROUNDS] [SECONDS] [CONNS]
Needs wrk, taskset, nginx (skipped with the reason when absent); binds 127.0.0.1:47180.
As root, corelane gives up root for `nobody` after binding: the files are world-readable.
"""
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PORT = 47180


def pids_of(pid):
    """The process and its children (nginx's workers)."""
    out = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            out += [int(p) for p in f.read().split()]
    except FileNotFoundError:
        pass
    return out


def rss_bytes(pid):
    total = 0
    for p in pids_of(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except FileNotFoundError:
            pass
    return total


def cpu_ns(pid):
    total = 0
    for p in pids_of(pid):
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except FileNotFoundError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except FileNotFoundError:
                pass
    return total


def wait_port():
    end = time.time() + 10
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", PORT), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("server did not listen on 127.0.0.1:%d" % PORT)


def start(kind, binary, www, work):
    if kind.startswith("nginx"):
        nopush = "tcp_nopush on; " if kind == "nginx-nopush" else ""
        conf = os.path.join(work, "nginx.conf")
        with open(conf, "w") as f:
            f.write(
                f"worker_processes 1;\ndaemon off;\npid {work}/nginx.pid;\n"
                f"error_log {work}/nginx-error.log;\nworker_rlimit_nofile 20000;\n"
                "events { worker_connections 19000; }\n"
                f"http {{ access_log off; sendfile on; {nopush}keepalive_requests 1000000000;\n"
                "  keepalive_timeout 600s;\n"
                f"  client_body_temp_path {work}/body; proxy_temp_path {work}/proxy;\n"
                f"  fastcgi_temp_path {work}/fastcgi; uwsgi_temp_path {work}/uwsgi;\n"
                f"  scgi_temp_path {work}/scgi;\n"
                f"  server {{ listen 127.0.0.1:{PORT}; root {www}; }}\n}}\n")
        proc = subprocess.Popen(["taskset", "-c", "1", "nginx", "-c", conf],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        proc = subprocess.Popen(
            ["taskset", "-c", "1", binary, "serve", "http", "--addr", "127.0.0.1",
             "--port", str(PORT), "--lanes", "1", "--pin", "1", "--root", www,
             "--backend", kind, "--idle-timeout", "600s", "--max-connections", "19000",
             "--duration", "600s"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port()
    time.sleep(0.3)
    return proc


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def get(sock, path):
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise OSError("closed")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
    while len(body) < length:
        body += sock.recv(65536)
    return head.split(b"\r\n")[0]


def idle(kind, binary, www, work, conns):
    proc = start(kind, binary, www, work)
    try:
        before = rss_bytes(proc.pid)
        held = []
        for _ in range(conns):
            s = socket.create_connection(("127.0.0.1", PORT))
            get(s, "/small.bin")
            held.append(s)
        time.sleep(1.0)
        after = rss_bytes(proc.pid)
        fresh = socket.create_connection(("127.0.0.1", PORT), timeout=5)
        answered = get(fresh, "/small.bin").startswith(b"HTTP/1.1 200")
        fresh.close()
        for s in held:
            s.close()
        return (after - before) / conns, answered
    finally:
        stop(proc)


def files(kind, binary, www, work, path, seconds):
    proc = start(kind, binary, www, work)
    try:
        before = cpu_ns(proc.pid)
        wrk = subprocess.Popen(["taskset", "-c", "0", "wrk", "-t1", "-c16", f"-d{seconds}s",
                                f"http://127.0.0.1:{PORT}{path}"],
                               stdout=subprocess.PIPE, text=True)
        _, status, usage = os.wait4(wrk.pid, 0)
        after = cpu_ns(proc.pid)
        out = wrk.stdout.read()
        if status != 0:
            raise SystemExit(f"{kind} {path}: wrk failed ({status})")
        client = (usage.ru_utime + usage.ru_stime) * 1e9
        requests = int(re.search(r"(\d+) requests in", out).group(1))
        errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        if errors:
            raise SystemExit(f"{kind} {path}: {errors.group(1)} non-2xx answers")
        return (after - before) / requests, client / requests, requests / seconds
    finally:
        stop(proc)


def main():
    binary = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    seconds = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    conns = int(sys.argv[4]) if len(sys.argv) > 4 else 9000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    kinds = ["epoll", "uring"] + (["nginx", "nginx-nopush"] if shutil.which("nginx") else [])
    if "nginx" not in kinds:
        print("nginx: skipped (apt-get install nginx-light)")
    www = tempfile.mkdtemp(prefix="corelane-files-")
    work = tempfile.mkdtemp(prefix="corelane-nginx-")
    os.chmod(www, 0o755)
    for name, size in [("small.bin", 4096), ("large.bin", 1 << 20)]:
        with open(os.path.join(www, name), "wb") as f:
            f.write(os.urandom(size))
        os.chmod(os.path.join(www, name), 0o644)
    results = {}
    try:
        for r in range(rounds):
            order = kinds if r % 2 == 0 else list(reversed(kinds))
            for kind in order:
                per_conn, answered = idle(kind, binary, www, work, conns)
                small = files(kind, binary, www, work, "/small.bin", seconds)
                large = files(kind, binary, www, work, "/large.bin", seconds)
                results.setdefault(kind, []).append((per_conn, answered, small, large))
                print(f"round {r + 1} {kind}: idle {per_conn:.0f} B/conn (new request "
                      f"{'answered' if answered else 'NOT answered'}), 4 KiB server "
                      f"{small[0]:.0f} + client {small[1]:.0f} ns/req {small[2]:.0f} req/s, "
                      f"1 MiB server {large[0]:.0f} + client {large[1]:.0f} ns/req "
                      f"{large[2]:.0f} req/s", flush=True)
    finally:
        shutil.rmtree(www, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nmedians of {rounds} rounds ({conns} idle connections; wrk -t1 -c16 -d{seconds}s):")
    print(f"{'server':12} {'B/idle conn':>11} | 4 KiB: {'server':>7} {'client':>7} {'both':>7} "
          f"{'req/s':>7} | 1 MiB: {'server':>7} {'client':>7} {'both':>7} {'req/s':>6}  (ns/req)")
    for kind, rows in results.items():
        med = lambda f: statistics.median(f(x) for x in rows)
        cells = [med(lambda x: x[0])]
        for i in (2, 3):
            cells += [med(lambda x: x[i][0]), med(lambda x: x[i][1]),
                      med(lambda x: x[i][0] + x[i][1]), med(lambda x: x[i][2])]
        print(f"{kind:12} {cells[0]:11.0f} | {cells[1]:13.0f} {cells[2]:7.0f} {cells[3]:7.0f} "
              f"{cells[4]:7.0f} | {cells[5]:13.0f} {cells[6]:7.0f} {cells[7]:7.0f} {cells[8]:6.0f}")
    if not all(x[1] for rows in results.values() for x in rows):
        raise SystemExit("a new request was not answered after the idle connections")


if __name__ == "__main__":
    main()
