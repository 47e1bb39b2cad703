#!/usr/bin/env bash
# Redis CPU of the router's hot-path scripts (router/src/gate/limiter_lua.rs
# BUDGET_SCRIPT for the address shield and KEY_SCRIPT for the key, extracted
# from the source; OLD_SOURCE, if given, a limiter_lua.rs holding the former
# single SCRIPT) next to a plain GET, on a throwaway redis-server (PORT,
# default 6390): redis-benchmark, 32 clients, random keys, ROUNDS rounds
# alternating (default 3), and INFO commandstats usec_per_call of each.
#   loadtest/capacity/redis_limiter_bench.sh [PORT] [OLD_SOURCE]
set -euo pipefail
PORT=${1:-6390}
OLD=${2:-}
N=${N:-200000}
ROUNDS=${ROUNDS:-3}
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
extract() { # file const-name
  python3 -c 'import re,sys; s=open(sys.argv[1]).read(); print(re.search(r"const "+sys.argv[2]+r": &str = r#\"(.*?)\"#;", s, re.S).group(1))' "$1" "$2"
}
src=$here/../../router/src/gate/limiter_lua.rs
budget=$(redis-cli -p "$PORT" script load "$(extract "$src" BUDGET_SCRIPT)")
key=$(redis-cli -p "$PORT" script load "$(extract "$src" KEY_SCRIPT)")
old=''
[ -z "$OLD" ] || old=$(redis-cli -p "$PORT" script load "$(extract "$OLD" SCRIPT)")
k='{usr___rand_int__}'
run() { # label args...
  local label=$1
  shift
  redis-cli -p "$PORT" config resetstat >/dev/null
  local rps
  rps=$(redis-benchmark -p "$PORT" -n "$N" -c 32 -r 1000000 --csv "$@" | tail -1 | cut -d, -f2 | tr -d '"')
  local usec
  usec=$(redis-cli -p "$PORT" info commandstats | grep -E "^cmdstat_(evalsha|get):" | sed -E 's/.*usec_per_call=([0-9.]+).*/\1/')
  printf '%s,%s,%s\n' "$label" "$rps" "$usec"
}
echo "command,requests_per_s,usec_per_call"
for _ in $(seq 1 "$ROUNDS"); do
  run GET get foo
  run "shield EVALSHA" evalsha "$budget" 2 "router:rl:addr:{10.0.__rand_int__}:29402040" \
    "router:rl:addr:{10.0.__rand_int__}:29402039" 30000 60000 3000
  run "key EVALSHA" evalsha "$key" 5 "router:rl:key:$k:k:29402040" "router:rl:key:$k:k:29402039" \
    "cluster:$k:key:k" "cluster:$k:user" "cluster:$k:lastused:k" 30000 60000 600 1764151200123
  if [ -n "$old" ]; then
    run "old EVALSHA" evalsha "$old" 7 router:rl:addr:10.0.__rand_int__:29402040 \
      router:rl:addr:10.0.__rand_int__:29402039 router:rl:key:key___rand_int__:29402040 \
      router:rl:key:key___rand_int__:29402039 cluster:key:key___rand_int__ \
      cluster:user:usr___rand_int__ cluster:lastused:key___rand_int__ 30000 60000 3000 600 1764151200123
  fi
done
