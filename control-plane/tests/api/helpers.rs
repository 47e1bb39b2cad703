//! Test harness: a throwaway catalog database and a real server per test.

use std::time::Duration;

use cluster_protocol::control::client::{ClientError, ControlPlaneClient};
use cluster_protocol::control::AddShard;
use control_plane::config::{AccountConfig, Config, Secret};
use redis::AsyncCommands;

/// The operator's `CONTROL_PLANE_TOKEN`.
pub const TOKEN: &str = "test-token-0123456789";
/// `CONTROL_PLANE_ROUTER_TOKEN`.
pub const ROUTER_TOKEN: &str = "test-router-token-0123";
/// `CONTROL_PLANE_SHARD_TOKEN`.
pub const SHARD_TOKEN: &str = "test-shard-token-0123";
/// `METRICS_TOKEN`.
pub const METRICS_TOKEN: &str = "test-metrics-token-0123";

pub struct App {
    pub client: ControlPlaneClient,
    pub base: String,
    pub redis: redis::aio::MultiplexedConnection,
    pub server: tokio::task::JoinHandle<()>,
    pub admin: tokio_postgres::Client,
    pub db_name: String,
    /// The catalog's DSN (tests that age rows directly).
    pub db_url_for_tests: String,
}

pub fn skip() -> bool {
    if std::env::var_os("SKIP_DB_TESTS").is_some() {
        eprintln!("SKIP_DB_TESTS is set: skipping database test");
        return true;
    }
    false
}

/// A fresh catalog database and a server on an ephemeral port.
pub async fn spawn_app() -> App {
    let redis_url =
        std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    spawn_app_with_redis(redis_url).await
}

/// Like [`spawn_app`], with the control plane (and `App::redis`) on `redis_url`.
pub async fn spawn_app_with_redis(redis_url: String) -> App {
    spawn_app_with(redis_url, AccountConfig::default()).await
}

/// Like [`spawn_app`], with these account settings.
pub async fn spawn_app_with_accounts(accounts: AccountConfig) -> App {
    let redis_url =
        std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    spawn_app_with(redis_url, accounts).await
}

async fn spawn_app_with(redis_url: String, accounts: AccountConfig) -> App {
    let admin_url = std::env::var("TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
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
    let db_url_copy = db_url.clone();
    let config = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        database_url: Secret::new(db_url),
        tokens: control_plane::config::Tokens {
            admin: Secret::new(TOKEN),
            router: Secret::new(ROUTER_TOKEN),
            shard: Some(Secret::new(SHARD_TOKEN)),
            metrics: Some(Secret::new(METRICS_TOKEN)),
        },
        redis_url: Secret::new(redis_url.clone()),
        creating_ttl: Duration::from_secs(600),
        reaper_interval: Duration::from_secs(3600),
        moves: control_plane::config::MoveConfig::default(),
        // One recorder for the whole test process: every server shares it.
        metrics: Some(service_kit::metrics::install_once()),
        accounts,
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
        db_url_for_tests: db_url_copy,
    }
}

impl App {
    /// Stops the server and drops the throwaway database.
    pub async fn finish(self) {
        self.server.abort();
        let _ = self.server.await;
        let drop = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.db_name);
        if let Err(e) = self.admin.batch_execute(&drop).await {
            eprintln!("could not drop {}: {e}", self.db_name);
        }
    }
    pub async fn user(&self) -> String {
        let email = format!("{}@example.com", cluster_protocol::ids::random_token(8));
        self.client
            .create_user(&email, None)
            .await
            .expect("create user")
            .id
    }
    pub async fn shard(&self, name: &str, weight: u32) {
        let req = AddShard {
            name: name.into(),
            url: format!("http://{name}.local"),
            postgres: "postgres://x".into(),
            weight,
        };
        self.client.add_shard(&req).await.expect("add shard");
    }
    /// A session on the catalog database itself.
    pub async fn catalog(&self) -> tokio_postgres::Client {
        let (client, conn) = tokio_postgres::connect(&self.db_url_for_tests, tokio_postgres::NoTls)
            .await
            .expect("connect catalog");
        tokio::spawn(conn);
        client
    }
    pub async fn redis_get(&self, key: &str) -> Option<i64> {
        let mut c = self.redis.clone();
        c.get(key).await.expect("redis get")
    }
}

/// The HTTP status of a call that must fail (0 when it never got one).
pub fn status<T: std::fmt::Debug>(r: Result<T, ClientError>) -> u16 {
    r.expect_err("the call should fail").status().unwrap_or(0)
}

/// Runs the real binary as an operator would.
pub async fn cli(app: &App, args: &[&str]) -> (bool, String, String) {
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

pub fn one_json(stdout: &str) -> serde_json::Value {
    assert_eq!(
        stdout.trim().lines().count(),
        1,
        "exactly one line: {stdout}"
    );
    serde_json::from_str(stdout.trim()).expect("stdout is one JSON object")
}
