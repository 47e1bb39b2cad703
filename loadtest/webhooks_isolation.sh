#!/usr/bin/env bash
# While deliveries hang on a receiver that never answers, how soon another
# webhook's deliveries leave: p99 of (received_at - enqueued_at) must stay
# within 1 s.
#
#   loadtest/webhooks_isolation.sh
#
# Builds the release shard-node and shard-node/examples/webhook_bench.rs,
# which makes a throwaway database on BENCH_POSTGRES_URL (as in
# webhooks_throughput.sh), enqueues HANG_DELIVERIES (100) rows over
# HANG_WEBHOOKS (1) webhooks pointing at a receiver path that never answers,
# starts the node, waits until their attempts are out (each webhook holds
# WEBHOOK_CONCURRENCY_PER_WEBHOOK, 4, at once; HANG_WEBHOOKS=25 puts all 100
# in flight at once), then enqueues another webhook's deliveries one per
# transaction with the outbox's pg_notify at RATE (50) per second for
# DURATION (20) s, and prints one JSON line with latency_ms_p50/p90/p99/max.
# WEBHOOK_TIMEOUT (10s) and the other WEBHOOK_* knobs pass to the node.
# LIVE_DATABASE=other puts the live webhook in a second database (fairness
# between databases: HANG_WEBHOOKS=100 HANG_DELIVERIES=1000 is one tenant
# with 100 webhooks at a dead receiver); NODE_BIN=path runs another build
# of the node (the "before" of an A/B). The enqueueing starts once the
# hanging attempts stop growing for 2 s.
# OUT=file also writes the JSON there.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
cargo build --release -q -p shard-node --bin shard-node --example webhook_bench
bin="${CARGO_TARGET_DIR:-$root/target}/release"
echo "== webhook isolation (load $(cut -d' ' -f1 /proc/loadavg), $(nproc) CPUs)" >&2
NODE_BIN="${NODE_BIN:-$bin/shard-node}" "$bin/examples/webhook_bench" isolation | tee "${OUT:-/dev/null}"
