#!/usr/bin/env python3
"""First-page latency on a shard of 10,000 databases against a shard of one
(docs/capacity.md, "A shard with 10,000 databases"), after
loadtest/capacity/shard10k_fixture.py.

    loadtest/capacity/shard10k_bench.py ENV_FILE [SAMPLE] [LABEL]

Straight to the shard nodes (the router's signed principal, version 2, as
loadtest/k6/sign.js), one keep-alive connection per node, one request at a
time, A and B alternating so both meet the same machine:

  A  GET /api/tables/{Items}/records of a random clone database (first
     page, 100 of its 200 records, with the Owner link and the lookup
     through it) on the shard holding the clones;
  B  the same request on the template, alone on its shard.

Pass "cold": SAMPLE (1,000) clone databases this node has not served since
it started (the bench keeps the list of those it used in
loadtest/.shard10k-used.json: a restarted node empties it with
USED_RESET=1), each once; pass "warm": the same databases again, in
another random order. B is the same request every time. Then the
resident memory of the two shard nodes and of their PostgreSQL backends
(/proc, root or the postgres user) and the schema-cache size if the node
reports it. TOUCH=N then serves N more databases not served yet, THREADS
(3) at a time, and reports the memory again (the node after serving
most of the shard). Prints one JSON line per pass and appends it to
loadtest/results/capacity/shard10k.jsonl with LABEL.

A2_URL: a second shard node serving the clones' shard (another build of
it, started by hand with the first one's environment and another
SHARD_LISTEN): each pass then sends A, A2 (the same request to that node,
on other databases it has not served either) and B in turn, and reports
A2 and its ratio to B too: two builds compared in the same minute. The
used list then holds both nodes' databases (USED_RESET=1 after restarting
both).
"""

import base64
import hashlib
import hmac
import http.client
import json
import os
import random
import subprocess
import sys
import time
import urllib.parse

from common import load_env, pct, summary

HERE = os.path.dirname(os.path.abspath(__file__))


EMPTY = hashlib.sha256(b"").hexdigest()


class Node:
    """One keep-alive connection to a shard node, signing as the router."""

    def __init__(self, url, secret, fx):
        u = urllib.parse.urlparse(url)
        self.host, self.port = u.hostname, u.port
        self.secret = secret.encode()
        self.fx = fx
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)

    def get(self, database_id, path):
        principal = base64.urlsafe_b64encode(json.dumps({
            "user_id": self.fx["user_id"], "key_id": self.fx["key_id"], "access": "read_write",
            "narrowed": False, "database_id": database_id, "role": "owner", "support": False,
        }, separators=(",", ":")).encode()).rstrip(b"=").decode()
        ts = str(int(time.time()))
        text = f"v2\n{ts}\nGET\n{path}\n{EMPTY}\n{principal}"
        headers = {
            "x-cluster-principal": principal, "x-cluster-timestamp": ts,
            "x-cluster-signature-version": "2", "x-cluster-body-sha256": EMPTY,
            "x-cluster-signature": hmac.new(self.secret, text.encode(), hashlib.sha256).hexdigest(),
        }
        start = time.perf_counter()
        try:
            self.conn.request("GET", path, headers=headers)
            r = self.conn.getresponse()
            body = r.read()
        except (http.client.HTTPException, OSError):
            self.conn.close()
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
            raise
        ms = (time.perf_counter() - start) * 1000
        if r.status != 200:
            raise SystemExit(f"{path}: {r.status} {body[:300]!r}")
        return ms, body


def rss_kib(pid):
    out = {}
    try:
        for line in open(f"/proc/{pid}/status"):
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon"):
                out[k] = int(v.split()[0])
    except OSError:
        pass
    return out


def node_pid(env, shard):
    try:
        return int(open(os.path.join(env["DEV_CLUSTER_DIR"], "run", f"{shard}.pid")).read().strip())
    except (OSError, ValueError):
        return None


def backends(dsn):
    """Pids of the shard node's PostgreSQL sessions (application_name
    shard-node...), read as the service role (its own sessions)."""
    out = subprocess.run(["psql", dsn, "-X", "-tA", "-c",
                          "SELECT pid, application_name FROM pg_stat_activity "
                          "WHERE application_name LIKE 'shard-node%' AND pid <> pg_backend_pid()"],
                         capture_output=True, text=True).stdout
    return [(int(p), a) for p, a in (l.split("|", 1) for l in out.split() if "|" in l)]


def memory(env, fx):
    report = {}
    for side, shard, dsn in (("A", fx["clones"]["shard"], fx["clones"]["dsn"]),
                             ("B", fx["template"]["shard"], fx["template"]["dsn"])):
        pid = node_pid(env, shard)
        b = [(p, a, rss_kib(p)) for p, a in backends(dsn)]
        report[side] = {
            "node_rss_mib": round(rss_kib(pid).get("VmRSS", 0) / 1024, 1) if pid else None,
            "backends_rss_anon_mib": sorted(round(r.get("RssAnon", 0) / 1024, 1) for _, a, r in b
                                            if a == "shard-node"),
            "maintenance_rss_anon_mib": sorted(round(r.get("RssAnon", 0) / 1024, 1) for _, a, r in b
                                               if a != "shard-node"),
        }
    return report


def main():
    env = load_env(sys.argv[1])
    sample = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    label = sys.argv[3] if len(sys.argv) > 3 else ""
    fx = json.load(open(os.environ.get("FIXTURE", os.path.join(HERE, "..", ".shard10k-fixture.json"))))
    used_path = os.path.join(HERE, "..", ".shard10k-used.json")
    used = set() if os.environ.get("USED_RESET") == "1" or not os.path.exists(used_path) \
        else set(json.load(open(used_path)))
    t = fx["template"]
    items = t["tables"]["Items"]
    tag = t["tag"]
    a = Node(fx["clones"]["url"], env["CLUSTER_SECRET"], fx)
    b = Node(t["url"], env["CLUSTER_SECRET"], fx)
    fresh = [d for d in fx["clones"]["databases"] if d not in used]
    random.shuffle(fresh)
    a2_url = os.environ.get("A2_URL")
    a2 = Node(a2_url, env["CLUSTER_SECRET"], fx) if a2_url else None
    chosen2 = fresh[sample:2 * sample] if a2 else []
    chosen = fresh[:sample]
    if len(chosen) + len(chosen2) < sample * (2 if a2 else 1):
        raise SystemExit(f"only {len(chosen)} clone databases not served yet (USED_RESET=1 after a restart)")
    b_path = f"/api/tables/{items}/records"

    def a_path(db):
        return f"/api/tables/tbl_{db[3:8]}{items[9:]}/records"

    # One request each so both connections are open and B is warm.
    b.get(t["database_id"], b_path)
    out = []
    passes = (("cold", chosen, chosen2),
              ("warm", random.sample(chosen, len(chosen)), random.sample(chosen2, len(chosen2))))
    for name, order, order2 in passes:
        lat_a, lat_a2, lat_b = [], [], []
        started = time.time()
        for i, db in enumerate(order):
            # With A2, which of A and A2 goes first changes every time.
            if a2 and i % 2:
                ms, _ = a2.get(order2[i], a_path(order2[i]))
                lat_a2.append(ms)
            ms, body = a.get(db, a_path(db))
            lat_a.append(ms)
            if a2 and not i % 2:
                ms, _ = a2.get(order2[i], a_path(order2[i]))
                lat_a2.append(ms)
            ms, _ = b.get(t["database_id"], b_path)
            lat_b.append(ms)
        used.update(chosen)
        used.update(chosen2)
        json.dump(sorted(used), open(used_path, "w"))
        row = {"label": label, "pass": name, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "A_10k": summary(lat_a), "B_1": summary(lat_b),
               "p99_ratio": round(pct(lat_a, 99) / pct(lat_b, 99), 2),
               "seconds": round(time.time() - started, 1), "page_bytes": len(body),
               "memory": memory(env, fx), "served_before": len(used)}
        if a2:
            row["A2_url"] = a2_url
            row["A2_10k"] = summary(lat_a2)
            row["A2_p99_ratio"] = round(pct(lat_a2, 99) / pct(lat_b, 99), 2)
        print(json.dumps(row))
        out.append(row)
    touch = int(os.environ.get("TOUCH", "0"))
    if touch:
        # Every remaining database once, THREADS at a time: the node's
        # schema cache and sessions after serving (nearly) all of them.
        import concurrent.futures
        rest = [d for d in fx["clones"]["databases"] if d not in used][:touch]
        threads = int(os.environ.get("THREADS", "3"))
        nodes = [Node(fx["clones"]["url"], env["CLUSTER_SECRET"], fx) for _ in range(threads)]
        started = time.time()

        def worker(k):
            lat = []
            for db in rest[k::threads]:
                lat.append(nodes[k].get(db, a_path(db))[0])
            return lat

        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            lat = [x for part in pool.map(worker, range(threads)) for x in part]
        used.update(rest)
        json.dump(sorted(used), open(used_path, "w"))
        row = {"label": label, "pass": f"touch x{threads}", "A_10k": summary(lat),
               "seconds": round(time.time() - started, 1), "memory": memory(env, fx),
               "served_before": len(used)}
        print(json.dumps(row))
        out.append(row)
    os.makedirs(os.path.join(HERE, "..", "results", "capacity"), exist_ok=True)
    with open(os.path.join(HERE, "..", "results", "capacity", "shard10k.jsonl"), "a") as f:
        for row in out:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
