#!/usr/bin/env bash
# The SQL equivalents of the records benchmark, straight on the shard's
# PostgreSQL: first captures the exact statements the shard node runs for
# each query (records_sql.py: deferred join, keyset bookmark, parameters
# inlined), then pgbench, CLIENTS (8) clients, 2 threads, DURATION (20) s
# each.
#   loadtest/records_pgbench.sh [ENV_FILE]   (after records_setup.sh)
#   QUERIES="first deep" CAPTURE=0 ...      (reuse pgbench/generated/)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
env_file="${1:-$root/.dev-cluster/env}"
dsn="$(jq -er .shard_dsn "$here/.records-fixture.json")"
[[ "${CAPTURE:-1}" == 1 ]] && python3 "$here/records_sql.py" "$env_file"
for s in ${QUERIES:-first deep filter filter_sort sort_deep}; do
  echo "== $s (load $(cut -d' ' -f1 /proc/loadavg))"
  pgbench -n -M prepared -c "${CLIENTS:-8}" -j 2 -T "${DURATION:-20}" -f "$here/pgbench/generated/$s.sql" "$dsn" 2>&1 |
    grep -E '^(tps|latency average|number of failed)'
done
