//! The gate every request passes: the identical 401, key budgets and the
//! anonymous shield, liveness, whoami, membership before a shard, principals
//! signed for the shard, 421 retries, the import exception and the database
//! list's fan-out.

use super::*;

#[tokio::test]
async fn every_401_is_identical_and_unstamped() {
    let e = env(100, 1000).await;
    let (_, key_id, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    let unknown = format!("{}.whatever", new_untagged(Kind::Key));
    let wrong = format!("{key_id}.wrongsecret");
    let mut bodies = Vec::new();
    for t in [
        None,
        Some("garbage"),
        Some(unknown.as_str()),
        Some(wrong.as_str()),
    ] {
        let r = e.get("/api/meta/whoami", t).await;
        assert_eq!(r.status(), 401);
        assert!(header(&r, "x-ratelimit-limit").is_none());
        bodies.push(r.text().await.unwrap());
    }
    assert!(bodies.iter().all(|b| b == &bodies[0]));
    let v: Value = serde_json::from_str(&bodies[0]).unwrap();
    assert_eq!(v["error"]["code"], "unauthorized");
    assert_eq!(
        v["error"]["message"],
        cluster_protocol::error::UNAUTHORIZED_MESSAGE
    );
    // The right secret still works after wrong ones, and a wrong one after it is 401.
    assert_eq!(e.get("/api/meta/whoami", Some(&token)).await.status(), 200);
    assert_eq!(e.get("/api/meta/whoami", Some(&wrong)).await.status(), 401);
}

#[tokio::test]
async fn key_budget_headers_429_and_two_keys_two_budgets() {
    let e = env(5, 1000).await;
    let (_, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    let (_, _, other) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    for expected in (0..5).rev() {
        let r = e.get("/api/meta/whoami", Some(&token)).await;
        assert_eq!(r.status(), 200);
        assert_eq!(header(&r, "x-ratelimit-limit").as_deref(), Some("5"));
        assert_eq!(
            header(&r, "x-ratelimit-remaining"),
            Some(expected.to_string())
        );
    }
    let r = e.get("/api/meta/whoami", Some(&token)).await;
    assert_eq!(r.status(), 429);
    let retry: u64 = header(&r, "retry-after").unwrap().parse().unwrap();
    // At most the rest of this minute's bucket plus the time the next one
    // needs for 5 old requests to decay below 4 (a fifth of the window):
    // 72 s when all five fell at the very start of a bucket.
    assert!((1..=72).contains(&retry), "retry-after {retry}");
    assert_eq!(header(&r, "x-ratelimit-limit").as_deref(), Some("5"));
    assert_eq!(header(&r, "x-ratelimit-remaining").as_deref(), Some("0"));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "rate_limited");
    assert_eq!(
        v["error"]["message"],
        format!("Too many requests. Retry in about {retry}s.")
    );
    // A 404 for a verified key is stamped too; the other key has its own budget.
    let r = e.get("/api/nothing/here", Some(&other)).await;
    assert_eq!(r.status(), 404);
    assert_eq!(header(&r, "x-ratelimit-remaining").as_deref(), Some("4"));
}

#[tokio::test]
async fn anonymous_shield_per_address() {
    let e = env(100, 4).await;
    for _ in 0..4 {
        assert_eq!(e.get("/api/databases", None).await.status(), 401);
    }
    let r = e.get("/api/databases", None).await;
    assert_eq!(r.status(), 429);
    assert!(header(&r, "retry-after").is_some());
    assert!(header(&r, "x-ratelimit-limit").is_none());
    // Another address (last x-forwarded-for entry) has its own shield.
    let r = e
        .http
        .get(format!("{}/api/databases", e.router))
        .header(
            "x-forwarded-for",
            format!("{}, 192.0.2.{}", e.address, rand::random::<u8>()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // Health counts against the address like every request.
    assert_eq!(e.get("/api/health", None).await.status(), 429);
}

#[tokio::test]
async fn deleted_liveness_means_401_on_the_next_request() {
    let e = env(100, 1000).await;
    let (user_id, key_id, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    assert_eq!(e.get("/api/meta/whoami", Some(&token)).await.status(), 200);
    assert_eq!(e.get("/api/meta/whoami", Some(&token)).await.status(), 200);
    // Revoke: the control plane forgets the key and deletes its liveness.
    e.cp.keys.lock().unwrap().remove(&key_id);
    let _: () = redis::cmd("DEL")
        .arg(cluster_protocol::control::redis_keys::key_version(
            &user_id, &key_id,
        ))
        .query(&mut *redis_conn())
        .unwrap();
    assert_eq!(e.get("/api/meta/whoami", Some(&token)).await.status(), 401);
}

#[tokio::test]
async fn whoami_shape_and_last_used() {
    let e = env(100, 1000).await;
    let (user_id, key_id, token) = e.user_with_key(
        Access::ReadOnly,
        DatabaseScope::Only(vec!["db_Ab3dZ1234567".into()]),
    );
    let v: Value = e
        .get("/api/meta/whoami", Some(&token))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["user"]["id"], user_id);
    assert_eq!(v["key"]["id"], key_id);
    assert_eq!(v["key"]["access"], "read_only");
    assert_eq!(v["key"]["databases"], json!(["db_Ab3dZ1234567"]));
    assert!(v["key"]["created_at"].as_str().unwrap().ends_with('Z'));
    let v: Value = e
        .get("/api/meta/whoami", Some(&token))
        .await
        .json()
        .await
        .unwrap();
    assert!(v["key"]["last_used_at"]
        .as_str()
        .is_some_and(|s| s.ends_with('Z')));
}

#[tokio::test]
async fn non_members_and_unknown_tags_never_reach_a_shard() {
    let e = env(100, 1000).await;
    let shard = Arc::new(Shard::default());
    let url = spawn_shard(shard.clone()).await;
    let (_, tag) = e.database(&[&url]);
    let (_, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    for path in [
        format!("/api/tables/{}", new_tagged(Kind::Table, &tag)),
        format!("/api/tables/{}", new_tagged(Kind::Table, &random_token(5))),
        "/api/tables/tbl_bad".to_string(),
    ] {
        let r = e.get(&path, Some(&token)).await;
        assert_eq!(r.status(), 404, "{path}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "not_found");
    }
    assert_eq!(shard.hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn members_reach_the_shard_with_a_verified_principal() {
    let e = env(100, 1000).await;
    let shard = Arc::new(Shard::default());
    let url = spawn_shard(shard.clone()).await;
    let (db, tag) = e.database(&[&url]);
    let (user_id, key_id, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    e.member(&user_id, &db, Role::Editor);
    let path = format!(
        "/api/tables/{}/records?page_size=5",
        new_tagged(Kind::Table, &tag)
    );
    let r = e.get(&path, Some(&token)).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-ratelimit-limit").as_deref(), Some("100"));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["path"], path);
    assert_eq!(v["principal"]["role"], "editor");
    assert_eq!(v["principal"]["database_id"], db);
    assert_eq!(v["principal"]["key_id"], key_id);
    assert_eq!(v["authorization"], Value::Null);
    assert!(v["traceparent"]
        .as_str()
        .is_some_and(|t| t.starts_with("00-")));

    // A narrowed key away from the database: 404.
    let (uid2, _, narrowed) = e.user_with_key(Access::ReadWrite, DatabaseScope::Only(vec![]));
    e.member(&uid2, &db, Role::Owner);
    assert_eq!(e.get(&path, Some(&narrowed)).await.status(), 404);
    assert_eq!(shard.hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn misplaced_answers_are_retried_on_the_fresh_placement() {
    let e = env(100, 1000).await;
    let old = Arc::new(Shard {
        misplaced: true,
        ..Shard::default()
    });
    let new = Arc::new(Shard::default());
    let (old_url, new_url) = (
        spawn_shard(old.clone()).await,
        spawn_shard(new.clone()).await,
    );
    let (db, tag) = e.database(&[&old_url, &new_url]);
    let (user_id, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    e.member(&user_id, &db, Role::Viewer);
    let r = e
        .http
        .post(format!(
            "{}/api/tables/{}/records/list",
            e.router,
            new_tagged(Kind::Table, &tag)
        ))
        .header("authorization", format!("Bearer {token}"))
        .header("x-forwarded-for", &e.address)
        .json(&json!({"page_size": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["principal"]["epoch"], 2);
    assert_eq!(v["body"], r#"{"page_size":1}"#);
    assert_eq!(old.hits.load(Ordering::SeqCst), 1);
    assert_eq!(new.hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn import_skips_the_membership_check() {
    let e = env(100, 1000).await;
    let shard = Arc::new(Shard::default());
    let url = spawn_shard(shard.clone()).await;
    let (db, _) = e.database(&[&url]);
    let (_, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    let r = e
        .http
        .post(format!("{}/api/databases/{db}/import", e.router))
        .header("authorization", format!("Bearer {token}"))
        .header("x-forwarded-for", &e.address)
        .body("file")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["principal"]["role"], Value::Null);
    assert_eq!(v["body"], "file", "streamed through whole");
    assert_eq!(v["body_sha256"], STREAMED_BODY);
    assert_eq!(
        e.get(&format!("/api/databases/{db}/tables"), Some(&token))
            .await
            .status(),
        404
    );
}

#[tokio::test]
async fn database_list_fans_out_and_merges() {
    let e = env(100, 1000).await;
    let (user_id, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    let mk = |id: &str, position: i64, created: &str| json!({"id": id, "name": id, "position": position, "created_at": created});
    let (tag_a, tag_b, tag_c) = (random_token(5), random_token(5), random_token(5));
    let (a, b, c) = (
        new_tagged(Kind::Database, &tag_a),
        new_tagged(Kind::Database, &tag_b),
        new_tagged(Kind::Database, &tag_c),
    );
    let s1 = Arc::new(Shard {
        databases: vec![mk(&a, 2, "2026-01-01T00:00:00.000Z")],
        ..Shard::default()
    });
    let s2 = Arc::new(Shard {
        databases: vec![
            mk(&b, 1, "2026-01-02T00:00:00.000Z"),
            mk(&c, 1, "2026-01-01T00:00:00.000Z"),
        ],
        ..Shard::default()
    });
    let (u1, u2) = (spawn_shard(s1).await, spawn_shard(s2).await);
    for (db, tag, url) in [(&a, &tag_a, &u1), (&b, &tag_b, &u2), (&c, &tag_c, &u2)] {
        let p = Placement {
            database_id: db.clone(),
            tag: tag.clone(),
            shard: ShardRef {
                name: url.clone(),
                url: url.clone(),
            },
            epoch: 1,
            state: DatabaseState::Active,
            hold_until: None,
        };
        e.cp.placements.lock().unwrap().insert(tag.clone(), vec![p]);
        e.member(&user_id, db, Role::Viewer);
    }
    let r = e.get("/api/databases", Some(&token)).await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    let ids: Vec<&str> = v["databases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![c.as_str(), b.as_str(), a.as_str()]);
}
