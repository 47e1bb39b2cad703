#!/usr/bin/env bash
# abrun.sh OUTDIR ROUNDS label=bin[:ENV=V,..] ...  : run.sh quick pairs (RATE=500 DURATION=30s HOLD_DURATION=15s)
out=$1; R=$2; shift 2
cd /work/main
for r in $(seq $R); do
  for spec in "$@"; do
    label=${spec%%=*}; rest=${spec#*=}; bin=${rest%%:*}; envs=""
    [[ "$rest" == *:* ]] && envs=${rest#*:}
    /tmp/rbench/swap.sh "$bin" $(tr ',' ' ' <<<"$envs") >/dev/null
    sleep 1
    d=$out/$(date -u +%H%M)-$label; mkdir -p $d
    { echo "== $(date -u +%FT%TZ) build $label ($bin $envs), uptime: $(uptime)"; RESULTS=$d RATE=${RATE:-500} DURATION=${DURATION:-30s} HOLD_DURATION=${HOLD_DURATION:-15s} loadtest/run.sh .dev-cluster-bench/env; } > $d/console.txt 2>&1
    echo "$(date -u +%H:%M) $label: $(jq -c '{cpu: .router_cpu.us_per_request, user: .router_cpu.user_us_per_request, p50: .latency.added_ms.p50, p99: .latency.added_ms.p99, rss: .rss.max_mib, conns: .rss.connections, rt: .redis.monitor.client_commands_per_request, load: .machine_during_compare.load_avg_before, busy: .machine_during_compare.busy_cores}' $d/summary.json)"
  done
done
