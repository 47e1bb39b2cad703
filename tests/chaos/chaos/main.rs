//! One test binary for the chaos tests; run them one at a time
//! (`--test-threads=1`, as deploy/test does). libtest runs them in name
//! order: the restore drill (`backups`) and the kills on the two-shard
//! cluster first, then `scale`, which grows it to three shards,
//! rebalances, drains and moves files, and last `traces`, which restarts
//! the services exporting spans to the test.

// Test code: an unwrap that fails is a failed test with its location.
#![allow(clippy::unwrap_used)]

mod abort_offline;
mod backups;
mod kills;
mod restart;
mod scale;
mod traces;
