#!/bin/bash
# The AF_XDP floor measurement of docs/RESULTS.md: one mode per run, root only,
# run it alone under a lock. Builds namespaces hc-tx/hc-rx (removed after).
# usage: xdp-floor.sh BIN MODE [N] [RATE]
#   MODE: mmsg | xdp | xdp-bp | xdp-drop (XDP modes with threaded NAPI pinned to CPU 1)
#       | xdp-return (the delivery floor: redirected to the AF_XDP sockets, handed back unread)
#       | xdp-sirq | xdp-drop-sirq (threaded NAPI off: veth's XDP runs as softirq in the
#         sender's sends on CPU 0, as the recvmmsg path's receive work does)
# DEFER=T (ns, optional): napi_defer_hard_irqs 2 and gro_flush_timeout T on the receiving veth,
#   so that while frames flow its NAPI polls on a T-ns timer instead of on every send.
# NAPI_POLICY=fifo (optional): the NAPI threads at SCHED_FIFO 1 instead of the kernel's default
#   SCHED_OTHER (which lab udp uses: at FIFO a burst keeps the lane off its CPU until the RX ring
#   overflows). STALL=S (optional): the sender stopped for S seconds 0.5 s in, then catching up.
# Charged: the receiver (schedstat), the NAPI threads, ksoftirqd/0 and /1 (softirq work that
# left the sender's context), and the sender (wait4's rusage).
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
  mmsg) A="";; xdp|xdp-sirq) A="--backend xdp";; xdp-bp) A="--backend xdp --busy-poll ${BP:-50}";; xdp-drop|xdp-drop-sirq) A="--backend xdp-drop";; xdp-return) A="--backend xdp-return";;
  *) echo "xdp-floor.sh: unknown mode $MODE" >&2; exit 2;;
esac
ip netns exec hc-rx taskset -c 1 $BIN udp recv 10.207.0.2:9000 $A --duration 30s --pin 1 --json ${EXTRA:-} > $W/cpu-recv.json 2>$W/cpu-recv.err &
R=$!
# Wait for the receiver's ready line (its lanes are reading), at most 10 s.
for _ in $(seq 200); do grep -q '"type":"ready"' $W/cpu-recv.json 2>/dev/null && break; sleep 0.05; done
if ! grep -q '"type":"ready"' $W/cpu-recv.json; then
  echo "xdp-floor.sh: the receiver did not get ready" >&2; cat $W/cpu-recv.err >&2
  kill $R 2>/dev/null; wait $R; ip netns del hc-tx; ip netns del hc-rx; exit 1
fi
NAPI=""
if [ -n "${DEFER:-}" ]; then
  ip netns exec hc-rx sh -c "echo 2 > /sys/class/net/hcr/napi_defer_hard_irqs; echo $DEFER > /sys/class/net/hcr/gro_flush_timeout"
fi
case $MODE in mmsg|*-sirq) THREADED=0;; *) THREADED=1;; esac
if [ $THREADED = 1 ]; then
  ip netns exec hc-rx sh -c 'echo 1 > /sys/class/net/hcr/threaded'; sleep 0.3
  for p in $(pgrep '^napi/hcr-'); do
    taskset -p -c 1 $p >/dev/null
    if [ "${NAPI_POLICY:-other}" = fifo ]; then chrt -f -p 1 $p; else chrt -o -p 0 $p; fi
    NAPI="$NAPI $p"
  done
fi
SIRQ=$(pgrep '^ksoftirqd/[01]$')
n0=0; for p in $NAPI; do n0=$((n0 + $(cut -d' ' -f1 /proc/$p/schedstat))); done
k0=0; for p in $SIRQ; do k0=$((k0 + $(cut -d' ' -f1 /proc/$p/schedstat))); done
# The sender's whole CPU time from wait4's rusage (Linux derives it from the exact runtime):
# with RPS off, the recvmmsg path's kernel receive work runs as softirq in its sends.
if [ -n "${STALL:-}" ]; then
  ( sleep 0.5; S=$(pgrep -f "^$BIN udp send 10.207.0.2:9000"); kill -STOP $S; sleep $STALL; kill -CONT $S ) &
fi
OUT=$W/cpu-send.json ip netns exec hc-tx taskset -c 0 python3 -c 'import os,subprocess,sys
p=subprocess.Popen(sys.argv[1:], stdout=open(os.environ["OUT"],"w"), stderr=subprocess.STDOUT)
_,_,ru=os.wait4(p.pid,0); open(os.environ["OUT"]+".cpu","w").write(str(int((ru.ru_utime+ru.ru_stime)*1e9)))' \
  $BIN udp send 10.207.0.2:9000 --rate $RATE --gso 16 --count $N --duration 10s --pin 0 --json
sleep 0.3
n1=0; for p in $NAPI; do n1=$((n1 + $(cut -d' ' -f1 /proc/$p/schedstat))); done
k1=0; for p in $SIRQ; do k1=$((k1 + $(cut -d' ' -f1 /proc/$p/schedstat))); done
RP=$(pgrep -f "udp recv 10.207.0.2:9000" | head -1); kill -INT $RP; wait $R
TXD=$(ip netns exec hc-tx cat /sys/class/net/hct/statistics/tx_dropped)
python3 - "$MODE" "$((n1-n0))" "$TXD" "$W" "$N" "$((k1-k0))" <<'PY'
import json,sys
mode,napi,txd=sys.argv[1],int(sys.argv[2]),sys.argv[3]
sender=int(open(sys.argv[4]+'/cpu-send.json.cpu').read()); sent=int(sys.argv[5]); ksirq=int(sys.argv[6])
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
ks=ksirq/max(d,1); nd=napi/max(d,1)
lost=(x.get('xsk') or {})
print(f"{mode:9s} got {d} missing {q['missing']} dup {q['duplicates']} late {q['late']} veth_txdrop {txd} xsk_lost {lost.get('rx_ring_full',0)+lost.get('rx_dropped',0)}  kdrops {s['kernel_drops']}  lane {lane:.0f} (whole run {s['cpu_ns_per_datagram']:.0f}) + napi {nd:.0f} = {lane+nd:.0f} ns/dgram; ksoftirqd {ks:.0f}; sender {sender/sent:.0f} per sent; all {lane+nd+ks+sender/sent:.0f}")
PY
ip netns del hc-tx; ip netns del hc-rx
