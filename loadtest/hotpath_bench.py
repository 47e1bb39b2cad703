#!/usr/bin/env python3
"""Hot path benchmark: five requests through the router, each next to
pgbench running the least SQL that gives the same answer on the same
PostgreSQL (the shard that owns the database), with throughput, latency
and CPU per request on both sides. A benchmark, not a test: it asserts
nothing, it measures and prints.

    loadtest/hotpath_bench.py .dev-cluster-bench/env

ENV_FILE (default .dev-cluster-bench/env) is the `env` of a dev cluster of
its own with the per-key and per-address budgets raised (loadtest/README.md,
"Running"): every wrk connection is one key from 127.0.0.1.

Steps:

1. Fixture through the API (router, Bearer key): a new user and key (the
   control-plane CLI, `users create` / `keys create`), a database, a table
   "hot" with Name (single_line_text), Amount (number), Status
   (single_select: todo/doing/done/blocked), Due (date), Notes (long_text),
   and 10,000 records in 100 POSTs of 100, values from a seeded random
   generator (Amount uniform 0..1000 with 2 decimals, Status one of the four,
   Due within two years from 2025-01-01, Notes 60 to 200 characters of
   words). Saved to loadtest/.hotpath-fixture.json (ids in creation order).
2. Just after the load (a table PostgreSQL has no statistics for yet, unless
   autovacuum got there during the load): the first page of 100 through the
   router, wrk at 2 connections for FRESH_DURATION; the tenant table's
   pg_stat_user_tables row (n_live_tup, last_analyze, last_autoanalyze, ...)
   is printed before and after (its counters can trail the load by up to
   ~10 s: a backend flushes them at most once a second, an idle one later;
   reltuples = -1 is what says "never analyzed").
3. The least table, in the same PostgreSQL: schema least_bench (dropped and
   made again), table t (id text COLLATE "C" PRIMARY KEY, created_at
   timestamptz, name text, amount numeric, status text, due date, notes
   text), the tenant table's live rows copied in creation order, the select
   column's choice ids turned into the names the API answers with (the
   service's updated_at, created_by and deleted_at are left out: the least
   table has no trash and no edits). Ids are
   'r' || lpad(n::text, L - 1, '0') (L = length of the service's record ids,
   16) so that pgbench can pick a random row: with LEAST_ID_ORDER=service
   (default) n is the rank of the row's service id (the order the service
   lists by), so both list the same rows in the same order; with
   LEAST_ID_ORDER=creation n is the creation order. No index beyond the
   primary key (the service table has its primary key on id, a partial index
   on id over live rows and one over trashed rows: the least table has no
   trash, so its primary key is the equivalent of both id indexes; both are
   printed). Then the first page by pgbench at 2 connections for
   FRESH_DURATION (before ANALYZE), then ANALYZE least_bench.t.
4. Lines, service (wrk, CONNS connections, 2 threads, --latency, the
   hotpath/hotpath.lua script) then least (pgbench -M prepared -n -c CONNS
   -j 2 -T <same> --log), one after the other:
     get          GET /api/tables/{tid}/records/{rid}, rid random among the
                  fixture's ids
                  | SELECT * FROM least_bench.t WHERE id = 'r' || lpad(:n::text, 15, '0')
     list         GET /api/tables/{tid}/records (first page of 100; the node
                  orders by id and reads 101 rows to know if there is a next page)
                  | SELECT * FROM least_bench.t ORDER BY id LIMIT 101
     filter_sort  ?filter={"conditions":[{"field":"Amount","op":"greater","value":500}]}&sort=-Amount
                  | SELECT * FROM least_bench.t WHERE amount > 500 ORDER BY amount DESC, id LIMIT 101
                  (the service orders DESC NULLS FIRST, id: the filter leaves no NULL)
     fresh        the first page at 2 connections just after loading (step
                  2 and 3) and again SETTLE seconds after the load ended
                  (the other lines run meanwhile, then it sleeps the rest),
                  service and least; printed as the ratio just after / settled
     create       POST one record with the five fields
                  | INSERT INTO least_bench.t VALUES ('x' || substr(md5(random()::text), 1, 15), now(), ...) RETURNING *
   Reads run DURATION seconds, creates WRITE_DURATION, creates last (they add
   rows). Per line: requests (transactions) per second, p50 and p99 latency
   (wrk's histogram; pgbench's per-transaction log), and CPU per request
   from /proc/<pid>/stat (utime + stime, SC_CLK_TCK) sampled before and
   after the line: for the service router + owning shard node + Redis, and
   the shard's PostgreSQL (the postmaster, every child alive at the start
   or the end, and through the postmaster's cutime + cstime every child
   that exited in between, so pgbench's backends count in full: the
   sample after a line waits 0.5 s for backends that exit as the load stops
   to be reaped); for pgbench the PostgreSQL CPU only (pgbench itself is
   left out, as wrk is). Redis and the router are shared by every database;
   the other shard's node and PostgreSQL are not counted.
   The ratio is service req/s / least tps.
5. A Markdown table, the just-after / settled line, the machine (nproc, CPU
   model), the checkout's commit and the binaries; every figure as JSON in
   OUT.

Reading the just-after line: without statistics PostgreSQL estimates 0.5 %
of the rows for the node's `deleted_at IS NULL`, so the first page becomes
a bitmap scan of the whole table and a sort instead of 101 rows of the id
index. On PostgreSQL 15.20 the shard node's pooled sessions kept that plan
after autovacuum had analyzed the table (seen with auto_explain for tens of
seconds) until the session was replaced (the node drops one when wrk stops
with requests in flight); a new session plans the index scan. The least
SQL has no such condition and plans the same either way.

Before the lines, the first page and the filtered page of the service are
compared with the least SQL's (same names in the same order): printed as
"same answer".

Knobs (environment): DURATION (20, reads), WRITE_DURATION (10, creates),
CONNS (8), FRESH_DURATION (10, the two 2-connection first-page lines),
FRESH_CONNS (2), SETTLE (600: seconds after the load for the settled line),
REUSE=1 (no fixture load: reuse loadtest/.hotpath-fixture.json, rebuild the
least table from the service table as it is now, rows earlier create lines
added included; no just-after lines; the settled line still runs, SETTLE
seconds after the fixture's load at the earliest),
LINES (get,list,filter_sort,fresh,create: a comma list to run a subset),
LEAST_ID_ORDER (service | creation), SEED (1), ROWS (10000), OUT
(loadtest/results/hotpath.json), BIN_DIR (directory of the control-plane
CLI; default the env file's BIN_DIR, the binaries the cluster runs, else
target/release), WRK (/usr/bin/wrk), PGBENCH (pgbench).
Quick run: DURATION=3 WRITE_DURATION=3 FRESH_DURATION=3 SETTLE=0 loadtest/hotpath_bench.py ENV.

Needs: python3 (standard library only), wrk, pgbench and psql, and to read
/proc of the cluster's processes (run it as the user that started the
cluster, or root).
"""

import datetime
import glob
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LUA = os.path.join(HERE, "hotpath", "hotpath.lua")
FIXTURE = os.path.join(HERE, ".hotpath-fixture.json")


def knob(name, default):
    return type(default)(os.environ.get(name, default))


DURATION = knob("DURATION", 20)
WRITE_DURATION = knob("WRITE_DURATION", 10)
CONNS = knob("CONNS", 8)
FRESH_DURATION = knob("FRESH_DURATION", 10)
FRESH_CONNS = knob("FRESH_CONNS", 2)
SETTLE = knob("SETTLE", 600.0)
REUSE = os.environ.get("REUSE", "0") == "1"
ALL_LINES = ["get", "list", "filter_sort", "fresh", "create"]
LINES = [l.strip() for l in os.environ.get("LINES", ",".join(ALL_LINES)).split(",") if l.strip()]
LEAST_ID_ORDER = os.environ.get("LEAST_ID_ORDER", "service")
SEED = knob("SEED", 1)
ROWS = knob("ROWS", 10000)
BATCH = 100
OUT = os.environ.get("OUT", os.path.join(HERE, "results", "hotpath.json"))
WRK = os.environ.get("WRK", "/usr/bin/wrk")
PGBENCH = os.environ.get("PGBENCH", "pgbench")
THREADS = 2
LOAD_END_MONO = None  # time.monotonic() at the end of this run's load
CLK_TCK = os.sysconf("SC_CLK_TCK")
STATUSES = ["todo", "doing", "done", "blocked"]
FILTER = {"conditions": [{"field": "Amount", "op": "greater", "value": 500}]}
SORT = "-Amount"
WORDS = ("alpha beta gamma delta ledger invoice order shipment customer review draft budget "
         "meeting quarter report launch backlog sprint design release note follow up call "
         "vendor contract renewal audit travel office supply paper plan goal risk issue fix "
         "test deploy monitor support ticket urgent later maybe weekly monthly summary").split()


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def load_env(path):
    env = {}
    for line in open(path):
        m = re.match(r"export (\w+)='(.*)'$", line.strip())
        if m:
            env[m.group(1)] = m.group(2).replace("'\\''", "'")
    return env


def pct(values, p):
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    v = sorted(values)
    if not v:
        return None
    k = max(0, min(len(v) - 1, int(-(-p * len(v) // 100)) - 1))
    return v[k]


def psql(dsn, sql, stdin=False):
    """Runs `sql` (one statement with -c, or a script on stdin), returns the
    unaligned tuples-only output."""
    args = ["psql", dsn, "-XAtq", "-v", "ON_ERROR_STOP=1"]
    r = subprocess.run(args + ([] if stdin else ["-c", sql]), input=sql if stdin else None,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"psql {sql[:80]!r}...: {r.stderr.strip()}")
    return r.stdout.strip()


# ---------------------------------------------------------------- cluster

class Cluster:
    def __init__(self, env_file):
        self.env_file = env_file
        self.env = load_env(env_file)
        self.router = self.env["ROUTER_URL"].rstrip("/")
        self.dir = self.env.get("DEV_CLUSTER_DIR") or os.path.dirname(os.path.abspath(env_file))
        env_bin = self.env.get("BIN_DIR")
        if os.environ.get("BIN_DIR"):
            self.bin_dir = os.environ["BIN_DIR"]
        elif env_bin and os.path.exists(os.path.join(env_bin, "control-plane")):
            self.bin_dir = env_bin
        else:
            self.bin_dir = os.path.join(ROOT, "target", "release")
        self.cluster_bin_dir = env_bin
        self.cp_bin = os.path.join(self.bin_dir, "control-plane")
        self.proc_env = dict(os.environ, **{k: v for k, v in self.env.items() if k != "BIN_DIR"},
                             RUST_LOG="warn")

    def cli(self, *args):
        r = subprocess.run([self.cp_bin, *args, "--json"], env=self.proc_env,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"control-plane {' '.join(args)}: {r.stderr.strip()}")
        return json.loads(r.stdout) if r.stdout.strip() else None

    def shard_of(self, db):
        d = self.cli("databases", "show", db)
        return d.get("shard") or d["database"]["shard"]

    def shard(self, name):
        return next(s for s in self.cli("shards", "list")["shards"] if s["name"] == name)

    def layout(self):
        out = {}
        try:
            for line in open(os.path.join(self.dir, "layout")):
                k, _, v = line.strip().partition("=")
                out[k] = v
        except OSError:
            pass
        return out

    def pid_file(self, name):
        try:
            return int(open(os.path.join(self.dir, "run", f"{name}.pid")).read().strip())
        except (OSError, ValueError):
            return None


class Api:
    def __init__(self, base, token):
        self.base, self.token = base, token

    def call(self, method, path, body=None, params=None, timeout=120):
        url = self.base + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"{method} {path}: {e.code} {e.read()[:500]!r}") from None


# ---------------------------------------------------------------- CPU

def stat_of(pid):
    """(ppid, starttime, utime + stime, cutime + cstime, state) (times in
    clock ticks), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    rest = s[s.rindex(")") + 2:].split()
    return (int(rest[1]), int(rest[19]), int(rest[11]) + int(rest[12]),
            int(rest[13]) + int(rest[14]), rest[0])


def children_of(ppid, states=None):
    """{(pid, starttime): utime + stime} of the live children of `ppid`;
    `states`, when given, collects the children's states."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        st = stat_of(d)
        if st and st[0] == ppid:
            out[(int(d), st[1])] = st[2]
            if states is not None:
                states.append(st[4])
    return out


def postmaster_of(cl, dsn):
    """The pid of the PostgreSQL instance `dsn` points at: the postmaster.pid
    of the cluster's data directory with that port (DEV_CLUSTER_DIR/pg/*),
    else the parent of a backend of ours (read while its session is open)."""
    port = str(urllib.parse.urlsplit(dsn).port or 5432)
    for f in glob.glob(os.path.join(cl.dir, "pg", "*", "postmaster.pid")):
        try:
            lines = open(f).read().split("\n")
        except OSError:
            continue
        if len(lines) > 3 and lines[3].strip() == port and stat_of(int(lines[0])):
            return int(lines[0])
    p = subprocess.Popen(["psql", dsn, "-XAtq"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        p.stdin.write("SELECT pg_backend_pid();\n")
        p.stdin.flush()
        st = stat_of(int(p.stdout.readline()))
    finally:
        p.stdin.close()
        p.wait()
    if st is None:
        raise RuntimeError("cannot read /proc of the shard's PostgreSQL (run as its user or root)")
    return st[0]


class Procs:
    """The processes whose CPU a line counts."""

    def __init__(self, cl, shard_name, pg_dsn):
        self.service = {}
        for name in ("router", shard_name, "redis"):
            pid = cl.pid_file(name)
            if pid is None or stat_of(pid) is None:
                raise RuntimeError(f"no live pid for {name} in {cl.dir}/run/{name}.pid")
            self.service[name] = pid
        self.postmaster = postmaster_of(cl, pg_dsn)

    def settle(self, least=0.5, most=3.0):
        """Waits until the backends that exit as the load stops (pgbench's,
        or one the shard node drops with a request wrk cancels) are reaped:
        for some milliseconds such a backend is neither in /proc as a child
        nor in the postmaster's cutime yet, and its CPU would be counted in
        the next line's. At least `least` seconds (seen: under 20 ms), then
        until no child is a zombie."""
        t0 = time.monotonic()
        time.sleep(least)
        while time.monotonic() - t0 < most:
            states = []
            children_of(self.postmaster, states)
            if not any(s in ("Z", "X") for s in states):
                return
            time.sleep(0.05)

    def sample(self):
        pm = stat_of(self.postmaster)
        return {"t": time.monotonic(),
                "service": {n: stat_of(p)[2] for n, p in self.service.items()},
                "pg_own": pm[2], "pg_reaped": pm[3], "pg_children": children_of(self.postmaster)}

    @staticmethod
    def delta(a, b):
        """CPU seconds between two samples: per service process, and
        PostgreSQL (postmaster + children alive at either end + children
        reaped in between, through cutime/cstime)."""
        svc = {n: (b["service"][n] - a["service"][n]) / CLK_TCK for n in a["service"]}
        ticks = (b["pg_own"] - a["pg_own"]) + (b["pg_reaped"] - a["pg_reaped"])
        for k, v in b["pg_children"].items():
            ticks += v - a["pg_children"].get(k, 0)
        for k, v in a["pg_children"].items():
            if k not in b["pg_children"]:
                ticks -= v  # its whole life is in cutime; only what came after `a` counts
        return {"service_s": svc, "pg_s": ticks / CLK_TCK, "wall_s": b["t"] - a["t"],
                "pg_children": [len(a["pg_children"]), len(b["pg_children"])]}


# ---------------------------------------------------------------- fixture

def notes_text(rng):
    target = rng.randint(59, 199)  # the final "." makes 60 to 200
    words = []
    length = 0
    while True:
        w = rng.choice(WORDS)
        if length + len(w) + (1 if words else 0) > target:
            break
        words.append(w)
        length += len(w) + (1 if len(words) > 1 else 0)
    text = " ".join(words)
    if len(text) < 59:  # the last word did not fit: pad
        text = (text + " " + "x" * 59)[:59]
    return text[0].upper() + text[1:] + "."


def make_fixture(cl):
    stamp = int(time.time())
    user = cl.cli("users", "create", "--email", f"hotpath-{stamp}-{os.getpid()}@example.com")
    key = cl.cli("keys", "create", "--user", user["id"], "--name", "hotpath")
    api = Api(cl.router, key["token"])
    db = api.call("POST", "/api/databases", {"name": "hot path bench"})["database"]["id"]
    tbl = api.call("POST", f"/api/databases/{db}/tables", {"name": "hot"})["table"]["id"]
    fields, choices = {}, {}
    for body in ({"name": "Name", "type": "single_line_text"},
                 {"name": "Amount", "type": "number"},
                 {"name": "Status", "type": "single_select",
                  "options": {"choices": [{"name": s} for s in STATUSES]}},
                 {"name": "Due", "type": "date"},
                 {"name": "Notes", "type": "long_text"}):
        f = api.call("POST", f"/api/tables/{tbl}/fields", body)["field"]
        fields[body["name"]] = f["id"]
        if body["type"] == "single_select":
            choices = {c["name"]: c["id"] for c in f["options"]["choices"]}
    shard = cl.shard_of(db)
    sh = cl.shard(shard)
    rng = random.Random(SEED)
    day0 = datetime.date(2025, 1, 1)
    ids = []
    log(f"loading {ROWS} records into {db}/{tbl} on {shard} ({ROWS // BATCH} POSTs of {BATCH}) ...")
    t0 = time.time()
    for b in range(ROWS // BATCH):
        recs = []
        for i in range(b * BATCH, (b + 1) * BATCH):
            recs.append({"fields": {
                "Name": f"{rng.choice(WORDS).capitalize()} {rng.choice(WORDS)} {i + 1}",
                "Amount": round(rng.uniform(0, 1000), 2),
                "Status": rng.choice(STATUSES),
                "Due": (day0 + datetime.timedelta(days=rng.randint(0, 729))).isoformat(),
                "Notes": notes_text(rng)}})
        reply = api.call("POST", f"/api/tables/{tbl}/records", {"records": recs})
        got = [r["id"] for r in reply["records"]]
        if len(got) != BATCH:
            raise RuntimeError(f"batch {b}: {len(got)} records in the reply")
        ids.extend(got)
    t1 = time.time()
    global LOAD_END_MONO
    LOAD_END_MONO = time.monotonic()
    log(f"loaded {len(ids)} records in {t1 - t0:.1f} s")
    fx = {"token": key["token"], "user_id": user["id"], "key_id": key["id"], "database_id": db,
          "table_id": tbl, "shard": shard, "shard_url": sh["url"].rstrip("/"), "shard_dsn": sh["postgres"],
          "fields": fields, "choices": choices, "seed": SEED, "rows": ROWS,
          "load_started": t0, "load_finished": t1, "load_s": t1 - t0, "record_ids": ids}
    with open(FIXTURE, "w") as f:
        json.dump(fx, f)
    return fx


def pg_stat(dsn, schema, table):
    row = psql(dsn, f"""
        SELECT row_to_json(x) FROM (
          SELECT s.n_live_tup, s.n_dead_tup, s.n_mod_since_analyze, s.n_ins_since_vacuum,
                 s.last_analyze, s.last_autoanalyze, s.last_vacuum, s.last_autovacuum,
                 s.analyze_count, s.autoanalyze_count, s.autovacuum_count,
                 c.reltuples, c.relpages, now() AS at
            FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
           WHERE s.schemaname = '{schema}' AND s.relname = '{table}') x""")
    return json.loads(row) if row else None


def show_stat(what, st):
    if not st:
        return f"{what}: no pg_stat_user_tables row"
    return (f"{what}: n_live_tup={st['n_live_tup']} n_dead_tup={st['n_dead_tup']} "
            f"n_mod_since_analyze={st['n_mod_since_analyze']} reltuples={st['reltuples']} "
            f"relpages={st['relpages']} last_analyze={st['last_analyze']} "
            f"last_autoanalyze={st['last_autoanalyze']} last_autovacuum={st['last_autovacuum']}")


# ---------------------------------------------------------------- least table

def least_sql(fx, id_len):
    """The SQL that makes least_bench.t from the tenant table's live rows."""
    f = fx["fields"]
    tenant = f'"{fx["database_id"]}"."{fx["table_id"]}"'
    status = "CASE r.\"%s\" %s END" % (f["Status"], " ".join(
        f"WHEN '{cid}' THEN '{name}'" for name, cid in fx["choices"].items()))
    fx_ids = "{" + ",".join(fx["record_ids"]) + "}"
    creation = "coalesce(fx.ord, 9223372036854775807), r.created_at, r.id"
    numbering = "r.id" if LEAST_ID_ORDER == "service" else creation
    return f"""
BEGIN;
DROP SCHEMA IF EXISTS least_bench CASCADE;
CREATE SCHEMA least_bench;
CREATE TABLE least_bench.t (
  id text COLLATE "C" PRIMARY KEY,
  created_at timestamptz,
  name text,
  amount numeric,
  status text,
  due date,
  notes text
);
CREATE TEMP TABLE fx (id text COLLATE "C", ord bigint) ON COMMIT DROP;
INSERT INTO fx SELECT * FROM unnest('{fx_ids}'::text[]) WITH ORDINALITY;
INSERT INTO least_bench.t
SELECT 'r' || lpad(s.n::text, {id_len - 1}, '0'), s.created_at, s.name, s.amount, s.status, s.due, s.notes
  FROM (SELECT r.created_at, r."{f['Name']}" AS name, r."{f['Amount']}" AS amount,
               {status} AS status, r."{f['Due']}" AS due, r."{f['Notes']}" AS notes,
               row_number() OVER (ORDER BY {numbering}) AS n,
               coalesce(fx.ord, 9223372036854775807) AS ord, r.id
          FROM {tenant} r LEFT JOIN fx ON fx.id = r.id
         WHERE r.deleted_at IS NULL) s
 ORDER BY s.ord, s.created_at, s.id;
COMMIT;
SELECT count(*) FROM least_bench.t;
"""


def indexes(dsn, schema, table):
    out = psql(dsn, f"SELECT indexname || E'\\t' || indexdef FROM pg_indexes "
                    f"WHERE schemaname = '{schema}' AND tablename = '{table}' ORDER BY indexname")
    return [dict(zip(("name", "def"), l.split("\t", 1))) for l in out.splitlines() if l]


def same_answer(api, fx, dsn):
    """The service's first page and filtered page against the least SQL's:
    the same names in the same order."""
    tid = fx["table_id"]
    out = {}
    for name, params, sql in (
            ("list", {}, "SELECT name FROM least_bench.t ORDER BY id LIMIT 100"),
            ("filter_sort", {"filter": json.dumps(FILTER), "sort": SORT},
             "SELECT name FROM least_bench.t WHERE amount > 500 ORDER BY amount DESC, id LIMIT 100")):
        svc = [r["fields"].get("Name") for r in api.call("GET", f"/api/tables/{tid}/records", params=params)["records"]]
        least = psql(dsn, sql).splitlines()
        out[name] = {"same": svc == least, "service_rows": len(svc), "least_rows": len(least)}
    return out


# ---------------------------------------------------------------- runners

def run_wrk(cl, procs, fx, mode, conns, duration, ids_file=None, query=""):
    env = dict(os.environ, HOT_MODE=mode, HOT_TOKEN=fx["token"], HOT_TABLE=fx["table_id"],
               HOT_IDS=ids_file or "", HOT_QUERY=query)
    cmd = [WRK, f"-t{min(THREADS, conns)}", f"-c{conns}", f"-d{duration}s", "--timeout", "30s",
           "--latency", "-s", LUA, cl.router]
    a = procs.sample()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    procs.settle()
    b = procs.sample()
    m = re.search(r"^HOTPATH_JSON (.*)$", r.stdout, re.M)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"wrk {mode}: rc {r.returncode}\n{r.stdout}\n{r.stderr}")
    w = json.loads(m.group(1))
    cpu = Procs.delta(a, b)
    n = w["requests"]
    errors = sum(w["errors"].values())
    if errors:
        log(f"WARNING: wrk {mode}: errors {w['errors']} (status = non-2xx answers; 429 means the "
            "cluster's rate limits were not raised)")
    svc_s = sum(cpu["service_s"].values())
    return {"tool": "wrk", "command": " ".join(cmd), "mode": mode, "query": query, "conns": conns,
            "duration_s": w["duration_us"] / 1e6, "requests": n, "errors": w["errors"],
            "rps": n / (w["duration_us"] / 1e6),
            "p50_ms": w["latency_us"]["p50"] / 1000, "p99_ms": w["latency_us"]["p99"] / 1000,
            "p90_ms": w["latency_us"]["p90"] / 1000, "max_ms": w["latency_us"]["max"] / 1000,
            "mean_ms": w["latency_us"]["mean"] / 1000,
            "cpu": cpu, "service_cpu_ms_per_req": svc_s * 1000 / n if n else None,
            "service_cpu_ms_per_req_by_process": {k: v * 1000 / n for k, v in cpu["service_s"].items()} if n else None,
            "pg_cpu_ms_per_req": cpu["pg_s"] * 1000 / n if n else None,
            "wrk_stdout": r.stdout}


def run_pgbench(procs, dsn, name, script, conns, duration, tmp):
    path = os.path.join(tmp, f"{name}.sql")
    with open(path, "w") as f:
        f.write(script)
    prefix = os.path.join(tmp, f"log-{name}-{int(time.time() * 1000)}")
    cmd = [PGBENCH, "-M", "prepared", "-n", "-c", str(conns), "-j", str(min(THREADS, conns)),
           "-T", str(duration), "--log", f"--log-prefix={prefix}", "-f", path, dsn]
    a = procs.sample()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
    procs.settle()
    b = procs.sample()
    if r.returncode != 0:
        raise RuntimeError(f"pgbench {name}: rc {r.returncode}\n{r.stdout}\n{r.stderr}")
    n = int(re.search(r"number of transactions actually processed: (\d+)", r.stdout).group(1))
    failed = re.search(r"number of failed transactions: (\d+)", r.stdout)
    tps = float(re.search(r"tps = ([\d.]+) \(without initial connection time\)", r.stdout).group(1))
    lat = []
    for lf in glob.glob(prefix + ".*"):
        with open(lf) as f:
            for line in f:
                p = line.split()
                if len(p) >= 6:
                    lat.append(int(p[2]))
    cpu = Procs.delta(a, b)
    return {"tool": "pgbench", "command": " ".join(cmd[:-1] + ["<dsn>"]), "script": script.strip(),
            "conns": conns, "duration_s": duration, "transactions": n, "logged": len(lat),
            "failed": int(failed.group(1)) if failed else None, "tps": tps,
            "p50_ms": pct(lat, 50) / 1000 if lat else None, "p99_ms": pct(lat, 99) / 1000 if lat else None,
            "max_ms": max(lat) / 1000 if lat else None,
            "cpu": cpu, "pg_cpu_ms_per_req": cpu["pg_s"] * 1000 / n if n else None,
            "pgbench_stdout": r.stdout}


def least_scripts(id_len, rows):
    pad = id_len - 1
    return {
        "get": (f"\\set n random(1, {rows})\n"
                f"SELECT * FROM least_bench.t WHERE id = 'r' || lpad(:n::text, {pad}, '0');\n"),
        "list": "SELECT * FROM least_bench.t ORDER BY id LIMIT 101;\n",
        "filter_sort": "SELECT * FROM least_bench.t WHERE amount > 500 ORDER BY amount DESC, id LIMIT 101;\n",
        "create": ("\\set a random(0, 100000)\n\\set s random(1, 4)\n\\set d random(0, 729)\n"
                   "INSERT INTO least_bench.t VALUES ("
                   f"'x' || substr(md5(random()::text), 1, {pad}), now(), 'bench ' || :a::text, "
                   ":a::int / 100.0, (ARRAY['todo','doing','done','blocked'])[:s::int], "
                   "date '2025-01-01' + :d::int, "
                   "'Create line of the hot path benchmark: a record with five fields, written "
                   "through the router and the shard node in one request.') RETURNING *;\n"),
    }


# ---------------------------------------------------------------- output

def f1(v, d=1):
    return "-" if v is None else f"{v:,.{d}f}"


def line_row(label, conns, svc, least):
    def lat(x):
        return f"{f1(x['p50_ms'], 2)} / {f1(x['p99_ms'], 2)}" if x else "-"
    s_cpu = f"{f1(svc['service_cpu_ms_per_req'], 3)} / {f1(svc['pg_cpu_ms_per_req'], 3)}" if svc else "-"
    ratio = f"{svc['rps'] / least['tps']:.2f}" if svc and least and least["tps"] else "-"
    rps = f1(svc["rps"]) if svc else "-"
    if svc and sum(svc["errors"].values()):
        rps += f" ({sum(svc['errors'].values())} errors)"
    if least and least.get("failed"):
        ratio += f" (least: {least['failed']} failed)"
    return (f"| {label} | {conns} | {rps} | {lat(svc)} | {s_cpu} | "
            f"{f1(least['tps']) if least else '-'} | {lat(least)} | "
            f"{f1(least['pg_cpu_ms_per_req'], 3) if least else '-'} | {ratio} |")


def machine():
    model = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1048576:.1f} GiB"
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu_model": model, "mem": mem,
            "loadavg": open("/proc/loadavg").read().split()[:3]}


def git_head():
    r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or "?"


# ---------------------------------------------------------------- main

def since_load(load_end):
    """Seconds since the load ended (monotonic when the load was this run's)."""
    if LOAD_END_MONO is not None:
        return time.monotonic() - LOAD_END_MONO
    return time.time() - load_end


def main():
    env_file = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".dev-cluster-bench", "env")
    bad = [l for l in LINES if l not in ALL_LINES]
    if bad:
        sys.exit(f"hotpath_bench.py: unknown LINES {bad} (known: {','.join(ALL_LINES)})")
    if LEAST_ID_ORDER not in ("service", "creation"):
        sys.exit("hotpath_bench.py: LEAST_ID_ORDER is service or creation")
    for tool in (WRK, PGBENCH, "psql"):
        if not shutil.which(tool):
            sys.exit(f"hotpath_bench.py: {tool} not found")
    cl = Cluster(env_file)
    if not os.access(cl.cp_bin, os.X_OK):
        sys.exit(f"hotpath_bench.py: no control-plane binary at {cl.cp_bin} (BIN_DIR)")
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    mach = machine()
    log(f"machine: {mach['nproc']} CPUs, {mach['cpu_model']}; commit {git_head()}; "
        f"cluster binaries {cl.cluster_bin_dir}; CLI {cl.cp_bin}")
    result = {"started": started, "env_file": os.path.abspath(env_file), "machine": mach,
              "commit": git_head(), "cluster_bin_dir": cl.cluster_bin_dir, "cli": cl.cp_bin,
              "knobs": {"DURATION": DURATION, "WRITE_DURATION": WRITE_DURATION, "CONNS": CONNS,
                        "FRESH_DURATION": FRESH_DURATION, "FRESH_CONNS": FRESH_CONNS, "SETTLE": SETTLE,
                        "REUSE": REUSE, "LINES": LINES, "LEAST_ID_ORDER": LEAST_ID_ORDER, "SEED": SEED,
                        "ROWS": ROWS},
              "lines": {}}
    tmp = tempfile.mkdtemp(prefix="hotpath-")
    fresh = "fresh" in LINES and not REUSE

    # 1. fixture
    if REUSE:
        if not os.path.exists(FIXTURE):
            sys.exit(f"hotpath_bench.py: REUSE=1 but no {FIXTURE}")
        fx = json.load(open(FIXTURE))
        try:
            fx["shard"] = cl.shard_of(fx["database_id"])
        except Exception as e:  # noqa: BLE001
            sys.exit(f"hotpath_bench.py: {FIXTURE} is stale ({e}); run without REUSE=1")
        fx["shard_dsn"] = cl.shard(fx["shard"])["postgres"]
        log(f"reusing {FIXTURE} ({fx['database_id']}/{fx['table_id']} on {fx['shard']})")
    else:
        fx = make_fixture(cl)
    dsn = fx["shard_dsn"]
    db, tid = fx["database_id"], fx["table_id"]
    api = Api(cl.router, fx["token"])
    procs = Procs(cl, fx["shard"], dsn)
    load_end = fx["load_finished"]
    id_len = len(fx["record_ids"][0])
    result["fixture"] = {k: fx[k] for k in ("database_id", "table_id", "shard", "fields", "choices",
                                            "load_s", "rows", "seed")}
    result["pids"] = {"service": procs.service, "postmaster": procs.postmaster}
    ids_file = os.path.join(tmp, "ids.txt")
    with open(ids_file, "w") as f:
        f.write("\n".join(fx["record_ids"]) + "\n")

    # 2. the first page just after the load
    stats = result["tenant_pg_stat"] = {}
    if fresh:
        stats["before_fresh"] = pg_stat(dsn, db, tid)
        log(show_stat("tenant table just after the load", stats["before_fresh"]))
        at = since_load(load_end)
        log(f"fresh: service first page, {FRESH_CONNS} connections, {FRESH_DURATION} s "
            f"({at:.1f} s after the load)")
        result["lines"]["fresh_service"] = run_wrk(cl, procs, fx, "list", FRESH_CONNS, FRESH_DURATION)
        result["lines"]["fresh_service"]["started_s_after_load"] = at
        stats["after_fresh"] = pg_stat(dsn, db, tid)
        log(show_stat("tenant table after the just-after line", stats["after_fresh"]))

    # 3. the least table
    svc_idx = indexes(dsn, db, tid)
    result["service_indexes"] = svc_idx
    log("service table indexes:\n  " + "\n  ".join(i["def"] for i in svc_idx))
    t0 = time.monotonic()
    rows = int(psql(dsn, least_sql(fx, id_len), stdin=True).splitlines()[-1])
    log(f"least_bench.t: {rows} rows copied in {time.monotonic() - t0:.2f} s "
        f"(ids 'r' || lpad(n, {id_len - 1}, '0'), n in {LEAST_ID_ORDER} order)")
    least_idx = indexes(dsn, "least_bench", "t")
    result["least_indexes"] = least_idx
    result["least_rows"] = rows
    log("least table indexes:\n  " + "\n  ".join(i["def"] for i in least_idx))
    scripts = least_scripts(id_len, rows)
    least_stats = result["least_pg_stat"] = {}
    if fresh:
        least_stats["before_fresh"] = pg_stat(dsn, "least_bench", "t")
        log(f"fresh: least first page, {FRESH_CONNS} connections, {FRESH_DURATION} s (before ANALYZE)")
        result["lines"]["fresh_least"] = run_pgbench(procs, dsn, "fresh_least", scripts["list"],
                                                     FRESH_CONNS, FRESH_DURATION, tmp)
        least_stats["after_fresh"] = pg_stat(dsn, "least_bench", "t")
        log(show_stat("least table after its just-after line", least_stats["after_fresh"]))
    psql(dsn, "ANALYZE least_bench.t")
    result["same_answer"] = same_answer(api, fx, dsn)
    log(f"same answer (names in order, service vs least): {result['same_answer']}")
    result["least_explain"] = {
        k: psql(dsn, "EXPLAIN " + v.replace(":n::text", "'1'"))
        for k, v in (("list", scripts["list"].strip().rstrip(";")),
                     ("filter_sort", scripts["filter_sort"].strip().rstrip(";")),
                     ("get", scripts["get"].splitlines()[1].rstrip(";")))}

    # 4. the read lines
    unanalyzed = []  # lines that began before the tenant table had statistics
    for line, query in (("get", None), ("list", ""),
                        ("filter_sort", urllib.parse.urlencode({"filter": json.dumps(FILTER, separators=(",", ":")),
                                                                 "sort": SORT}))):
        if line not in LINES:
            continue
        log(f"{line}: service, {CONNS} connections, {DURATION} s")
        before = pg_stat(dsn, db, tid)
        s = run_wrk(cl, procs, fx, "get" if line == "get" else "list", CONNS, DURATION,
                    ids_file=ids_file, query=query or "")
        log(f"{line}: service {s['rps']:.1f} req/s, p50 {s['p50_ms']:.2f} p99 {s['p99_ms']:.2f} ms; "
            f"least, {CONNS} connections, {DURATION} s")
        l = run_pgbench(procs, dsn, line, scripts[line], CONNS, DURATION, tmp)
        log(f"{line}: least {l['tps']:.1f} tps, p50 {l['p50_ms']:.2f} p99 {l['p99_ms']:.2f} ms")
        s["tenant_pg_stat_before"] = before
        if before and before["reltuples"] < 0:
            unanalyzed.append(line)
        result["lines"][line] = {"service": s, "least": l}

    # the settled first page
    if "fresh" in LINES:
        wait = SETTLE - since_load(load_end)
        if wait > 0:
            log(f"settled: sleeping {wait:.0f} s (until {SETTLE:.0f} s after the load)")
            time.sleep(wait)
        stats["before_settled"] = pg_stat(dsn, db, tid)
        log(show_stat("tenant table before the settled line", stats["before_settled"]))
        at = since_load(load_end)
        log(f"settled: service first page, {FRESH_CONNS} connections, {FRESH_DURATION} s "
            f"({at:.0f} s after the load)")
        result["lines"]["settled_service"] = run_wrk(cl, procs, fx, "list", FRESH_CONNS, FRESH_DURATION)
        result["lines"]["settled_service"]["started_s_after_load"] = at
        result["lines"]["settled_least"] = run_pgbench(procs, dsn, "settled_least", scripts["list"],
                                                       FRESH_CONNS, FRESH_DURATION, tmp)
        least_stats["settled"] = pg_stat(dsn, "least_bench", "t")

    # creates last
    if "create" in LINES:
        log(f"create: service, {CONNS} connections, {WRITE_DURATION} s")
        s = run_wrk(cl, procs, fx, "create", CONNS, WRITE_DURATION)
        log(f"create: service {s['rps']:.1f} req/s; least, {CONNS} connections, {WRITE_DURATION} s")
        l = run_pgbench(procs, dsn, "create", scripts["create"], CONNS, WRITE_DURATION, tmp)
        result["lines"]["create"] = {"service": s, "least": l}

    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    result["machine"]["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(result, f, indent=1, default=str)
    shutil.rmtree(tmp, ignore_errors=True)

    # 5. the table
    L = result["lines"]
    out = ["| request | conns | service req/s | p50 / p99 ms | CPU ms/req (router+shard+redis / PG) | "
           "least tps | least p50 / p99 ms | least PG CPU ms/req | service/least |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    labels = {"get": "get one record (random id)", "list": "list first page of 100",
              "filter_sort": "filter Amount > 500, sort -Amount, page of 100",
              "create": "create one record (5 fields)"}
    for line in ("get", "list", "filter_sort"):
        if line in L:
            out.append(line_row(labels[line], CONNS, L[line]["service"], L[line]["least"]))
    if "fresh_service" in L:
        out.append(line_row(f"list first page, just after loading "
                            f"(from {L['fresh_service']['started_s_after_load']:.1f} s after)",
                            FRESH_CONNS, L["fresh_service"], L.get("fresh_least")))
    if "settled_service" in L:
        out.append(line_row(f"list first page, settled "
                            f"(from {L['settled_service']['started_s_after_load']:.0f} s after)",
                            FRESH_CONNS, L["settled_service"], L.get("settled_least")))
    if "create" in L:
        out.append(line_row(labels["create"], CONNS, L["create"]["service"], L["create"]["least"]))
    print("\n".join(out))
    print()
    if unanalyzed:
        print(f"Note: {', '.join(unanalyzed)} began before PostgreSQL had analyzed the tenant table "
              "(reltuples = -1): those service figures are of a table without statistics.")
    if "fresh_service" in L and "settled_service" in L:
        fs, ss = L["fresh_service"], L["settled_service"]
        print(f"List first page, just after loading / settled (service, {FRESH_CONNS} connections): "
              f"{fs['rps']:.1f} / {ss['rps']:.1f} req/s = {fs['rps'] / ss['rps']:.2f}; "
              f"p50 {fs['p50_ms']:.2f} / {ss['p50_ms']:.2f} ms; "
              f"PG CPU {fs['pg_cpu_ms_per_req']:.3f} / {ss['pg_cpu_ms_per_req']:.3f} ms/req"
              + (f"; least {L['fresh_least']['tps']:.1f} / {L['settled_least']['tps']:.1f} tps"
                 if "fresh_least" in L else ""))
        for k in ("before_fresh", "after_fresh", "before_settled"):
            print("  " + show_stat(f"tenant table {k.replace('_', ' ')}", stats.get(k)))
        aa = (stats.get("before_settled") or {}).get("last_autoanalyze")
        if aa:
            at = datetime.datetime.fromisoformat(aa).timestamp() - load_end
            fs_at = fs["started_s_after_load"]
            when = ("before" if at < fs_at else "during" if at < fs_at + FRESH_DURATION else "after")
            print(f"  autovacuum analyzed the tenant table {at:.1f} s after the load, {when} the "
                  f"just-after line ({fs_at:.1f} to {fs_at + FRESH_DURATION:.1f} s)")
    elif "settled_service" in L:
        print("List first page, settled only (REUSE=1: no just-after line).")
    print(f"Least table: least_bench.t in the owning shard's PostgreSQL ({fx['shard']}), {rows} rows copied "
          f"from the tenant table, ids 'r' || lpad(n::text, {id_len - 1}, '0') with n in "
          f"{'the order of the service ids (the order the service lists by)' if LEAST_ID_ORDER == 'service' else 'creation order'}, "
          f"indexes: {'; '.join(i['def'] for i in least_idx)}.")
    print(f"Service table indexes: {'; '.join(i['def'] for i in svc_idx)}.")
    print("Least SQL (pgbench scripts):")
    for k in ("get", "list", "filter_sort", "create"):
        print(f"  {k}: " + " ".join(scripts[k].split()))
    print(f"Same answer (first page / filtered page, names in order): "
          + ", ".join(f"{k} {'yes' if v['same'] else 'NO'}" for k, v in result["same_answer"].items()))
    print(f"Machine: {mach['nproc']} CPUs ({mach['cpu_model']}, {mach['mem']}), load {' '.join(mach['loadavg'])} "
          f"at start, {' '.join(result['machine']['loadavg_end'])} at end; commit {result['commit']}; "
          f"cluster binaries {cl.cluster_bin_dir}; control-plane CLI {cl.cp_bin}.")
    print(f"wrk -t{THREADS} --latency (hotpath/hotpath.lua), pgbench -M prepared -n -j {THREADS} --log; reads "
          f"{DURATION} s, creates {WRITE_DURATION} s, first-page lines {FRESH_DURATION} s. Figures: {OUT}")


if __name__ == "__main__":
    main()
