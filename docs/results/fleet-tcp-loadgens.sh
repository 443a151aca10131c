#!/usr/bin/env bash
# lab tcp's load generator check (wrk beside corelane load against the same corelane server)
# from one vs two load hosts, on the namespace fleet of fleet-one-vs-two.sh: three SSH
# "hosts" made of network namespaces (h1 and h3 load, h2 serves), each with a real sshd.
# Both tools run on every load host with the connections split (each host one thread) and
# start together; the runs alternate one/two hosts so machine drift falls on both. Prints
# each tool's total and each host's part. Root only, needs wrk; removes everything it made.
# On one machine the "hosts" share its CPUs, so a second host adds at most what they leave.
# Usage: [TRIALS=N] [CONNECTIONS=N] fleet-tcp-loadgens.sh CORELANE [ROUNDS]
set -euo pipefail
exe=$(realpath "$1"); rounds=${2:-2}; trials=${TRIALS:-3}; conns=${CONNECTIONS:-50}
p=cltw$$; ctl=$p-ctl; sw=$p-sw; hosts=($p-h1 $p-h2 $p-h3)
source "$(dirname "$0")/namespace-fleet.sh"
common=(lab tcp --configs none --vs wrk --trials "$trials" --connections "$conns"
        --rx-host root@10.210.2.2 --rx-addr 10.210.3.2 --ssh-config "$dir/config" --deploy)
for r in $(seq 1 "$rounds"); do
  order=(one two); [ $((r % 2)) -eq 0 ] && order=(two one)   # alternate who goes first
  for side in "${order[@]}"; do
    load=(--tx-host root@10.210.1.2)
    [ $side = two ] && load+=(--tx-host root@10.210.4.2)
    ip netns exec $ctl "$exe" "${common[@]}" "${load[@]}" --json "$dir/$side-$r.json" > /dev/null 2>&1
    python3 - "$dir/$side-$r.json" "$side" "$r" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
for s in rep.get("skipped", []):
    print(f'round {sys.argv[3]} {sys.argv[2]}: skipped: {s}')
for t in rep["load_generators"]:
    print(f'round {sys.argv[3]} {sys.argv[2]:3} load host(s) {t["tool"]:14} {t["median_rps"]:9.0f} req/s  '
          f'p99 {t["p99_us"]:7.0f} us (highest host)  errors {t["errors"]}  trials {[round(x) for x in t["trials_rps"]]}')
    for h in t.get("hosts", []):
        print(f'    {h["host"]:18} {h["connections"]:4} connections {h["rps"]:9.0f} req/s  p50 {h["p50_us"]:6.0f} us  '
              f'p99 {h["p99_us"]:6.0f} us  errors {h["errors"]}  clock {h["clock_offset_ns"]/1e6:+.3f} ms')
PY
  done
done
