#!/usr/bin/env python3
"""Redis memory per key type: N keys of each shape written with redis-cli --pipe
into a throwaway redis-server on port 6390; used_memory before/after / N, and
MEMORY USAGE of one sample key. Prints one JSON line per shape."""
import json, random, string, subprocess, sys
N = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
A = string.ascii_letters + string.digits
rnd = random.Random(1)
def rid(): return ''.join(rnd.choice(A) for _ in range(12))
def resp(*args):
    out = [f'*{len(args)}\r\n']
    for a in args:
        a = str(a); out.append(f'${len(a.encode())}\r\n{a}\r\n')
    return ''.join(out)
def cli(*a): return subprocess.run(['redis-cli', '-p', '6390', *a], capture_output=True, text=True).stdout.strip()
def used(): 
    for l in cli('info', 'memory').splitlines():
        if l.startswith('used_memory:'): return int(l.split(':')[1])
bucket = 29402040  # now_ms / 60000, Nov 2026
now = 1764151200123
shapes = {
 # key liveness version, written by the control plane (SET_MAX)
 'cluster:key:{key}': lambda k: [('SET', f'cluster:key:key_{k}', 3)],
 'cluster:user:{user}': lambda k: [('SET', f'cluster:user:usr_{k}', 7)],
 'cluster:lastused:{key}': lambda k: [('SET', f'cluster:lastused:key_{k}', now)],
 # the per-key sliding window: cur + prev bucket counters, PEXPIRE 120 s
 'router:rl:key:{key}:{bucket} x2 (cur+prev)': lambda k: [('SET', f'router:rl:key:key_{k}:{bucket}', 412, 'PX', 120000), ('SET', f'router:rl:key:key_{k}:{bucket-1}', 598, 'PX', 120000)],
 'router:rl:addr:{ipv4}:{bucket} x2': lambda k: [('SET', f'router:rl:addr:10.{rnd.randrange(256)}.{rnd.randrange(256)}.{rnd.randrange(256)}:{bucket}', 1200, 'PX', 120000), ('SET', f'router:rl:addr:10.{rnd.randrange(256)}.{rnd.randrange(256)}.{rnd.randrange(256)}:{bucket-1}', 2900, 'PX', 120000)],
 # upload log: zset of the last 60 s of uploads, 5 entries typical
 'router:rl:upload:{user} (zset, 5 entries)': lambda k: [('ZADD', f'router:rl:upload:usr_{k}', *sum(([now + i, f'{now + i}:{rnd.randrange(1 << 32)}'] for i in range(5)), [])), ('PEXPIRE', f'router:rl:upload:usr_{k}', 60000)],
 # a move's ack hash: one field per router (1 000 routers would be large; measured per 10 routers)
 'cluster:acks:{db} (hash, 10 routers)': lambda k: [('HSET', f'cluster:acks:db_{k}', *sum(([f'rtr_{rid()}', 12] for _ in range(10)), [])), ('PEXPIRE', f'cluster:acks:db_{k}', 600000)],
}
cli('flushall')
base = used()
for name, gen in shapes.items():
    before = used()
    n = N if 'acks' not in name else N // 10
    buf = ''.join(resp(*c) for i in range(n) for c in gen(rid()))
    subprocess.run(['redis-cli', '-p', '6390', '--pipe'], input=buf, text=True, capture_output=True, check=True)
    after = used()
    sample = gen('SAMPLEKEY0001')
    buf = ''.join(resp(*c) for c in sample)
    subprocess.run(['redis-cli', '-p', '6390', '--pipe'], input=buf, text=True, capture_output=True, check=True)
    mu = [int(cli('memory', 'usage', c[1], 'samples', '0')) for c in sample if c[0] != 'PEXPIRE']
    print(json.dumps({'shape': name, 'n': n, 'used_memory_delta_per_item': round((after - before) / n, 1),
                      'memory_usage_sample': mu}))
print(json.dumps({'total_used_memory': used(), 'keys': int(cli('dbsize'))}))
