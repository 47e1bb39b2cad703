#!/usr/bin/env bash
# pstat.sh [RATE] [DUR] : router-only k6 at RATE; perf stat of the router; per-request figures
set -uo pipefail
cd "$(dirname "$0")/../../.."   # the repository root
. .dev-cluster-bench/env
RATE=${1:-500}; DUR=${2:-20s}
pid=${PID:-$(cat .dev-cluster-bench/run/router.pid)}; ROUTER_URL=${URL:-$ROUTER_URL}
out=/tmp/rbench/out; mkdir -p $out
k6r() { k6 run --quiet --no-usage-report -e FIXTURES=$PWD/loadtest/.fixtures.json -e ROUTER_URL=$ROUTER_URL -e CLUSTER_SECRET=$CLUSTER_SECRET "$@" loadtest/k6/tables_get.js; }
k6r -e MODE=router -e RATE=100 -e DURATION=3s -e SUMMARY_JSON=$out/warm.json >/dev/null 2>&1
load=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(sed 's/.*) //' /proc/$pid/stat | awk '{print $12+$13}'); u0=$(sed 's/.*) //' /proc/$pid/stat | awk '{print $12}')
perf stat -e task-clock,context-switches,cpu-migrations,raw_syscalls:sys_enter -p $pid -o $out/perf.txt &
ppid=$!
sleep 0.3
k6r -e MODE=router -e RATE=$RATE -e DURATION=$DUR -e SUMMARY_JSON=$out/k6.json >/dev/null 2>&1
kill -INT $ppid; wait $ppid 2>/dev/null
t1=$(sed 's/.*) //' /proc/$pid/stat | awk '{print $12+$13}'); u1=$(sed 's/.*) //' /proc/$pid/stat | awk '{print $12}')
n=$(jq '.scenarios.router.requests' $out/k6.json)
p50=$(jq '.scenarios.router.p50_ms' $out/k6.json); p99=$(jq '.scenarios.router.p99_ms' $out/k6.json)
tc=$(awk '/task-clock/ {gsub(",","",$1); print $1}' $out/perf.txt)
cs=$(awk '/context-switches/ {gsub(",","",$1); print $1}' $out/perf.txt)
sc=$(awk '/sys_enter/ {gsub(",","",$1); print $1}' $out/perf.txt)
awk -v n=$n -v tc=$tc -v cs=$cs -v sc=$sc -v t0=$t0 -v t1=$t1 -v u0=$u0 -v u1=$u1 -v ld="$load" -v p50=$p50 -v p99=$p99 -v r=$RATE 'BEGIN{
 printf "rate %s n %d | stat-cpu %.1f us/req (user %.1f) | perf task-clock %.1f us/req | ctxsw %.2f/req | syscalls %.2f/req | p50 %.3f p99 %.3f ms | load %s\n", r, n, (t1-t0)*10000/n, (u1-u0)*10000/n, tc*1000/n, cs/n, sc/n, p50, p99, ld}'
