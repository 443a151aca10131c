#!/usr/bin/env bash
# `lab latency` across hosts against the local run, on a namespace fleet: three SSH "hosts"
# made of network namespaces (h1 and h3 load, h2 serves), each with a real sshd, a controller
# namespace with a management link to each, and a data network on a bridge in a namespace of
# its own (2-queue veths), as fleet-one-vs-two.sh builds it. Then, interleaved so machine
# drift falls on all three: `lab latency` on the namespace testbed (local), from h1 alone
# (one load host: it pings and loads), and from h1 and h3 (h1 the ping-pong host, each
# under-load point's rate and connections split over both, started at one agreed time).
# Prints every row's round trips (p50/p99, from the ping-pong host) and achieved rate, and
# each load host's part. Root only; removes everything it made on exit. On one machine the
# "hosts" share its CPUs (every client pins the first CPU of its host): what a second host
# adds here is bounded by them. sockperf is left out by default: its ul client spins between
# sends, and two load hosts' clients pinned to the one machine's same CPU starve each other
# (one sent 27 messages in a second and sockperf printed no figures); on real machines add
# it with ARGS="... --vs sockperf,nginx".
# Usage: [ARGS="lab latency options"] latency-across-hosts.sh CORELANE [ROUNDS]
set -euo pipefail
exe=$(realpath "$1"); rounds=${2:-2}
p=cllt$$; ctl=$p-ctl; sw=$p-sw; hosts=($p-h1 $p-h2 $p-h3)
source "$(dirname "$0")/namespace-fleet.sh"
args=(${ARGS:---configs echo,corelane-serve --vs nginx --trials 1 --duration 3})
remote=(--rx-host root@10.210.2.2 --rx-addr 10.210.3.2 --ssh-config "$dir/config" --deploy)
for r in $(seq 1 "$rounds"); do
  order=(local one two); [ $((r % 2)) -eq 0 ] && order=(two one local)   # alternate who goes first
  for side in "${order[@]}"; do
    case $side in
      local) "$exe" lab latency "${args[@]}" --json "$dir/$side-$r.json" > /dev/null 2> "$dir/err" || { tail -3 "$dir/err"; exit 1; } ;;
      one) ip netns exec $ctl "$exe" lab latency "${args[@]}" "${remote[@]}" --tx-host root@10.210.1.2 \
             --json "$dir/$side-$r.json" > /dev/null 2> "$dir/err" || { tail -3 "$dir/err"; exit 1; } ;;
      two) ip netns exec $ctl "$exe" lab latency "${args[@]}" "${remote[@]}" --tx-host root@10.210.1.2 \
             --tx-host root@10.210.4.2 --json "$dir/$side-$r.json" > /dev/null 2> "$dir/err" || { tail -3 "$dir/err"; exit 1; } ;;
    esac
    python3 - "$dir/$side-$r.json" "$side" "$r" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
for row in rep["rows"]:
    print(f'round {sys.argv[3]} {sys.argv[2]:5} {row["protocol"]:4} {row["server"]:20} <- {row["client"]:14} '
          f'{row["load"]:>9}: achieved {row["achieved"]:9.0f}/s  p50 {row["p50_us"]:8.1f}  p99 {row["p99_us"]:8.1f} us  lost {row["lost"]}')
    for h in row.get("hosts", []):
        offered = "ping-pong" if h["offered"] is None else f'offered {h["offered"]}/s'
        print(f'    {h["host"]:18} {h["role"]:9} {offered:>16} achieved {h["achieved"]:9.0f}/s  '
              f'p50 {h["p50_us"]:8.1f}  p99 {h["p99_us"]:8.1f} us  clock {h["clock_offset_ns"]/1e6:+.3f} ms')
for k in rep["knees"]:
    print(f'round {sys.argv[3]} {sys.argv[2]:5} knee {k["pair"]}: {k["knee_rate"]} (last below {k["last_below"]}, highest {k["highest_rate"]})')
print(f'round {sys.argv[3]} {sys.argv[2]:5} skipped: {rep["skipped"]}')
PY
  done
done
