#!/usr/bin/env bash
# Two builds side by side on the records benchmark, through the router:
# one cluster and one fixture (records_setup.sh), the three binaries
# swapped between rounds in the order A B B A (then again, ROUNDS times),
# so a drift of the box's speed weighs on both builds alike. Each round
# restarts the cluster on the build's binaries (data kept), warms every
# query up, then runs one k6 line per query (records.js, PATH_KIND=router).
#
#   loadtest/records_ab.sh ENV_FILE BIN_DIR_A BIN_DIR_B
#
# Knobs: ROUNDS (2, i.e. A B B A A B B A), QUERIES ("first deep filter
# filter_sort sort_deep create"), VUS (8), DURATION (20s), WARMUP (3s),
# OUT (results/records-ab.console.txt). Each line printed is
# `<A|B> <round> <k6 JSON>`; records_ab_table.py summarises them.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
env_file="$1"; bin_a="$2"; bin_b="$3"
set -a; . "$env_file"; set +a
ROUNDS="${ROUNDS:-2}"; VUS="${VUS:-8}"; DURATION="${DURATION:-20s}"; WARMUP="${WARMUP:-3s}"
QUERIES="${QUERIES:-first deep filter filter_sort sort_deep create}"
out="${OUT:-$here/results/records-ab.console.txt}"
# records.js writes its JSON files under ./loadtest/results: keep them out
# of the repository's results.
scratch="$(mktemp -d)"; mkdir -p "$scratch/loadtest/results"
trap 'rm -rf "$scratch"' EXIT

# The services' ports: a restart waits until no socket holds one (a client
# socket in TIME-WAIT on a bench port in the ephemeral range makes the
# next bind fail).
ports="$(echo "$ROUTER_URL $CONTROL_PLANE_URL $SHARD_URLS" | grep -oE ':[0-9]+' | tr -d : | paste -sd'|')"
restart() { # BIN_DIR
  DEV_CLUSTER_DIR="$DEV_CLUSTER_DIR" "$root/deploy/dev-cluster" down >/dev/null 2>&1 || true
  for _ in $(seq 600); do
    ss -tan | grep -qE "127\.0\.0\.1:($ports) " || break
    sleep 0.2
  done
  DEV_CLUSTER_DIR="$DEV_CLUSTER_DIR" DEV_CLUSTER_BIN_DIR="$1" \
    ROUTER_KEY_LIMIT_PER_MIN=100000000 ROUTER_ADDRESS_LIMIT_PER_MIN=100000000 \
    "$root/deploy/dev-cluster" up >/dev/null
}
k6_line() { # QUERY DURATION
  (cd "$scratch" && k6 run -q -e FIXTURE="$here/.records-fixture.json" -e ROUTER_URL="$ROUTER_URL" \
    -e CLUSTER_SECRET="$CLUSTER_SECRET" -e PATH_KIND=router -e QUERY="$1" -e VUS="$VUS" \
    -e DURATION="$2" "$here/k6/records.js" 2>/dev/null)
}
{
  echo "run $(date -u +%FT%TZ) HEAD $(git -C "$root" rev-parse --short HEAD) A $(cat "$bin_a/COMMIT" 2>/dev/null || echo "$bin_a") B $(cat "$bin_b/COMMIT" 2>/dev/null || echo "$bin_b") nproc $(nproc)"
  for ((r = 1; r <= ROUNDS; r++)); do
    for build in A B B A; do
      bin=$bin_a; [[ "$build" == B ]] && bin=$bin_b
      restart "$bin"
      for q in $QUERIES; do
        [[ "$q" == create || "$WARMUP" == 0 ]] || k6_line "$q" "$WARMUP" >/dev/null
        echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
        k6_line "$q" "$DURATION" | sed "s/^/$build $r /"
      done
    done
  done
} | tee "$out"
