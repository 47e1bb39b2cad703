//! Liveness and change propagation: Redis down, membership and placement
//! changes, database creation.

use super::*;

#[tokio::test]
async fn redis_down_falls_back_to_the_local_limiter() {
    // Nothing listens on port 1: every Redis call fails fast.
    let e = env_with_redis(3, 1000, "redis://127.0.0.1:1".into()).await;
    let (_, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    for expected in (0..3).rev() {
        let r = e.get("/api/meta/whoami", Some(&token)).await;
        assert_eq!(r.status(), 200);
        assert_eq!(
            header(&r, "x-ratelimit-remaining"),
            Some(expected.to_string())
        );
    }
    let r = e.get("/api/meta/whoami", Some(&token)).await;
    assert_eq!(r.status(), 429);
    assert!(header(&r, "retry-after").is_some());
}

#[tokio::test]
async fn membership_and_placement_changes_apply_promptly() {
    let e = env(100, 1000).await;
    let (s1, s2) = (Arc::new(Shard::default()), Arc::new(Shard::default()));
    let (u1, u2) = (spawn_shard(s1.clone()).await, spawn_shard(s2.clone()).await);
    let (db, tag) = e.database(&[&u1]);
    let (user_id, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    e.member(&user_id, &db, Role::Editor);
    let path = format!("/api/databases/{db}/tables");
    assert_eq!(e.get(&path, Some(&token)).await.status(), 200);

    // The placement moves; the control plane publishes an invalidation.
    let moved = Placement {
        database_id: db.clone(),
        tag: tag.clone(),
        shard: ShardRef {
            name: "s2".into(),
            url: u2.clone(),
        },
        epoch: 2,
        state: DatabaseState::Active,
        hold_until: None,
    };
    e.cp.placements
        .lock()
        .unwrap()
        .insert(tag.clone(), vec![moved]);
    let msg = serde_json::to_string(
        &cluster_protocol::control::redis_keys::Invalidation::Placement(db.clone()),
    )
    .unwrap();
    let _: i64 = redis::cmd("PUBLISH")
        .arg("cluster:invalidate")
        .arg(msg)
        .query(&mut *redis_conn())
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(e.get(&path, Some(&token)).await.status(), 200);
    assert_eq!(
        (
            s1.hits.load(Ordering::SeqCst),
            s2.hits.load(Ordering::SeqCst)
        ),
        (1, 1)
    );

    // Membership removed: the access version in Redis changes, the next request is 404.
    {
        let mut access = e.cp.access.lock().unwrap();
        let a = access.get_mut(&user_id).unwrap();
        a.memberships.clear();
        a.version += 1;
    }
    let _: () = redis::cmd("SET")
        .arg(cluster_protocol::control::redis_keys::user_version(
            &user_id,
        ))
        .arg(999)
        .query(&mut *redis_conn())
        .unwrap();
    assert_eq!(e.get(&path, Some(&token)).await.status(), 404);
    assert_eq!(s2.hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn create_database_allocates_forwards_and_confirms() {
    let e = env(100, 1000).await;
    let shard = Arc::new(Shard::default());
    let url = spawn_shard(shard.clone()).await;
    *e.cp.allocate_to.lock().unwrap() = Some(url);
    let post = |token: String| {
        e.http
            .post(format!("{}/api/databases", e.router))
            .header("authorization", format!("Bearer {token}"))
            .header("x-forwarded-for", &e.address)
            .json(&json!({"name": "Projects"}))
            .send()
    };
    let (_, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    let r = post(token).await.unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert!(v["principal"]["new_database"]["database_id"]
        .as_str()
        .unwrap()
        .starts_with("db_"));
    assert_eq!(v["body"], r#"{"name":"Projects"}"#);
    assert_eq!(e.cp.confirmed.load(Ordering::SeqCst), 1);

    let (_, _, narrowed) = e.user_with_key(Access::ReadWrite, DatabaseScope::Only(vec![]));
    let r = post(narrowed).await.unwrap();
    assert_eq!(r.status(), 403);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["error"]["message"],
        cluster_protocol::error::forbidden::NARROWED_KEY_CREATE
    );
    let (_, _, read_only) = e.user_with_key(Access::ReadOnly, DatabaseScope::All);
    let r = post(read_only).await.unwrap();
    assert_eq!(r.status(), 403);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["message"], "This API key is read-only.");
    assert_eq!(shard.hits.load(Ordering::SeqCst), 1);
}
