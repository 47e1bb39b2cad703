//! The router's part in database moves (docs/moves.md, "Router"): held
//! placements, 421 retries, the heartbeat and placement acknowledgements.

use std::time::Duration;

use cluster_protocol::control::redis_keys::{placement_acks, Invalidation, ROUTERS};

use super::*;

/// Bounds every wait for something the router does in the background.
const PATIENCE: Duration = Duration::from_secs(20);

fn placement(db: &str, tag: &str, url: &str, epoch: i64, hold_ms: Option<i64>) -> Placement {
    Placement {
        database_id: db.to_string(),
        tag: tag.to_string(),
        shard: ShardRef {
            name: format!("s{epoch}"),
            url: url.to_string(),
        },
        epoch,
        state: DatabaseState::Active,
        hold_until: hold_ms.map(|ms| chrono::Utc::now() + chrono::Duration::milliseconds(ms)),
    }
}

fn publish_placement_change(db: &str) {
    let msg = serde_json::to_string(&Invalidation::Placement(db.to_string())).unwrap();
    let _: i64 = redis::cmd("PUBLISH")
        .arg("cluster:invalidate")
        .arg(msg)
        .query(&mut *redis_conn())
        .unwrap();
}

/// Polls `check` until it yields a value (at most [`PATIENCE`]).
async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let give_up = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(tokio::time::Instant::now() < give_up, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A member with an editor key on a database whose placements the control
/// plane hands out in turn; returns (db, tag, token).
fn member_of(
    e: &Env,
    placements: impl FnOnce(&str, &str) -> Vec<Placement>,
) -> (String, String, String) {
    let tag = random_token(5);
    let db = new_tagged(Kind::Database, &tag);
    e.cp.placements
        .lock()
        .unwrap()
        .insert(tag.clone(), placements(&db, &tag));
    let (user_id, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    e.member(&user_id, &db, Role::Editor);
    (db, tag, token)
}

fn post_records(
    e: &Env,
    tag: &str,
    token: &str,
) -> impl std::future::Future<Output = reqwest::Response> {
    let req = e
        .http
        .post(format!(
            "{}/api/tables/{}/records",
            e.router,
            new_tagged(Kind::Table, tag)
        ))
        .header("authorization", format!("Bearer {token}"))
        .header("x-forwarded-for", &e.address)
        .json(&json!({"records": [{"fields": {"Name": "held"}}]}))
        .send();
    async move { req.await.unwrap() }
}

#[tokio::test]
async fn a_held_request_waits_for_the_flip_and_goes_to_the_new_shard() {
    let e = env(100, 1000).await;
    let (old, new) = (Arc::new(Shard::default()), Arc::new(Shard::default()));
    let (old_url, new_url) = (
        spawn_shard(old.clone()).await,
        spawn_shard(new.clone()).await,
    );
    // Held for a minute: only the invalidation can release it.
    let (db, tag, token) = member_of(&e, |db, tag| {
        vec![placement(db, tag, &old_url, 1, Some(60_000))]
    });
    let request = tokio::spawn(post_records(&e, &tag, &token));
    eventually("the router reads the held placement", || {
        (e.cp.placement_calls.load(Ordering::SeqCst) > 0).then_some(())
    })
    .await;
    // Give a wrong router every chance to send it anyway.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!request.is_finished(), "a held request must wait");
    assert_eq!(old.hits.load(Ordering::SeqCst), 0);

    // The flip: epoch 2 on the new shard, hold cleared, invalidation published.
    e.cp.placements
        .lock()
        .unwrap()
        .insert(tag.clone(), vec![placement(&db, &tag, &new_url, 2, None)]);
    publish_placement_change(&db);
    let r = tokio::time::timeout(PATIENCE, request)
        .await
        .expect("released by the invalidation")
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["principal"]["epoch"], 2);
    assert!(v["body"].as_str().unwrap().contains("held"));
    assert_eq!(old.hits.load(Ordering::SeqCst), 0);
    assert_eq!(new.hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_hold_that_runs_out_lets_the_request_through() {
    let e = env(100, 1000).await;
    let shard = Arc::new(Shard::default());
    let url = spawn_shard(shard.clone()).await;
    // No invalidation ever comes (an aborted cutover whose message was
    // lost): after hold_until the placement is read again.
    let (_, tag, token) = member_of(&e, |db, tag| {
        vec![
            placement(db, tag, &url, 1, Some(500)),
            placement(db, tag, &url, 1, None),
        ]
    });
    let r = tokio::time::timeout(PATIENCE, post_records(&e, &tag, &token))
        .await
        .expect("the hold runs out");
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["principal"]["epoch"], 1);
    assert_eq!(shard.hits.load(Ordering::SeqCst), 1);
    assert!(
        e.cp.placement_calls.load(Ordering::SeqCst) >= 2,
        "read again"
    );
}

#[tokio::test]
async fn misplaced_twice_then_served_is_a_200() {
    let e = env(100, 1000).await;
    let shard = Arc::new(Shard {
        misplaced_first: AtomicUsize::new(2),
        ..Shard::default()
    });
    let url = spawn_shard(shard.clone()).await;
    let (_, tag, token) = member_of(&e, |db, tag| vec![placement(db, tag, &url, 1, None)]);
    let r = post_records(&e, &tag, &token).await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert!(
        v["body"].as_str().unwrap().contains("held"),
        "the same body each time"
    );
    assert_eq!(shard.hits.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn always_misplaced_is_a_503_after_five_attempts() {
    let e = env(100, 1000).await;
    let shard = Arc::new(Shard {
        misplaced: true,
        ..Shard::default()
    });
    let url = spawn_shard(shard.clone()).await;
    let (_, tag, token) = member_of(&e, |db, tag| vec![placement(db, tag, &url, 1, None)]);
    let r = post_records(&e, &tag, &token).await;
    assert_eq!(r.status(), 503);
    assert_eq!(header(&r, "retry-after").as_deref(), Some("1"));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "unavailable");
    assert_eq!(shard.hits.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn a_placement_invalidation_is_acknowledged_by_a_live_router() {
    let e = env(100, 1000).await;
    let shard = Arc::new(Shard::default());
    let url = spawn_shard(shard.clone()).await;
    let (db, tag, token) = member_of(&e, |db, tag| vec![placement(db, tag, &url, 7, None)]);
    // An unknown database first: nothing to acknowledge. Published again
    // every second until acknowledged, as the control plane does (the
    // router may not have subscribed yet).
    let unknown = new_tagged(Kind::Database, &random_token(5));
    let mut polls = 0;
    let acks = eventually("the router acknowledges epoch 7", || {
        if polls % 50 == 0 {
            publish_placement_change(&unknown);
            publish_placement_change(&db);
        }
        polls += 1;
        let acks: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(placement_acks(&db))
            .query(&mut *redis_conn())
            .unwrap();
        (!acks.is_empty()).then_some(acks)
    })
    .await;
    assert_eq!(acks.len(), 1, "{acks:?}");
    let (router_id, epoch) = acks.into_iter().next().unwrap();
    assert_eq!(epoch, "7");
    assert_eq!(router_id.len(), 12);
    assert!(router_id.bytes().all(|b| b.is_ascii_alphanumeric()));
    let ttl: i64 = redis::cmd("TTL")
        .arg(placement_acks(&db))
        .query(&mut *redis_conn())
        .unwrap();
    assert!((1..=3600).contains(&ttl), "ttl {ttl}");
    let exists: i64 = redis::cmd("EXISTS")
        .arg(placement_acks(&unknown))
        .query(&mut *redis_conn())
        .unwrap();
    assert_eq!(exists, 0);

    // The router that acknowledged heartbeats into the registry.
    let score: f64 = eventually("the router heartbeats", || {
        redis::cmd("ZSCORE")
            .arg(ROUTERS)
            .arg(&router_id)
            .query::<Option<f64>>(&mut *redis_conn())
            .unwrap()
    })
    .await;
    assert!(score > 0.0);
    assert_eq!(post_records(&e, &tag, &token).await.status(), 200);
}

#[tokio::test]
async fn a_held_import_waits_before_its_body_is_sent() {
    let e = env(100, 1000).await;
    let (old, new) = (Arc::new(Shard::default()), Arc::new(Shard::default()));
    let (old_url, new_url) = (
        spawn_shard(old.clone()).await,
        spawn_shard(new.clone()).await,
    );
    let (db, tag, token) = member_of(&e, |db, tag| {
        vec![placement(db, tag, &old_url, 1, Some(60_000))]
    });
    let import = e
        .http
        .post(format!("{}/api/databases/{db}/import", e.router))
        .header("authorization", format!("Bearer {token}"))
        .header("x-forwarded-for", &e.address)
        .body("file")
        .send();
    let request = tokio::spawn(import);
    eventually("the router reads the held placement", || {
        (e.cp.placement_calls.load(Ordering::SeqCst) > 0).then_some(())
    })
    .await;
    e.cp.placements
        .lock()
        .unwrap()
        .insert(tag.clone(), vec![placement(&db, &tag, &new_url, 2, None)]);
    publish_placement_change(&db);
    let r = tokio::time::timeout(PATIENCE, request)
        .await
        .expect("released")
        .unwrap()
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["principal"]["epoch"], 2);
    assert_eq!(v["body"], "file");
    assert_eq!(old.hits.load(Ordering::SeqCst), 0);
    assert_eq!(new.hits.load(Ordering::SeqCst), 1);
}
