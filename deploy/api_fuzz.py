"""Runs schemathesis against a running cluster with router/openapi.json.

deploy/api-fuzz installs schemathesis and calls this with the cluster's env
file. It makes a fixture database through the API (tables, fields, records,
views, webhooks, a delivery) so generated requests reach real resources,
not only 404s, gives every operation's path parameters those ids (a
deleting operation gets ids of its own, so it cannot take the others'
resources away), runs schemathesis with the checks below, and prints one
line per operation: `ok <operation>` or `FAILED <operation>` (details on
stderr). Exit status 1 when an operation failed or the run broke.

Checks: no 5xx (`not_a_server_error`), every status, content type, header
and body documented (`status_code_conformance`, `content_type_conformance`,
`response_headers_conformance`, `response_schema_conformance`).

The demo key's budget is 600 requests a minute (part C): the run stays
under it (`FUZZ_RATE`, default 9/s), so a 429 is rare, and documented.
Knobs: FUZZ_MAX_EXAMPLES (default 10), FUZZ_RATE, FUZZ_SEED,
FUZZ_REPORT_DIR (default a temporary directory).
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET

CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
    ]
)


def read_env(path):
    env = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("export "):
                line = line[len("export ") :]
            if "=" in line and not line.startswith("#"):
                k, v = line.split("=", 1)
                env[k] = v.strip().strip("'\"")
    return env


class Api:
    def __init__(self, base, key):
        self.base = base.rstrip("/")
        self.key = key

    def call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.key}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for attempt in range(20):
            try:
                with urllib.request.urlopen(req, timeout=60) as resp:
                    return json.loads(resp.read() or b"null")
            except urllib.error.HTTPError as e:
                if e.code == 429 and attempt < 19:
                    time.sleep(float(e.headers.get("Retry-After", "1")))
                    continue
                raise SystemExit(
                    f"api-fuzz: fixture {method} {path} answered {e.code}: {e.read()[:300]!r}"
                )
        raise SystemExit(f"api-fuzz: fixture {method} {path}: rate limited")


def fixture(api):
    """The resources the generated requests are pointed at."""
    ids = {}
    db = api.call("POST", "/api/databases", {"name": "schemathesis fixture"})["database"]["id"]
    ids["db"] = db
    tbl = api.call("POST", f"/api/databases/{db}/tables", {"name": "Things"})["table"]["id"]
    ids["tbl"] = tbl
    ids["tbl_del"] = api.call("POST", f"/api/databases/{db}/tables", {"name": "Doomed"})["table"]["id"]
    fields = [
        {"name": "Name", "type": "single_line_text"},
        {"name": "Amount", "type": "number"},
        {
            "name": "Status",
            "type": "single_select",
            "options": {"choices": [{"name": "Open"}, {"name": "Done"}]},
        },
        {"name": "Due", "type": "date"},
        {"name": "Files", "type": "attachment"},
        {"name": "Patched", "type": "single_line_text"},
        {"name": "Doomed", "type": "number"},
    ]
    made = {}
    for f in fields:
        made[f["name"]] = api.call("POST", f"/api/tables/{tbl}/fields", f)["field"]["id"]
    ids["fld"] = made["Patched"]
    ids["fld_del"] = made["Doomed"]
    records = api.call(
        "POST",
        f"/api/tables/{tbl}/records",
        {
            "records": [
                {"fields": {"Name": "alpha", "Amount": 1, "Status": "Open", "Due": "2026-01-02"}},
                {"fields": {"Name": "beta", "Amount": 2.5, "Status": "Done"}},
                {"fields": {"Name": "gamma"}},
            ]
        },
    )["records"]
    ids["rec"] = records[0]["id"]
    ids["viw"] = api.call("POST", f"/api/tables/{tbl}/views", {"name": "Grid"})["view"]["id"]
    ids["viw_del"] = api.call("POST", f"/api/tables/{tbl}/views", {"name": "Doomed"})["view"]["id"]
    hook = {"url": "http://127.0.0.1:9/hook", "trigger_type": "record_created", "table_id": tbl}
    ids["whk"] = api.call("POST", f"/api/databases/{db}/webhooks", hook)["webhook"]["id"]
    ids["whk_del"] = api.call("POST", f"/api/databases/{db}/webhooks", hook)["webhook"]["id"]
    comments = f"/api/tables/{tbl}/records/{ids['rec']}/comments"
    ids["cmt"] = api.call("POST", comments, {"text": "first"})["comment"]["id"]
    ids["cmt_del"] = api.call("POST", comments, {"text": "doomed"})["comment"]["id"]
    share = api.call("POST", f"/api/views/{ids['viw']}/shares")["share"]
    ids["share_token"] = share["token"]
    ids["shl_del"] = api.call("POST", f"/api/views/{ids['viw']}/shares")["share"]["id"]
    # One delivery to replay: a create enqueues it.
    api.call("POST", f"/api/tables/{tbl}/records", {"records": [{"fields": {"Name": "hook"}}]})
    for _ in range(50):
        log = api.call("GET", f"/api/webhooks/{ids['whk']}/deliveries")
        if log.get("deliveries"):
            ids["dlv"] = log["deliveries"][0]["delivery_id"]
            break
        time.sleep(0.2)
    return ids


def operation_parameters(ids, user_id):
    """Path parameters per operationId (router/openapi.json)."""
    db = {"path.id": ids["db"]}
    tbl = {"path.id": ids["tbl"]}
    rec = {"path.id": ids["tbl"], "path.rid": ids["rec"]}
    whk = {"path.id": ids["whk"]}
    params = {
        "updateDatabase": db,
        "deleteDatabase": db,
        "importFile": db,
        "listTables": db,
        "createTable": db,
        "exportDatabase": db,
        "listWebhooks": db,
        "createWebhook": db,
        "getTable": tbl,
        "renameTable": tbl,
        "deleteTable": {"path.id": ids["tbl_del"]},
        "listFields": tbl,
        "createField": tbl,
        "listViews": tbl,
        "createView": tbl,
        "listRecords": tbl,
        "createRecords": tbl,
        "updateRecords": tbl,
        "upsertRecords": tbl,
        "trashRecords": tbl,
        "listRecordsPost": tbl,
        "listTrash": tbl,
        "restoreRecords": tbl,
        "purgeRecords": tbl,
        "uploadAttachment": tbl,
        "getRecord": rec,
        "pressButton": rec,
        "updateField": {"path.id": ids["fld"]},
        "deleteField": {"path.id": ids["fld_del"]},
        "updateView": {"path.id": ids["viw"]},
        "deleteView": {"path.id": ids["viw_del"]},
        "getWebhook": whk,
        "updateWebhook": whk,
        "regenerateWebhookSecret": whk,
        "testWebhook": whk,
        "listDeliveries": whk,
        "deleteWebhook": {"path.id": ids["whk_del"]},
        "listMembers": db,
        "addMember": db,
        # The demo user, the database's one owner: demoting or removing the
        # last owner is refused, so the fixture stays usable.
        "changeMemberRole": {"path.id": ids["db"], "path.user_id": user_id},
        "removeMember": {"path.id": ids["db"], "path.user_id": user_id},
        "listComments": rec,
        "createComment": rec,
        "updateComment": {"path.id": ids["cmt"]},
        "deleteComment": {"path.id": ids["cmt_del"]},
        "listShareLinks": {"path.id": ids["viw"]},
        "createShareLink": {"path.id": ids["viw"]},
        "deleteShareLink": {"path.id": ids["shl_del"]},
        "readShareLink": {"path.token": ids["share_token"]},
    }
    if "dlv" in ids:
        params["replayDelivery"] = {"path.id": ids["whk"], "path.delivery_id": ids["dlv"]}
    return params


def toml_string(s):
    return json.dumps(s)


def config(ids, user_id):
    lines = []
    for op, params in operation_parameters(ids, user_id).items():
        lines.append("[[operations]]")
        lines.append(f"include-operation-id = {toml_string(op)}")
        inner = ", ".join(f"{toml_string(k)} = {toml_string(v)}" for k, v in params.items())
        lines.append(f"parameters = {{ {inner} }}")
        lines.append("")
    return "\n".join(lines)


def results(junit_path):
    """(operation, failure text or None) per test case of the JUnit report."""
    out = []
    root = ET.parse(junit_path).getroot()
    for case in root.iter("testcase"):
        problems = [
            (p.get("message") or "") + "\n" + (p.text or "")
            for p in list(case)
            if p.tag in ("failure", "error")
        ]
        out.append((case.get("name"), "\n".join(problems) if problems else None))
    return out


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: api_fuzz.py <cluster env file> <schemathesis binary>")
    env = read_env(sys.argv[1])
    st = sys.argv[2]
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    base, key = env["ROUTER_URL"], env["DEMO_API_KEY"]
    api = Api(base, key)
    ids = fixture(api)
    work = os.environ.get("FUZZ_REPORT_DIR") or tempfile.mkdtemp(prefix="api-fuzz-")
    os.makedirs(work, exist_ok=True)
    cfg = os.path.join(work, "schemathesis.toml")
    with open(cfg, "w", encoding="utf-8") as f:
        f.write(config(ids, env["DEMO_USER_ID"]))
    junit = os.path.join(work, "junit.xml")
    cmd = [
        st,
        "--config-file",
        cfg,
        "run",
        os.path.join(repo, "router", "openapi.json"),
        "--url",
        base,
        "-H",
        f"Authorization: Bearer {key}",
        "--checks",
        CHECKS,
        "--rate-limit",
        os.environ.get("FUZZ_RATE", "9/s"),
        "--max-examples",
        os.environ.get("FUZZ_MAX_EXAMPLES", "10"),
        "--phases",
        "examples,coverage,fuzzing",
        # One worker: CPython 3.11's ast module is not thread-safe, and
        # hypothesis parses sources with it ("AST constructor recursion
        # depth mismatch" with two).
        "--workers",
        "1",
        "--request-timeout",
        "60",
        "--continue-on-failure",
        "--suppress-health-check",
        "all",
        "--report",
        "junit",
        "--report-junit-path",
        junit,
    ]
    if os.environ.get("FUZZ_SEED"):
        cmd += ["--seed", os.environ["FUZZ_SEED"]]
    print(f"api-fuzz: schemathesis against {base} (report: {work})", file=sys.stderr)
    # In the report directory: schemathesis keeps a cache (.schemathesis/) in
    # its working directory.
    run = subprocess.run(cmd, cwd=work, stdout=sys.stderr, stderr=sys.stderr)
    if not os.path.exists(junit):
        print(f"FAILED schemathesis run (exit {run.returncode}, no report)")
        return 1
    failed = 0
    for name, problem in results(junit):
        if problem is None:
            print(f"ok schemathesis {name}")
        else:
            failed += 1
            print(f"FAILED schemathesis {name}")
            print("  " + problem.strip().replace("\n", "\n  ")[:4000], file=sys.stderr)
    if run.returncode != 0 and failed == 0:
        print(f"FAILED schemathesis run (exit {run.returncode})")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
