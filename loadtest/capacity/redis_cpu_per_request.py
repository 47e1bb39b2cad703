# Redis server CPU per routed request of the router's hot-path calls
# (docs/capacity.md "Redis"): N requests over 16 connections, random names,
# the redis-server's utime+stime from /proc (the client's CPU not counted).
#   python3 loadtest/capacity/redis_cpu_per_request.py PORT N router/src/gate/limiter_lua.rs OLD_limiter_lua.rs [ROUNDS]
# OLD_limiter_lua.rs: a limiter_lua.rs with the former single SCRIPT
# (`git show e9c8cd4:router/src/gate/limiter_lua.rs`).
import socket, sys, os, time, random, threading
PORT=int(sys.argv[1]); N=int(sys.argv[2]); CONNS=16
def enc(*args):
    out=[b'*%d\r\n'%len(args)]
    for a in args:
        a=a if isinstance(a,bytes) else str(a).encode()
        out.append(b'$%d\r\n%s\r\n'%(len(a),a))
    return b''.join(out)
def read_replies(sock, buf, n):
    # count top-level replies crudely: parse RESP
    def parse(b,i):
        t=b[i:i+1]; j=b.index(b'\r\n',i)
        if t in (b'+',b'-',b':'): return j+2
        if t==b'$':
            l=int(b[i+1:j]); return j+2 if l<0 else j+2+l+2
        if t==b'*':
            l=int(b[i+1:j]); k=j+2
            for _ in range(max(l,0)): k=parse(b,k)
            return k
        raise ValueError(b[i:i+20])
    got=0; i=0
    while True:
        try:
            while got<n:
                i=parse(buf,i); got+=1
            return buf[i:]
        except (ValueError, IndexError):
            buf+=sock.recv(65536)
def cpu(pid):
    f=open(f'/proc/{pid}/stat').read().rsplit(')',1)[1].split()
    return int(f[11])+int(f[12])
def info_pid():
    s=socket.create_connection(('127.0.0.1',PORT)); s.sendall(enc('INFO','server'))
    d=b''
    while b'process_id' not in d: d+=s.recv(65536)
    return int(d.split(b'process_id:')[1].split(b'\r\n')[0])
def load(sha):
    s=socket.create_connection(('127.0.0.1',PORT)); return s
def run(label, make_batches):
    pid=info_pid(); c0=cpu(pid)
    def worker(k):
        s=socket.create_connection(('127.0.0.1',PORT)); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY,1)
        buf=b''
        for it in range(N//CONNS):
            for batch,count in make_batches():
                s.sendall(batch); buf=read_replies(s,buf,count)
    ts=[threading.Thread(target=worker,args=(k,)) for k in range(CONNS)]
    t=time.time(); [x.start() for x in ts]; [x.join() for x in ts]
    c1=cpu(pid)
    print(f"{label}: {(c1-c0)/os.sysconf('SC_CLK_TCK')/N*1e6:.2f} us server CPU per request ({N/(time.time()-t):.0f} req/s)", flush=True)
scripts={}
def script(name, body):
    s=socket.create_connection(('127.0.0.1',PORT)); s.sendall(enc('SCRIPT','LOAD',body)); d=b''
    while not d.endswith(b'\r\n') or len(d)<40: d+=s.recv(1000)
    scripts[name]=d.split(b'\r\n')[1]
import re
src=open(sys.argv[3]).read(); old=open(sys.argv[4]).read()
script('budget', re.search(r'const BUDGET_SCRIPT: &str = r#"(.*?)"#;', src, re.S).group(1))
script('key', re.search(r'const KEY_SCRIPT: &str = r#"(.*?)"#;', src, re.S).group(1))
script('old', re.search(r'const SCRIPT: &str = r#"(.*?)"#;', old, re.S).group(1))
B=29402040
def names():
    a=f"10.{random.randrange(65536)}"; u=f"usr_{random.randrange(1000000)}"; k=f"key_{random.randrange(1000000)}"
    return a,u,k
def get():
    return [(enc('GET','foo'),1)]
def old_():
    a,u,k=names()
    return [(enc('EVALSHA',scripts['old'],7,f'router:rl:addr:{a}:{B}',f'router:rl:addr:{a}:{B-1}',f'router:rl:key:{k}:{B}',f'router:rl:key:{k}:{B-1}',f'cluster:key:{k}',f'cluster:user:{u}',f'cluster:lastused:{k}',30000,60000,3000,600,1764151200123),1)]
def two_scripts():
    a,u,k=names()
    return [(enc('EVALSHA',scripts['budget'],2,f'router:rl:addr:{{{a}}}:{B}',f'router:rl:addr:{{{a}}}:{B-1}',30000,60000,3000),1),
            (enc('EVALSHA',scripts['key'],5,f'router:rl:key:{{{u}}}:{k}:{B}',f'router:rl:key:{{{u}}}:{k}:{B-1}',f'cluster:{{{u}}}:key:{k}',f'cluster:{{{u}}}:user',f'cluster:{{{u}}}:lastused:{k}',30000,60000,600,1764151200123),1)]
def two_scripts_pipelined():
    (a,n1),(b,n2)=two_scripts(); return [(a+b,n1+n2)]
def shield_pipe(a):
    c=f'router:rl:addr:{{{a}}}:{B}'
    return enc('INCR',c)+enc('PEXPIRE',c,120000,'NX')+enc('GET',f'router:rl:addr:{{{a}}}:{B-1}'), 3
def key_pipe(u,k):
    c=f'router:rl:key:{{{u}}}:{k}:{B}'
    return enc('INCR',c)+enc('PEXPIRE',c,120000,'NX')+enc('MGET',f'router:rl:key:{{{u}}}:{k}:{B-1}',f'cluster:{{{u}}}:key:{k}',f'cluster:{{{u}}}:user')+enc('SET',f'cluster:{{{u}}}:lastused:{k}',1764151200123,'GET'),4
def plain_two():
    a,u,k=names(); return [shield_pipe(a), key_pipe(u,k)]
def plain_one():
    a,u,k=names(); s,n1=shield_pipe(a); kk,n2=key_pipe(u,k); return [(s+kk,n1+n2)]
def key_script_only():
    return two_scripts()[1:]
def key_pipe_only():
    a,u,k=names(); return [key_pipe(u,k)]
for r in range(int(sys.argv[5]) if len(sys.argv)>5 else 2):
    run('GET', get); run('old EVALSHA', old_); run('two EVALSHAs (shield, key)', two_scripts)
    run('two EVALSHAs pipelined, 1 round trip', two_scripts_pipelined)
    run('key EVALSHA only', key_script_only)
    run('plain pipelines, 2 round trips', plain_two); run('plain pipelines, 1 round trip', plain_one); run('key plain pipeline only', key_pipe_only)
