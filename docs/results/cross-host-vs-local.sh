#!/usr/bin/env bash
# Remote control against the local testbed, same rows, interleaved (issue 13's performance
# check): two SSH "hosts" made of network namespaces, each with a real sshd, a controller
# namespace, management links and a 2-queue data link (docs of the recipe: the shared notes'
# multihost.md); then `lab tcp` alternately on the namespace testbed and across the two
# hosts (or `lab udp`, LAB=udp; or lab udp's peers, the C loop, sockperf and iperf3 with
# corelane's default row beside them, LAB=udp-peers); with FULL=1, one full `lab udp` across the hosts at the end
# (every row, --rx-add-addr for the rows that target two receiver IPs), its table printed.
# Root only; removes everything it made on exit.
# Usage: [LAB=udp|udp-peers] [FULL=1] cross-host-vs-local.sh CORELANE [ROUNDS]
set -euo pipefail
exe=$(realpath "$1"); rounds=${2:-2}; lab=${LAB:-tcp}
p=clxh$$; ctl=$p-ctl; h1=$p-h1; h2=$p-h2
dir=$(mktemp -d)
cleanup() {
  for ns in $ctl $h1 $h2; do
    for pid in $(ip netns pids $ns 2>/dev/null); do kill -9 $pid 2>/dev/null || true; done
    ip netns del $ns 2>/dev/null || true
  done
  rm -rf "$dir"
}
trap cleanup EXIT
for ns in $ctl $h1 $h2; do ip netns add $ns; ip -n $ns link set lo up; done
ip link add c1 netns $ctl type veth peer m0 netns $h1
ip link add c2 netns $ctl type veth peer m0 netns $h2
ip link add d0 numtxqueues 2 numrxqueues 2 netns $h1 type veth peer d0 numtxqueues 2 numrxqueues 2 netns $h2
ip -n $ctl addr add 10.210.1.1/24 dev c1; ip -n $ctl addr add 10.210.2.1/24 dev c2
ip -n $h1 addr add 10.210.1.2/24 dev m0; ip -n $h2 addr add 10.210.2.2/24 dev m0
ip -n $h1 addr add 10.210.3.1/24 dev d0; ip -n $h2 addr add 10.210.3.2/24 dev d0
for l in "$ctl c1" "$ctl c2" "$h1 m0" "$h2 m0" "$h1 d0" "$h2 d0"; do set -- $l; ip -n $1 link set $2 up; done
for k in hostkey id; do ssh-keygen -q -t ed25519 -N '' -f "$dir/$k"; done
cp "$dir/id.pub" "$dir/authorized_keys"
printf 'HostKey %s/hostkey\nAuthorizedKeysFile %s/authorized_keys\nPermitRootLogin prohibit-password\nPasswordAuthentication no\nUsePAM no\nStrictModes no\nPidFile none\n' "$dir" "$dir" > "$dir/sshd_config"
printf 'Host *\n  IdentityFile %s/id\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n' "$dir" > "$dir/config"
mkdir -p /run/sshd
for ns in $h1 $h2; do ip netns exec $ns /usr/sbin/sshd -f "$dir/sshd_config"; done
sleep 1
if [ "$lab" = udp ]; then
  common=(lab udp --configs default,placement,reuseport --vs none --trials 3)
elif [ "$lab" = udp-peers ]; then
  common=(lab udp --configs default --vs c-loop,sockperf,iperf3 --trials 2)
else
  common=(lab tcp --configs baseline --vs none --trials 3)
fi
remote=(--tx-host root@10.210.1.2 --rx-host root@10.210.2.2 --rx-addr 10.210.3.2 --ssh-config "$dir/config" --deploy)
for r in $(seq 1 "$rounds"); do
  order=(local remote); [ $((r % 2)) -eq 0 ] && order=(remote local)   # alternate who goes first
  for side in "${order[@]}"; do
    if [ $side = local ]; then
      "$exe" "${common[@]}" --json "$dir/local-$r.json" > /dev/null 2>&1
    else
      ip netns exec $ctl "$exe" "${common[@]}" "${remote[@]}" --json "$dir/remote-$r.json" > /dev/null 2>&1
    fi
    python3 - "$dir/$side-$r.json" "$side" "$r" <<'EOF'
import json, sys
rep = json.load(open(sys.argv[1]))
for row in rep.get("peers", []):
    print(f'round {sys.argv[3]} {sys.argv[2]:6} peer {row["receiver"][:28]:28} <- {row["sender"][:24]:24} {row["median_pps"]:9.0f} pps  '
          f'receiver CPU {row["cpu_ns_per_datagram"]:.0f} ns/datagram')
for row in rep["rows"]:
    if "median_pps" in row:
        print(f'round {sys.argv[3]} {sys.argv[2]:6} {row["config"]:10} {row["median_pps"]:9.0f} pps  '
              f'receiver CPU {row["cpu_ns_per_datagram"]:.0f} ns/datagram  trials {[round(t) for t in row["trials_pps"]]}')
        continue
    print(f'round {sys.argv[3]} {sys.argv[2]:6} {row["workload"]:10} {row["median_rps"]:9.0f} req/s  '
          f'server CPU {row["cpu_us_per_request"]:.2f} us/request  trials {[round(t) for t in row["trials_rps"]]}')
EOF
  done
done
if [ "${FULL:-0}" = 1 ]; then
  ip netns exec $ctl "$exe" lab udp --vs none "${remote[@]}" --rx-add-addr 10.210.3.3/24 \
    --json "$dir/full.json" 2>/dev/null
fi
