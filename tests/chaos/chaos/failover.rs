//! Failover of replicated PostgreSQL (issue 30, sections 1 and 4), on the
//! HA test cluster (`HA=1 deploy/dev-cluster up`: two Patroni members per
//! instance, synchronous replication), all through the router under write
//! load:
//! * a shard's primary member lost (its Patroni agent and its PostgreSQL
//!   killed together, as a lost machine): no acknowledged write lost,
//!   writes to that shard resume within 15 s, the other shard never fails;
//! * PostgreSQL alone killed on a shard's primary: restarted in place by
//!   its agent (or failed over), no acknowledged write lost;
//! * the catalog's primary member lost: routers keep serving cached keys
//!   and placements; creating a key or a database answers 503 during the
//!   failover and succeeds after it;
//! * a shard standby's data directory removed: the primary keeps serving
//!   every write, Patroni rebuilds the standby.
//!
//! Every killed member is started again (`deploy/dev-cluster up`) and the
//! test waits until it is a synchronous standby before it ends, so the
//! next test starts from a whole cluster. Run without an HA cluster these
//! tests fail, unless `CHAOS_SKIP_WITHOUT_HA=1` (then they say they were
//! skipped).

use std::time::{Duration, Instant};

use chaos_tests::ha::{self, Member};
use chaos_tests::write_load::{assert_no_acknowledged_write_lost, items_table, statuses, Load};
use cluster_protocol::control::{Access, CreateKey, DatabaseScope};
use e2e_tests::cluster_ops::dev_cluster_up;
use e2e_tests::moves::database;
use e2e_tests::{cluster, Person};

/// The acceptance bound: writes to a shard whose primary was lost
/// resume within 15 s (the dev cluster's Patroni timings: ttl 10 s,
/// loop_wait 1 s, retry_timeout 3 s, so the standby takes over once the
/// lost leader's key expires, about 10 s after the kill).
const RESUME_BOUND: Duration = Duration::from_secs(15);
/// How long a test waits for writes to resume at all before it fails
/// (a liveness limit, not the acceptance bound).
const RESUME_LIMIT: Duration = Duration::from_secs(90);
/// How long a member may take to be a synchronous standby again after
/// `deploy/dev-cluster up` (a rewind, or a new base backup).
const REJOIN_LIMIT: Duration = Duration::from_secs(240);
/// Writers on the shard whose primary is killed, and on the other shard.
const WRITERS: usize = 3;
/// Failovers per run of the shard test.
const RUNS: usize = 3;

/// How a shard's primary is hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hit {
    /// Patroni agent and postmaster together (a lost machine).
    Machine,
    /// The postmaster alone.
    Postgres,
}

/// A database of `owner` on each of two shards: databases are created
/// until two shards hold one (the allocation spreads them; a move would
/// need the mover on the HA cluster, which is not what these tests test).
/// Returns `((shard, database), (other shard, database))`.
async fn databases_on_two_shards(owner: &Person) -> ((String, String), (String, String)) {
    let mut seen: Vec<(String, String)> = Vec::new();
    for _ in 0..20 {
        let db = owner.api.new_database("ha").await;
        let shard = database(&db).await.shard;
        if let Some((first_shard, first_db)) = seen.iter().find(|(s, _)| *s != shard) {
            return ((first_shard.clone(), first_db.clone()), (shard, db));
        }
        seen.push((shard, db));
    }
    panic!("20 new databases all landed on one shard: {seen:?}");
}

/// One failover of `victim`'s primary under write load. Returns the
/// write unavailability: from the kill to the answer of the first write
/// sent after it that was acknowledged.
async fn one_failover(
    members: &[Member],
    owner: &Person,
    victim: (&str, &str),
    other: (&str, &str),
    hit: Hit,
) -> Duration {
    let (victim_shard, victim_db) = victim;
    let (_, other_db) = other;
    let hit_records = items_table(owner, victim_db).await;
    let other_records = items_table(owner, other_db).await;
    ha::wait_healthy(members, victim_shard, REJOIN_LIMIT).await;
    let primary = ha::wait_leader(members, victim_shard, Duration::from_secs(30)).await;

    let hit_load = Load::start(owner, &hit_records, WRITERS).await;
    let other_load = Load::start(owner, &other_records, WRITERS).await;
    let warm = Instant::now();
    assert!(
        hit_load
            .first_ack_sent_after(warm, Duration::from_secs(30))
            .await
            .is_some()
            && other_load
                .first_ack_sent_after(warm, Duration::from_secs(30))
                .await
                .is_some(),
        "writes are acknowledged before the kill"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;

    match hit {
        Hit::Machine => ha::lose_machine(&primary),
        Hit::Postgres => ha::kill_postmaster(&primary),
    }
    let killed = Instant::now();
    let resumed = hit_load.first_ack_sent_after(killed, RESUME_LIMIT).await;
    let Some(resumed) = resumed else {
        panic!(
            "writes to {victim_shard} did not resume within {RESUME_LIMIT:?} of the {hit:?} kill: {:?}",
            statuses(&hit_load.writes())
        );
    };
    let unavailable = resumed.duration_since(killed);
    // Some acknowledged writes on the new (or restarted) primary too.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let hit_writes = hit_load.stop().await;
    let other_writes = other_load.stop().await;

    let hit_statuses = statuses(&hit_writes);
    let other_statuses = statuses(&other_writes);
    eprintln!(
        "chaos: {hit:?} kill of {} ({victim_shard}): writes resumed after {unavailable:?}; \
         that shard answered {hit_statuses:?}, the other {other_statuses:?}",
        primary.name
    );
    // A write in flight when the primary died, or sent before the new one
    // was up, answers 503 (retryable), never 500 or another status.
    assert!(
        hit_statuses.keys().all(|s| *s == 200 || *s == 503),
        "the hit shard answers 200 or 503 only: {hit_statuses:?}"
    );
    assert!(
        other_statuses.keys().all(|s| *s == 200),
        "writes to the other shard never fail: {other_statuses:?}"
    );
    let acked = assert_no_acknowledged_write_lost(&owner.api, &hit_records, &hit_writes).await;
    assert_no_acknowledged_write_lost(&owner.api, &other_records, &other_writes).await;
    eprintln!("chaos: all {acked} acknowledged writes to {victim_shard} are readable");

    // Start what was killed again; it rejoins as the synchronous standby
    // (or, after a postmaster-only kill, Patroni restarted it in place and
    // one of the two members leads).
    if hit == Hit::Machine {
        dev_cluster_up(None).await;
        ha::wait_sync_standby(members, &primary, REJOIN_LIMIT).await;
    } else {
        ha::wait_healthy(members, victim_shard, REJOIN_LIMIT).await;
    }
    unavailable
}

/// Databases on the two shards, for [`one_failover`].
async fn setup() -> (Person, (String, String), (String, String)) {
    let owner = Person::new().await;
    let (victim, other) = databases_on_two_shards(&owner).await;
    (owner, victim, other)
}

/// `runs` failovers of one shard's primary; their unavailabilities.
async fn failovers(members: &[Member], hit: Hit, runs: usize) -> Vec<Duration> {
    let (owner, (vs, vd), (os, od)) = setup().await;
    let mut out = Vec::new();
    for run in 1..=runs {
        let u = one_failover(members, &owner, (&vs, &vd), (&os, &od), hit).await;
        eprintln!("chaos: run {run}/{runs}: write unavailability {u:?}");
        out.push(u);
    }
    out
}

#[tokio::test]
async fn ha_shard_primary_lost_loses_no_acknowledged_write_and_resumes_within_15s() {
    let Some(members) = ha::members_or_skip("shard primary lost") else {
        return;
    };
    let times = failovers(&members, Hit::Machine, RUNS).await;
    let max = times.iter().max().copied().unwrap_or_default();
    assert!(
        max < RESUME_BOUND,
        "writes resume within {RESUME_BOUND:?} of losing the primary (issue 30's acceptance \
         bound, with the dev cluster's Patroni timings); the slowest of {RUNS} runs took {max:?}: \
         {times:?}"
    );
}

#[tokio::test]
async fn ha_shard_postgres_killed_alone_is_restarted_and_loses_no_acknowledged_write() {
    let Some(members) = ha::members_or_skip("shard postgres killed") else {
        return;
    };
    failovers(&members, Hit::Postgres, 1).await;
}

/// Answers of the control plane's `POST /keys` while the catalog fails
/// over: 503 until the new primary serves, then the key.
async fn create_key_until_ok(user_id: &str, limit: Duration) -> (usize, e2e_tests::Api) {
    let deadline = Instant::now() + limit;
    let mut refused = 0;
    loop {
        let made = cluster()
            .control_plane
            .create_key(&CreateKey {
                user_id: user_id.to_owned(),
                name: "after failover".into(),
                access: Access::ReadWrite,
                databases: DatabaseScope::All,
            })
            .await;
        match made {
            Ok(key) => return (refused, e2e_tests::Api::with_token(&key.token)),
            Err(e) => {
                assert_eq!(
                    e.status(),
                    Some(503),
                    "a key created while the catalog fails over answers 503: {e}"
                );
                refused += 1;
            }
        }
        assert!(
            Instant::now() < deadline,
            "creating a key kept failing {limit:?} after the catalog's primary was lost"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `POST /api/databases` through the router until it succeeds; returns
/// how many 503s came first.
async fn create_database_until_ok(owner: &Person, limit: Duration) -> usize {
    let deadline = Instant::now() + limit;
    let mut refused = 0;
    loop {
        let r = owner
            .api
            .post(
                "/api/databases",
                serde_json::json!({"name": e2e_tests::unique("after-failover")}),
            )
            .await;
        if (200..300).contains(&r.status) {
            return refused;
        }
        assert_eq!(
            r.status, 503,
            "a database created while the catalog fails over answers 503: {}",
            r.body
        );
        assert!(
            r.header("retry-after").is_some(),
            "the 503 says when to retry"
        );
        refused += 1;
        assert!(
            Instant::now() < deadline,
            "creating a database kept failing {limit:?} after the catalog's primary was lost"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn ha_catalog_primary_lost_routers_serve_cached_keys_and_new_ones_wait_for_failover() {
    let Some(members) = ha::members_or_skip("catalog primary lost") else {
        return;
    };
    ha::wait_healthy(&members, "control", REJOIN_LIMIT).await;
    let owner = Person::new().await;
    let db = owner.api.new_database("ha").await;
    // The router verifies the writers' keys and caches the placement now.
    let records = items_table(&owner, &db).await;
    let load = Load::start(&owner, &records, WRITERS).await;
    let warm = Instant::now();
    assert!(
        load.first_ack_sent_after(warm, Duration::from_secs(30))
            .await
            .is_some(),
        "writes are acknowledged before the kill"
    );
    let primary = ha::wait_leader(&members, "control", Duration::from_secs(30)).await;

    ha::lose_machine(&primary);
    let killed = Instant::now();
    let (db_refusals, (new_db_refusals, new_key)) = tokio::join!(
        create_database_until_ok(&owner, RESUME_LIMIT),
        create_key_until_ok(&owner.user_id, RESUME_LIMIT)
    );
    let recovered = killed.elapsed();
    // The new key works through the router.
    let listed = new_key.get("/api/databases").await;
    assert_eq!(listed.status, 200, "the new key works: {}", listed.body);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let writes = load.stop().await;
    let answered = statuses(&writes);
    eprintln!(
        "chaos: catalog primary {} lost: new databases and keys answered 503 {db_refusals} \
         and {new_db_refusals} times, then succeeded after {recovered:?}; cached-key writes \
         answered {answered:?}",
        primary.name
    );
    assert!(
        answered.keys().all(|s| *s == 200),
        "requests with cached keys and placements keep working while the catalog fails over: \
         {answered:?}"
    );
    assert!(
        db_refusals > 0 && new_db_refusals > 0,
        "right after the catalog's primary is lost, creating a database or a key answers 503 \
         (databases {db_refusals}, keys {new_db_refusals})"
    );
    assert_no_acknowledged_write_lost(&owner.api, &records, &writes).await;

    dev_cluster_up(None).await;
    ha::wait_sync_standby(&members, &primary, REJOIN_LIMIT).await;
}

#[tokio::test]
async fn ha_shard_standby_data_directory_removed_primary_keeps_serving_and_standby_is_rebuilt() {
    let Some(members) = ha::members_or_skip("standby data directory removed") else {
        return;
    };
    let (owner, (shard, db), _) = setup().await;
    ha::wait_healthy(&members, &shard, REJOIN_LIMIT).await;
    let leader = ha::wait_leader(&members, &shard, Duration::from_secs(30)).await;
    let standby = ha::of_instance(&members, &shard)
        .into_iter()
        .find(|m| m.name != leader.name)
        .expect("a standby member");
    let records = items_table(&owner, &db).await;
    let load = Load::start(&owner, &records, WRITERS).await;
    let warm = Instant::now();
    assert!(
        load.first_ack_sent_after(warm, Duration::from_secs(30))
            .await
            .is_some(),
        "writes are acknowledged before the standby is lost"
    );

    ha::lose_machine(&standby);
    std::fs::remove_dir_all(&standby.data_dir)
        .unwrap_or_else(|e| panic!("remove {}: {e}", standby.data_dir));
    eprintln!("chaos: removed {}", standby.data_dir);
    tokio::time::sleep(Duration::from_secs(3)).await;
    dev_cluster_up(None).await;
    ha::wait_sync_standby(&members, &standby, REJOIN_LIMIT).await;
    // Writes go on with the rebuilt standby too.
    let rebuilt = Instant::now();
    assert!(
        load.first_ack_sent_after(rebuilt, Duration::from_secs(30))
            .await
            .is_some(),
        "writes are acknowledged after the standby is rebuilt"
    );
    let writes = load.stop().await;
    let answered = statuses(&writes);
    eprintln!(
        "chaos: standby {} lost and rebuilt; writes answered {answered:?}",
        standby.name
    );
    assert!(
        answered.keys().all(|s| *s == 200),
        "the primary keeps serving every write while its standby is lost and rebuilt: {answered:?}"
    );
    assert_no_acknowledged_write_lost(&owner.api, &records, &writes).await;
    let still = ha::wait_leader(&members, &shard, Duration::from_secs(30)).await;
    assert_eq!(still, leader, "the primary stayed the primary");
}

/// Percentile `p` (0..=100) of sorted `times`, nearest rank.
fn percentile(sorted: &[Duration], p: usize) -> Duration {
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// The write unavailability of a lost shard primary over
/// `FAILOVER_BENCH_RUNS` runs (default 10), p50 and p99: run by hand on
/// an HA cluster (`cargo test --test chaos -- --ignored failover_bench
/// --nocapture`), figures for loadtest/README.md. Each run checks what
/// the shard test checks, except the 15 s bound.
#[tokio::test]
#[ignore = "a measurement, run by hand on an HA cluster"]
async fn ha_failover_bench_write_unavailability() {
    let Some(members) = ha::members_or_skip("failover bench") else {
        return;
    };
    let runs = std::env::var("FAILOVER_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let mut times = failovers(&members, Hit::Machine, runs).await;
    times.sort();
    println!(
        "failover bench: {runs} runs of kill -9 of a shard primary member (patroni + postgres): \
         write unavailability p50 {:.1}s, p99 {:.1}s, min {:.1}s, max {:.1}s; all: {:?}",
        percentile(&times, 50).as_secs_f64(),
        percentile(&times, 99).as_secs_f64(),
        times[0].as_secs_f64(),
        times[times.len() - 1].as_secs_f64(),
        times
    );
}

#[test]
fn percentiles_are_nearest_rank() {
    let t: Vec<Duration> = (1..=10).map(Duration::from_secs).collect();
    assert_eq!(percentile(&t, 50), Duration::from_secs(5));
    assert_eq!(percentile(&t, 99), Duration::from_secs(10));
    assert_eq!(percentile(&t[..1], 99), Duration::from_secs(1));
}
