#!/bin/bash
# Interleaved rounds of xdp-floor.sh (mmsg, xdp, xdp-return, xdp-drop), the order rotated each
# round; run it alone: flock /work/bench.lock docs/results/xdp-floor-rounds.sh BIN [ROUNDS]
BIN=$1; R=${2:-8}
modes=(mmsg xdp xdp-return xdp-drop)
for r in $(seq 1 $R); do
  for k in 0 1 2 3; do
    m=${modes[$(( (k + r) % 4 ))]}
    echo -n "round $r: "
    EXTRA="--rcvbuf 4M" timeout 60 bash docs/results/xdp-floor.sh $BIN $m 2>&1 | tail -1
  done
done
