#!/usr/bin/env python3
"""Markdown table of a records_run.sh console file:
    loadtest/records_table.py loadtest/results/records-run.console.txt
The CPU columns (ms per request: shard node, its PostgreSQL, router, the
load generator: k6 or pgbench) come from the `cpu` line after each line,
when the console has them."""
import json, sys

load, rows = None, []
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("load"):
        load = line.split()[1]
    elif line.startswith("cpu "):
        rows[-1][1] = json.loads(line[4:])["ms_per_request"]
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
        tool = f" ({d['tool']})" if "tool" in d else ""
        line = f"| {d['query']} | {d['path']}{tool} | {d['rps']:.0f} | {d['med_ms']:.1f} | {d['p99_ms']:.1f} |"
    if cpu:
        if c:
            client = c.get("k6", c.get("goose", c.get("pgbench", 0)))
            line += f" {c['node']:.2f} / {c['pg']:.2f} / {c['router']:.2f} / {client:.2f} |"
        else:
            line += " |"
    print(f"{line} {load} |")
