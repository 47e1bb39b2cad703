//! Key verification under attack and dependencies that cannot be reached:
//! guesses per address, bursts counted before hashing, argon2 slots, absent
//! versions, unreachable control plane and shard.

use super::*;

/// The status of `GET /api/meta/whoami` with `token` from `address`.
async fn whoami(e: &Env, token: &str, address: &str) -> u16 {
    get_from(e, "/api/meta/whoami", token, address)
        .await
        .status()
        .as_u16()
}

/// GET `path` with `token` from the client address `address`.
async fn get_from(e: &Env, path: &str, token: &str, address: &str) -> reqwest::Response {
    e.http
        .get(format!("{}{path}", e.router))
        .header("x-forwarded-for", address)
        .header("authorization", format!("Bearer {token}"))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn wrong_guesses_from_one_address_do_not_lock_the_owner_out_elsewhere() {
    let e = env(100, 1000).await;
    let (_, key_id, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    let n = || rand::random::<u8>();
    let attacker = format!("198.51.{}.{}", n(), n());
    let owner = format!("192.0.{}.{}", n(), n());
    for i in 0..router::gate::attempts::MAX_FAILURES + 2 {
        let wrong = format!("{key_id}.wrong{i}");
        assert_eq!(whoami(&e, &wrong, &attacker).await, 401);
    }
    // The guessing address is refused even with the right secret ...
    assert_eq!(whoami(&e, &token, &attacker).await, 401);
    // ... the owner's address is not.
    assert_eq!(whoami(&e, &token, &owner).await, 200);
    // Once verified here, the key is checked from memory, from any address.
    assert_eq!(whoami(&e, &token, &attacker).await, 200);
    let wrong = format!("{key_id}.wrong-again");
    assert_eq!(whoami(&e, &wrong, &owner).await, 401);
    assert_eq!(whoami(&e, &token, &owner).await, 200);
}

#[tokio::test]
async fn a_burst_of_wrong_secrets_is_counted_before_hashing() {
    let cp = Arc::new(Cp::default());
    let cp_addr = spawn_cp(cp.clone()).await;
    let control = cluster_protocol::control::client::ControlPlaneClient::new(
        &format!("http://{cp_addr}"),
        ROUTER_TOKEN,
    );
    let store =
        router::gate::keys::KeyStore::new(control, router::gate::keys::HashLimits::default());
    let secret = random_token(32);
    let key_id = new_untagged(Kind::Key);
    let user_id = new_untagged(Kind::User);
    cp.keys.lock().unwrap().insert(
        key_id.clone(),
        KeyRecord {
            id: key_id.clone(),
            name: "k".into(),
            user: User {
                id: user_id.clone(),
                email: format!("{user_id}@example.com"),
                name: "Tess".into(),
                suspended: false,
            },
            secret_hash: hash(&secret),
            access: Access::ReadWrite,
            databases: DatabaseScope::All,
            created_at: chrono::Utc::now(),
            version: 1,
            requests_per_minute: None,
        },
    );
    const BURST: usize = 40;
    let wrong: Vec<String> = (0..BURST).map(|i| format!("wrong-{i}")).collect();
    let results = futures::future::join_all(
        wrong
            .iter()
            .map(|w| store.verify_cold(&key_id, w, "203.0.113.50")),
    )
    .await;
    assert!(results
        .iter()
        .all(|r| matches!(r, Err(router::gate::keys::AuthError::Unauthorized))));
    let budget = u64::from(router::gate::attempts::MAX_FAILURES);
    assert!(
        store.hashes() <= budget,
        "{} of {BURST} wrong secrets were hashed",
        store.hashes()
    );
    // The same burst of one wrong secret from many addresses: one hash.
    let before = store.hashes();
    let addresses: Vec<String> = (0..BURST).map(|i| format!("203.0.114.{i}")).collect();
    let results = futures::future::join_all(
        addresses
            .iter()
            .map(|a| store.verify_cold(&key_id, "same-wrong", a)),
    )
    .await;
    assert!(results.iter().all(|r| r.is_err()));
    assert_eq!(store.hashes() - before, 1);
    // The right secret, many times at once from a fresh address: one hash.
    let before = store.hashes();
    let results = futures::future::join_all(
        (0..BURST).map(|_| store.verify_cold(&key_id, &secret, "203.0.115.1")),
    )
    .await;
    assert!(results.iter().all(|r| r.is_ok()));
    assert_eq!(store.hashes() - before, 1);
}

#[tokio::test]
async fn no_argon2_slot_in_time_is_503_not_401() {
    let e = env_with_config(100, 1000, redis_url(), |c| {
        c.hash_limits = router::gate::keys::HashLimits {
            concurrency: 0,
            wait: std::time::Duration::from_millis(50),
        };
    })
    .await;
    let (_, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    let r = e.get("/api/meta/whoami", Some(&token)).await;
    assert_eq!(r.status(), 503);
    assert_eq!(header(&r, "retry-after").as_deref(), Some("1"));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "unavailable");
    assert_eq!(v["error"]["message"], router::gate::auth::HASH_BUSY_MESSAGE);
}

/// What the control plane leaves when it cannot store a new version: the
/// version deleted. The router must then ask again, for users and keys.
#[tokio::test]
async fn absent_versions_make_the_router_ask_the_control_plane_again() {
    let e = env(100, 1000).await;
    let shard = Arc::new(Shard::default());
    let url = spawn_shard(shard.clone()).await;
    let (db, _) = e.database(&[&url]);
    let path = format!("/api/databases/{db}/tables");
    let del = |name: String| {
        let _: () = redis::cmd("DEL")
            .arg(name)
            .query(&mut *redis_conn())
            .unwrap();
    };

    // A membership removed, its user's version deleted (no invalidation).
    let (user_id, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    e.member(&user_id, &db, Role::Editor);
    assert_eq!(e.get(&path, Some(&token)).await.status(), 200);
    assert_eq!(e.get(&path, Some(&token)).await.status(), 200);
    {
        let mut access = e.cp.access.lock().unwrap();
        let a = access.get_mut(&user_id).unwrap();
        a.memberships.clear();
        a.version += 1;
    }
    del(redis_keys::user_version(&user_id));
    assert_eq!(e.get(&path, Some(&token)).await.status(), 404);

    // A key narrowed away from the database, its version deleted.
    let (user_id, key_id, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    e.member(&user_id, &db, Role::Editor);
    assert_eq!(e.get(&path, Some(&token)).await.status(), 200);
    assert_eq!(e.get(&path, Some(&token)).await.status(), 200);
    {
        let mut keys = e.cp.keys.lock().unwrap();
        let k = keys.get_mut(&key_id).unwrap();
        k.databases = DatabaseScope::Only(vec![new_tagged(Kind::Database, &random_token(5))]);
        k.version += 1;
    }
    del(redis_keys::key_version(&user_id, &key_id));
    assert_eq!(e.get(&path, Some(&token)).await.status(), 404);
    assert_eq!(shard.hits.load(Ordering::SeqCst), 4);
}

/// A dependency that cannot be reached is a retryable 503 in the envelope,
/// never the `internal` 500: a shard nobody listens on, then a control
/// plane nobody listens on (for a key this router has not verified yet).
#[tokio::test]
async fn unreachable_dependencies_answer_503_with_retry_after() {
    let e = env(100, 1000).await;
    let (user_id, _, token) = e.user_with_key(Access::ReadWrite, DatabaseScope::All);
    // Port 1: nothing listens there, the connection is refused at once.
    let (db, _) = e.database(&["http://127.0.0.1:1"]);
    e.member(&user_id, &db, Role::Editor);
    let r = e
        .get(&format!("/api/databases/{db}/tables"), Some(&token))
        .await;
    assert_eq!(r.status(), 503);
    assert_eq!(header(&r, "retry-after").as_deref(), Some("1"));
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unavailable", "{body}");

    let down = env_with_config(100, 1000, redis_url(), |c| {
        c.control_plane_url = "http://127.0.0.1:1".into();
    })
    .await;
    let r = down.get("/api/meta/whoami", Some(&token)).await;
    assert_eq!(r.status(), 503);
    assert_eq!(header(&r, "retry-after").as_deref(), Some("1"));
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unavailable", "{body}");
}
