#!/usr/bin/env bash
# lab tcp's scale and file rows from one vs two load hosts, on the namespace fleet of
# namespace-fleet.sh: three SSH "hosts" made of network namespaces (h1 and h3 load, h2 serves),
# each with a real sshd. The served files are made on h2 and served by corelane (epoll,
# io_uring) and nginx there; the idle connections are held from every load host (each its
# share, `load http --hold-idle`) while h2's server memory is read; the load is split over the
# load hosts and started together. --quick counts (100 and 1,000 connections), one trial each;
# about 3 minutes for one round. The runs alternate one/two hosts so machine drift falls on
# both. Root only; nginx is measured when installed; removes everything it made. On one machine
# the "hosts" share its CPUs, so a second host adds at most what they leave.
# Usage: fleet-scale-files.sh CORELANE [ROUNDS]
set -euo pipefail
exe=$(realpath "$1"); rounds=${2:-1}
p=clsf$$; ctl=$p-ctl; sw=$p-sw; hosts=($p-h1 $p-h2 $p-h3)
source "$(dirname "$0")/namespace-fleet.sh"
common=(lab tcp --quick --configs scale,files --vs nginx
        --rx-host root@10.210.2.2 --rx-addr 10.210.3.2 --ssh-config "$dir/config" --deploy)
for r in $(seq 1 "$rounds"); do
  order=(one two); [ $((r % 2)) -eq 0 ] && order=(two one)   # alternate who goes first
  for side in "${order[@]}"; do
    load=(--tx-host root@10.210.1.2)
    [ $side = two ] && load+=(--tx-host root@10.210.4.2)
    ip netns exec $ctl "$exe" "${common[@]}" "${load[@]}" --json "$dir/$side-$r.json" > "$dir/$side-$r.txt" 2>&1 \
      || { echo "round $r $side: lab tcp failed:"; tail -3 "$dir/$side-$r.txt"; continue; }
    python3 - "$dir/$side-$r.json" "$side" "$r" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1])); tag = f'round {sys.argv[3]} {sys.argv[2]:3} load host(s)'
for s in rep.get("skipped", []):
    print(f'{tag}: skipped: {s}')
def hosts(row):
    for h in row.get("hosts", []):
        print(f'    {h["host"]:18} {h["connections"]:5} connections {h["rps"]:9.0f} req/s  '
              f'p99 {h["p99_us"]:7.0f} us  errors {h["errors"]}  clock {h["clock_offset_ns"]/1e6:+.3f} ms')
for row in rep["scale_rows"]:
    print(f'{tag} scale {row["connections"]:5} {row["server"]:8} {row["backend"]:8} '
          f'{row["bytes_per_idle_connection"]:7.0f} B/idle conn  answered after idle {row["answered_after_idle"]}  '
          f'{row["median_rps"]:8.0f} req/s  CPU {row["cpu_us_per_request"]:6.2f} us/req  errors {row["errors"]}')
    hosts(row)
for row in rep["file_rows"]:
    print(f'{tag} file {row["file"]:6} {row["server"]:8} {row["backend"]:8} {row["median_rps"]:8.0f} req/s  '
          f'CPU {row["cpu_ns_per_request"]:8.0f} ns/req  errors {row["errors"] + row["non_2xx"]}')
    hosts(row)
PY
  done
done
