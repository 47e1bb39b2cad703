//! One test binary for the chaos tests; run them one at a time
//! (`--test-threads=1`, as deploy/test does). libtest runs them in name
//! order: the restore drill (`backups`), then the kills on the two-shard
//! cluster (`failover` and `move_failover`, the PostgreSQL failovers of
//! issue 30, need the HA cluster deploy/test's chaos phase starts), then
//! `scale`, which grows it to three shards, rebalances, drains and moves
//! files, `traces`, which restarts the services exporting spans to the
//! test, and last `two_movers`, a rebalance that survives the kill of one
//! of two control planes.

// Test code: an unwrap that fails is a failed test with its location.
#![allow(clippy::unwrap_used)]

mod abort_offline;
mod backups;
mod failover;
mod kills;
mod move_failover;
mod redis_failover;
mod restart;
mod scale;
mod traces;
mod two_movers;
