#!/usr/bin/env python3
"""Issue 27, sections 1 and 2: how much one import raises the peak resident
memory (VmHWM) of the shard node holding the database.

    loadtest/import_memory.py [ENV_FILE] [case ...]

ENV_FILE defaults to .dev-cluster-bench/env (a running dev cluster, see
README "Running"). Before each case the node's VmHWM is reset to its
current RSS (`echo 5 > /proc/PID/clear_refs`, needs root); after it, the
growth is VmHWM minus the RSS before. Cases (all by default):

* tall_csv: preview of 9,000,000 one-letter lines (18 MB; refused at the
  50,000-row ceiling);
* wide_csv_preview / wide_csv_run: a 20 MB CSV of 50,000 rows x 40
  columns, previewed, then imported into a new table (every column text);
* grid_xlsx: preview of the 1.6 KB .xlsx with cells at A1 and XFD1048576;
* big_xlsx: preview of an .xlsx near the caps (50,000 rows x 40 columns,
  numbers and shared strings, written here with zipfile).

Figures are printed and written to results/import_memory.json (OUT).
"""

import io
import json
import os
import random
import re
import subprocess
import sys
import time
import zipfile

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


def cli(env, *args):
    out = subprocess.run(
        [os.path.join(env["BIN_DIR"], "control-plane"), *args, "--json"],
        env={**os.environ, "CONTROL_PLANE_URL": env["CONTROL_PLANE_URL"],
             "CONTROL_PLANE_TOKEN": env["CONTROL_PLANE_TOKEN"]},
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {key} for {pid}")


def shard_pid(env, database_id):
    shard = cli(env, "databases", "show", database_id)["shard"]
    path = os.path.join(env["DEV_CLUSTER_DIR"], "run", f"{shard}.pid")
    return int(open(path).read())


def tall_csv():
    return "tall.csv", b"a\n" * 9_000_000


def wide_csv():
    rnd = random.Random(27)
    out = io.StringIO()
    out.write(",".join(f"c{i}" for i in range(40)) + "\n")
    for r in range(50_000):
        out.write(",".join(f"{rnd.randrange(10**8, 10**9)}" for _ in range(40)) + "\n")
    data = out.getvalue().encode()
    assert len(data) <= 20 * MB, len(data)
    return "wide.csv", data


def xlsx(sheet_data, shared=None):
    rels = "http://schemas.openxmlformats.org/package/2006/relationships"
    doc = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("_rels/.rels", f'<Relationships xmlns="{rels}"><Relationship Id="rId1" '
                   f'Type="{doc}/officeDocument" Target="xl/workbook.xml"/></Relationships>')
        z.writestr("xl/workbook.xml", f'<workbook xmlns="{main}" xmlns:r="{doc}"><sheets>'
                   f'<sheet name="S" sheetId="1" r:id="rId1"/></sheets></workbook>')
        z.writestr("xl/_rels/workbook.xml.rels", f'<Relationships xmlns="{rels}"><Relationship '
                   f'Id="rId1" Type="{doc}/worksheet" Target="worksheets/sheet1.xml"/>'
                   f'</Relationships>')
        if shared is not None:
            sis = "".join(f"<si><t>{s}</t></si>" for s in shared)
            z.writestr("xl/sharedStrings.xml", f'<sst xmlns="{main}" count="{len(shared)}" '
                       f'uniqueCount="{len(shared)}">{sis}</sst>')
        z.writestr("xl/worksheets/sheet1.xml",
                   f'<worksheet xmlns="{main}"><sheetData>{sheet_data}</sheetData></worksheet>')
    return buf.getvalue()


def grid_xlsx():
    data = ('<row r="1"><c r="A1" t="inlineStr"><is><t>a</t></is></c></row>'
            '<row r="1048576"><c r="XFD1048576"><v>1</v></c></row>')
    return "grid.xlsx", xlsx(data)


def col(i):
    s = ""
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        s = chr(65 + r) + s
    return s


def big_xlsx():
    rnd = random.Random(27)
    shared = [f"name {i}" for i in range(200_000)]
    rows = ['<row r="1">' + "".join(
        f'<c r="{col(c)}1" t="inlineStr"><is><t>h{c}</t></is></c>' for c in range(40)) + "</row>"]
    for r in range(2, 50_002):
        cells = []
        for c in range(40):
            if c % 4 == 0:
                cells.append(f'<c r="{col(c)}{r}" t="s"><v>{rnd.randrange(len(shared))}</v></c>')
            else:
                cells.append(f'<c r="{col(c)}{r}"><v>{rnd.randrange(10**6)}</v></c>')
        rows.append(f'<row r="{r}">' + "".join(cells) + "</row>")
    return "big.xlsx", xlsx("".join(rows), shared)


def post(env, token, db, filename, data, target=None, plan=None):
    files = {"file": (filename, data)}
    if target is not None:
        files["target"] = (None, json.dumps(target))
        files["plan"] = (None, json.dumps(plan))
    return requests.post(f'{env["ROUTER_URL"]}/api/databases/{db}/import', files=files,
                         headers={"Authorization": f"Bearer {token}"}, timeout=600)


def measure(env, token, db, name, make, run=False):
    filename, data = make()
    pid = shard_pid(env, db)
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")
    before = status_kib(pid, "VmRSS")
    target = plan = None
    if run:
        target = {"mode": "new_table", "name": f"{name}-{time.time_ns()}"}
        plan = [{"columnIndex": i, "action": {"kind": "create", "name": f"c{i}",
                                              "costume": "single_line_text"}}
                for i in range(40)]
    start = time.perf_counter()
    try:
        r = post(env, token, db, filename, data, target, plan)
        status, reply = r.status_code, r.text[:160]
    except requests.RequestException as e:
        status, reply = None, str(e)[:160]
    took = time.perf_counter() - start
    figure = {"case": name, "file_bytes": len(data), "status": status, "reply": reply,
              "seconds": round(took, 2), "rss_before_mib": round(before / 1024, 1)}
    try:
        peak = status_kib(pid, "VmHWM")
        figure.update(peak_mib=round(peak / 1024, 1),
                      peak_growth_mib=round((peak - before) / 1024, 1))
    except (OSError, RuntimeError):
        figure["node"] = "died"
    print(json.dumps(figure), flush=True)
    return figure


CASES = {
    "tall_csv": (tall_csv, False),
    "wide_csv_preview": (wide_csv, False),
    "wide_csv_run": (wide_csv, True),
    "grid_xlsx": (grid_xlsx, False),
    "big_xlsx": (big_xlsx, False),
}


def main():
    args = sys.argv[1:]
    env_path = args.pop(0) if args and os.path.exists(args[0]) else \
        os.path.join(ROOT, ".dev-cluster-bench", "env")
    env = load_env(env_path)
    user = cli(env, "users", "create", "--email", f"imem-{time.time_ns()}@example.com")
    token = cli(env, "keys", "create", "--user", user["id"], "--name", "imem")["token"]
    db = requests.post(f'{env["ROUTER_URL"]}/api/databases', json={"name": "imem"},
                       headers={"Authorization": f"Bearer {token}"}).json()
    db = db.get("id") or db["database"]["id"]
    figures = [measure(env, token, db, name, *CASES[name]) for name in (args or CASES)]
    out = os.environ.get("OUT", os.path.join(HERE, "results", "import_memory.json"))
    with open(out, "w") as f:
        json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
