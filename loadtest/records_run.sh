#!/usr/bin/env bash
# The records benchmark side by side in one run: for each query, k6 through
# the router, k6 straight to the shard node, then pgbench with the SQL the
# shard node runs for it (captured first by records_sql.py), each preceded
# by the load average; the create batches last (they add records).
#
#   loadtest/records_run.sh [ENV_FILE]      (after records_setup.sh)
#
# Knobs: VUS (8), DURATION (10s, k6 and pgbench alike), QUERIES
# ("first deep filter filter_sort sort_deep"), CREATE (1), PGBENCH (1; 0
# skips the SQL capture and pgbench, e.g. to compare shard-node builds),
# OUT (console copy, default results/records-run.console.txt).
# Console copy: loadtest/results/records-run.console.txt; k6 JSON per line
# in loadtest/results/records-<path>-<query>.json.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
env_file="${1:-$root/.dev-cluster/env}"
set -a; . "$env_file"; set +a
VUS="${VUS:-8}"; DURATION="${DURATION:-10s}"
dsn="$(jq -er .shard_dsn "$here/.records-fixture.json")"
out="${OUT:-$here/results/records-run.console.txt}"
cd "$root"
if [[ "${PGBENCH:-1}" == 1 ]]; then
  python3 "$here/records_sql.py" "$env_file"
  mkdir -p "$here/results/records-sql"
  cp "$here"/pgbench/generated/*.sql "$here/results/records-sql/"
fi
{
  echo "run $(date -u +%FT%TZ) HEAD $(git rev-parse --short HEAD) shard-node $(sha256sum "${DEV_CLUSTER_BIN_DIR:-$BIN_DIR}/shard-node" 2>/dev/null | cut -c1-12) nproc $(nproc) rustc procs $(pgrep -c rustc || true)"
  for q in ${QUERIES:-first deep filter filter_sort sort_deep}; do
    for p in router direct; do
      echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
      k6 run -q -e FIXTURE="$here/.records-fixture.json" -e ROUTER_URL="$ROUTER_URL" \
        -e CLUSTER_SECRET="$CLUSTER_SECRET" -e PATH_KIND="$p" -e QUERY="$q" -e VUS="$VUS" \
        -e DURATION="$DURATION" "$here/k6/records.js" 2>/dev/null
    done
    [[ "${PGBENCH:-1}" == 1 ]] || continue
    echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "{\"path\":\"pgbench\",\"query\":\"$q\",$(pgbench -n -M prepared -c "$VUS" -j 2 -T "${DURATION%s}" \
      -f "$here/pgbench/generated/$q.sql" "$dsn" 2>&1 | awk '
        /^tps/ {tps=$3} /latency average/ {avg=$4} /number of failed/ {f=$5}
        END {printf "\"tps\":%s,\"avg_ms\":%s,\"failed\":%s", tps, avg, f}')}"
  done
  if [[ "${CREATE:-1}" == 1 ]]; then
    echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
    k6 run -q -e FIXTURE="$here/.records-fixture.json" -e ROUTER_URL="$ROUTER_URL" \
      -e CLUSTER_SECRET="$CLUSTER_SECRET" -e PATH_KIND=router -e QUERY=create -e VUS=1 \
      -e DURATION="$DURATION" "$here/k6/records.js" 2>/dev/null
  fi
  echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out"
