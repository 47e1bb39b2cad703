//! Time limits of the node's PostgreSQL sessions, pool exhaustion, each
//! database's and each owner's share of the pool, and what an abandoned request does to the
//! statement it left running. A read is made slow by another session
//! holding its table locked, so nothing here depends on how fast the
//! machine is; each test runs a node of its own (small pool, chosen limits)
//! on a database of its own.

use std::time::Duration;

use cluster_protocol::principal::Principal;
use shard_node::config::DbLimits;
use tokio_postgres::{Client, NoTls};

use crate::helpers::*;

/// Bounds every wait of these tests, so a regression fails instead of hanging.
const PATIENCE: Duration = Duration::from_secs(20);

async fn connect(url: &str) -> Client {
    let (client, conn) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(conn);
    client
}

/// Reads waiting for a lock on `relation` (a qualified table name). The
/// pass of the trash purger a node runs when it starts may reach the locked
/// table too; it deletes (another lock mode) and is not counted.
async fn waiting_on(pg: &Client, relation: &str) -> i64 {
    pg.query_one(
        "SELECT count(*) FROM pg_locks WHERE relation = to_regclass($1) AND NOT granted \
           AND mode = 'AccessShareLock'",
        &[&relation],
    )
    .await
    .unwrap()
    .get(0)
}

/// Polls until `waiting_on(relation)` is `count`, at most [`PATIENCE`].
async fn until_waiting(pg: &Client, relation: &str, count: i64) -> bool {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while tokio::time::Instant::now() < deadline {
        if waiting_on(pg, relation).await == count {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// A database with two tables on `url`, made through a node with default
/// limits: (owner, first table id, its qualified name, second table id).
async fn fixture(url: &str) -> (Principal, String, String, String) {
    let app = spawn_app_on(url.to_owned()).await;
    let (db, owner) = app.owned_database().await;
    let first = app.create_table_id(&db, &owner, "Slow").await;
    let second = app.create_table_id(&db, &owner, "Other").await;
    let qualified = shard_node::tenant_schema::table(&db, &first).unwrap();
    (owner, first, qualified, second)
}

/// Holds `relation` locked against every read until the returned session
/// rolls back or is dropped.
async fn lock(url: &str, relation: &str) -> Client {
    let locker = connect(url).await;
    locker
        .batch_execute(&format!(
            "BEGIN; LOCK TABLE {relation} IN ACCESS EXCLUSIVE MODE"
        ))
        .await
        .unwrap();
    locker
}

async fn records(app: &TestApp, table: &str, p: &Principal) -> Reply {
    let path = format!("/api/tables/{table}/records");
    tokio::time::timeout(PATIENCE, app.get(&path, p))
        .await
        .expect("the node answered within the test's patience")
}

/// A signed GET whose response headers the test reads.
async fn signed_get(app: &TestApp, path: &str, p: &Principal) -> reqwest::Response {
    let mut req = app
        .http
        .get(format!("http://{}{path}", app.addr))
        .timeout(PATIENCE)
        .build()
        .unwrap();
    p.sign_reqwest(SECRET.as_bytes(), chrono::Utc::now().timestamp(), &mut req);
    app.http.execute(req).await.unwrap()
}

#[tokio::test]
async fn a_statement_over_the_time_limit_is_stopped_with_a_400_naming_the_limit() {
    let (url, _) = private_database().await;
    let (owner, table, relation, _) = fixture(&url).await;
    let limits = DbLimits {
        statement: Duration::from_millis(300),
        ..DbLimits::default()
    };
    let node = spawn_app_with(url.clone(), 2, limits).await;
    let locker = lock(&url, &relation).await;

    let r = records(&node, &table, &owner).await;
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert_eq!(r.error_code(), "bad_request");
    assert!(r.error_message().contains("time limit"), "{:?}", r.body);

    locker.batch_execute("ROLLBACK").await.unwrap();
    let r = records(&node, &table, &owner).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
}

#[tokio::test]
async fn a_request_finding_every_session_busy_answers_503_with_retry_after() {
    let (url, _) = private_database().await;
    let (owner, table, relation, other) = fixture(&url).await;
    // One database (and one owner) may hold the whole pool here: what runs
    // out is the pool, not the database's or the owner's share of it.
    let limits = DbLimits {
        pool_wait: Duration::from_millis(200),
        sessions_per_database: Some(2),
        sessions_per_owner: Some(2),
        ..DbLimits::default()
    };
    let node = std::sync::Arc::new(spawn_app_with(url.clone(), 1, limits).await);
    let locker = lock(&url, &relation).await;

    // The node's only session waits on the lock...
    let held = tokio::spawn({
        let (node, owner, table) = (node.clone(), owner.clone(), table.clone());
        async move { records(&node, &table, &owner).await }
    });
    assert!(until_waiting(&locker, &relation, 1).await);

    // ...so another request gets none.
    let resp = signed_get(&node, &format!("/api/tables/{other}/records"), &owner).await;
    assert_eq!(resp.status(), 503);
    assert_eq!(resp.headers()["retry-after"], "1");
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    assert_eq!(
        body["error"]["message"],
        shard_node::error::POOL_BUSY_MESSAGE,
        "{body}"
    );

    locker.batch_execute("ROLLBACK").await.unwrap();
    let r = held.await.unwrap();
    assert_eq!(r.status, 200, "{:?}", r.body);
}

#[tokio::test]
async fn an_abandoned_request_cancels_its_statement_and_frees_its_session() {
    let (url, _) = private_database().await;
    let (owner, table, relation, other) = fixture(&url).await;
    // Only a cancel can end the waiting statement within the test.
    let limits = DbLimits {
        statement: Duration::from_secs(120),
        ..DbLimits::default()
    };
    let node = std::sync::Arc::new(spawn_app_with(url.clone(), 1, limits).await);
    let locker = lock(&url, &relation).await;

    let abandoned = tokio::spawn({
        let (node, owner, table) = (node.clone(), owner.clone(), table.clone());
        async move { records(&node, &table, &owner).await }
    });
    assert!(until_waiting(&locker, &relation, 1).await);
    // The client goes away: its connection to the node closes.
    abandoned.abort();

    // The statement is cancelled while the lock is still held...
    assert!(
        until_waiting(&locker, &relation, 0).await,
        "the abandoned statement still waits on the lock"
    );
    // ...and the node's only session serves the next request at once.
    let r = records(&node, &other, &owner).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    locker.batch_execute("ROLLBACK").await.unwrap();
}

#[tokio::test]
async fn a_database_holding_its_share_of_the_pool_waits_while_another_is_served() {
    let (url, _) = private_database().await;
    let (owner_a, slow, relation, _) = fixture(&url).await;
    let (owner_b, table_b, _, _) = fixture(&url).await;
    // Three sessions, at most two of them for the requests of one database.
    let limits = DbLimits {
        pool_wait: Duration::from_millis(500),
        sessions_per_database: Some(2),
        ..DbLimits::default()
    };
    let node = std::sync::Arc::new(spawn_app_with(url.clone(), 3, limits).await);
    let locker = lock(&url, &relation).await;

    // Two slow reads of database A hold two sessions, waiting on the lock...
    let held: Vec<_> = (0..2)
        .map(|_| {
            let (node, owner, table) = (node.clone(), owner_a.clone(), slow.clone());
            tokio::spawn(async move { records(&node, &table, &owner).await })
        })
        .collect();
    assert!(until_waiting(&locker, &relation, 2).await);

    // ...so a third read of A waits for one of A's own sessions rather than
    // taking the shard's last one...
    let third = tokio::spawn({
        let (node, owner, table) = (node.clone(), owner_a.clone(), slow.clone());
        async move {
            let resp = signed_get(&node, &format!("/api/tables/{table}/records"), &owner).await;
            let status = resp.status().as_u16();
            let retry_after = resp.headers().get("retry-after").cloned();
            let body: serde_json::Value = resp.json().await.unwrap();
            (status, retry_after, body)
        }
    });
    // ...which database B's request finds free.
    let r = records(&node, &table_b, &owner_b).await;
    assert_eq!(r.status, 200, "{:?}", r.body);

    // A's third read is refused after the pool wait, naming A's requests.
    let (status, retry_after, body) = third.await.unwrap();
    assert_eq!(status, 503, "{body}");
    assert_eq!(retry_after.unwrap(), "1");
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("This database has too many requests in progress"),
        "{body}"
    );
    assert!(message.contains("Retry in about 1s"), "{body}");
    // It never reached PostgreSQL.
    assert_eq!(waiting_on(&locker, &relation).await, 2);

    locker.batch_execute("ROLLBACK").await.unwrap();
    for h in held {
        let r = h.await.unwrap();
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
    // Given back: A is served again.
    let r = records(&node, &slow, &owner_a).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
}

/// Reads waiting for a lock on any of `relations`.
async fn waiting_on_any(pg: &Client, relations: &[String]) -> i64 {
    let mut total = 0;
    for r in relations {
        total += waiting_on(pg, r).await;
    }
    total
}

#[tokio::test]
async fn an_owner_with_several_databases_cannot_take_every_session() {
    let (url, _) = private_database().await;
    // One owner with three databases, another owner with one.
    let setup = spawn_app_on(url.clone()).await;
    let user = user_id();
    let mut owned = Vec::new();
    for name in ["One", "Two", "Three"] {
        let db = setup.create_database(&user, name).await;
        let id = db["id"].as_str().unwrap().to_owned();
        let p = owner(&user, &id);
        let table = setup.create_table_id(&id, &p, "Slow").await;
        let relation = shard_node::tenant_schema::table(&id, &table).unwrap();
        owned.push((p, table, relation));
    }
    let (owner_b, table_b, _, _) = fixture(&url).await;
    // Three sessions; one per database, at most two for one owner's.
    let limits = DbLimits {
        pool_wait: Duration::from_millis(500),
        sessions_per_database: Some(1),
        sessions_per_owner: Some(2),
        ..DbLimits::default()
    };
    let node = std::sync::Arc::new(spawn_app_with(url.clone(), 3, limits).await);
    let relations: Vec<String> = owned.iter().map(|(_, _, r)| r.clone()).collect();
    let locker = connect(&url).await;
    locker
        .batch_execute(&format!(
            "BEGIN; LOCK TABLE {} IN ACCESS EXCLUSIVE MODE",
            relations.join(", ")
        ))
        .await
        .unwrap();

    // Slow reads of two of the owner's databases hold two sessions...
    let held: Vec<_> = owned[..2]
        .iter()
        .map(|(p, table, _)| {
            let (node, p, table) = (node.clone(), p.clone(), table.clone());
            tokio::spawn(async move { records(&node, &table, &p).await })
        })
        .collect();
    assert!(until_waiting_any(&locker, &relations, 2).await);

    // ...so a read of the owner's third database waits for one of the
    // owner's own sessions rather than taking the shard's last one...
    let third = tokio::spawn({
        let (p, table, _) = owned[2].clone();
        let node = node.clone();
        async move {
            let resp = signed_get(&node, &format!("/api/tables/{table}/records"), &p).await;
            let status = resp.status().as_u16();
            let retry_after = resp.headers().get("retry-after").cloned();
            let body: serde_json::Value = resp.json().await.unwrap();
            (status, retry_after, body)
        }
    });
    // (had it taken that session, its read would wait on the lock too)
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !third.is_finished() && waiting_on_any(&locker, &relations).await < 3 {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // ...which another owner's request finds free.
    let r = records(&node, &table_b, &owner_b).await;
    assert_eq!(r.status, 200, "{:?}", r.body);

    let (status, retry_after, body) = third.await.unwrap();
    assert_eq!(status, 503, "{body}");
    assert_eq!(retry_after.unwrap(), "1");
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
    assert_eq!(
        body["error"]["message"],
        shard_node::error::OWNER_BUSY_MESSAGE,
        "{body}"
    );

    locker.batch_execute("ROLLBACK").await.unwrap();
    for h in held {
        let r = h.await.unwrap();
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
    // Given back: the owner's third database is served again.
    let (p, table, _) = &owned[2];
    let r = records(&node, table, p).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
}

/// Polls until [`waiting_on_any`] is `count`, at most [`PATIENCE`].
async fn until_waiting_any(pg: &Client, relations: &[String], count: i64) -> bool {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while tokio::time::Instant::now() < deadline {
        if waiting_on_any(pg, relations).await == count {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}
