#!/usr/bin/env python3
"""Issue 31 part 4: rebalancing at fleet speed. Moves per hour of a drain
and of a rebalance at several (MOVES_MAX, MOVES_PER_SHARD) settings, the
cutover pause of the moving databases and the latency of requests to
databases that do not move, measured side by side in one run.

    loadtest/rebalance_bench.py [ENV_FILE]

ENV_FILE defaults to .dev-cluster-bench/env: a cluster of its own with
three shards and the per-key and per-address budgets raised, e.g.

    DEV_CLUSTER_DIR=$PWD/.dev-cluster-bench PORT_BASE=35400 ROUTER_PORT=35080 \\
    SHARDS=3 BACKUPS=0 ROUTER_KEY_LIMIT_PER_MIN=100000000 \\
    ROUTER_ADDRESS_LIMIT_PER_MIN=100000000 ROUTER_ANON_LIMIT_PER_MIN=100000000 \\
    deploy/dev-cluster up

(the anonymous budget too: `up`, which restarts the control planes, waits
for the router's `GET /api/health`, which the load's address would
otherwise have used up).

Steps:

1. fixture: DATABASES small databases (one table, Name and Score, RECORDS
   records each, written through the router in batches of 100), owned by
   as many users as the per-user limit of 100 needs (90 each). The first
   BYSTANDERS databases created on shards other than SHARD are the
   bystanders: the load runs against them and nothing moves them (a drain
   of SHARD does not touch them, and a rebalance gives away the newest
   databases). Kept in FIXTURE (loadtest/.rebalance-fixture.json);
   REUSE=1 reads it back instead of creating one.
2. load: RATE requests per second at constant arrival (a scheduler thread
   and WORKERS threads with keep-alive connections) over the bystanders,
   half first-page reads and half one-record PATCHes; each request's
   latency is taken from its scheduled start (no coordinated omission).
3. for each setting of SETTINGS (`MAX/PER_SHARD,...`), in order and
   ROUNDS times over (so settings alternate and share the machine's
   moods): the control planes are stopped (SIGTERM) and started again by
   `deploy/dev-cluster up` with MOVES_MAX and MOVES_PER_SHARD; QUIET
   seconds of load alone (the baseline); `shards drain SHARD` (every
   database of SHARD moves to the other shards), polled every POLL
   seconds through `moves list --batch`, until every move has finished;
   `shards activate SHARD`, QUIET seconds again, then `rebalance` (the
   newest databases move back onto SHARD), polled the same way.

Per batch (drain, rebalance): moves, done, aborted; wall time from the
command to the last move's `finished_at`; moves per hour; the highest
number of moves under way at once seen by the poll (overall and on one
shard); each move's `pause_ms` (its cutover pause, the mover's own
figure: from the hold to the published flip) p50 / p99 / max; the
bystanders' request latency p50 / p99 / max and errors during the batch
next to the quiet window before it. Written to OUT
(results/capacity/rebalance.json) and printed as a Markdown table
(docs/capacity.md, "Rebalancing").

Knobs (environment): DATABASES (300), RECORDS (200), BYSTANDERS (30),
RATE (40), WORKERS (16), SETTINGS (4/2,16/3,64/3; `MAX/PER_SHARD/DIR`
runs that setting with the binaries of DIR, e.g. an older control plane
next to this one), ROUNDS (1), QUIET (20),
POLL (1), SHARD (shard-3), FIXTURE, REUSE (0), OUT, DEV_CLUSTER (the
repository's deploy/dev-cluster). The control planes restart with the
caller's other move knobs (MOVE_*) too.

Needs: python3 (standard library only) and the cluster's binaries (BIN_DIR
of the env file: the control-plane CLI).
"""

import http.client
import json
import os
import queue
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from datetime import datetime

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def knob(name, default):
    return type(default)(os.environ.get(name, default))


DATABASES = knob("DATABASES", 300)
RECORDS = knob("RECORDS", 200)
BYSTANDERS = knob("BYSTANDERS", 30)
RATE = knob("RATE", 40.0)
WORKERS = knob("WORKERS", 16)
SETTINGS = [(int(s.split("/")[0]), int(s.split("/")[1]), (s.split("/", 2) + [""] * 3)[2])
            for s in os.environ.get("SETTINGS", "4/2,16/3,64/3").split(",") if s]
ROUNDS = knob("ROUNDS", 1)
QUIET = knob("QUIET", 20.0)
POLL = knob("POLL", 1.0)
SHARD = os.environ.get("SHARD", "shard-3")
FIXTURE = os.environ.get("FIXTURE", os.path.join(HERE, ".rebalance-fixture.json"))
REUSE = os.environ.get("REUSE", "0") == "1"
OUT = os.environ.get("OUT", os.path.join(HERE, "results", "capacity", "rebalance.json"))
DEV_CLUSTER = os.environ.get("DEV_CLUSTER", os.path.join(ROOT, "deploy", "dev-cluster"))
PER_USER = 90


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def load_env(path):
    env = {}
    for line in open(path):
        m = re.match(r"export (\w+)='(.*)'$", line.strip())
        if m:
            env[m.group(1)] = m.group(2).replace("'\\''", "'")
    return env


def pct(xs, p):
    """Nearest-rank percentile; None for no samples."""
    if not xs:
        return None
    s = sorted(xs)
    return s[max(0, min(len(s) - 1, int(round(p / 100 * len(s) + 0.5)) - 1))]


def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


class Cluster:
    def __init__(self, env_file):
        self.env_file = env_file
        self.env = load_env(env_file)
        self.bin_dir = self.env.get("BIN_DIR") or os.path.join(ROOT, "target", "release")
        self.cp_bin = os.path.join(self.bin_dir, "control-plane")
        self.router = urllib.parse.urlparse(self.env["ROUTER_URL"])
        self.dir = self.env["DEV_CLUSTER_DIR"]
        self.proc_env = dict(os.environ, **self.env)

    def cli(self, *args):
        r = subprocess.run([self.cp_bin, *args, "--json"], env=self.proc_env,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"control-plane {' '.join(args)}: {r.stderr.strip()}")
        return json.loads(r.stdout)

    def conn(self):
        return http.client.HTTPConnection(self.router.hostname, self.router.port, timeout=30)

    def restart_control_planes(self, moves_max, per_shard, bin_dir=""):
        """SIGTERM to every control plane of the cluster, then `up` with the
        knobs (and the binaries of `bin_dir`, when given)."""
        run = os.path.join(self.dir, "run")
        for name in sorted(os.listdir(run)):
            if not re.fullmatch(r"control-plane(-\d+)?\.pid", name):
                continue
            try:
                pid = int(open(os.path.join(run, name)).read().strip())
                os.kill(pid, signal.SIGTERM)
                for _ in range(200):
                    os.kill(pid, 0)
                    time.sleep(0.05)
            except (ProcessLookupError, ValueError):
                pass
        env = dict(os.environ, DEV_CLUSTER_DIR=self.dir, DEV_CLUSTER_BIN_DIR=bin_dir or self.bin_dir,
                   MOVES_MAX=str(moves_max), MOVES_PER_SHARD=str(per_shard))
        env.pop("SHARDS", None)
        r = subprocess.run([DEV_CLUSTER, "up"], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"dev-cluster up: {r.stdout[-2000:]}{r.stderr[-2000:]}")


def api(conn, token, method, path, body=None):
    headers = {"Authorization": f"Bearer {token}"}
    data = None
    if body is not None:
        data = json.dumps(body)
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    text = r.read()
    if r.status != 200:
        raise RuntimeError(f"{method} {path}: {r.status} {text[:300]!r}")
    return json.loads(text)


def make_database(c, conn, token, i):
    db = api(conn, token, "POST", "/api/databases", {"name": f"rebalance {i}"})["database"]["id"]
    table = api(conn, token, "POST", f"/api/databases/{db}/tables", {"name": "Items"})["table"]["id"]
    for f in ({"name": "Name", "type": "single_line_text"}, {"name": "Score", "type": "number"}):
        api(conn, token, "POST", f"/api/tables/{table}/fields", f)
    ids = []
    for start in range(0, RECORDS, 100):
        rows = [{"fields": {"Name": f"r{n}", "Score": n}}
                for n in range(start, min(RECORDS, start + 100))]
        made = api(conn, token, "POST", f"/api/tables/{table}/records", {"records": rows})
        ids += [r["id"] for r in made["records"]]
    return {"database_id": db, "table_id": table, "token": token, "record_ids": ids[:50]}


def fixture(c):
    if REUSE and os.path.exists(FIXTURE):
        fx = json.load(open(FIXTURE))
        log(f"fixture: {len(fx['databases'])} databases from {FIXTURE}")
        return fx
    run_id = f"{int(time.time())}-{os.getpid()}"
    tokens = []
    for u in range((DATABASES + PER_USER - 1) // PER_USER):
        user = c.cli("users", "create", "--email", f"rebalance-{run_id}-{u}@example.com",
                      "--name", f"rebalance {u}")
        key = c.cli("keys", "create", "--user", user["id"], "--name", f"rebalance-{u}")
        tokens.append(key["token"])
    jobs = queue.Queue()
    for i in range(DATABASES):
        jobs.put(i)
    made, lock = {}, threading.Lock()

    def worker():
        conn = c.conn()
        while True:
            try:
                i = jobs.get_nowait()
            except queue.Empty:
                return
            d = make_database(c, conn, tokens[i // PER_USER], i)
            with lock:
                made[i] = d
                if len(made) % 25 == 0:
                    log(f"fixture: {len(made)}/{DATABASES} databases")

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dbs = [made[i] for i in sorted(made)]
    if len(dbs) != DATABASES:
        raise RuntimeError(f"fixture: {len(dbs)} of {DATABASES} databases made")
    on_shard = {d["id"] for d in c.cli("databases", "list", "--shard", SHARD, "--limit", "1000")["databases"]}
    bystanders = [d for d in dbs if d["database_id"] not in on_shard][:BYSTANDERS]
    fx = {"databases": dbs, "bystanders": bystanders}
    with open(FIXTURE, "w") as f:
        json.dump(fx, f)
    log(f"fixture: {len(dbs)} databases, {len(bystanders)} bystanders, in {FIXTURE}")
    return fx


class Load:
    """Constant-arrival requests over the bystanders; latency from the scheduled start."""

    def __init__(self, c, bystanders):
        self.c, self.targets = c, bystanders
        self.samples = []  # (scheduled start, latency ms, ok)
        self.lock = threading.Lock()
        self.jobs = queue.Queue()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.worker, daemon=True) for _ in range(WORKERS)]
        self.threads.append(threading.Thread(target=self.scheduler, daemon=True))

    def start(self):
        for t in self.threads:
            t.start()

    def scheduler(self):
        n, t0 = 0, time.time()
        while not self.stop.is_set():
            at = t0 + n / RATE
            delay = at - time.time()
            if delay > 0:
                time.sleep(delay)
            self.jobs.put((at, n))
            n += 1

    def worker(self):
        conn = self.c.conn()
        while not self.stop.is_set():
            try:
                at, n = self.jobs.get(timeout=0.5)
            except queue.Empty:
                continue
            d = self.targets[n % len(self.targets)]
            path = f"/api/tables/{d['table_id']}/records"
            ok = True
            try:
                if n % 2 == 0:
                    api(conn, d["token"], "GET", f"{path}?page_size=20")
                else:
                    rid = d["record_ids"][n % len(d["record_ids"])]
                    api(conn, d["token"], "PATCH", path,
                        {"records": [{"id": rid, "fields": {"Score": n}}]})
            except Exception:  # noqa: BLE001 - any failure is a failed request
                ok = False
                conn.close()
                conn = self.c.conn()
            with self.lock:
                self.samples.append((at, (time.time() - at) * 1000, ok))

    def window(self, t0, t1):
        with self.lock:
            s = [x for x in self.samples if t0 <= x[0] < t1]
        lat = [x[1] for x in s]
        return {"requests": len(s), "errors": sum(1 for x in s if not x[2]),
                "p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99), "max_ms": max(lat) if lat else None}


def run_batch(c, kind, start):
    """Starts a drain or rebalance and polls its batch until every move finished."""
    t0 = time.time()
    reply = start()
    batch = reply.get("batch")
    if not batch:
        return {"kind": kind, "moves": 0}
    peak_total, peak_shard, moves = 0, 0, []
    while True:
        moves = c.cli("moves", "list", "--batch", batch, "--limit", "1000")["moves"]
        live = [m for m in moves if m["state"] not in ("pending", "done", "aborted")]
        per = {}
        for m in live:
            for s in (m["from"], m["to"]):
                per[s] = per.get(s, 0) + 1
        peak_total = max(peak_total, len(live))
        peak_shard = max([peak_shard, *per.values()])
        if moves and all(m["state"] in ("done", "aborted") for m in moves):
            break
        time.sleep(POLL)
    end = max(ts(m["finished_at"]) for m in moves)
    wall = end - t0
    pauses = [m["pause_ms"] for m in moves if m.get("pause_ms") is not None]
    return {
        "kind": kind, "batch": batch, "moves": len(moves),
        "done": sum(1 for m in moves if m["state"] == "done"),
        "aborted": sum(1 for m in moves if m["state"] == "aborted"),
        "wall_s": round(wall, 1), "moves_per_hour": round(len(moves) / wall * 3600),
        "peak_concurrent": peak_total, "peak_per_shard": peak_shard,
        "pause_p50_ms": pct(pauses, 50), "pause_p99_ms": pct(pauses, 99),
        "pause_max_ms": max(pauses) if pauses else None,
        "t0": t0, "t1": end,
    }


def write(fx, results):
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    with open(OUT, "w") as f:
        json.dump({"commit": commit, "databases": len(fx["databases"]), "records": RECORDS,
                   "rate": RATE, "bystanders": len(fx["bystanders"]), "batches": results},
                  f, indent=1)


def main():
    env_file = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".dev-cluster-bench", "env")
    c = Cluster(env_file)
    shards = [s["name"] for s in c.cli("shards", "list")["shards"]]
    if SHARD not in shards or len(shards) < 3:
        raise SystemExit(f"needs three shards, {SHARD} among them (SHARDS=3 deploy/dev-cluster up): {shards}")
    fx = fixture(c)
    load = Load(c, fx["bystanders"])
    load.start()
    results = []
    for rnd in range(ROUNDS):
        for moves_max, per_shard, bin_dir in SETTINGS:
            log(f"round {rnd + 1}: MOVES_MAX={moves_max} MOVES_PER_SHARD={per_shard} {bin_dir}")
            c.restart_control_planes(moves_max, per_shard, bin_dir)
            for kind in ("drain", "rebalance"):
                q0 = time.time()
                time.sleep(QUIET)
                quiet = load.window(q0, time.time())
                if kind == "drain":
                    r = run_batch(c, kind, lambda: c.cli("shards", "drain", SHARD))
                else:
                    c.cli("shards", "activate", SHARD)
                    r = run_batch(c, kind, lambda: c.cli("rebalance"))
                if r["moves"]:
                    r["during"] = load.window(r["t0"], r["t1"])
                r.update(round=rnd + 1, moves_max=moves_max, per_shard=per_shard,
                         bin_dir=bin_dir, quiet=quiet)
                log(json.dumps({k: v for k, v in r.items() if k not in ("t0", "t1")}))
                results.append(r)
                write(fx, results)  # after every batch: a run cut short keeps what it measured
    load.stop.set()
    print("| MOVES_MAX / PER_SHARD | batch | moves | wall s | moves/h | peak at once (shard) "
          "| pause p50 / p99 / max ms | bystanders p50 / p99 ms quiet -> during | errors |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if not r["moves"]:
            continue
        q, d = r["quiet"], r["during"]
        f = lambda x: "-" if x is None else f"{x:.0f}"  # noqa: E731
        print(f"| {r['moves_max']} / {r['per_shard']}{' ' + r['bin_dir'] if r['bin_dir'] else ''} | {r['kind']} | {r['moves']} ({r['aborted']} aborted) "
              f"| {r['wall_s']} | {r['moves_per_hour']} | {r['peak_concurrent']} ({r['peak_per_shard']}) "
              f"| {f(r['pause_p50_ms'])} / {f(r['pause_p99_ms'])} / {f(r['pause_max_ms'])} "
              f"| {f(q['p50_ms'])} / {f(q['p99_ms'])} -> {f(d['p50_ms'])} / {f(d['p99_ms'])} "
              f"| {q['errors']} / {d['errors']} |")
    print(f"\nwritten to {OUT}")


if __name__ == "__main__":
    main()
