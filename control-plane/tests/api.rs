//! Integration tests: the real server in-process against a real PostgreSQL
//! (a throwaway database per test) and Redis. Set SKIP_DB_TESTS to skip.

use std::time::Duration;

use cluster_protocol::control::client::{ClientError, ControlPlaneClient};
use cluster_protocol::control::redis_keys;
use cluster_protocol::control::{
    Access, AddShard, CreateKey, DatabaseScope, DatabaseState, Role, UpdateKey,
};
use control_plane::config::{Config, Secret};
use redis::AsyncCommands;

const TOKEN: &str = "test-token-0123456789";

struct App {
    client: ControlPlaneClient,
    base: String,
    redis: redis::aio::MultiplexedConnection,
    server: tokio::task::JoinHandle<()>,
    admin: tokio_postgres::Client,
    db_name: String,
}

fn skip() -> bool {
    if std::env::var_os("SKIP_DB_TESTS").is_some() {
        eprintln!("SKIP_DB_TESTS is set: skipping database test");
        return true;
    }
    false
}

/// A fresh catalog database and a server on an ephemeral port.
async fn spawn_app() -> App {
    let admin_url = std::env::var("TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let redis_url =
        std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let (admin, conn) = tokio_postgres::connect(&admin_url, tokio_postgres::NoTls)
        .await
        .expect("connect postgres");
    tokio::spawn(conn);
    let name = format!(
        "cp_test_{}",
        cluster_protocol::ids::random_token(10).to_lowercase()
    );
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create test database");
    let mut cfg: tokio_postgres::Config = admin_url.parse().expect("postgres url");
    cfg.dbname(&name);
    let db_url = format!(
        "host=127.0.0.1 port={} user={} dbname={name}",
        cfg.get_ports().first().copied().unwrap_or(5432),
        cfg.get_user().unwrap_or("postgres")
    );
    let config = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        database_url: Secret::new(db_url),
        token: Secret::new(TOKEN),
        redis_url: Secret::new(redis_url.clone()),
        creating_ttl: Duration::from_secs(600),
        reaper_interval: Duration::from_secs(3600),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        control_plane::run_until(config, listener, std::future::pending())
            .await
            .expect("server runs");
    });
    let client = ControlPlaneClient::new(&base, TOKEN);
    for _ in 0..100 {
        if client.shards().await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let redis = redis::Client::open(redis_url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    App {
        client,
        base,
        redis,
        server,
        admin,
        db_name: name,
    }
}

impl App {
    /// Stops the server and drops the throwaway database.
    async fn finish(self) {
        self.server.abort();
        let _ = self.server.await;
        let drop = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.db_name);
        if let Err(e) = self.admin.batch_execute(&drop).await {
            eprintln!("could not drop {}: {e}", self.db_name);
        }
    }
    async fn user(&self) -> String {
        let email = format!("{}@example.com", cluster_protocol::ids::random_token(8));
        self.client
            .create_user(&email, None)
            .await
            .expect("create user")
            .id
    }
    async fn shard(&self, name: &str, weight: u32) {
        let req = AddShard {
            name: name.into(),
            url: format!("http://{name}.local"),
            postgres: "postgres://x".into(),
            weight,
        };
        self.client.add_shard(&req).await.expect("add shard");
    }
    async fn redis_get(&self, key: &str) -> Option<i64> {
        let mut c = self.redis.clone();
        c.get(key).await.expect("redis get")
    }
}

fn status(e: ClientError) -> u16 {
    e.status().unwrap_or(0)
}

#[tokio::test]
async fn auth_and_envelope() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    let http = reqwest::Client::new();
    let r = http
        .get(format!("{}/internal/shards", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthorized");
    let r = http
        .get(format!("{}/internal/shards", app.base))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = http
        .get(format!("{}/internal/health", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = http
        .get(format!("{}/internal/nope", app.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = http
        .post(format!("{}/internal/members", app.base))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"database_id":"db_x","user_id":"usr_y","role":"boss"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "bad_request");
    app.finish().await;
}

#[tokio::test]
async fn users_validation_and_conflicts() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    assert_eq!(
        status(
            app.client
                .create_user("not-an-email", None)
                .await
                .unwrap_err()
        ),
        400
    );
    let email = format!("{}@Example.com", cluster_protocol::ids::random_token(8));
    let u = app.client.create_user(&email, None).await.unwrap();
    assert!(u.id.starts_with("usr_") && u.id.len() == 16);
    assert_eq!(u.name, email.split('@').next().unwrap());
    assert_eq!(
        status(
            app.client
                .create_user(&email.to_lowercase(), None)
                .await
                .unwrap_err()
        ),
        409
    );
    assert_eq!(
        status(
            app.client
                .suspend_user("usr_000000000000", true)
                .await
                .unwrap_err()
        ),
        404
    );
    assert_eq!(
        status(
            app.client
                .add_shard(&AddShard {
                    name: "s1".into(),
                    url: "x".into(),
                    postgres: "p".into(),
                    weight: 1
                })
                .await
                .unwrap_err()
        ),
        400
    );
    app.shard("s1", 100).await;
    assert_eq!(
        status(
            app.client
                .add_shard(&AddShard {
                    name: "s1".into(),
                    url: "http://y".into(),
                    postgres: "p".into(),
                    weight: 1
                })
                .await
                .unwrap_err()
        ),
        409
    );
    app.finish().await;
}

#[tokio::test]
async fn allocation_cap_positions_and_draining() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    let no_shard_user = app.user().await;
    assert_eq!(
        status(
            app.client
                .allocate_database(&no_shard_user)
                .await
                .unwrap_err()
        ),
        500
    );
    app.shard("a", 100).await;
    app.shard("b", 100).await;
    app.client.drain_shard("b").await.unwrap();
    assert_eq!(
        status(app.client.drain_shard("zzz").await.unwrap_err()),
        404
    );
    assert_eq!(
        status(
            app.client
                .allocate_database("usr_000000000000")
                .await
                .unwrap_err()
        ),
        404
    );

    let owner = app.user().await;
    let allocations =
        futures::future::join_all((0..100).map(|_| app.client.allocate_database(&owner))).await;
    let mut positions: Vec<i64> = Vec::new();
    for a in allocations {
        let a = a.expect("allocation under the cap");
        assert_eq!(a.shard.name, "a", "draining shard b must get nothing");
        assert_eq!(a.epoch, 1);
        assert!(a.database_id.starts_with(&format!("db_{}", a.tag)));
        positions.push(a.position);
    }
    positions.sort();
    positions.dedup();
    assert_eq!(positions.len(), 100, "positions are unique");
    let err = app.client.allocate_database(&owner).await.unwrap_err();
    assert_eq!(status(err), 400);

    let other = app.user().await;
    let next = app.client.allocate_database(&other).await.unwrap();
    assert!(
        next.position > *positions.last().unwrap(),
        "positions increase"
    );
    let list = app.client.databases(Some("b")).await.unwrap();
    assert!(list.databases.is_empty());

    // Placement, confirm, release.
    let p = app.client.placement(&next.tag).await.unwrap();
    assert_eq!(p.state, DatabaseState::Creating);
    assert_eq!(
        status(app.client.placement("ZZZZZ").await.unwrap_err()),
        404
    );
    app.client
        .confirm_database(&next.database_id)
        .await
        .unwrap();
    assert_eq!(
        app.client.database(&next.database_id).await.unwrap().state,
        DatabaseState::Active
    );
    assert_eq!(
        status(
            app.client
                .release_database(&next.database_id)
                .await
                .unwrap_err()
        ),
        409
    );
    let access = app.client.user_access(&other).await.unwrap();
    assert_eq!(access.role_in(&next.database_id), Some(Role::Owner));

    let gone = app.client.allocate_database(&other).await.unwrap();
    assert!(
        app.client
            .user_access(&other)
            .await
            .unwrap()
            .role_in(&gone.database_id)
            .is_none(),
        "creating is invisible"
    );
    app.client
        .release_database(&gone.database_id)
        .await
        .unwrap();
    assert_eq!(
        status(app.client.database(&gone.database_id).await.unwrap_err()),
        404
    );
    let found = app
        .client
        .placements(vec![next.database_id.clone(), gone.database_id.clone()])
        .await
        .unwrap();
    assert_eq!(found.placements.len(), 1);
    app.finish().await;
}

#[tokio::test]
async fn keys_liveness_revocation_and_suspension() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    let user = app.user().await;
    let req = CreateKey {
        user_id: user.clone(),
        name: "ci".into(),
        access: Access::ReadWrite,
        databases: DatabaseScope::All,
    };
    let created = app.client.create_key(&req).await.unwrap();
    let (id, secret) = created.token.split_once('.').unwrap();
    assert_eq!(id, created.id);
    assert!(id.starts_with("key_") && id.len() == 16);
    assert_eq!(secret.len(), 40);
    let live = redis_keys::key_version(id);
    assert_eq!(app.redis_get(&live).await, Some(1));

    let record = app.client.key(id).await.unwrap();
    assert!(record.secret_hash.starts_with("$argon2id$"));
    use argon2::password_hash::{PasswordHash, PasswordVerifier};
    let parsed = PasswordHash::new(&record.secret_hash).unwrap();
    assert!(argon2::Argon2::default()
        .verify_password(secret.as_bytes(), &parsed)
        .is_ok());

    let narrowed = UpdateKey {
        access: Some(Access::ReadOnly),
        databases: Some(DatabaseScope::Only(vec!["db_abcdefghijkl".into()])),
    };
    let info = app.client.update_key(id, &narrowed).await.unwrap();
    assert_eq!(info.access, Access::ReadOnly);
    assert_eq!(app.redis_get(&live).await, Some(2));
    assert_eq!(app.client.key(id).await.unwrap().version, 2);
    let bad = UpdateKey {
        access: None,
        databases: Some(DatabaseScope::Only(vec!["nope".into()])),
    };
    assert_eq!(
        status(app.client.update_key(id, &bad).await.unwrap_err()),
        400
    );

    // Re-seed after the liveness key disappeared.
    let mut c = app.redis.clone();
    let _: () = c.del(&live).await.unwrap();
    app.client.key(id).await.unwrap();
    assert_eq!(app.redis_get(&live).await, Some(2));

    // Suspension clears liveness; GET reports suspended and does not re-seed.
    let u = app.client.suspend_user(&user, true).await.unwrap();
    assert!(u.suspended);
    assert_eq!(app.redis_get(&live).await, None);
    assert!(app.client.key(id).await.unwrap().user.suspended);
    assert_eq!(app.redis_get(&live).await, None);
    app.client.suspend_user(&user, false).await.unwrap();
    assert_eq!(app.redis_get(&live).await, Some(2));

    // Revocation.
    app.client.revoke_key(id).await.unwrap();
    assert_eq!(app.redis_get(&live).await, None);
    assert_eq!(status(app.client.key(id).await.unwrap_err()), 404);
    assert_eq!(status(app.client.revoke_key(id).await.unwrap_err()), 404);
    let unknown = CreateKey {
        user_id: "usr_000000000000".into(),
        ..req
    };
    assert_eq!(
        status(app.client.create_key(&unknown).await.unwrap_err()),
        404
    );
    app.finish().await;
}

#[tokio::test]
async fn membership_changes_bump_versions() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    app.shard("a", 100).await;
    let owner = app.user().await;
    let guest = app.user().await;
    let db = app
        .client
        .allocate_database(&owner)
        .await
        .unwrap()
        .database_id;
    app.client.confirm_database(&db).await.unwrap();

    let v0 = app.client.user_access(&guest).await.unwrap().version;
    assert_eq!(
        app.redis_get(&redis_keys::user_version(&guest)).await,
        Some(v0)
    );
    app.client
        .add_member(&db, &guest, Role::Editor)
        .await
        .unwrap();
    let a1 = app.client.user_access(&guest).await.unwrap();
    assert!(a1.version > v0);
    assert_eq!(a1.role_in(&db), Some(Role::Editor));
    assert_eq!(
        app.redis_get(&redis_keys::user_version(&guest)).await,
        Some(a1.version)
    );

    app.client
        .add_member(&db, &guest, Role::Viewer)
        .await
        .unwrap();
    let a2 = app.client.user_access(&guest).await.unwrap();
    assert!(a2.version > a1.version);
    assert_eq!(a2.role_in(&db), Some(Role::Viewer));

    app.client.remove_member(&db, &guest).await.unwrap();
    let a3 = app.client.user_access(&guest).await.unwrap();
    assert!(a3.version > a2.version && a3.role_in(&db).is_none());

    app.client.grant_support(&db, &guest).await.unwrap();
    app.client.grant_support(&db, &guest).await.unwrap();
    let a4 = app.client.user_access(&guest).await.unwrap();
    assert!(a4.has_support(&db) && a4.version > a3.version);
    app.client.revoke_support(&db, &guest).await.unwrap();
    app.client.revoke_support(&db, &guest).await.unwrap();
    assert!(!app
        .client
        .user_access(&guest)
        .await
        .unwrap()
        .has_support(&db));

    assert_eq!(
        status(
            app.client
                .add_member("db_000000000000", &guest, Role::Viewer)
                .await
                .unwrap_err()
        ),
        404
    );
    assert_eq!(
        status(
            app.client
                .add_member(&db, "usr_000000000000", Role::Viewer)
                .await
                .unwrap_err()
        ),
        404
    );
    assert_eq!(
        status(
            app.client
                .user_access("usr_000000000000")
                .await
                .unwrap_err()
        ),
        404
    );
    app.finish().await;
}

/// Runs the real binary as an operator would.
async fn cli(app: &App, args: &[&str]) -> (bool, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_control-plane"))
        .args(args)
        .env("CONTROL_PLANE_URL", &app.base)
        .env("CONTROL_PLANE_TOKEN", TOKEN)
        .output()
        .await
        .expect("run control-plane");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        out.status.success(),
        stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn one_json(stdout: &str) -> serde_json::Value {
    assert_eq!(
        stdout.trim().lines().count(),
        1,
        "exactly one line: {stdout}"
    );
    serde_json::from_str(stdout.trim()).expect("stdout is one JSON object")
}

#[tokio::test]
async fn operator_cli() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    let email = format!("{}@example.com", cluster_protocol::ids::random_token(8));
    let (ok, out, err) = cli(
        &app,
        &[
            "users", "create", "--email", &email, "--name", "Ada", "--json",
        ],
    )
    .await;
    assert!(ok, "{err}");
    let user = one_json(&out);
    assert_eq!(user["email"], email.as_str());
    assert_eq!(user["name"], "Ada");
    let user_id = user["id"].as_str().unwrap().to_string();

    let (ok, out, err) = cli(
        &app,
        &[
            "--json",
            "keys",
            "create",
            "--user",
            &user_id,
            "--name",
            "k",
            "--access",
            "read_only",
            "--databases",
            "db_abcdefghijkl",
        ],
    )
    .await;
    assert!(ok, "{err}");
    let key = one_json(&out);
    assert_eq!(key["access"], "read_only");
    assert_eq!(key["databases"], serde_json::json!(["db_abcdefghijkl"]));
    assert!(key["token"]
        .as_str()
        .unwrap()
        .starts_with(key["id"].as_str().unwrap()));
    let key_id = key["id"].as_str().unwrap().to_string();

    let (ok, out, _) = cli(
        &app,
        &["keys", "update", &key_id, "--databases", "all", "--json"],
    )
    .await;
    assert!(ok);
    assert_eq!(one_json(&out), serde_json::json!({"ok": true}));
    let (ok, out, _) = cli(
        &app,
        &[
            "shards",
            "add",
            "--name",
            "s1",
            "--url",
            "http://s1",
            "--postgres",
            "postgres://s1",
            "--json",
        ],
    )
    .await;
    assert!(ok);
    assert_eq!(one_json(&out)["name"], "s1");
    let (ok, out, _) = cli(&app, &["shards", "list", "--json"]).await;
    assert!(ok);
    assert_eq!(one_json(&out)["shards"].as_array().unwrap().len(), 1);
    let (ok, out, _) = cli(&app, &["databases", "list", "--json"]).await;
    assert!(ok);
    assert_eq!(one_json(&out), serde_json::json!({"databases": []}));
    let (ok, out, _) = cli(&app, &["users", "suspend", &user_id]).await;
    assert!(ok && out.contains(&user_id));
    let (ok, out, _) = cli(&app, &["keys", "revoke", &key_id, "--json"]).await;
    assert!(ok);
    assert_eq!(one_json(&out), serde_json::json!({"ok": true}));

    let (ok, out, err) = cli(&app, &["keys", "revoke", &key_id, "--json"]).await;
    assert!(!ok && out.is_empty() && !err.is_empty());
    let (ok, _, err) = cli(&app, &["move", "db_abcdefghijkl", "--to", "s1"]).await;
    assert!(!ok && err.contains("not yet implemented"));
    let (ok, _, _) = cli(&app, &["databases", "show", "db_abcdefghijkl", "--json"]).await;
    assert!(!ok);
    app.finish().await;
}
