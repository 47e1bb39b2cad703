#!/usr/bin/env python3
"""Markdown table of a records_run.sh console file:
    loadtest/records_table.py loadtest/results/records-run.console.txt"""
import json, sys

load = None
print("| query | path | req/s (pgbench: tps) | median ms | p99 ms | load (1 min) before |")
print("|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("load"):
        load = line.split()[1]
    elif line.startswith("{"):
        d = json.loads(line)
        if d["path"] == "pgbench":
            print(f"| {d['query']} | pgbench | {d['tps']:.0f} | {d['avg_ms']:.1f} (avg) | | {load} |")
        else:
            print(f"| {d['query']} | {d['path']} | {d['rps']:.0f} | {d['med_ms']:.1f} | {d['p99_ms']:.1f} | {load} |")
