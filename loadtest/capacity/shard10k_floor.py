#!/usr/bin/env python3
"""PostgreSQL's own floor for the first page of a random database on a shard
of 10,000 against a shard of one (docs/capacity.md, "A shard with 10,000
databases"), after loadtest/capacity/shard10k_fixture.py; the shard node's
figures for the same request are loadtest/capacity/shard10k_bench.py's.

    loadtest/capacity/shard10k_floor.py ENV_FILE [SAMPLE] [LABEL]

Needs psycopg 3 (`pip install 'psycopg[binary]'`). Reads
loadtest/.shard10k-fixture.json (FIXTURE) and the page's SQL from
loadtest/capacity/shard10k_floor.sql (SQL): the one statement the shard
node sends for GET /api/tables/{Items}/records (first page, 100 of 200
records, the Owner link with its lookup and the reverse link from Tasks),
as logged by the template's shard PostgreSQL with log_statement = all for
one request (2026-11-29, 043898e), its ids replaced by placeholders:
@@DB@@, @@TABLE:<table>@@, @@FIELD:<table>.<field>@@ (names of the
fixture's template), filled from the template shard's catalog (`tables`,
`fields`) at start; a clone's statement is the template's with the
routing tag replaced (the clones' ids are the template's with their own
tag). It has no parameters. After a change to the node's page SQL,
capture it again the same way. The node's other statement of a warm request (the database's
schema_version and placement check) and the catalog reads of a cold one
are the node's own and are not part of the floor.

Two sessions, both as the shard's service role (the fixture's DSNs), one
statement at a time, A and B alternating request by request:

  A  ONE persistent session on the clones' shard; for each of SAMPLE (300)
     clone databases the shard node has not served (not in
     loadtest/.shard10k-used.json) and this session has not touched, the
     page's statement for that clone: Parse (named prepared statement),
     then Bind/Execute with binary results, all rows read (what the node's
     prepare_cached + query does on a database none of its sessions has
     served). One clone is served first and left out of the sample (the
     session's own first-use costs, as a pooled session that has served
     other databases).
  B  the template's statement on its own shard (the one-database shard),
     prepared once, executed every time (what the node does for B).

Passes: "cold" (A on clones the session has not touched: catalog
entries loaded, parsed, planned, executed), "replan" (the same clones
again in another order, a new Parse each: catalog entries warm, planned
again), "prepared" (the same clones again, the statements prepared in
"cold" executed: catalog and plan warm). B is the same every time. Each
pass prints one JSON line (p50/p90/p99 of A and B, the p99 ratio, raw
latencies in ms) appended to loadtest/results/capacity/shard10k-floor.jsonl
with LABEL, plus the A session backend's RssAnon (root can read /proc).
"""

import json
import os
import random
import re
import sys
import time

import psycopg
from psycopg.pq import ExecStatus

from common import pct, summary

HERE = os.path.dirname(os.path.abspath(__file__))


def rss_anon_mib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("RssAnon:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None


class Session:
    """One libpq session: named prepared statements, binary results."""

    def __init__(self, dsn):
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.pg = self.conn.pgconn
        self.pid = self.conn.info.backend_pid
        self.n = 0

    def prepare(self, sql):
        self.n += 1
        name = f"p{self.n}"
        r = self.pg.prepare(name.encode(), sql.encode())
        if r.status != ExecStatus.COMMAND_OK:
            raise SystemExit(f"prepare: {r.error_message.decode()}")
        return name

    def execute(self, name):
        r = self.pg.exec_prepared(name.encode(), [], result_format=1)
        if r.status != ExecStatus.TUPLES_OK:
            raise SystemExit(f"execute: {r.error_message.decode()}")
        # Read every value, as a client that decodes the page does.
        rows = r.ntuples
        for i in range(rows):
            for j in range(r.nfields):
                r.get_value(i, j)
        return rows


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sample = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    label = sys.argv[3] if len(sys.argv) > 3 else ""
    fx = json.load(open(os.environ.get("FIXTURE", os.path.join(HERE, "..", ".shard10k-fixture.json"))))
    template_sql = open(os.environ.get("SQL", os.path.join(HERE, "shard10k_floor.sql"))).read().strip()
    used_path = os.path.join(HERE, "..", ".shard10k-used.json")
    used = set(json.load(open(used_path))) if os.path.exists(used_path) else set()
    touched_path = os.path.join(HERE, "..", ".shard10k-floor-touched.json")
    touched = set(json.load(open(touched_path))) if os.path.exists(touched_path) else set()

    t = fx["template"]
    with psycopg.connect(t["dsn"]) as c:
        names = {f"@@TABLE:{n}@@": i for i, n in c.execute(
            "SELECT id, name FROM tables WHERE database_id = %s", (t["database_id"],))}
        names.update({f"@@FIELD:{tn}.{fn}@@": i for i, tn, fn in c.execute(
            "SELECT f.id, t.name, f.name FROM fields f JOIN tables t ON t.id = f.table_id "
            "WHERE f.database_id = %s", (t["database_id"],))})
    names["@@DB@@"] = t["database_id"]
    for placeholder in set(re.findall(r"@@[^@]+@@", template_sql)):
        if placeholder not in names:
            raise SystemExit(f"{placeholder}: not in the template's catalog")
        template_sql = template_sql.replace(placeholder, names[placeholder])

    def sql_for(tag):
        return template_sql.replace(f"_{t['tag']}", f"_{tag}")

    fresh = [d for d in fx["clones"]["databases"] if d not in used and d not in touched]
    random.shuffle(fresh)
    if len(fresh) < sample + 1:
        raise SystemExit(f"only {len(fresh)} clone databases neither served nor touched")
    first, chosen = fresh[0], fresh[1:sample + 1]
    touched.update(fresh[:sample + 1])
    json.dump(sorted(touched), open(touched_path, "w"))

    a = Session(fx["clones"]["dsn"])
    b = Session(fx["template"]["dsn"])
    b_name = b.prepare(sql_for(fx["template"]["tag"]))
    for _ in range(5):
        rows = b.execute(b_name)
    assert rows == 101, rows
    rows = a.execute(a.prepare(sql_for(first[3:8])))
    assert rows == 101, rows
    rss_start = rss_anon_mib(a.pid)

    names = {}
    out = []
    for name, order in (("cold", chosen), ("replan", random.sample(chosen, len(chosen))),
                        ("prepared", random.sample(chosen, len(chosen)))):
        lat_a, lat_b = [], []
        started = time.time()
        for db in order:
            t0 = time.perf_counter()
            if name == "prepared":
                stmt = names[db]
            else:
                stmt = a.prepare(sql_for(db[3:8]))
                names.setdefault(db, stmt)
            rows = a.execute(stmt)
            lat_a.append((time.perf_counter() - t0) * 1000)
            assert rows == 101, rows
            t0 = time.perf_counter()
            b.execute(b_name)
            lat_b.append((time.perf_counter() - t0) * 1000)
        row = {"label": label, "pass": name, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "A_10k": summary(lat_a), "B_1": summary(lat_b),
               "p99_ratio": round(pct(lat_a, 99) / pct(lat_b, 99), 2),
               "p50_ratio": round(pct(lat_a, 50) / pct(lat_b, 50), 2),
               "seconds": round(time.time() - started, 1),
               "a_backend_rss_anon_mib": {"start": rss_start, "now": rss_anon_mib(a.pid)},
               "load": os.getloadavg()[0],
               "raw_ms": {"A": [round(x, 3) for x in lat_a], "B": [round(x, 3) for x in lat_b]}}
        print(json.dumps({k: v for k, v in row.items() if k != "raw_ms"}))
        out.append(row)
    os.makedirs(os.path.join(HERE, "..", "results", "capacity"), exist_ok=True)
    with open(os.path.join(HERE, "..", "results", "capacity", "shard10k-floor.jsonl"), "a") as f:
        for row in out:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
