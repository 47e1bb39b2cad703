#!/usr/bin/env bash
# What one matching webhook adds to a record write (issue 14: at most 1 ms
# more at the median). One database, two tables with the same fields:
# `plain` has no webhook, `hooked` has a `record_created` and a
# `record_updated` webhook (table-bound, no conditions), so every write on
# it matches exactly one webhook and enqueues one delivery in its
# transaction. Single-record creates, then single-record updates, through
# the router at a constant arrival rate, the two tables interleaved by 5 s
# slice (k6/webhooks_write.js); prints each table's median and p90 and the
# difference, and how many deliveries were enqueued.
#
#   loadtest/webhooks_write.sh [ENV_FILE]      (default: .dev-cluster/env)
#
# Start the cluster with the per-key budget raised (README "Running"), e.g.
#   ROUTER_KEY_LIMIT_PER_MIN=100000000 ROUTER_ADDRESS_LIMIT_PER_MIN=100000000 deploy/dev-cluster up
# Knobs: RATE (100 writes/s), DURATION per operation (60s), SLICE (5 s),
# OPS ("create update"), RECORDS (updated records per table, 200),
# HOOK_URL (where the webhooks point; nothing needs to listen: the
# deliveries only have to be enqueued; default http://127.0.0.1:9/hook),
# OUT (results/webhooks-write.json), WARMUP (1; 0 skips the 3 s warm-up
# run per operation). A failed k6 run (SMOKE=1: a failed check) fails the
# script. Needs k6, jq, curl, psql.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
env_file="${1:-$root/.dev-cluster/env}"
set -a; . "$env_file"; set +a
RATE="${RATE:-100}"; DURATION="${DURATION:-60s}"; SLICE="${SLICE:-5}"
OPS="${OPS:-create update}"; RECORDS="${RECORDS:-200}"; WARMUP="${WARMUP:-1}"
HOOK_URL="${HOOK_URL:-http://127.0.0.1:9/hook}"
OUT="${OUT:-$here/results/webhooks-write.json}"
cp_bin="${BIN_DIR:-$root/target/release}/control-plane"
export CONTROL_PLANE_URL CONTROL_PLANE_TOKEN
cpl() { "$cp_bin" "$@" --json; }

user_id="$(cpl users create --email "whbench-$(date +%s)-$$@example.com" | jq -er .id)"
token="$(cpl keys create --user "$user_id" --name whbench | jq -er .token)"
api() { # METHOD PATH [BODY]
  curl -sS -f -X "$1" "$ROUTER_URL$2" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' ${3:+--data "$3"}
}
db="$(api POST /api/databases '{"name":"webhooks bench"}' | jq -er .database.id)"
table() { # NAME -> table id, with the benchmark's fields
  local t
  t="$(api POST "/api/databases/$db/tables" "{\"name\":\"$1\"}" | jq -er .table.id)"
  api POST "/api/tables/$t/fields" '{"name":"Name","type":"single_line_text"}' >/dev/null
  api POST "/api/tables/$t/fields" '{"name":"Amount","type":"number"}' >/dev/null
  api POST "/api/tables/$t/fields" '{"name":"Status","type":"single_select","options":{"choices":[{"name":"Open"},{"name":"Won"}]}}' >/dev/null
  echo "$t"
}
plain="$(table plain)"; hooked="$(table hooked)"
for trigger in record_created record_updated; do
  api POST "/api/databases/$db/webhooks" \
    "{\"name\":\"bench $trigger\",\"url\":\"$HOOK_URL\",\"trigger_type\":\"$trigger\",\"table_id\":\"$hooked\"}" >/dev/null
done
seed() { # TABLE -> JSON list of RECORDS record ids (written before any webhook fires matter)
  local ids="[]" n=0
  while ((n < RECORDS)); do
    local batch=$((RECORDS - n < 40 ? RECORDS - n : 40))   # < 50: like any small write
    local body; body="$(jq -nc --argjson k "$batch" '{records: [range(0;$k) | {fields: {Name: "seed \(.)", Amount: ., Status: "Open"}}]}')"
    ids="$(jq -c --argjson more "$(api POST "/api/tables/$1/records" "$body" | jq -c '[.records[].id]')" '. + $more' <<<"$ids")"
    n=$((n + batch))
  done
  echo "$ids"
}
fixture="$(mktemp)"; trap 'rm -f "$fixture"' EXIT
jq -n --arg token "$token" --arg plain "$plain" --arg hooked "$hooked" \
  --argjson plain_ids "$(seed "$plain")" --argjson hooked_ids "$(seed "$hooked")" \
  '{token:$token, tables:{plain:$plain, hooked:$hooked}, records:{plain:$plain_ids, hooked:$hooked_ids}}' >"$fixture"

shard="$(cpl databases show "$db" | jq -er '.shard // .database.shard')"
dsn="$(cpl shards list | jq -er --arg s "$shard" '.shards[] | select(.name == $s) | .postgres')"
enqueued() { psql "$dsn" -Atqc "SELECT count(*) FROM deliveries WHERE database_id = '$db'"; }

echo "webhooks_write.sh: database $db on $shard, RATE=$RATE/s, DURATION=$DURATION per operation, HEAD $(git -C "$root" rev-parse --short HEAD)" >&2
mkdir -p "$(dirname "$OUT")"
lines=()
for op in $OPS; do
  # Warm-up (first use of the key, prepared statements, schema caches).
  if [[ "$WARMUP" == 1 ]]; then
    k6 run -q -e FIXTURE="$fixture" -e ROUTER_URL="$ROUTER_URL" -e OP="$op" -e RATE=20 -e DURATION=3s \
      -e SLICE=1 "$here/k6/webhooks_write.js" >/dev/null 2>&1 || true
  fi
  before="$(enqueued)"
  line="$(k6 run -q -e FIXTURE="$fixture" -e ROUTER_URL="$ROUTER_URL" -e OP="$op" -e RATE="$RATE" \
    -e DURATION="$DURATION" -e SLICE="$SLICE" "$here/k6/webhooks_write.js" | tail -1)"
  line="$(jq -c --argjson n "$(( $(enqueued) - before ))" '. + {deliveries_enqueued: $n}' <<<"$line")"
  echo "$line"
  lines+=("$line")
done
printf '%s\n' "${lines[@]}" | jq -s --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
  --arg head "$(git -C "$root" rev-parse --short HEAD)" '{head:$head, load_after:$load, runs:.}' >"$OUT"
printf '%s\n' "${lines[@]}" | jq -r '"\(.op): median plain \(.plain.med_ms|.*1000|round/1000) ms, hooked \(.hooked.med_ms|.*1000|round/1000) ms, difference \(.median_diff_ms|.*1000|round/1000) ms (p90 \(.plain.p90_ms|.*1000|round/1000) / \(.hooked.p90_ms|.*1000|round/1000) ms; \(.plain.count) + \(.hooked.count) writes, \(.deliveries_enqueued) deliveries enqueued)"' >&2
echo "wrote $OUT" >&2
