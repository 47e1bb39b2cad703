#!/usr/bin/env python3
"""Writes loadtest/pgbench/generated/<query>.sql: the exact statements the
shard node runs for each records benchmark query (one, or two for a
filtered page), captured from the shard's
PostgreSQL log (log_min_duration_statement = 0 for the duration of one
request each) with its bound parameters inlined as literals. pgbench then
runs the same SQL shape as the API, deferred join, keyset bookmark and all.

    loadtest/records_sql.py ENV_FILE        (after records_setup.sh)

Queries: first, deep (bookmark near record 90,000 of the id order), filter,
filter_sort, sort_deep (bookmark near record 90,000 of -Score), the same
parameters as k6/records.js.
"""
import json, os, re, subprocess, sys, time, urllib.parse, urllib.request

here = os.path.dirname(os.path.abspath(__file__))
env_file = sys.argv[1]
env = dict(re.findall(r"^export (\w+)='([^']*)'", open(env_file).read(), re.M))
fx = json.load(open(os.path.join(here, ".records-fixture.json")))
router, dsn = env["ROUTER_URL"], fx["shard_dsn"]
port = int(urllib.parse.urlparse(dsn).port)
shard_i = port - int(open(os.path.join(env["DEV_CLUSTER_DIR"], "layout")).read().split("PORT_BASE=")[1].split()[0]) - 10
log_path = os.path.join(env["DEV_CLUSTER_DIR"], "logs", f"pg-shard-{shard_i}.log")

flt = json.dumps({"conditions": [{"field": "Status", "op": "is", "value": "doing"},
                                 {"field": "Score", "op": "greater", "value": 200}]})
QUERIES = {"first": {}, "deep": {}, "filter": {"filter": flt},
           "filter_sort": {"filter": flt, "sort": "-Score"}, "sort_deep": {"sort": "-Score"}}

def get(params):
    url = f"{router}/api/tables/{fx['table_id']}/records?" + urllib.parse.urlencode(params)
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {fx['token']}"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)

def deep_bookmark(q):
    bm = None
    for _ in range(90):
        p = dict(q, page_size=1000, fields="Name")
        if bm: p["bookmark"] = bm
        bm = get(p)["bookmark"]
    return bm

def psql(sql):
    subprocess.run(["psql", "-q", dsn, "-c", sql], check=True, stdout=subprocess.DEVNULL)

def inline(sql, detail):
    vals = dict((int(n), v) for n, v in re.findall(r"\$(\d+) = ('(?:[^']|'')*'|NULL)", detail))
    for n in sorted(vals, reverse=True):
        sql = re.sub(rf"\${n}(?!\d)", vals[n], sql)
    return sql

os.makedirs(os.path.join(here, "pgbench", "generated"), exist_ok=True)
for name, q in QUERIES.items():
    params = dict(q, page_size=100)
    if name.endswith("deep"):
        params["bookmark"] = deep_bookmark(q)
    start = os.path.getsize(log_path)
    psql("ALTER SYSTEM SET log_min_duration_statement = 0"); psql("SELECT pg_reload_conf()")
    time.sleep(0.3)
    get(params)
    psql("ALTER SYSTEM RESET log_min_duration_statement"); psql("SELECT pg_reload_conf()")
    with open(log_path, errors="replace") as f:
        f.seek(start); lines = f.read().splitlines()
    # A page is one statement, or two (filtered pages: the rows, then their
    # cells); pgbench runs them in order, as one transaction of its script.
    found = []
    for i, line in enumerate(lines):
        m = re.search(r"execute [^:]*: ((?:WITH|SELECT) .*(?:\"__page\"|r\.xmin::text).*)$", line)
        if m:
            detail = lines[i + 1] if i + 1 < len(lines) and "parameters:" in lines[i + 1] else ""
            found.append(inline(m.group(1), detail))
    if not found:
        sys.exit(f"records_sql.py: no list statement for {name} in {log_path}")
    # pgbench takes `:MI` and `:SS` in to_char's format for its variables
    # (in -M prepared it binds them); `":"` prints the same colon.
    found = ";\n".join(f.replace("HH24:MI:SS", 'HH24":"MI":"SS') for f in found)
    out = os.path.join(here, "pgbench", "generated", f"{name}.sql")
    with open(out, "w") as f:
        f.write(f"-- {name}: captured from the shard node ({json.dumps(params)[:200]})\n{found};\n")
    print(f"records_sql.py: wrote {out}", file=sys.stderr)
