//! Spawns the real shard node in-process against a throwaway PostgreSQL
//! database (one per test binary run) and drives it over HTTP with
//! principals signed here.

use std::net::SocketAddr;
use std::time::Duration;

use cluster_protocol::control::{Access, Allocation, Role, ShardRef};
use cluster_protocol::ids;
use cluster_protocol::principal::{sign_encoded, Principal, SignedRequest, Target};
use serde_json::Value;
use shard_node::attachments::settings::AttachmentSettings;
use shard_node::config::{Config, DbLimits, Secret};
use tokio::sync::OnceCell;

pub const SECRET: &str = "test-cluster-secret";
pub const SHARD: &str = "test-shard";
/// The nodes' `METRICS_TOKEN`: the one credential `/metrics` takes.
pub const METRICS_TOKEN: &str = "test-metrics-token";
/// The nodes' `CONTROL_PLANE_SHARD_TOKEN`: it does not open `/metrics`.
pub const SHARD_TOKEN: &str = "test-shard-token";

static DATABASE_URL: OnceCell<String> = OnceCell::const_new();

fn admin_url() -> String {
    std::env::var("TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// Creates the throwaway database once per test binary run.
async fn database_url() -> String {
    DATABASE_URL
        .get_or_init(|| async {
            let admin = admin_url();
            let (client, conn) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
                .await
                .expect("connect to TEST_POSTGRES_URL");
            let task = tokio::spawn(conn);
            drop_stale_databases(&client).await;
            let name = format!(
                "shard_node_test_{}_{}",
                std::process::id(),
                ids::random_token(6).to_lowercase()
            );
            client
                .batch_execute(&format!("CREATE DATABASE {name}"))
                .await
                .expect("create the test database");
            drop(client);
            let _ = task.await;
            let (base, _) = admin.rsplit_once('/').expect("URL has a database path");
            format!("{base}/{name}")
        })
        .await
        .clone()
}

/// Drops throwaway databases left by earlier runs whose process is gone.
async fn drop_stale_databases(client: &tokio_postgres::Client) {
    let Ok(rows) = client
        .query(
            "SELECT datname::text FROM pg_database WHERE datname LIKE 'shard_node_test_%'",
            &[],
        )
        .await
    else {
        return;
    };
    for row in rows {
        let name: String = row.get(0);
        let pid = name
            .trim_start_matches("shard_node_test_")
            .split('_')
            .next()
            .unwrap_or("");
        let alive = pid
            .parse::<u32>()
            .is_ok_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists());
        if !alive {
            let _ = client
                .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\""))
                .await;
        }
    }
}

pub struct TestApp {
    pub addr: SocketAddr,
    pub http: reqwest::Client,
    pub pg: tokio_postgres::Client,
    pub db: shard_node::db::Db,
}

/// A response: status and parsed JSON body (Null when not JSON).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
}

impl Reply {
    pub fn error_message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or("")
    }
    pub fn error_code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
}

pub enum Body {
    None,
    Json(Value),
    Raw(&'static str),
}

pub async fn spawn_app() -> TestApp {
    spawn_app_on(database_url().await).await
}

/// A database of its own, for tests that break it; returns its URL.
pub async fn private_database() -> (String, String) {
    let admin = admin_url();
    let (client, conn) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let name = format!(
        "shard_node_test_{}_{}",
        std::process::id(),
        ids::random_token(6).to_lowercase()
    );
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let (base, _) = admin.rsplit_once('/').unwrap();
    (format!("{base}/{name}"), name)
}

/// Drops a database even while the node still holds connections to it.
pub async fn force_drop_database(name: &str) {
    let (client, conn) = tokio_postgres::connect(&admin_url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .await
        .unwrap();
}

pub async fn spawn_app_on(url: String) -> TestApp {
    spawn_app_with(url, 4, DbLimits::default()).await
}

/// A node with its own pool size and time limits.
pub async fn spawn_app_with(url: String, pool_size: usize, db_limits: DbLimits) -> TestApp {
    spawn_node(url, pool_size, db_limits, Default::default()).await
}

/// A node with its own webhook settings (retry schedule, timeout, egress
/// allow list). Its deliverer claims every due delivery of its database,
/// so give it a database of its own ([`private_database`]).
pub async fn spawn_app_webhooks(
    url: String,
    webhooks: shard_node::config::WebhookSettings,
) -> TestApp {
    spawn_node(url, 4, DbLimits::default(), webhooks).await
}

/// The local blob store every node of [`spawn_app`] writes to.
pub fn local_blobs() -> blobstore::Settings {
    blobstore::Settings::local(
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("shard-node-blobs"),
    )
}

/// The S3 test server `deploy/test` starts (`TEST_S3_*`, as in
/// blobstore's own tests).
pub fn s3_blobs() -> blobstore::Settings {
    let env = |name: &str| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| {
                panic!("{name} is not set: run the tests through deploy/test, which starts the S3 test server")
            })
    };
    blobstore::Settings::S3(blobstore::settings::S3Settings {
        endpoint: Some(env("TEST_S3_ENDPOINT")),
        region: env("TEST_S3_REGION"),
        bucket: env("TEST_S3_BUCKET"),
        access_key_id: env("TEST_S3_ACCESS_KEY_ID"),
        secret_access_key: blobstore::settings::SecretString::new(env("TEST_S3_SECRET_ACCESS_KEY")),
        force_path_style: true,
        part_size: blobstore::settings::DEFAULT_PART_SIZE,
    })
}

/// A node on the shared test database whose blob store is `blobs`.
pub async fn spawn_app_blobs(blobs: blobstore::Settings) -> TestApp {
    let url = database_url().await;
    spawn_node_with(
        url,
        4,
        DbLimits::default(),
        Default::default(),
        blobs,
        Default::default(),
    )
    .await
}

/// A node on the shared test database with its own attachment settings
/// (a small storage quota, small thumbnail budgets), whose fetches may
/// reach loopback (a file server of the test).
pub async fn spawn_app_attachments(attachments: AttachmentSettings) -> TestApp {
    let url = database_url().await;
    let webhooks = shard_node::config::WebhookSettings {
        egress_allow_cidrs: vec!["127.0.0.0/8".into(), "::1/128".into()],
        ..Default::default()
    };
    spawn_node_with(
        url,
        4,
        DbLimits::default(),
        webhooks,
        local_blobs(),
        attachments,
    )
    .await
}

async fn spawn_node(
    url: String,
    pool_size: usize,
    db_limits: DbLimits,
    webhooks: shard_node::config::WebhookSettings,
) -> TestApp {
    let attachments = AttachmentSettings::default();
    spawn_node_with(
        url,
        pool_size,
        db_limits,
        webhooks,
        local_blobs(),
        attachments,
    )
    .await
}

async fn spawn_node_with(
    url: String,
    pool_size: usize,
    db_limits: DbLimits,
    webhooks: shard_node::config::WebhookSettings,
    blobs: blobstore::Settings,
    attachments: AttachmentSettings,
) -> TestApp {
    show_node_errors();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let config = node_config(
        addr,
        &url,
        pool_size,
        db_limits,
        webhooks,
        blobs,
        attachments,
    );
    tokio::spawn(async move {
        if let Err(e) = shard_node::run_until(config, listener, std::future::pending()).await {
            panic!("shard node failed: {e:#}");
        }
    });
    connect_to(addr, &url).await
}

fn node_config(
    addr: SocketAddr,
    url: &str,
    pool_size: usize,
    db_limits: DbLimits,
    webhooks: shard_node::config::WebhookSettings,
    blobs: blobstore::Settings,
    attachments: AttachmentSettings,
) -> Config {
    Config {
        shard_name: SHARD.into(),
        listen: addr,
        database_url: Secret::new(url.to_owned()),
        cluster_secret: Secret::new(SECRET),
        control_plane_url: None,
        control_plane_token: Some(Secret::new(SHARD_TOKEN)),
        metrics_token: Some(Secret::new(METRICS_TOKEN)),
        pool_size,
        trash: Default::default(),
        db_limits,
        schema_cache_weight: shard_node::schema::cache::DEFAULT_MAX_WEIGHT,
        webhooks,
        blobs,
        attachments,
        public_url: shard_node::config::DEFAULT_PUBLIC_URL.into(),
        // One recorder for the whole test process: every node shares it.
        metrics: Some(service_kit::metrics::install_once()),
    }
}

/// A node's state on `url` with no server and no background tasks, for
/// tests that drive a background pass themselves (`webhooks::clock::pass`)
/// on a database a node spawned with the same settings has migrated.
pub fn node_state(
    url: &str,
    webhooks: shard_node::config::WebhookSettings,
) -> shard_node::state::AppState {
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let config = node_config(
        addr,
        url,
        4,
        DbLimits::default(),
        webhooks,
        local_blobs(),
        AttachmentSettings::default(),
    );
    let db = shard_node::db::Db::connect_with(url, 4, DbLimits::default()).unwrap();
    shard_node::state::AppState::new(&config, db).unwrap()
}

/// The nodes' WARN and ERROR lines go to the output of the test that
/// caused them (printed when it fails), so a 500 shows its cause.
fn show_node_errors() {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        let _ = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_test_writer()
            .try_init();
    });
}

/// Waits for the node at `addr` to be healthy and connects to its database.
pub async fn connect_to(addr: SocketAddr, url: &str) -> TestApp {
    let (pg, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let http = reqwest::Client::new();
    let health = format!("http://{addr}/internal/health");
    for _ in 0..100 {
        if let Ok(r) = http.get(&health).send().await {
            if r.status() == 200 {
                let db = shard_node::db::Db::connect(url, 2).unwrap();
                return TestApp { addr, http, pg, db };
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("shard node did not become healthy");
}

pub fn user_id() -> String {
    ids::new_untagged(ids::Kind::User)
}

fn base(user: &str, database_id: Option<&str>) -> Principal {
    Principal {
        user_id: user.into(),
        key_id: ids::new_untagged(ids::Kind::Key),
        access: Access::ReadWrite,
        narrowed: false,
        database_id: database_id.map(String::from),
        role: None,
        support: false,
        epoch: Some(1),
        new_database: None,
        share: false,
    }
}

pub fn member(user: &str, database_id: &str, role: Role) -> Principal {
    Principal {
        role: Some(role),
        ..base(user, Some(database_id))
    }
}

pub fn owner(user: &str, database_id: &str) -> Principal {
    member(user, database_id, Role::Owner)
}

pub fn editor(database_id: &str) -> Principal {
    member(&user_id(), database_id, Role::Editor)
}

pub fn viewer(database_id: &str) -> Principal {
    member(&user_id(), database_id, Role::Viewer)
}

pub fn support(database_id: &str) -> Principal {
    Principal {
        support: true,
        ..base(&user_id(), Some(database_id))
    }
}

pub fn read_only(p: Principal) -> Principal {
    Principal {
        access: Access::ReadOnly,
        ..p
    }
}

/// A principal without a database (the lookup fan-out).
pub fn bare(user: &str) -> Principal {
    base(user, None)
}

/// A principal carrying a fresh allocation for this shard.
pub fn creator(user: &str) -> Principal {
    let tag = ids::random_token(ids::TAG_LEN);
    let allocation = Allocation {
        database_id: ids::new_database_id(&tag),
        tag,
        position: rand::random::<u32>() as i64,
        shard: ShardRef {
            name: SHARD.into(),
            url: "http://unused".into(),
        },
        epoch: 1,
        limits: Default::default(),
    };
    Principal {
        new_database: Some(allocation),
        ..base(user, None)
    }
}

pub enum Signing<'a> {
    Unsigned,
    With(&'a Principal),
    WrongSecret(&'a Principal),
}

impl TestApp {
    pub async fn call(&self, method: &str, path: &str, signing: Signing<'_>, body: Body) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self
            .http
            .request(method, format!("http://{}{}", self.addr, path));
        req = match body {
            Body::None => req,
            Body::Json(v) => req
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&v).unwrap()),
            Body::Raw(s) => req.header("content-type", "application/json").body(s),
        };
        let mut req = req.build().expect("request");
        let now = chrono::Utc::now().timestamp();
        match signing {
            Signing::Unsigned => {}
            Signing::With(p) => p.sign_reqwest(SECRET.as_bytes(), now, &mut req),
            Signing::WrongSecret(p) => p.sign_reqwest(b"not-the-secret", now, &mut req),
        }
        let resp = self.http.execute(req).await.expect("request");
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.unwrap();
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Reply { status, body }
    }

    pub async fn get(&self, path: &str, p: &Principal) -> Reply {
        self.call("GET", path, Signing::With(p), Body::None).await
    }
    pub async fn post(&self, path: &str, p: &Principal, body: Value) -> Reply {
        self.call("POST", path, Signing::With(p), Body::Json(body))
            .await
    }
    pub async fn patch(&self, path: &str, p: &Principal, body: Value) -> Reply {
        self.call("PATCH", path, Signing::With(p), Body::Json(body))
            .await
    }
    pub async fn delete(&self, path: &str, p: &Principal) -> Reply {
        self.call("DELETE", path, Signing::With(p), Body::None)
            .await
    }

    /// Creates a database owned by `user`; returns its JSON.
    pub async fn create_database(&self, user: &str, name: &str) -> Value {
        let r = self
            .post(
                "/api/databases",
                &creator(user),
                serde_json::json!({ "name": name }),
            )
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        r.body["database"].clone()
    }

    /// A fresh database and its owner's principal.
    pub async fn owned_database(&self) -> (String, Principal) {
        let user = user_id();
        let db = self.create_database(&user, "Test").await;
        let id = db["id"].as_str().unwrap().to_string();
        let p = owner(&user, &id);
        (id, p)
    }

    pub async fn create_table(&self, database_id: &str, p: &Principal, name: &str) -> Value {
        let r = self
            .post(
                &format!("/api/databases/{database_id}/tables"),
                p,
                serde_json::json!({ "name": name }),
            )
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        r.body["table"].clone()
    }

    /// [`Self::create_table`], when only the new table's id is needed.
    pub async fn create_table_id(&self, database_id: &str, p: &Principal, name: &str) -> String {
        let table = self.create_table(database_id, p, name).await;
        table["id"].as_str().unwrap().to_string()
    }

    /// A field of `ty` named `name` in `table_id`; its id.
    pub async fn create_field_id(
        &self,
        table_id: &str,
        p: &Principal,
        name: &str,
        ty: &str,
    ) -> String {
        let r = self
            .post(
                &format!("/api/tables/{table_id}/fields"),
                p,
                serde_json::json!({"name": name, "type": ty}),
            )
            .await;
        assert_eq!(r.status, 200, "{:?}", r.body);
        r.body["field"]["id"].as_str().unwrap().to_string()
    }
}

/// RFC 3339 UTC with exactly three fractional digits.
pub fn assert_ms_timestamp(v: &Value) {
    let s = v.as_str().unwrap_or_else(|| panic!("not a string: {v}"));
    assert_eq!(s.len(), 24, "{s}");
    assert!(s.ends_with('Z') && s.as_bytes()[19] == b'.', "{s}");
    assert!(chrono::DateTime::parse_from_rfc3339(s).is_ok(), "{s}");
}

/// The head of a request written by hand on a raw socket (tests of what
/// the node does to the connection), signed as a router would with
/// `body_sha256` (`EMPTY_BODY_SHA256` for no body, `STREAMED_BODY` for a
/// body the router streams); `extra` holds further header lines, each
/// ending in `\r\n`.
pub fn signed_head(
    method: &str,
    path: &str,
    p: &Principal,
    body_sha256: &str,
    extra: &str,
) -> String {
    let now = chrono::Utc::now().timestamp();
    let target = Target {
        method,
        path_and_query: path,
    };
    let principal = p.encode();
    let signed = SignedRequest {
        signature: sign_encoded(SECRET.as_bytes(), now, target, body_sha256, &principal),
        principal,
        timestamp: now.to_string(),
        body_sha256: body_sha256.to_string(),
    };
    let mut head = format!("{method} {path} HTTP/1.1\r\nhost: shard\r\n{extra}");
    for (name, value) in signed.headers() {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head
}
