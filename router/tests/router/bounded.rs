//! The router's caches at their bound (`ROUTER_*_CACHE_ENTRIES` of 1):
//! what is evicted is read again, a revoked key stays refused, and
//! a cached user's access still follows its version.

use super::*;

/// A router whose three caches hold one entry each.
async fn env_of_one_entry() -> Env {
    env_with_config(100, 1000, redis_url(), |c| {
        c.caches = router::config::CacheLimits {
            placements: 1,
            keys: 1,
            users: 1,
        };
    })
    .await
}

fn revoke(e: &Env, user_id: &str, key_id: &str) {
    // What the control plane does: the record gone, the version deleted, an
    // invalidation published.
    e.cp.keys.lock().unwrap().remove(key_id);
    let mut redis = redis_conn();
    let _: () = redis::cmd("DEL")
        .arg(cluster_protocol::control::redis_keys::key_version(
            user_id, key_id,
        ))
        .query(&mut *redis)
        .unwrap();
    let msg = serde_json::to_string(&cluster_protocol::control::redis_keys::Invalidation::Key(
        key_id.to_string(),
    ))
    .unwrap();
    let _: i64 = redis::cmd("PUBLISH")
        .arg(cluster_protocol::control::redis_keys::INVALIDATION_CHANNEL)
        .arg(msg)
        .query(&mut *redis)
        .unwrap();
}

#[tokio::test]
async fn a_revoked_key_pushed_out_of_a_full_cache_stays_refused() {
    let e = env_of_one_entry().await;
    let (a_user, a_id, a) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    let (_, _, b) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    assert_eq!(e.get("/api/meta/whoami", Some(&a)).await.status(), 200);
    // B takes the only place: A is evicted, then revoked while out.
    assert_eq!(e.get("/api/meta/whoami", Some(&b)).await.status(), 200);
    revoke(&e, &a_user, &a_id);
    assert_eq!(e.get("/api/meta/whoami", Some(&a)).await.status(), 401);
    // Revoked while cached, then pushed out by B, then presented again.
    let (c_user, c_id, c) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    assert_eq!(e.get("/api/meta/whoami", Some(&c)).await.status(), 200);
    revoke(&e, &c_user, &c_id);
    assert_eq!(e.get("/api/meta/whoami", Some(&b)).await.status(), 200);
    for _ in 0..2 {
        assert_eq!(e.get("/api/meta/whoami", Some(&c)).await.status(), 401);
    }
    // An evicted key's wrong secret is still wrong, its right one still right.
    let (b_id, _) = b.split_once('.').unwrap();
    let wrong = format!("{b_id}.not-the-secret");
    assert_eq!(e.get("/api/meta/whoami", Some(&wrong)).await.status(), 401);
    assert_eq!(e.get("/api/meta/whoami", Some(&b)).await.status(), 200);
}

#[tokio::test]
async fn evicted_placements_are_read_again_and_cached_access_follows_its_version() {
    let e = env_of_one_entry().await;
    let (s1, s2) = (Arc::new(Shard::default()), Arc::new(Shard::default()));
    let (u1, u2) = (spawn_shard(s1.clone()).await, spawn_shard(s2.clone()).await);
    let (db1, _) = e.database(&[&u1, &u2]);
    let (db2, _) = e.database(&[&u2]);
    let (user_id, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    e.member(&user_id, &db1, Role::Editor);
    e.member(&user_id, &db2, Role::Editor);
    let (p1, p2) = (
        format!("/api/databases/{db1}/tables"),
        format!("/api/databases/{db2}/tables"),
    );
    let calls = || e.cp.placement_calls.load(Ordering::SeqCst);

    assert_eq!(e.get(&p1, Some(&token)).await.status(), 200);
    assert_eq!(e.get(&p1, Some(&token)).await.status(), 200);
    let after_db1 = calls();
    // db2 pushes db1's placement out; db1 is read again (its list hands
    // out shard 2 next: proof that it was asked, not remembered).
    assert_eq!(e.get(&p2, Some(&token)).await.status(), 200);
    assert_eq!(e.get(&p1, Some(&token)).await.status(), 200);
    assert_eq!(calls(), after_db1 + 2);
    assert_eq!(
        (
            s1.hits.load(Ordering::SeqCst),
            s2.hits.load(Ordering::SeqCst)
        ),
        (2, 2)
    );

    // A membership removed: the cached access (one user, bound 1) follows
    // its version as before.
    {
        let mut access = e.cp.access.lock().unwrap();
        let a = access.get_mut(&user_id).unwrap();
        a.memberships.retain(|m| m.database_id != db1);
        a.version += 1;
    }
    let _: () = redis::cmd("SET")
        .arg(cluster_protocol::control::redis_keys::user_version(
            &user_id,
        ))
        .arg(999)
        .query(&mut *redis_conn())
        .unwrap();
    assert_eq!(e.get(&p1, Some(&token)).await.status(), 404);
    assert_eq!(e.get(&p2, Some(&token)).await.status(), 200);
}
