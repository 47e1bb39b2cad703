#!/usr/bin/env bash
# par.sh ROUNDS RATE DUR labelA=binA[:ENV=V,..] labelB=binB[:...]
# Runs both routers at once (ports 35080 and 35081, swapped each round), each
# loaded by its own k6 at RATE; perf stat per router. Paired comparison.
set -uo pipefail
cd /work/main; . .dev-cluster-bench/env
R=$1; RATE=$2; DUR=$3; A=$4; B=$5
D=/work/main/.dev-cluster-bench; out=/tmp/rbench/out; mkdir -p $out
[ -f /tmp/rbench/router.env ] || { echo "no router.env"; exit 1; }
start() { # port bin envs -> pid
  local port=$1 bin=$2 envs=$3
  mapfile -t E < <(grep -v '^ROUTER_LISTEN=' /tmp/rbench/router.env)
  (cd $D && exec nohup env -i "${E[@]}" ROUTER_LISTEN=127.0.0.1:$port $(tr ',' ' ' <<<"$envs") "$bin" </dev/null >>$D/logs/router-par-$port.log 2>&1) &
  echo $!
}
k6r() { k6 run --quiet --no-usage-report -e FIXTURES=/work/main/loadtest/.fixtures.json -e CLUSTER_SECRET=$CLUSTER_SECRET "$@" loadtest/k6/tables_get.js; }
stat1() { sed 's/.*) //' /proc/$1/stat | awk '{print $12, $13}'; }
# stop the cluster's router for the duration (restarted at the end)
cpid=$(cat $D/run/router.pid); kill $cpid; sleep 1
for r in $(seq $R); do
  if (( r % 2 )); then pa=35080; pb=35081; else pa=35081; pb=35080; fi
  la=${A%%=*}; ra=${A#*=}; ba=${ra%%:*}; ea=""; [[ "$ra" == *:* ]] && ea=${ra#*:}
  lb=${B%%=*}; rb=${B#*=}; bb=${rb%%:*}; eb=""; [[ "$rb" == *:* ]] && eb=${rb#*:}
  ida=$(start $pa $ba "$ea"); idb=$(start $pb $bb "$eb")
  for i in $(seq 50); do curl -sf http://127.0.0.1:$pa/api/health >/dev/null && curl -sf http://127.0.0.1:$pb/api/health >/dev/null && break; sleep 0.2; done
  k6r -e ROUTER_URL=http://127.0.0.1:$pa -e MODE=router -e RATE=100 -e DURATION=3s -e SUMMARY_JSON=$out/wa.json >/dev/null 2>&1 &
  k6r -e ROUTER_URL=http://127.0.0.1:$pb -e MODE=router -e RATE=100 -e DURATION=3s -e SUMMARY_JSON=$out/wb.json >/dev/null 2>&1; wait
  load=$(cut -d' ' -f1 /proc/loadavg)
  sa0=$(stat1 $ida); sb0=$(stat1 $idb)
  perf stat -e task-clock,context-switches,raw_syscalls:sys_enter -p $ida -o $out/pa.txt & qa=$!
  perf stat -e task-clock,context-switches,raw_syscalls:sys_enter -p $idb -o $out/pb.txt & qb=$!
  sleep 0.3
  k6r -e ROUTER_URL=http://127.0.0.1:$pa -e MODE=router -e RATE=$RATE -e DURATION=$DUR -e SUMMARY_JSON=$out/ka.json >/dev/null 2>&1 & ka=$!
  k6r -e ROUTER_URL=http://127.0.0.1:$pb -e MODE=router -e RATE=$RATE -e DURATION=$DUR -e SUMMARY_JSON=$out/kb.json >/dev/null 2>&1; wait $ka; sleep 0.5
  kill -INT $qa $qb; wait $qa $qb 2>/dev/null
  sa1=$(stat1 $ida); sb1=$(stat1 $idb)
  for x in a b; do
    if [ $x = a ]; then l=$la; s0=$sa0; s1=$sa1; port=$pa; else l=$lb; s0=$sb0; s1=$sb1; port=$pb; fi
    n=$(jq '.scenarios.router.requests' $out/k$x.json); p50=$(jq '.scenarios.router.p50_ms' $out/k$x.json); p99=$(jq '.scenarios.router.p99_ms' $out/k$x.json)
    tc=$(awk '/task-clock/ {gsub(",","",$1); print $1}' $out/p$x.txt); cs=$(awk '/context-switches/ {gsub(",","",$1); print $1}' $out/p$x.txt); sc=$(awk '/sys_enter/ {gsub(",","",$1); print $1}' $out/p$x.txt)
    echo "$(date -u +%H:%M:%S) r$r $l:$port $(awk -v n=$n -v tc=$tc -v cs=$cs -v sc=$sc -v s0="$s0" -v s1="$s1" -v ld=$load -v p50=$p50 -v p99=$p99 'BEGIN{split(s0,a," "); split(s1,b," "); printf "n %d | cpu %.1f us/req (user %.1f sys %.1f) | task-clock %.1f | ctxsw %.2f | syscalls %.2f | p50 %.3f p99 %.3f | load %s", n, (b[1]+b[2]-a[1]-a[2])*10000/n, (b[1]-a[1])*10000/n, (b[2]-a[2])*10000/n, tc*1000/n, cs/n, sc/n, p50, p99, ld}')"
  done
  kill $ida $idb; wait $ida $idb 2>/dev/null
done
# restore the cluster's router
/tmp/rbench/swap.sh ${CLUSTER_ROUTER_BIN:-/work/main/.dev-cluster-bench-bin/base/router} >/dev/null 2>&1 || true
