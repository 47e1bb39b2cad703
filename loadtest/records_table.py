#!/usr/bin/env python3
"""Markdown table of a records_run.sh console file:
    loadtest/records_table.py loadtest/results/records-run.console.txt
The CPU columns (ms per request: shard node, its PostgreSQL, router, the
load generator: k6 or pgbench) come from the `cpu` line after each line,
when the console has them. After the table, per query and client, the
router line's throughput as a share of the direct line's and of pgbench's,
and the worst p99 (the issue's targets: >= 85 %, >= 1/3, < 25 ms)."""
import json, sys

load, rows = None, []
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("load"):
        load = line.split()[1]
    elif line.startswith("cpu "):
        spent = json.loads(line[4:])["ms_per_request"]
        rows[-1][1] = spent
        # An interleaved line's cpu line covers both of its paths.
        if "interleaved" in rows[-1][0]:
            for row in reversed(rows[:-1]):
                if "interleaved" not in row[0] or row[1] is not None:
                    break
                row[1] = spent
    elif line.startswith("{"):
        rows.append([json.loads(line), None, load])
cpu = any(c for _, c, _ in rows)
head = "| query | path | req/s (pgbench: tps) | median ms | p99 ms |"
head += " CPU ms/req: node / PG / router / client |" if cpu else ""
print(head + " load (1 min) before |")
print("|---" * (head.count("|") - 1 + 1) + "|")
for d, c, load in rows:
    if d["path"] == "pgbench":
        line = f"| {d['query']} | pgbench | {d['tps']:.0f} | {d['avg_ms']:.1f} (avg) | |"
    else:
        tags = [d["tool"]] if "tool" in d else []
        tags += ["interleaved"] if "interleaved" in d else []
        tool = f" ({', '.join(tags)})" if tags else ""
        line = f"| {d['query']} | {d['path']}{tool} | {d['rps']:.0f} | {d['med_ms']:.1f} | {d['p99_ms']:.1f} |"
    if cpu:
        if c:
            client = c.get("k6", c.get("goose", c.get("pgbench", 0)))
            line += f" {c['node']:.2f} / {c['pg']:.2f} / {c['router']:.2f} / {client:.2f} |"
        else:
            line += " |"
    print(f"{line} {load} |")

print()
by = {}
for d, _, _ in rows:
    by.setdefault(d["query"], {})[(d["path"], d.get("tool", "k6"))] = d
for q, lines in by.items():
    pg = next((d["tps"] for (path, _), d in lines.items() if path == "pgbench"), None)
    parts = []
    for tool in ("k6", "goose"):
        r, di = lines.get(("router", tool)), lines.get(("direct", tool))
        if not (r and di):
            continue
        part = f"{tool} router/direct {100 * r['rps'] / di['rps']:.1f} %"
        if pg:
            part += f", router/pgbench {100 * r['rps'] / pg:.0f} %"
        parts.append(part)
    p99 = [d["p99_ms"] for (path, _), d in lines.items() if path != "pgbench"]
    if parts:
        parts.append(f"worst p99 {max(p99):.1f} ms")
        print(f"* {q}: " + "; ".join(parts))
