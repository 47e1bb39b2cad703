#!/usr/bin/env bash
# The records benchmark side by side in one run: for each query, k6 reading
# pages through the router and straight to the shard node, alternating the
# two paths in slices of a few seconds within one line (INTERLEAVE below),
# the same with goose, then pgbench with the SQL the shard node
# runs for it (captured first by records_sql.py), each preceded by the load
# average; the create batches last (they add records).
#
#   loadtest/records_run.sh [ENV_FILE]      (after records_setup.sh)
#
# Knobs: VUS (8), DURATION (10s per path, k6, goose and pgbench alike),
# INTERLEAVE (1: each client measures the two paths in one line of twice
# DURATION, alternating them in SLICE-second slices (5), router, direct,
# direct, router, then the mirror image, so a drift of the box's speed
# weighs on both paths alike; 0: a separate line per path and client),
# WARMUP (3s of each
# query on each path before its lines, not reported; 0 skips it), QUERIES
# ("first deep filter filter_sort sort_deep"), CREATE (1), PGBENCH (1; 0
# skips the SQL capture and pgbench, e.g. to compare shard-node builds),
# OUT (console copy, default results/records-run.console.txt), GOOSE (1:
# after each k6 line the same line with the goose client,
# goose/src/bin/records.rs, built here if missing; 0 skips it).
# Console copy: loadtest/results/records-run.console.txt; k6 JSON per line
# in loadtest/results/records-<path>-<query>.json. After each k6 or pgbench
# line a `cpu` line gives the CPU time (user + system, from /proc) each
# process spent per request over that line: the owning shard node, its
# PostgreSQL (every backend, exited ones included), the router and k6
# itself, or goose (all four share the machine's cores). On an interleaved
# line the router's is per request through the router, the others per
# request of both paths.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
env_file="${1:-$root/.dev-cluster/env}"
set -a; . "$env_file"; set +a
VUS="${VUS:-8}"; DURATION="${DURATION:-10s}"; WARMUP="${WARMUP:-3s}"
INTERLEAVE="${INTERLEAVE:-1}"; SLICE="${SLICE:-5}"
dsn="$(jq -er .shard_dsn "$here/.records-fixture.json")"
out="${OUT:-$here/results/records-run.console.txt}"
cd "$root"
# CPU accounting (best effort: a missing pid file leaves that process out).
port_base="$(sed -n 's/^PORT_BASE=//p' "$DEV_CLUSTER_DIR/layout" 2>/dev/null || true)"
shard_port="$(jq -er .shard_url "$here/.records-fixture.json" | sed 's/.*://')"
shard_i=$((shard_port - ${port_base:-0} - 20))
node_pid="$(cat "$DEV_CLUSTER_DIR/run/shard-$shard_i.pid" 2>/dev/null || true)"
router_pid="$(cat "$DEV_CLUSTER_DIR/run/router.pid" 2>/dev/null || true)"
pm_pid="$(head -1 "$DEV_CLUSTER_DIR/pg/shard-$shard_i/postmaster.pid" 2>/dev/null || true)"
ticks() { # clock ticks of user+system CPU of the pids (children waited for too with -c)
  local own=12 s=0 p
  [[ "$1" == -c ]] && { own=14; shift; }
  for p in "$@"; do
    [[ -r /proc/$p/stat ]] || continue
    s=$((s + $(sed 's/.*) //' "/proc/$p/stat" | awk -v n="$own" '{t=$12+$13; if (n==14) t+=$14+$15; print t}')))
  done
  echo "$s"
}
pg_ticks() { [[ -n "$pm_pid" ]] && echo $(( $(ticks $(pgrep -P "$pm_pid")) + $(ticks -c "$pm_pid") )) || echo 0; }
cpu_mark() { c_node=$(ticks $node_pid); c_router=$(ticks $router_pid); c_pg=$(pg_ticks); c_self=$(ticks -c "$self_pid"); }
cpu_line() { # REQUESTS CLIENT [ROUTER_REQUESTS]: ms of CPU per request since cpu_mark
  # (CLIENT: k6, goose or pgbench; the router's per ROUTER_REQUESTS when given:
  # an interleaved line sends only half of its requests through the router)
  local n="$1" rn="${3:-$1}" hz; hz="$(getconf CLK_TCK)"
  awk -v n="$n" -v rn="$rn" -v hz="$hz" -v node=$(( $(ticks $node_pid) - c_node )) -v router=$(( $(ticks $router_pid) - c_router )) \
      -v pg=$(( $(pg_ticks) - c_pg )) -v client=$(( $(ticks -c "$self_pid") - c_self )) -v kind="$2" 'BEGIN {
    if (n <= 0 || rn <= 0) exit; f = 1000 / hz / n
    printf "cpu {\"ms_per_request\":{\"node\":%.3f,\"pg\":%.3f,\"router\":%.3f,\"%s\":%.3f}}\n", node*f, pg*f, router*1000/hz/rn, kind, client*f }'
}
requests() { # SECONDS_PER_PATH [PATH] < summary lines: requests served (on PATH)
  jq -s --arg d "$1" --arg p "${2:-}" '[.[] | select($p == "" or .path == $p) | .rps * ($d | tonumber)] | add // 0 | floor'
}
line_cpu() { # OUTPUT CLIENT SECONDS_PER_PATH: the cpu line of a k6 or goose line
  local n rn
  n="$(requests "$3" <<<"$1")"; rn="$(requests "$3" router <<<"$1")"
  cpu_line "$n" "$2" "$([[ "$rn" -gt 0 ]] && echo "$rn" || echo "$n")"
}
per_path() { # PATH: the seconds each path of a line gets (interleaved: DURATION
  # each, so the line lasts twice as long)
  [[ "$1" == interleaved ]] && echo $(( 2 * ${DURATION%s} )) || echo "${DURATION%s}"
}
k6_line() { # PATH QUERY VUS: one k6 line (interleaved: one per path), then its cpu line
  local out
  cpu_mark
  out="$(k6 run -q -e FIXTURE="$here/.records-fixture.json" -e ROUTER_URL="$ROUTER_URL" \
    -e CLUSTER_SECRET="$CLUSTER_SECRET" -e PATH_KIND="$1" -e QUERY="$2" -e VUS="$3" \
    -e SLICE="$SLICE" -e DURATION="$(per_path "$1")s" "$here/k6/records.js" 2>/dev/null)"
  echo "$out"
  line_cpu "$out" k6 "${DURATION%s}"
}
gbin="$here/goose/target/release/records"
goose_line() { # PATH QUERY VUS: the same line with the goose client
  local out
  cpu_mark
  out="$(FIXTURE="$here/.records-fixture.json" ROUTER_URL="$ROUTER_URL" CLUSTER_SECRET="$CLUSTER_SECRET" \
    PATH_KIND="$1" QUERY="$2" USERS="$3" RUN_TIME="$(per_path "$1")" SLICE="$SLICE" WARMUP=0 \
    "$gbin" --quiet --no-print-metrics 2>/dev/null | grep '^{')"
  echo "$out"
  line_cpu "$out" goose "${DURATION%s}"
}
if [[ "${GOOSE:-1}" == 1 && ! -x "$gbin" ]]; then
  (cd "$here/goose" && cargo build --release --locked --bin records)
fi
if [[ "${PGBENCH:-1}" == 1 ]]; then
  python3 "$here/records_sql.py" "$env_file"
  mkdir -p "$here/results/records-sql"
  cp "$here"/pgbench/generated/*.sql "$here/results/records-sql/"
fi
{
  # k6 and pgbench are waited-for children of this shell: their CPU
  # accrues to its children's time.
  self_pid=$BASHPID
  # The live records the pages are read from: create batches of an earlier
  # run add to them (records_setup.sh makes a fresh 100,000).
  live="$(psql "$dsn" -Atc "SELECT count(*) FROM \"$(jq -er .database_id "$here/.records-fixture.json")\".\"$(jq -er .table_id "$here/.records-fixture.json")\" WHERE deleted_at IS NULL" 2>/dev/null || echo '?')"
  echo "run $(date -u +%FT%TZ) HEAD $(git rev-parse --short HEAD) shard-node $(sha256sum "/proc/$node_pid/exe" 2>/dev/null | cut -c1-12) nproc $(nproc) rustc procs $(pgrep -c rustc || true) records $live"
  for q in ${QUERIES:-first deep filter filter_sort sort_deep}; do
    # Warm-up, not reported: each path's connections, prepared statements
    # and caches exist before its measured line starts.
    for p in router direct; do
      [[ "$WARMUP" == 0 ]] || DURATION="$WARMUP" k6_line "$p" "$q" "$VUS" >/dev/null
    done
    # Interleaved (the default): one k6 line and one goose line, each
    # alternating the two paths in SLICE-second slices. INTERLEAVE=0: the
    # mirrored order of separate lines, k6 router, k6 direct, then goose
    # direct, goose router (a drift of the box's speed across the four
    # lines then tilts each client's ratio, in opposite directions).
    if [[ "$INTERLEAVE" == 1 ]]; then
      lines=("k6 interleaved")
      [[ "${GOOSE:-1}" == 1 ]] && lines+=("goose interleaved")
    else
      lines=("k6 router" "k6 direct")
      [[ "${GOOSE:-1}" == 1 ]] && lines+=("goose direct" "goose router")
    fi
    for l in "${lines[@]}"; do
      read -r tool p <<<"$l"
      echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
      "${tool}_line" "$p" "$q" "$VUS"
    done
    [[ "${PGBENCH:-1}" == 1 ]] || continue
    echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
    cpu_mark
    pg_out="$(pgbench -n -M prepared -c "$VUS" -j 2 -T "${DURATION%s}" \
      -f "$here/pgbench/generated/$q.sql" "$dsn" 2>&1)"
    echo "{\"path\":\"pgbench\",\"query\":\"$q\",$(awk '
        /^tps/ {tps=$3} /latency average/ {avg=$4} /number of failed/ {f=$5}
        END {printf "\"tps\":%s,\"avg_ms\":%s,\"failed\":%s", tps, avg, f}' <<<"$pg_out")}"
    cpu_line "$(awk -F': ' '/number of transactions actually processed/ {split($2, a, "/"); print a[1]}' <<<"$pg_out")" pgbench
  done
  if [[ "${CREATE:-1}" == 1 ]]; then
    echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
    k6_line router create 1
  fi
  echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$out"
