#!/usr/bin/env bash
# Issue 14's performance check: the kernel-bypass rows of `lab udp` on the namespace veth
# testbed (run it alone on the machine, e.g. under `flock LOCKFILE`). recvmmsg and af-xdp are fed by the same paced GSO sender at
# 150,000 datagrams/s (RPS off; AF_XDP lanes and the veth's threaded NAPI threads pinned to
# the receiver's CPU, their exact runtime charged per datagram, and the sender's and the
# ksoftirqd threads' beside them); af-xdp-bp is the same lanes busy-polling, xdp-floor
# XDP_DROP at the same rate (the floor of the same run); af-xdp-tx is the AF_XDP
# sender into the recvmmsg lane; af-xdp-max and xdp-drop run at the full offered rate.
# Root only. Usage: lab-xdp.sh CORELANE [TRIALS]
set -euo pipefail
exe=$(realpath "$1"); trials=${2:-3}
out=$(dirname "$(realpath "$0")")
"$exe" lab udp --vs none --trials "$trials" --duration 5s \
  --configs recvmmsg,af-xdp,af-xdp-bp,xdp-floor,af-xdp-tx,af-xdp-max,xdp-drop \
  --json "$out/lab-xdp.json" --csv "$out/lab-xdp.csv" > "$out/lab-xdp.txt" 2> "$out/lab-xdp.progress.txt"
