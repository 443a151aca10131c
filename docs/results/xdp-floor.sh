#!/bin/bash
# The AF_XDP floor measurement of docs/RESULTS.md: one mode per run, root only,
# run it alone under a lock. Builds namespaces hc-tx/hc-rx (removed after).
# usage: xdp-floor.sh BIN MODE [N] [RATE]   MODE: mmsg | xdp | xdp-bp | xdp-drop
BIN=$1; MODE=$2; N=${3:-300000}; RATE=${4:-150000}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
ip netns del hc-tx 2>/dev/null; ip netns del hc-rx 2>/dev/null
ip netns add hc-tx; ip netns add hc-rx
ip link add hct numtxqueues 2 numrxqueues 2 netns hc-tx type veth peer name hcr numtxqueues 2 numrxqueues 2 netns hc-rx
ip -n hc-tx link set lo up; ip -n hc-rx link set lo up
ip -n hc-tx addr add 10.207.0.1/24 dev hct; ip -n hc-rx addr add 10.207.0.2/24 dev hcr
ip -n hc-tx link set hct up; ip -n hc-rx link set hcr up
ip netns exec hc-tx tc qdisc replace dev hct root pfifo limit 1000
MAC=$(ip -n hc-rx -o link show hcr | sed 's/.*link\/ether \([^ ]*\).*/\1/')
ip -n hc-tx neigh replace 10.207.0.2 lladdr $MAC dev hct nud permanent
case $MODE in
  mmsg) A="";; xdp) A="--backend xdp";; xdp-bp) A="--backend xdp --busy-poll ${BP:-50}";; xdp-drop) A="--backend xdp-drop";;
esac
ip netns exec hc-rx taskset -c 1 $BIN udp recv 10.207.0.2:9000 $A --duration 30s --pin 1 --json ${EXTRA:-} > $W/cpu-recv.json 2>$W/cpu-recv.err &
R=$!
sleep 1.2
NAPI=""
if [ $MODE != mmsg ]; then
  ip netns exec hc-rx sh -c 'echo 1 > /sys/class/net/hcr/threaded'; sleep 0.3
  for p in $(pgrep '^napi/hcr-'); do taskset -p -c 1 $p >/dev/null; chrt -f -p 1 $p; NAPI="$NAPI $p"; done
fi
n0=0; for p in $NAPI; do n0=$((n0 + $(cut -d' ' -f1 /proc/$p/schedstat))); done
# The sender's whole CPU time from wait4's rusage (Linux derives it from the exact runtime):
# with RPS off, the recvmmsg path's kernel receive work runs as softirq in its sends.
OUT=$W/cpu-send.json ip netns exec hc-tx taskset -c 0 python3 -c 'import os,subprocess,sys
p=subprocess.Popen(sys.argv[1:], stdout=open(os.environ["OUT"],"w"), stderr=subprocess.STDOUT)
_,_,ru=os.wait4(p.pid,0); open(os.environ["OUT"]+".cpu","w").write(str(int((ru.ru_utime+ru.ru_stime)*1e9)))' \
  $BIN udp send 10.207.0.2:9000 --rate $RATE --gso 16 --count $N --duration 10s --pin 0 --json
sleep 0.3
n1=0; for p in $NAPI; do n1=$((n1 + $(cut -d' ' -f1 /proc/$p/schedstat))); done
RP=$(pgrep -f "udp recv 10.207.0.2:9000" | head -1); kill -INT $RP; wait $R
TXD=$(ip netns exec hc-tx cat /sys/class/net/hct/statistics/tx_dropped)
python3 - "$MODE" "$((n1-n0))" "$TXD" "$W" "$N" <<'PY'
import json,sys
mode,napi,txd=sys.argv[1],int(sys.argv[2]),sys.argv[3]
sender=int(open(sys.argv[4]+'/cpu-send.json.cpu').read()); sent=int(sys.argv[5])
s=[json.loads(l) for l in open(sys.argv[4]+'/cpu-recv.json') if l.strip()]
s=[x['summary'] for x in s if x.get('type')=='summary'][-1]
d=s['datagrams']; q=s['sequence']
iv=[json.loads(l)['interval'] for l in open(sys.argv[4]+'/cpu-recv.json') if '"interval"' in l]
prev=0; used=0; got=0
for i in iv:
    g=i['datagrams']-prev; prev=i['datagrams']
    used+=i['cpu_ns_per_datagram']*g; got+=g
lane=used/max(got,1)
x=s.get('xdp') or {}
lost=(x.get('xsk') or {})
print(f"{mode:9s} got {d} missing {q['missing']} dup {q['duplicates']} late {q['late']} veth_txdrop {txd} xsk_lost {lost.get('rx_ring_full',0)+lost.get('rx_dropped',0)}  kdrops {s['kernel_drops']}  lane {lane:.0f} (whole run {s['cpu_ns_per_datagram']:.0f}) + napi {napi/max(d,1):.0f} = {lane+napi/max(d,1):.0f} ns/dgram; sender {sender/sent:.0f} per sent; all {lane+napi/max(d,1)+sender/sent:.0f}")
PY
ip netns del hc-tx; ip netns del hc-rx
