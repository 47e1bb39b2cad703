#!/usr/bin/env python3
"""Summarises records_ab.sh's console: per query and build, the median of
the lines' medians, p99s and rates, and B against A (B's median latency
over A's, in per cent; under 102 % meets "no more than 2 % slower")."""
import json
import statistics
import sys
from collections import defaultdict

rows = defaultdict(list)
for line in open(sys.argv[1] if len(sys.argv) > 1 else "loadtest/results/records-ab.console.txt"):
    parts = line.split(" ", 2)
    if len(parts) == 3 and parts[0] in ("A", "B") and parts[2].startswith("{"):
        d = json.loads(parts[2])
        rows[(d["query"], parts[0])].append(d)

print("| query | build | lines | req/s | median ms | p99 ms | B/A median |")
print("|---|---|---|---|---|---|---|")
for q in dict.fromkeys(k[0] for k in rows):
    med = {}
    for b in ("A", "B"):
        ds = rows.get((q, b), [])
        if not ds:
            continue
        med[b] = statistics.median(d["med_ms"] for d in ds)
        rps = statistics.median(d["rps"] for d in ds)
        p99 = statistics.median(d["p99_ms"] for d in ds)
        ratio = f"{100 * med['B'] / med['A']:.1f} %" if b == "B" and "A" in med else ""
        print(f"| {q} | {b} | {len(ds)} | {rps:.0f} | {med[b]:.2f} | {p99:.2f} | {ratio} |")
