#!/bin/sh
# Idle redis-server under `corelane run --syscall-cpus 1` for 10 s: its carriers' CPU (summary).
# Usage: idle-redis.sh CORELANE threads|uring (needs redis-server, redis-cli; port 18093 free).
B=$1; LANE=$2
$B run --app-cpus 0 --syscall-cpus 1 --syscall-lane $LANE --json ${TMPDIR:-/tmp}/idle-redis-$LANE.json -- \
  redis-server --port 18093 --bind 127.0.0.1 --save "" --appendonly no --daemonize no >/dev/null 2>&1 &
P=$!
sleep 1; redis-cli -p 18093 ping >/dev/null; sleep 10
kill -INT $P; wait $P
python3 -c "import json;s=json.load(open('${TMPDIR:-/tmp}/idle-redis-$LANE.json'));t=s['syscall_threads'];print('$B','$LANE',t,'wall',s['wall_ns'],'carriers %.3f %% of a CPU'%(100*t['cpu_ns']/s['wall_ns']))"
