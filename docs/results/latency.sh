#!/bin/sh
# Issue 15's figures: `corelane lab latency` (namespace testbed as root; loopback otherwise),
# every pair swept up to saturation, 1 s per point, under the shared benchmark lock.
# Writes docs/results/lab-latency.{txt,json,csv}. About 2 minutes.
set -eu
cd "$(dirname "$0")/../.."
cargo build --release -q -p corelane-cli
flock /work/bench.lock target/release/corelane lab latency --duration 1s \
    --json docs/results/lab-latency.json --csv docs/results/lab-latency.csv \
    > docs/results/lab-latency.txt 2> docs/results/lab-latency.progress.txt
uptime >> docs/results/lab-latency.progress.txt
