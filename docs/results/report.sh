#!/usr/bin/env bash
# Every experiment's run as JSON, CSV, its own page and PNG charts, then all of them on one page
# (issue 17). Each experiment runs alone under a lock shared with any other measurement on this
# machine (the lab's figures are meaningless beside another load).
# Usage: report.sh CORELANE [OUT_DIR] [--quick]
set -euo pipefail
exe=$(realpath "$1"); out=${2:-docs/results}; quick=${3:-}
lock=${BENCH_LOCK:-/work/bench.lock}
mkdir -p "$out/charts"
for name in udp tcp affinity sched copy; do
  flock "$lock" "$exe" lab "$name" $quick --json "$out/lab-$name.json" --csv "$out/lab-$name.csv" \
    --report "$out/lab-$name.html" --png "$out/charts" 2> "$out/lab-$name.progress.txt" > "$out/lab-$name.txt"
done
"$exe" report "$out"/lab-{udp,tcp,affinity,sched,copy}.json -o "$out/lab-report.html"
