#!/usr/bin/env bash
# PostgreSQL backend memory against the number of tenant schemas a session
# has touched, on the shard of loadtest/capacity/shard10k_fixture.py
# (docs/capacity.md, "A shard with 10,000 databases").
#
#   loadtest/capacity/shard10k_pgmem.sh DSN [STEPS]
#
# DSN: the clone shard's PostgreSQL as a role that may read
# pg_backend_memory_contexts (superuser `postgres` on the dev cluster).
# STEPS (default "0 10 100 500 1000 2000 5000 10000"): after each, the
# session has read the first page of every table of that many clone
# databases (`SELECT * FROM t ORDER BY id LIMIT 101`, which opens the
# table and every index of it, as the records page's plan does) and
# prints one line: schemas touched, the CacheMemoryContext's own bytes,
# the "index info" contexts (count, bytes), every context of the backend
# together, and the backend's resident anonymous memory (its
# /proc/PID/status, read with pg_read_file: superuser).
set -euo pipefail
dsn=$1
steps=${2:-"0 10 100 500 1000 2000 5000 10000"}
fixture=${FIXTURE:-$(dirname "$0")/../.shard10k-fixture.json}
# The template's tables (and connector tables), renamed per clone.
template=$(jq -er .template.database_id "$fixture")
tag=$(jq -er .template.tag "$fixture")
src=$(jq -er .template.dsn "$fixture")
mapfile -t rels < <(psql "$src" -X -tA -c "SELECT relname FROM pg_class WHERE relnamespace = '\"$template\"'::regnamespace AND relkind = 'r' ORDER BY 1")
mapfile -t dbs < <(jq -r '.clones.databases[]' "$fixture")
report="SELECT (SELECT total_bytes FROM pg_backend_memory_contexts WHERE name = 'CacheMemoryContext') AS cache_own, (SELECT count(*) FROM pg_backend_memory_contexts WHERE name = 'index info') AS index_infos, (SELECT sum(total_bytes) FROM pg_backend_memory_contexts WHERE name = 'index info') AS index_info_bytes, (SELECT sum(total_bytes) FROM pg_backend_memory_contexts) AS all_contexts, (SELECT substring(pg_read_file('/proc/' || pg_backend_pid() || '/status') FROM 'RssAnon:\\s+(\\d+)')) AS rss_anon_kib \\gset
\\echo schemas=:done cache_context=:cache_own index_info=:index_infos/:index_info_bytes all_contexts=:all_contexts rss_anon_kib=:rss_anon_kib"
{
  echo "\\set done 0"
  prev=0
  for s in $steps; do
    for ((i = prev; i < s && i < ${#dbs[@]}; i++)); do
      new=${dbs[$i]:3:5}
      for r in "${rels[@]}"; do
        echo "SELECT count(*) FROM (SELECT * FROM \"${dbs[$i]}\".\"${r/$tag/$new}\" ORDER BY 1 LIMIT 101) x;"
      done
    done
    prev=$s
    echo "\\set done $s"
    printf '%s\n' "$report"
  done
} | psql "$dsn" -X -q -o /dev/null -v ON_ERROR_STOP=1
