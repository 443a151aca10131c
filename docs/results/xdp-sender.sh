#!/bin/bash
# The AF_XDP sender measurement of docs/RESULTS.md, root only, run alone under a lock.
# usage: xdp-sender.sh BIN MODE   MODE: mmsg | gso | xdp ; sender CPU per datagram (exact, steady 2 s window)
BIN=$1; MODE=$2; RATE=${RATE:-150000}
ip netns del ht-tx 2>/dev/null; ip netns del ht-rx 2>/dev/null
ip netns add ht-tx; ip netns add ht-rx
ip link add htt netns ht-tx type veth peer name htr netns ht-rx
ip -n ht-tx link set lo up; ip -n ht-rx link set lo up
ip -n ht-tx addr add 10.206.0.1/24 dev htt; ip -n ht-rx addr add 10.206.0.2/24 dev htr
ip -n ht-tx link set htt up; ip -n ht-rx link set htr up
ip netns exec ht-tx tc qdisc replace dev htt root pfifo limit 1000
MAC=$(ip -n ht-rx -o link show htr | sed 's/.*link\/ether \([^ ]*\).*/\1/')
ip -n ht-tx neigh replace 10.206.0.2 lladdr $MAC dev htt nud permanent
W=$(mktemp -d)
ip netns exec ht-rx taskset -c 1 $BIN udp recv 10.206.0.2:9000 --duration 8s --pin 1 --rcvbuf 8M --json > $W/r.json 2>/dev/null &
R=$!
sleep 1
case $MODE in mmsg) A="";; gso) A="--gso 16";; xdp) A="--backend xdp";; esac
ip netns exec ht-tx taskset -c 0 $BIN udp send 10.206.0.2:9000 --rate $RATE $A --duration 5s --pin 0 --json > $W/s.json 2>&1 &
sleep 0.3; S=$(pgrep -f "udp send 10.206.0.2:9000" | head -1)
sleep 1.7
rt() { cat /proc/$S/task/*/schedstat | awk '{s+=$1} END {printf "%d", s}'; }
c0=$(rt); sleep 2; c1=$(rt)
wait $!
kill -INT $R; wait $R
python3 - "$MODE" "$((c1-c0))" "$W" <<'PY'
import json,sys
mode,ns,w=sys.argv[1],int(sys.argv[2]),sys.argv[3]
s=[json.loads(l) for l in open(w+'/s.json') if l.startswith('{')]
summ=[x['summary'] for x in s if x.get('type')=='summary'][-1]
r=[json.loads(l) for l in open(w+'/r.json') if l.startswith('{')]
rs=[x['summary'] for x in r if x.get('type')=='summary'][-1]
pps=summ['mean']['pps']
print(f"{mode:5s} sent {summ['datagrams']} at {pps/1e6:.3f}M, received {rs['datagrams']} (missing {rs['sequence']['missing']}), sender {ns/(2*pps):.0f} ns/dgram (exact, 2 s steady, its softirq included), syscalls {summ.get('syscalls')}")
PY
rm -rf $W
ip netns del ht-tx; ip netns del ht-rx
