#!/usr/bin/env python3
"""Fixture of a shard holding N (10,000) tenant databases, for the
measurements of docs/capacity.md, "A shard with 10,000 databases".

    loadtest/capacity/shard10k_fixture.py ENV_FILE [N]

ENV_FILE is the `env` of a dev cluster with at least two shards
(deploy/dev-cluster; BIN_DIR in it names the control-plane binary).

1. Through the router, with a new user and key (control-plane CLI): one
   template database of three tables, "People" (Name, Email; 50 records),
   "Items" (Name, Score, Status single select, Owner a link to People and
   "Owner name" a lookup through it; 200 records each linking one person)
   and "Tasks" (Title, Item a link to Items and "Item name" a lookup;
   100 records): 350 records, two connector tables, the lookups and the
   reverse link fields the API adds. It lands on the shard the control
   plane picks: that shard is the ONE-database side of the comparison.
2. Its whole footprint on that shard, read back: the tenant schema
   (`pg_dump -n`, DDL and rows) and its rows of the shard catalog
   (databases, placements, tables, fields, views, webhooks).
3. N clones on the OTHER shard (the one with the most databases already
   is not chosen: the first shard that is not the template's): for each,
   a routing tag from the control plane's own counter
   (`nextval('database_tag_counter')`, the bijection of
   protocol/src/ids.rs), every tagged id of the template (db_, tbl_, fld_,
   viw_, rec_, ...) renamed to carry the new tag (the 7 characters after
   the tag are kept: ids stay unique because tags are), the database named
   "shard10k NNNNN". The SQL is the template's text with the tag replaced,
   run as the shard's own service role (so every object has the owner the
   shard node gives it), 50 databases per transaction, PARALLEL (4)
   sessions at once. Then the control
   plane's rows: `databases` (active, epoch 1, the next positions) and the
   owner's `memberships`, in one transaction that also bumps the owner's
   access version, and the version's Redis key deleted (what a membership
   change does): routers find them like any database, the shard node
   serves them like its own.

Writes loadtest/.shard10k-fixture.json: token, user and key ids, the
template (one-database shard, its URL and DSN), the clone shard (URL, DSN),
the table ids of the template and the list of clone database ids.
The catalog rows of the clones are those of the template, so the same
request (first page of Items) works on any of them with the ids renamed.

Rerunnable: each run makes a new user and template and N more clones.
"""

import json
import os
import subprocess
import sys
import time
import urllib.request

from common import load_env

ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
TAG_SPACE = 916_132_832
TAG_MULTIPLIER = 387_420_489
TAG_OFFSET = 123_456_789
TAGGED_PREFIXES = ("db", "tbl", "fld", "viw", "rec", "att", "whk", "dlv", "cmt", "shl")
CATALOG = [  # shard catalog table, the column naming the database
    ("databases", "id"),
    ("placements", "database_id"),
    ("tables", "database_id"),
    ("fields", "database_id"),
    ("views", "database_id"),
    ("webhooks", "database_id"),
]
BATCH = 50


def tag_for_counter(counter):
    """protocol/src/ids.rs tag_for_counter."""
    n = ((counter % TAG_SPACE) * TAG_MULTIPLIER + TAG_OFFSET) % TAG_SPACE
    out = []
    for _ in range(5):
        out.append(ALPHABET[n % 62])
        n //= 62
    return "".join(reversed(out))


def run(cmd, input=None, env=None):
    r = subprocess.run(cmd, input=input, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r.stdout


def psql(dsn, sql):
    """Runs `sql` (on stdin: it may be long) and returns its unaligned rows."""
    return run(["psql", dsn, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-tA", "-f", "-"], input=sql)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    env = load_env(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    here = os.path.dirname(os.path.abspath(__file__))
    out_path = os.environ.get("OUT", os.path.join(here, "..", ".shard10k-fixture.json"))
    cp = os.path.join(env["BIN_DIR"], "control-plane")
    cp_env = dict(os.environ, CONTROL_PLANE_URL=env["CONTROL_PLANE_URL"],
                  CONTROL_PLANE_TOKEN=env["CONTROL_PLANE_TOKEN"])

    def cpl(*args):
        return json.loads(run([cp, *args, "--json"], env=cp_env))

    user = cpl("users", "create", "--email", f"shard10k-{int(time.time())}-{os.getpid()}@example.com")
    user_id = user.get("id") or user["user"]["id"]
    key = cpl("keys", "create", "--user", user_id, "--name", "shard10k")
    token = key["token"]
    key_id = key.get("id") or key["key"]["id"]

    def api(method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(env["ROUTER_URL"] + path, data=data, method=method, headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())

    # 1. The template, through the API.
    db = api("POST", "/api/databases", {"name": "shard10k template"})["database"]["id"]
    tag = db[3:8]

    def table(name):
        return api("POST", f"/api/databases/{db}/tables", {"name": name})["table"]["id"]

    def field(tbl, body):
        return api("POST", f"/api/tables/{tbl}/fields", body)["field"]["id"]

    def records(tbl, items):
        ids = []
        for i in range(0, len(items), 100):
            got = api("POST", f"/api/tables/{tbl}/records", {"records": items[i:i + 100]})
            ids += [r["id"] for r in got["records"]]
        return ids

    people = table("People")
    field(people, {"name": "Name", "type": "single_line_text"})
    field(people, {"name": "Email", "type": "email"})
    items = table("Items")
    field(items, {"name": "Name", "type": "single_line_text"})
    field(items, {"name": "Score", "type": "number"})
    field(items, {"name": "Status", "type": "single_select", "options": {
        "choices": [{"name": "todo"}, {"name": "doing"}, {"name": "done"}]}})
    owner = field(items, {"name": "Owner", "type": "link", "options": {"target_table_id": people}})
    person_name = next(f["id"] for f in api("GET", f"/api/tables/{people}")["table"]["fields"]
                       if f["name"] == "Name")
    field(items, {"name": "Owner name", "type": "lookup", "options": {
        "link_field_id": owner, "target_field_id": person_name}})
    tasks = table("Tasks")
    field(tasks, {"name": "Title", "type": "single_line_text"})
    item_link = field(tasks, {"name": "Item", "type": "link", "options": {"target_table_id": items}})
    item_name = next(f["id"] for f in api("GET", f"/api/tables/{items}")["table"]["fields"]
                     if f["name"] == "Name")
    field(tasks, {"name": "Item name", "type": "lookup", "options": {
        "link_field_id": item_link, "target_field_id": item_name}})
    person_ids = records(people, [{"fields": {"Name": f"Person {i}", "Email": f"p{i}@example.com"}}
                                  for i in range(50)])
    item_ids = records(items, [{"fields": {"Name": f"Item {i}", "Score": (i * 7919) % 1000,
                                           "Status": ["todo", "doing", "done"][i % 3],
                                           "Owner": [person_ids[i % 50]]}} for i in range(200)])
    records(tasks, [{"fields": {"Title": f"Task {i}", "Item": [item_ids[i % 200]]}} for i in range(100)])

    placement = cpl("databases", "show", db)
    template_shard = placement.get("shard") or placement["database"]["shard"]
    shards = {s["name"]: s for s in cpl("shards", "list")["shards"]}
    target = next(name for name in sorted(shards) if name != template_shard)
    src_dsn, dst_dsn = shards[template_shard]["postgres"], shards[target]["postgres"]
    print(f"template {db} (tag {tag}) on {template_shard}; {n} clones onto {target}", file=sys.stderr)

    # 2. The template's footprint on its shard.
    dump = run(["pg_dump", src_dsn, "-n", f"\"{db}\"", "--no-owner", "--no-privileges"])
    dump = "\n".join(l for l in dump.splitlines()
                     if not l.startswith(("SET ", "SELECT pg_catalog.set_config", "\\restrict", "\\unrestrict")))
    catalog = []
    for tbl, col in CATALOG:
        rows = run(["psql", src_dsn, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c",
                    f"COPY (SELECT * FROM {tbl} WHERE {col} = '{db}') TO STDOUT"])
        if rows:
            catalog.append(f"COPY public.{tbl} FROM stdin;\n{rows}\\.\n")
    template = "\n".join(catalog) + "\n" + dump + "\n"
    # The databases row: its tag column, name and position are set per clone.
    for p in TAGGED_PREFIXES:
        template = template.replace(f"{p}_{tag}", f"{p}_@@TAG@@")
    template = template.replace(f"\t{tag}\tshard10k template\t", "\t@@TAG@@\t@@NAME@@\t")
    assert template.count("@@NAME@@") == 1, "the databases row was not found"
    if tag in template:
        sys.exit(f"the template's tag {tag} is still in its SQL somewhere")

    # 3. The clones: tags and positions from the control plane.
    cp_dsn = env["CONTROL_PLANE_DATABASE_URL"]
    counters = [int(x) for x in psql(cp_dsn, f"SELECT nextval('database_tag_counter') FROM generate_series(1, {n})").split()]
    first_pos = int(psql(cp_dsn, "SELECT COALESCE(max(position), -1) + 1 FROM databases").strip())
    suffix = db[8:]
    clones = []
    start = time.time()
    # PARALLEL (4) psql sessions, clone i on session i % PARALLEL: on a
    # busy machine one stream of DDL gets one core's share at best.
    parallel = int(os.environ.get("PARALLEL", "4"))
    procs = [subprocess.Popen(["psql", dst_dsn, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-o", "/dev/null"],
                              stdin=subprocess.PIPE, text=True) for _ in range(parallel)]
    for i, counter in enumerate(counters):
        new = tag_for_counter(counter)
        proc, k = procs[i % parallel], i // parallel
        if k % BATCH == 0:
            proc.stdin.write("BEGIN;\nSET LOCAL synchronous_commit = off;\n")
        sql = template.replace("@@TAG@@", new).replace("@@NAME@@", f"shard10k {i:05d}")
        proc.stdin.write(sql)
        clones.append((f"db_{new}{suffix}", new, first_pos + i))
        if k % BATCH == BATCH - 1 or i >= n - parallel:
            proc.stdin.write("COMMIT;\n")
            proc.stdin.flush()
        if i % 500 == 499:
            print(f"  {i + 1} clones written ({time.time() - start:.0f} s)", file=sys.stderr)
    for proc in procs:
        proc.stdin.close()
    if any(proc.wait() != 0 for proc in procs):
        sys.exit("psql on the clone shard failed")
    # Shard-side positions like the control plane's (list order).
    values = ",".join(f"('{cid}',{pos})" for cid, _, pos in clones)
    psql(dst_dsn, f"UPDATE databases d SET position = v.pos FROM (VALUES {values}) AS v(id, pos) WHERE d.id = v.id")
    built = time.time() - start
    rows = "\n".join(f"{cid}\t{t}\t{user_id}\t{target}\tactive\t{pos}\t1" for cid, t, pos in clones)
    members = "\n".join(f"{cid}\t{user_id}\towner" for cid, _, _ in clones)
    run(["psql", cp_dsn, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-1", "-f", "-"], input=(
        "COPY databases (id, tag, owner_id, shard, state, position, epoch) FROM stdin;\n"
        f"{rows}\n\\.\n"
        "COPY memberships (database_id, user_id, role) FROM stdin;\n"
        f"{members}\n\\.\n"
        f"UPDATE users SET access_version = access_version + 1 WHERE id = '{user_id}';\n"))
    # As a membership change does: routers holding the user's access (the
    # template's requests) read it again once its version is gone.
    run(["redis-cli", "-u", env["REDIS_URL"], "DEL", f"cluster:user:{user_id}"])
    print(f"{n} clones in {built:.0f} s", file=sys.stderr)
    json.dump({
        "token": token, "user_id": user_id, "key_id": key_id,
        "template": {"database_id": db, "tag": tag, "shard": template_shard,
                     "url": shards[template_shard]["url"], "dsn": src_dsn,
                     "tables": {"People": people, "Items": items, "Tasks": tasks}},
        "clones": {"shard": target, "url": shards[target]["url"], "dsn": dst_dsn,
                   "databases": [cid for cid, _, _ in clones], "seconds": round(built)},
    }, open(out_path, "w"))
    print(f"wrote {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
