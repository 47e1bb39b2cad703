#!/usr/bin/env bash
# Throughput of the router's hot-path Redis script (router/src/gate/limiter_lua.rs
# SCRIPT, extracted from the source) next to a plain GET, on a throwaway
# redis-server (PORT, default 6390): redis-benchmark, 32 clients, random keys.
#   loadtest/capacity/redis_limiter_bench.sh [PORT]
set -euo pipefail
PORT=${1:-6390}
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
script="$(python3 -c 'import re,sys; s=open(sys.argv[1]).read(); print(re.search(r"const SCRIPT: &str = r#\"(.*?)\"#;", s, re.S).group(1))' "$here/../../router/src/gate/limiter_lua.rs")"
sha=$(redis-cli -p "$PORT" script load "$script")
b="router:rl:key:key___rand_int__"
redis-benchmark -p "$PORT" -n 300000 -c 32 -r 1000000 --csv evalsha "$sha" 7 \
  router:rl:addr:10.0.__rand_int__:29402040 router:rl:addr:10.0.__rand_int__:29402039 \
  "$b:29402040" "$b:29402039" cluster:key:key___rand_int__ cluster:user:usr___rand_int__ \
  cluster:lastused:key___rand_int__ 30000 60000 3000 600 1764151200123 | tail -1 | sed 's/^"evalsha[^"]*"/"limiter EVALSHA"/'
redis-benchmark -p "$PORT" -n 300000 -c 32 --csv get foo | tail -1
