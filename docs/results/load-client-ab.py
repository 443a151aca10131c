#!/usr/bin/env python3
"""A/B of two corelane binaries as the HTTP load generator: each binary's `load http` (50
connections, 4 s, CPU 0) against one `corelane serve http` (the new binary, CPU 1), 6 rounds
alternating who goes first; req/s and the client's CPU per response (its rusage).
Usage: load-client-ab.py OLD NEW"""
import subprocess, json, time, os, statistics, sys, resource
old, new = sys.argv[1], sys.argv[2]
srv = subprocess.Popen(['taskset','-c','1',new,'serve','http','--port','47180','--lanes','1'],stdout=subprocess.PIPE,stderr=subprocess.STDOUT)
time.sleep(1.5)
res={old:[],new:[]}
for r in range(6):
    for exe in ([old,new] if r%2==0 else [new,old]):
        t0=os.times()
        p=subprocess.run(['taskset','-c','0',exe,'load','http','http://127.0.0.1:47180/','-c','50','-d','4s','--json'],capture_output=True,text=True)
        t1=os.times()
        s=json.loads(p.stdout.strip().splitlines()[-1])['summary']
        cpu=(t1.children_user-t0.children_user)+(t1.children_system-t0.children_system)
        res[exe].append((s['requests_per_sec'], cpu*1e9/max(s['responses'],1), s['errors']))
        print(r, 'new' if exe==new else 'old', f"{s['requests_per_sec']:.0f} req/s  client {cpu*1e9/max(s['responses'],1):.0f} ns/resp  errors {s['errors']}", flush=True)
srv.terminate(); srv.wait()
for name,exe in (('old',old),('new',new)):
    rps=statistics.median(x[0] for x in res[exe]); ns=statistics.median(x[1] for x in res[exe])
    print(f'{name}: median {rps:.0f} req/s, client {ns:.0f} ns/response')
print('new/old req/s', statistics.median(x[0] for x in res[new])/statistics.median(x[0] for x in res[old]))
