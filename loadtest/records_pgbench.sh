#!/usr/bin/env bash
# The SQL equivalents of the records benchmark, straight on the shard's
# PostgreSQL: pgbench, CLIENTS (8) clients, 2 threads, DURATION (20) s each.
#   loadtest/records_pgbench.sh            (after records_setup.sh)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dsn="$(jq -er .shard_dsn "$here/.records-fixture.json")"
for s in first deep filter_sort; do
  echo "== $s"
  pgbench -n -c "${CLIENTS:-8}" -j 2 -T "${DURATION:-20}" -f "$here/pgbench/generated/$s.sql" "$dsn" 2>&1 |
    grep -E '^(tps|latency average|number of failed)'
done
