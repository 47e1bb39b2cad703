#!/usr/bin/env bash
# Routed requests per second on one Redis against a 3-master Redis Cluster
# (docs/capacity.md, "Redis"): the same closed-loop k6 load
# (k6/tables_get.js MODE=saturate, GET /api/tables/{id} through the router)
# against two dev clusters that differ only in REDIS_CLUSTER, alternating
# A, B, A, B ... so a drift of the box's speed weighs on both alike.
#
#   loadtest/capacity/redis_cluster_rps.sh ENV_ONE FIXTURES_ONE ENV_CLUSTER FIXTURES_CLUSTER
#
# Each ENV is a dev cluster's env file, each FIXTURES what loadtest/setup.sh
# wrote for it (FIXTURES=... N=50 loadtest/setup.sh ENV). Both clusters need
# the budgets raised (loadtest/README.md, "Running"). Knobs: ROUNDS (3),
# VUS (32), SECS (20). Per run, one JSON line on stdout: requests/s, the
# router's and all redis-server processes' user+sys CPU per request (from
# /proc, so k6's own CPU is not counted; the Redis servers' idle CPU over
# SECS just before is given apart and subtracted), and the share of
# failed answers.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -eq 4 ] || { sed -n 2,16p "$0" >&2; exit 2; }
ROUNDS=${ROUNDS:-3} VUS=${VUS:-32} SECS=${SECS:-20}
tick=$(getconf CLK_TCK)

# The pids of the processes listening on the given ports.
pids_on() {
  local port
  for port in "$@"; do
    ss -ltnpH "sport = :$port" | grep -o 'pid=[0-9]*' | cut -d= -f2
  done | sort -u
}

# user+sys clock ticks of the given pids, summed.
cpu_ticks() {
  local pid total=0
  for pid in "$@"; do
    total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
  done
  echo "$total"
}

one_run() { # label env fixtures
  local label=$1 env_file=$2 fixtures=$3 port_base router_port redis_ports router_pid redis_pids
  local layout
  layout="$(. "$env_file" && echo "$DEV_CLUSTER_DIR")/layout"
  port_base=$(. "$layout" && echo "${PORT_BASE:?}")
  router_port=$(. "$env_file" && echo "${ROUTER_URL##*:}")
  if [ "$(. "$layout" && echo "${REDIS_CLUSTER:-0}")" = 1 ]; then
    redis_ports=$(seq $((port_base + 90)) $((port_base + 95)))
  else
    redis_ports=$port_base
  fi
  router_pid=$(pids_on "$router_port")
  # shellcheck disable=SC2086
  redis_pids=$(pids_on $redis_ports)
  local router_url secret summary
  router_url=$(. "$env_file" && echo "$ROUTER_URL")
  secret=$(. "$env_file" && echo "$CLUSTER_SECRET")
  summary=$(mktemp --suffix=.json)
  local r0 s0 r1 s1 i0 i1
  # The Redis servers' own CPU while idle (cron, the cluster bus), over the
  # same time, is given apart: a cluster of six spends some with no load.
  # shellcheck disable=SC2086
  i0=$(cpu_ticks $redis_pids)
  sleep "$SECS"
  # shellcheck disable=SC2086
  i1=$(cpu_ticks $redis_pids)
  r0=$(cpu_ticks "$router_pid")
  # shellcheck disable=SC2086
  s0=$(cpu_ticks $redis_pids)
  k6 run --quiet --no-usage-report -e MODE=saturate -e VUS="$VUS" -e DURATION="${SECS}s" \
    -e FIXTURES="$fixtures" -e ROUTER_URL="$router_url" -e CLUSTER_SECRET="$secret" \
    -e SUMMARY_JSON="$summary" "$here/../k6/tables_get.js" >/dev/null
  r1=$(cpu_ticks "$router_pid")
  # shellcheck disable=SC2086
  s1=$(cpu_ticks $redis_pids)
  jq -c --arg which "$label" --argjson tick "$tick" --arg secs "$SECS" \
    --argjson router "$((r1 - r0))" --argjson redis "$((s1 - s0))" --argjson idle "$((i1 - i0))" \
    --argjson servers "$(wc -w <<<"$redis_pids")" '
    .scenarios.router as $r | $r.requests as $n
    | { redis: $which, redis_servers: $servers, requests: $n,
        rps: ($r.rate | floor), p50_ms: $r.p50_ms, p99_ms: $r.p99_ms,
        failed_share: $r.failed_rate,
        router_cpu_us_per_req: ($router / $tick * 1e6 / $n | floor),
        redis_cpu_us_per_req: ($redis / $tick * 1e6 / $n * 10 | floor / 10),
        redis_idle_cpu_share: ($idle / $tick / ($secs | tonumber) * 1000 | floor / 1000),
        redis_cpu_us_per_req_less_idle: (($redis - $idle) / $tick * 1e6 / $n * 10 | floor / 10) }' "$summary"
  rm -f "$summary" "${summary%.json}.full.json"
}

for round in $(seq "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then
    one_run one "$1" "$2"
    one_run cluster "$3" "$4"
  else
    one_run cluster "$3" "$4"
    one_run one "$1" "$2"
  fi
done
