//! Changes that take rights away fail closed when Redis refuses writes: the
//! version routers compare their cache with is deleted, or the change fails
//! (503) and nothing changes. Each test runs its own `redis-server` so it
//! can make it refuse writes without touching the shared one.

use std::time::Duration;

use cluster_protocol::control::redis_keys;
use cluster_protocol::control::{Access, CreateKey, DatabaseScope, Role, UpdateKey};

use crate::helpers::*;

/// A private `redis-server`, killed when dropped.
struct PrivateRedis {
    url: String,
    _child: tokio::process::Child,
}

impl PrivateRedis {
    async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = tokio::process::Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("redis-server on PATH");
        let url = format!("redis://127.0.0.1:{port}");
        let client = redis::Client::open(url.as_str()).unwrap();
        for _ in 0..100 {
            if let Ok(mut c) = client.get_multiplexed_async_connection().await {
                if redis::cmd("PING")
                    .query_async::<String>(&mut c)
                    .await
                    .is_ok()
                {
                    return Self { url, _child: child };
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("redis-server on port {port} did not start");
    }

    async fn command(&self, args: &[&str]) {
        let client = redis::Client::open(self.url.as_str()).unwrap();
        let mut c = client.get_multiplexed_async_connection().await.unwrap();
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        let _: redis::Value = cmd.query_async(&mut c).await.expect("redis command");
    }

    /// Every write refused (READONLY), reads still answered: a replica of
    /// a master that does not answer keeps its data.
    async fn refuse_all_writes(&self) {
        self.command(&["REPLICAOF", "127.0.0.1", "1"]).await;
    }

    /// Writes that need memory refused (OOM); DEL still works.
    async fn refuse_growing_writes(&self) {
        self.command(&["CONFIG", "SET", "maxmemory-policy", "noeviction"])
            .await;
        self.command(&["CONFIG", "SET", "maxmemory", "1"]).await;
    }

    async fn accept_writes(&self) {
        self.command(&["REPLICAOF", "NO", "ONE"]).await;
        self.command(&["CONFIG", "SET", "maxmemory", "0"]).await;
    }
}

/// A guest with an editor membership and a support grant on one database,
/// and a key; their versions seeded in Redis.
struct Setup {
    db: String,
    other_db: String,
    guest: String,
    key_id: String,
}

async fn setup(app: &App) -> Setup {
    app.shard("a", 100).await;
    let owner = app.user().await;
    let guest = app.user().await;
    let mut dbs = Vec::new();
    for _ in 0..2 {
        let db = app
            .client
            .allocate_database(&owner)
            .await
            .unwrap()
            .database_id;
        app.client.confirm_database(&db).await.unwrap();
        dbs.push(db);
    }
    app.client
        .add_member(&dbs[0], &guest, Role::Editor)
        .await
        .unwrap();
    app.client.grant_support(&dbs[1], &guest).await.unwrap();
    let key = CreateKey {
        user_id: guest.clone(),
        name: "k".into(),
        access: Access::ReadWrite,
        databases: DatabaseScope::All,
    };
    let key_id = app.client.create_key(&key).await.unwrap().id;
    app.client.user_access(&guest).await.unwrap();
    app.client.key(&key_id).await.unwrap();
    Setup {
        other_db: dbs[1].clone(),
        db: dbs.swap_remove(0),
        guest,
        key_id,
    }
}

fn narrowing(db: &str) -> UpdateKey {
    UpdateKey {
        name: None,
        access: Some(Access::ReadOnly),
        databases: Some(DatabaseScope::Only(vec![db.to_string()])),
    }
}

#[tokio::test]
async fn with_every_write_refused_removals_fail_and_change_nothing() {
    if skip() {
        return;
    }
    let redis = PrivateRedis::start().await;
    let app = spawn_app_with_redis(redis.url.clone()).await;
    let s = setup(&app).await;
    let user_key = redis_keys::user_version(&s.guest);
    let key_key = redis_keys::key_version(&s.guest, &s.key_id);
    let user_version = app.redis_get(&user_key).await.expect("seeded");
    let key_version = app.redis_get(&key_key).await.expect("seeded");

    redis.refuse_all_writes().await;
    let refused = app.client.remove_member(&s.db, &s.guest).await;
    let message = match refused {
        Err(cluster_protocol::control::client::ClientError::Api { status, body }) => {
            assert_eq!(status, 503);
            body.message
        }
        other => panic!("remove member should fail: {other:?}"),
    };
    assert!(message.contains("nothing was changed"), "{message}");
    assert_eq!(
        status(app.client.revoke_support(&s.other_db, &s.guest).await),
        503
    );
    assert_eq!(
        status(app.client.add_member(&s.db, &s.guest, Role::Viewer).await),
        503,
        "a downgrade too"
    );
    assert_eq!(
        status(app.client.update_key(&s.key_id, &narrowing(&s.db)).await),
        503
    );
    assert_eq!(status(app.client.revoke_key(&s.key_id).await), 503);
    assert_eq!(status(app.client.suspend_user(&s.guest, true).await), 503);
    let (ok, _, stderr) = cli(
        &app,
        &["members", "remove", "--database", &s.db, "--user", &s.guest],
    )
    .await;
    assert!(!ok, "the CLI reports the failure");
    assert!(stderr.contains("Redis"), "{stderr}");

    // Nothing changed: the catalog still grants what Redis' versions say.
    let access = app.client.user_access(&s.guest).await.unwrap();
    assert_eq!(access.version, user_version);
    assert_eq!(access.role_in(&s.db), Some(Role::Editor));
    assert!(access.has_support(&s.other_db));
    let key = app.client.key(&s.key_id).await.unwrap();
    assert_eq!(key.version, key_version);
    assert_eq!(key.access, Access::ReadWrite);
    assert!(!key.user.suspended);
    assert_eq!(app.redis_get(&user_key).await, Some(user_version));
    assert_eq!(app.redis_get(&key_key).await, Some(key_version));

    // Writable again: the same changes go through.
    redis.accept_writes().await;
    app.client.remove_member(&s.db, &s.guest).await.unwrap();
    let access = app.client.user_access(&s.guest).await.unwrap();
    assert!(access.version > user_version && access.role_in(&s.db).is_none());
    app.client
        .update_key(&s.key_id, &narrowing(&s.db))
        .await
        .unwrap();
    assert_eq!(
        app.client.key(&s.key_id).await.unwrap().access,
        Access::ReadOnly
    );
    app.finish().await;
}

#[tokio::test]
async fn when_only_the_new_version_cannot_be_stored_the_old_one_is_gone() {
    if skip() {
        return;
    }
    let redis = PrivateRedis::start().await;
    let app = spawn_app_with_redis(redis.url.clone()).await;
    let s = setup(&app).await;
    let user_key = redis_keys::user_version(&s.guest);
    let key_key = redis_keys::key_version(&s.guest, &s.key_id);
    assert!(app.redis_get(&user_key).await.is_some());
    assert!(app.redis_get(&key_key).await.is_some());

    // DEL works, SET does not: each change commits and leaves no version,
    // so routers ask the control plane (which answers the new state).
    redis.refuse_growing_writes().await;
    app.client.remove_member(&s.db, &s.guest).await.unwrap();
    assert_eq!(app.redis_get(&user_key).await, None);
    let access = app.client.user_access(&s.guest).await.unwrap();
    assert!(access.role_in(&s.db).is_none());
    assert_eq!(
        app.redis_get(&user_key).await,
        None,
        "the re-seed fails too"
    );

    app.client
        .revoke_support(&s.other_db, &s.guest)
        .await
        .unwrap();
    assert!(!app
        .client
        .user_access(&s.guest)
        .await
        .unwrap()
        .has_support(&s.other_db));
    assert_eq!(app.redis_get(&user_key).await, None);

    app.client
        .update_key(&s.key_id, &narrowing(&s.db))
        .await
        .unwrap();
    assert_eq!(app.redis_get(&key_key).await, None);
    let key = app.client.key(&s.key_id).await.unwrap();
    assert_eq!(key.access, Access::ReadOnly);

    redis.accept_writes().await;
    let seeded = app.client.user_access(&s.guest).await.unwrap().version;
    assert_eq!(app.redis_get(&user_key).await, Some(seeded));
    app.finish().await;
}
