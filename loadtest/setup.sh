#!/usr/bin/env bash
# Creates the fixtures the load tests read: N users, one API key each, and for
# each key one database with one table (created through the router, like a
# client would), plus the URL of the shard that holds it.
#
#   loadtest/setup.sh [ENV_FILE]        (default: .dev-cluster/env)
#
#   N=50                  how many users/keys/databases/tables
#   FIXTURES=loadtest/.fixtures.json   where to write them
#
# Output: a JSON array of
#   {token, user_id, key_id, database_id, table_id, shard_url}
#
# The router's per-key budget defaults to 600/min; the cluster used for load
# tests must be started with ROUTER_KEY_LIMIT_PER_MIN raised (e.g. 100000000),
# otherwise every key is throttled to 10 req/s and the figures measure 429s.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"

env_file="${1:-${CLUSTER_ENV_FILE:-$root/.dev-cluster/env}}"
[[ -f "$env_file" ]] || { echo "setup.sh: no env file at $env_file (start a cluster with deploy/dev-cluster up)" >&2; exit 1; }
set -a
# shellcheck disable=SC1090
. "$env_file"
set +a

N="${N:-50}"
FIXTURES="${FIXTURES:-$here/.fixtures.json}"
: "${ROUTER_URL:?env file lacks ROUTER_URL}"
: "${CONTROL_PLANE_URL:?env file lacks CONTROL_PLANE_URL}"
: "${CONTROL_PLANE_TOKEN:?env file lacks CONTROL_PLANE_TOKEN}"
BIN_DIR="${BIN_DIR:-$root/target/release}"
cp_bin="$BIN_DIR/control-plane"
[[ -x "$cp_bin" ]] || { echo "setup.sh: $cp_bin not found (BIN_DIR)" >&2; exit 1; }
export CONTROL_PLANE_URL CONTROL_PLANE_TOKEN

for tool in curl jq; do
  command -v "$tool" >/dev/null || { echo "setup.sh: needs $tool" >&2; exit 1; }
done

cpl() { "$cp_bin" "$@" --json; }

# POST JSON through the router; prints the body, fails on a non-2xx status.
api_post() {
  local token="$1" path="$2" body="$3" out status
  out="$(mktemp)"
  status="$(curl -sS -o "$out" -w '%{http_code}' -X POST "$ROUTER_URL$path" \
    -H "Authorization: Bearer $token" -H 'Content-Type: application/json' --data "$body")"
  if [[ "$status" != 2* ]]; then
    echo "setup.sh: POST $path -> $status: $(cat "$out")" >&2
    rm -f "$out"
    return 1
  fi
  cat "$out"
  rm -f "$out"
}

shards_json="$(cpl shards list)"
run_id="$(date +%s)-$$"
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT

echo "setup.sh: creating $N users/keys/databases/tables via $ROUTER_URL" >&2
for i in $(seq 1 "$N"); do
  user="$(cpl users create --email "loadtest-$run_id-$i@example.com" --name "loadtest $i")"
  user_id="$(jq -er .id <<<"$user")"
  key="$(cpl keys create --user "$user_id" --name "loadtest-$i")"
  key_id="$(jq -er .id <<<"$key")"
  token="$(jq -er .token <<<"$key")"

  db_id="$(api_post "$token" /api/databases "$(jq -nc --arg n "loadtest $i" '{name:$n}')" | jq -er .database.id)"
  table_id="$(api_post "$token" "/api/databases/$db_id/tables" '{"name":"items"}' | jq -er .table.id)"

  shard="$(cpl databases show "$db_id" | jq -er '.shard // .database.shard')"
  shard_url="$(jq -er --arg s "$shard" '.shards[] | select(.name == $s) | .url' <<<"$shards_json")"

  jq -nc --arg token "$token" --arg user_id "$user_id" --arg key_id "$key_id" \
    --arg database_id "$db_id" --arg table_id "$table_id" --arg shard_url "${shard_url%/}" \
    '{token:$token,user_id:$user_id,key_id:$key_id,database_id:$database_id,table_id:$table_id,shard_url:$shard_url}' >>"$tmp"
  (( i % 10 == 0 )) && echo "  $i/$N" >&2
done

jq -s . "$tmp" >"$FIXTURES"
echo "setup.sh: wrote $(jq length "$FIXTURES") fixtures to $FIXTURES" >&2

# Sanity: one table through the router, the same one directly with a signed principal
# is checked by the load tests themselves (non-2xx counts as a failure there).
first_token="$(jq -r '.[0].token' "$FIXTURES")"
first_table="$(jq -r '.[0].table_id' "$FIXTURES")"
code="$(curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $first_token" "$ROUTER_URL/api/tables/$first_table")"
echo "setup.sh: GET /api/tables/$first_table through the router -> $code" >&2
[[ "$code" == 200 ]]
