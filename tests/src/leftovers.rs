//! What a move may leave behind, and the check that it left nothing
//! (docs/moves.md): replication objects named `tmv_...` on either shard's
//! PostgreSQL instance, and the copy of the database (its schema, catalog
//! rows and placement) on the shard that does not hold it. Read as the
//! `postgres` superuser, straight from each instance.

use std::time::{Duration, Instant};

use cluster_protocol::control::Move;

use crate::cluster;
use crate::placements::{database, shard_names};

/// The shard-level catalog tables a move replicates, each filtered by
/// `database_id` (docs/moves.md), plus the never-replicated `placements`.
pub const CATALOG_TABLES: [&str; 10] = [
    "tables",
    "fields",
    "views",
    "webhooks",
    "deliveries",
    "webhook_matches",
    "attachments",
    "comments",
    "share_links",
    "placements",
];

/// Publication, slot and subscription name of a move (docs/moves.md,
/// "Names"): `tmv_` and the hex of the id's 12 characters.
pub fn replication_name(move_id: &str) -> String {
    let suffix = move_id.strip_prefix("mov_").unwrap_or(move_id);
    format!("tmv_{}", hex::encode(suffix.as_bytes()).to_lowercase())
}

/// A superuser session on a shard's PostgreSQL instance: the shard's
/// registered DSN (every host and port of it: under HA=1 both members, and
/// its `target_session_attrs=read-write` picks the primary) as the
/// `postgres` superuser of deploy/test, without a password (trust on
/// 127.0.0.1).
pub async fn shard_admin(shard: &str) -> tokio_postgres::Client {
    let list = cluster().control_plane.shards().await.expect("shards list");
    let dsn = list
        .shards
        .iter()
        .find(|s| s.name == shard)
        .unwrap_or_else(|| panic!("{shard} is registered"))
        .postgres
        .clone();
    let registered: tokio_postgres::Config = dsn.parse().expect("a shard DSN parses");
    // The host of TEST_POSTGRES_URL when set (where the tests reach the
    // instances), with the registered ports.
    let test_host = std::env::var("TEST_POSTGRES_URL")
        .ok()
        .and_then(|u| u.parse::<tokio_postgres::Config>().ok())
        .and_then(|c| match c.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => Some(h.clone()),
            _ => None,
        });
    let mut cfg = tokio_postgres::Config::new();
    for (i, host) in registered.get_hosts().iter().enumerate() {
        match (&test_host, host) {
            (Some(h), _) | (None, tokio_postgres::config::Host::Tcp(h)) => cfg.host(h),
            #[cfg(unix)]
            (None, tokio_postgres::config::Host::Unix(p)) => cfg.host_path(p),
        };
        let ports = registered.get_ports();
        if let Some(port) = ports.get(i).or(ports.first()) {
            cfg.port(*port);
        }
    }
    cfg.dbname(registered.get_dbname().unwrap_or("cluster"))
        .user("postgres")
        .target_session_attrs(registered.get_target_session_attrs());
    let (client, conn) = cfg
        .connect(tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("postgres of {shard} reachable as postgres: {e}"));
    tokio::spawn(conn);
    client
}

async fn count(pg: &tokio_postgres::Client, sql: &str, param: &str) -> i64 {
    pg.query_one(sql, &[&param])
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

/// What of one database a shard has: schema, catalog rows, placement.
#[derive(Debug, PartialEq, Eq)]
pub struct ShardCopy {
    pub schema: bool,
    pub database_row: bool,
    /// Catalog tables with rows of the database (placements included).
    pub catalog_rows: Vec<&'static str>,
    /// Publications over the database's schema.
    pub publications: i64,
}

impl ShardCopy {
    pub fn is_empty(&self) -> bool {
        !self.schema && !self.database_row && self.catalog_rows.is_empty() && self.publications == 0
    }
}

/// What `shard` holds of `database_id`.
pub async fn copy_on(shard: &str, database_id: &str) -> ShardCopy {
    let pg = shard_admin(shard).await;
    let schema = count(
        &pg,
        "SELECT count(*) FROM pg_namespace WHERE nspname = $1",
        database_id,
    )
    .await
        > 0;
    let database_row = count(
        &pg,
        "SELECT count(*) FROM databases WHERE id = $1",
        database_id,
    )
    .await
        > 0;
    let mut catalog_rows = Vec::new();
    for table in CATALOG_TABLES {
        let sql = format!("SELECT count(*) FROM {table} WHERE database_id = $1");
        if count(&pg, &sql, database_id).await > 0 {
            catalog_rows.push(table);
        }
    }
    let publications = count(
        &pg,
        "SELECT count(*) FROM pg_publication_namespace pn
           JOIN pg_namespace n ON n.oid = pn.pnnspid WHERE n.nspname = $1",
        database_id,
    )
    .await;
    ShardCopy {
        schema,
        database_row,
        catalog_rows,
        publications,
    }
}

/// Replication objects named `name` on a shard's instance:
/// `[publications, slots, subscriptions]`.
pub async fn replication_objects(shard: &str, name: &str) -> [i64; 3] {
    let pg = shard_admin(shard).await;
    [
        count(
            &pg,
            "SELECT count(*) FROM pg_publication WHERE pubname LIKE $1",
            name,
        )
        .await,
        count(
            &pg,
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE $1",
            name,
        )
        .await,
        count(
            &pg,
            "SELECT count(*) FROM pg_subscription WHERE subname LIKE $1",
            name,
        )
        .await,
    ]
}

/// After a finished move: the database is on exactly one of the two
/// shards, the one the catalog names, with its placement `owned` at the
/// catalog's epoch; the other has no schema, no catalog row and no
/// placement; neither has the move's publication, slot or subscription.
/// Polled for up to 30 s (the mover drops orphans after every move), then
/// asserted.
pub async fn assert_nothing_left(m: &Move) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let name = replication_name(&m.id);
    loop {
        let placed = database(&m.database_id).await;
        let other = if placed.shard == m.from {
            &m.to
        } else {
            &m.from
        };
        let mut problems = Vec::new();
        for shard in [&m.from, &m.to] {
            let objects = replication_objects(shard, &name).await;
            if objects != [0, 0, 0] {
                problems.push(format!(
                    "{shard} has {name}: publications/slots/subscriptions {objects:?}"
                ));
            }
        }
        let stale = copy_on(other, &m.database_id).await;
        if !stale.is_empty() {
            problems.push(format!("{other} (not holding it) still has {stale:?}"));
        }
        let held = copy_on(&placed.shard, &m.database_id).await;
        if !held.schema || !held.database_row || held.publications != 0 {
            problems.push(format!("{} (holding it) has {held:?}", placed.shard));
        }
        let owned = shard_admin(&placed.shard)
            .await
            .query_opt(
                "SELECT state, epoch FROM placements WHERE database_id = $1",
                &[&m.database_id],
            )
            .await
            .expect("read placements")
            .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)));
        if owned != Some(("owned".to_owned(), placed.epoch)) {
            problems.push(format!(
                "{}'s placement is {owned:?}, the catalog's epoch {}",
                placed.shard, placed.epoch
            ));
        }
        if problems.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "move {} ({}) left behind: {}",
            m.id,
            m.state.as_str(),
            problems.join("; ")
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Every `tmv_%` publication, slot and subscription on every shard (the
/// chaos tests run alone, so any is a leftover once their moves finished).
pub async fn all_replication_objects() -> Vec<(String, [i64; 3])> {
    let mut out = Vec::new();
    for shard in shard_names().await {
        let found = replication_objects(&shard, "tmv\\_%").await;
        if found != [0, 0, 0] {
            out.push((shard, found));
        }
    }
    out
}
