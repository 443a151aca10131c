#!/usr/bin/env bash
# One vs two load hosts against the same receiver, on a namespace fleet: three SSH "hosts"
# made of network namespaces (h1 and h3 load, h2 receives), each with a real sshd, a
# controller namespace with a management link to each, and a data network on a bridge in a
# namespace of its own (2-queue veths); then `lab udp` alternately from h1 alone and from h1
# and h3 together (the row's load split over them, started at one agreed time), interleaved
# so machine drift falls on both. Prints each row's total at the receiver and each load
# host's share. Root only; removes everything it made on exit. On one machine the "hosts"
# share its CPUs: what a second host adds here is bounded by them (see the CPU columns).
# Usage: [OFFERED=PPS] [TRIALS=N] fleet-one-vs-two.sh CORELANE [ROUNDS]
set -euo pipefail
exe=$(realpath "$1"); rounds=${2:-2}; offered=${OFFERED:-1500000}; trials=${TRIALS:-2}
p=clfl$$; ctl=$p-ctl; sw=$p-sw; hosts=($p-h1 $p-h2 $p-h3)
source "$(dirname "$0")/namespace-fleet.sh"
common=(lab udp --configs default,reuseport --vs none --trials "$trials" --offered "$offered"
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
for row in rep["rows"]:
    print(f'round {sys.argv[3]} {sys.argv[2]:3} load host(s) {row["config"]:9} offered {row["offered_pps"]:9.0f} '
          f'sent {row["sent_pps"]:9.0f} received {row["median_pps"]:9.0f} pps  drops/s {row["drops_per_sec"]:8.0f}  '
          f'rx CPU {row["cpu_ns_per_datagram"]:.0f} ns/datagram  trials {[round(t) for t in row["trials_pps"]]}')
    for h in row.get("hosts", []):
        print(f'    {h["host"]:18} offered {h["offered_pps"]:9.0f} sent {h["sent_pps"]:9.0f} received {h["received_pps"]:9.0f} pps (missing {h["missing"]})  '
              f'sender CPU {h["cpu_ns_per_datagram"]:.0f} ns/datagram  clock {h["clock_offset_ns"]/1e6:+.3f} ms '
              f'(rtt {h["clock_rtt_ns"]/1e6:.3f} ms)')
    print('    CPU usr/sys/si %: ' + '  '.join(f'CPU{c["cpu"]} {c["user_pct"]:.0f}/{c["sys_pct"]:.0f}/{c["softirq_pct"]:.0f}' for c in row["cpu"]))
PY
  done
done
