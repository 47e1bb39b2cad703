#!/usr/bin/env bash
# Fixture for the records benchmark: one user and key, one database, one
# table "bench" with ten mixed fields (text, email, number, date,
# date-with-time, single select, long text, a link to the table "owners",
# a lookup of the owner's name through it, a formula), ROWS (100,000)
# records each linking one of OWNERS (1,000) owners, and a view sorting
# by -Score.
#
#   loadtest/records_setup.sh [ENV_FILE]     (default: .dev-cluster/env)
#
# The fields are created through the router. The records are written
# straight into the owning shard's PostgreSQL with one INSERT ...
# generate_series (LOAD=sql, the default: seconds instead of minutes; the
# rows are exactly what the API would store: the real columns named by field
# id, choice ids in the select columns, created_by the user). LOAD=api
# writes them through the router in 100-record POST batches instead.
#
# Writes loadtest/.records-fixture.json:
#   {token,user_id,key_id,database_id,table_id,shard_url,shard_dsn,fields:{name:id}}
# (records_pgbench.sh then captures the SQL pgbench runs from the shard.)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
env_file="${1:-$root/.dev-cluster/env}"
set -a; . "$env_file"; set +a
ROWS="${ROWS:-100000}"
LOAD="${LOAD:-sql}"
OUT="${OUT:-$here/.records-fixture.json}"
cp_bin="${BIN_DIR:-$root/target/release}/control-plane"
export CONTROL_PLANE_URL CONTROL_PLANE_TOKEN
cpl() { "$cp_bin" "$@" --json; }

user_id="$(cpl users create --email "recbench-$(date +%s)-$$@example.com" | jq -er .id)"
key="$(cpl keys create --user "$user_id" --name recbench)"
key_id="$(jq -er .id <<<"$key")"; token="$(jq -er .token <<<"$key")"
api() { # METHOD PATH [BODY]
  curl -sS -f -X "$1" "$ROUTER_URL$2" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' ${3:+--data "$3"}
}
db="$(api POST /api/databases '{"name":"records bench"}' | jq -er .database.id)"
tbl="$(api POST "/api/databases/$db/tables" '{"name":"bench"}' | jq -er .table.id)"
declare -A F
field() { F[$1]="$(api POST "/api/tables/$tbl/fields" "$2" | jq -er .field.id)"; }
field Name   '{"name":"Name","type":"single_line_text"}'
field Email  '{"name":"Email","type":"email"}'
field Score  '{"name":"Score","type":"number"}'
field Due    '{"name":"Due","type":"date"}'
field Stamp  '{"name":"Stamp","type":"date","options":{"include_time":true}}'
field Status '{"name":"Status","type":"single_select","options":{"choices":[{"name":"todo"},{"name":"doing"},{"name":"done"}]}}'
field Notes  '{"name":"Notes","type":"long_text"}'
# A link to OWNERS owner records (one each), a lookup through it, a formula.
owners="$(api POST "/api/databases/$db/tables" '{"name":"owners"}' | jq -er .table.id)"
F[OwnerName]="$(api POST "/api/tables/$owners/fields" '{"name":"Name","type":"single_line_text"}' | jq -er .field.id)"
field Owner  "{\"name\":\"Owner\",\"type\":\"link\",\"options\":{\"target_table_id\":\"$owners\"}}"
field Owner_name "{\"name\":\"Owner name\",\"type\":\"lookup\",\"options\":{\"link_field_id\":\"${F[Owner]}\",\"target_field_id\":\"${F[OwnerName]}\"}}"
field Double '{"name":"Double","type":"formula","options":{"expression":"{Score} * 2"}}'
choices="$(api GET "/api/tables/$tbl" | jq -c --arg f "${F[Status]}" '.table.fields[] | select(.id == $f) | [.options.choices[].id]')"
F[DOING]="$(jq -er '.[1]' <<<"$choices")"   # the "doing" choice id (pgbench filter)
shard="$(cpl databases show "$db" | jq -er '.shard // .database.shard')"
shards="$(cpl shards list)"
shard_url="$(jq -er --arg s "$shard" '.shards[] | select(.name == $s) | .url' <<<"$shards")"
shard_dsn="$(jq -er --arg s "$shard" '.shards[] | select(.name == $s) | .postgres' <<<"$shards")"

t="\"$db\".\"$tbl\""
c() { printf '"%s"' "${F[$1]}"; }
OWNERS="${OWNERS:-1000}"
o="\"$db\".\"$owners\""
psql "$shard_dsn" -v ON_ERROR_STOP=1 -q <<SQL
INSERT INTO $o (id, created_by, $(c OwnerName))
SELECT 'rec_ow' || lpad(to_hex(g), 10, '0'), '$user_id', 'Owner ' || g FROM generate_series(1, $OWNERS) AS g;
SQL
if [[ "$LOAD" == sql ]]; then
  psql "$shard_dsn" -v ON_ERROR_STOP=1 -q <<SQL
INSERT INTO $t (id, created_by, $(c Name), $(c Email), $(c Score), $(c Due), $(c Stamp), $(c Status), $(c Notes))
SELECT 'rec_' || substr(md5(g::text), 1, 2) || lpad(to_hex(g), 10, '0'), '$user_id',
       'Item ' || g, 'user' || g || '@example.com', (g::bigint * 7919) % 1000,
       date '2020-01-01' + (g % 2000), timestamptz '2024-01-01' + make_interval(mins => g),
       (ARRAY$(jq -r 'map("\u0027"+.+"\u0027") | join(",") | "[" + . + "]"' <<<"$choices"))[1 + g % 3],
       CASE WHEN g % 5 = 0 THEN NULL ELSE 'Notes for item ' || g || ' lorem ipsum dolor sit amet' END
FROM generate_series(1, $ROWS) AS g;
-- Every record links one owner (what a create with {"Owner": [id]} stores).
INSERT INTO "$db"."lnk_${F[Owner]}" (from_id, to_id)
SELECT 'rec_' || substr(md5(g::text), 1, 2) || lpad(to_hex(g), 10, '0'),
       'rec_ow' || lpad(to_hex(1 + g % $OWNERS), 10, '0')
FROM generate_series(1, $ROWS) AS g;
SQL
else
  for ((b = 0; b < ROWS / 100; b++)); do
    body="$(jq -nc --argjson b "$b" --arg ow "rec_ow" --argjson n "$OWNERS" '{records: [range(0;100) | ($b*100 + . + 1) as $g |
      {fields: {Name: "Item \($g)", Email: "user\($g)@example.com", Score: (($g*7919)%1000),
       Due: "2021-01-01", Stamp: "2024-01-01T00:00:00Z", Status: (["todo","doing","done"][$g%3]),
       Notes: "Notes for item \($g)", Owner: [$ow + ("0000000000" + (1 + $g % $n | tostring))[-10:]]}}]}')"
    api POST "/api/tables/$tbl/records" "$body" >/dev/null
  done
fi
# A view sorting by -Score: the view is what earns the sort index on Score
# (shard-node views::sort_index); the k6 sorted queries send `sort=-Score`.
api POST "/api/tables/$tbl/views" "{\"name\":\"By score\",\"config\":{\"sorts\":[{\"fieldId\":\"${F[Score]}\",\"dir\":\"desc\"}]}}" >/dev/null
# What autovacuum would do soon after a bulk load: statistics and the
# visibility map (index-only scans of the id index).
psql "$shard_dsn" -v ON_ERROR_STOP=1 -q -c "VACUUM ANALYZE $t" -c "VACUUM ANALYZE $o" -c "VACUUM ANALYZE \"$db\".\"lnk_${F[Owner]}\""

fields_json="$(for k in "${!F[@]}"; do printf '%s\t%s\n' "$k" "${F[$k]}"; done | jq -Rn '[inputs | split("\t") | {(.[0]): .[1]}] | add')"
jq -n --arg token "$token" --arg user_id "$user_id" --arg key_id "$key_id" --arg database_id "$db" \
  --arg table_id "$tbl" --arg shard_url "${shard_url%/}" --arg shard_dsn "$shard_dsn" --argjson fields "$fields_json" \
  '{token:$token,user_id:$user_id,key_id:$key_id,database_id:$database_id,table_id:$table_id,shard_url:$shard_url,shard_dsn:$shard_dsn,fields:$fields,owner:"rec_ow0000000001"}' >"$OUT"

echo "records_setup.sh: $ROWS records in $db/$tbl on $shard; wrote $OUT" >&2
