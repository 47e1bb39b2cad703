#!/usr/bin/env bash
# Webhook deliveries per second from one shard node to a fast local
# receiver, with CPU per delivery of the node and of its PostgreSQL.
#
#   loadtest/webhooks_throughput.sh
#
# Builds the release shard-node and shard-node/examples/webhook_bench.rs,
# which makes a throwaway database on BENCH_POSTGRES_URL (superuser DSN of a
# PostgreSQL on this machine; default postgres://postgres@127.0.0.1:5432/postgres),
# enqueues DELIVERIES (20000) outbox rows over WEBHOOKS (10) webhooks with SQL,
# starts the node on it, receives in-process, and prints one JSON line:
# deliveries_per_s (first request received to last), node_cpu_ms_per_delivery,
# pg_sessions_cpu_ms_per_delivery (the node's PostgreSQL sessions),
# pg_instance_cpu_ms_per_delivery (every process of that instance). CPU is
# read from /proc from the first request until every row is recorded.
# WEBHOOK_CONCURRENCY and WEBHOOK_CONCURRENCY_PER_WEBHOOK pass to the node.
# OUT=file also writes the JSON there.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"
cargo build --release -q -p shard-node --bin shard-node --example webhook_bench
bin="${CARGO_TARGET_DIR:-$root/target}/release"
echo "== webhook throughput (load $(cut -d' ' -f1 /proc/loadavg), $(nproc) CPUs)" >&2
# Every row is one database's: lift its attempts-per-minute cap (default
# 6000, issue 27) so the node's own speed is what is measured.
export WEBHOOK_ATTEMPTS_PER_DATABASE_PER_MINUTE="${WEBHOOK_ATTEMPTS_PER_DATABASE_PER_MINUTE:-100000000}"
NODE_BIN="$bin/shard-node" "$bin/examples/webhook_bench" throughput | tee "${OUT:-/dev/null}"
