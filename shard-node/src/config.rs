//! The shard node's configuration ([`Config`]) and fixed limits; the
//! settings it is made from, flags and environment, are `crate::settings`.

use std::net::SocketAddr;

/// Largest request body the node reads; larger bodies are a 400 naming it.
pub const BODY_LIMIT_BYTES: usize = 10 * 1024 * 1024;
/// How the body limit is named in its 400 message.
pub const BODY_LIMIT_TEXT: &str = "10 MiB";
/// Part C: tables per database.
pub const MAX_TABLES_PER_DATABASE: i64 = 200;
/// Connections in the pool to the shard's PostgreSQL when `SHARD_POOL_SIZE`
/// is not set: [`pool_size_for`] this machine's CPUs, and one more held in
/// reserve for the other databases: one database may hold all but one
/// ([`sessions_per_database_for`]), so a single busy database still gets
/// the [`pool_size_for`] sessions the records benchmark was tuned with.
pub fn default_pool_size() -> usize {
    pool_size_for(std::thread::available_parallelism().map_or(2, |n| n.get())) + 1
}

/// One connection per CPU and one more, at least three. A page keeps a
/// PostgreSQL session busy on one core; a spare session lets a core start
/// the next page while another's reply is in flight. More sessions than
/// that only time-slice against each other: on two cores, 16 connections
/// put the p99 of record pages at up to 1.5 times what four gave, and four
/// about 7 ms above three (docs/performance.md, "Records").
pub fn pool_size_for(cpus: usize) -> usize {
    (cpus + 1).max(3)
}

/// Request sessions the requests of one database may hold at once when
/// `SHARD_SESSIONS_PER_DATABASE` is not set: all but one of the pool's (at
/// least one), so one busy database always leaves a session to the others
/// on its shard (`fair_share`).
pub fn sessions_per_database_for(pool_size: usize) -> usize {
    pool_size.saturating_sub(1).max(1)
}

/// Request sessions the requests of all one owner's databases may hold at
/// once when `SHARD_SESSIONS_PER_OWNER` is not set: as for one database,
/// all but one of the pool's, so one owner with several busy databases
/// still leaves a session to the other owners on its shard (`fair_share`).
pub fn sessions_per_owner_for(pool_size: usize) -> usize {
    sessions_per_database_for(pool_size)
}

/// `SHARD_EXPORT_SEND_TIMEOUT_MS` when not set: how long an export waits
/// for its client to take the next chunk before it is stopped.
pub const EXPORT_SEND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// Exports streamed at once on a node when `SHARD_MAX_EXPORTS` is not set:
/// half the pool's sessions (at least one). Each export holds a pooled
/// session and a blocking thread for its whole stream; the other half of
/// the pool is left to the other requests.
pub fn max_exports_for(pool_size: usize) -> usize {
    (pool_size / 2).max(1)
}

/// How long opening one PostgreSQL session may take.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long `GET /internal/health` waits for PostgreSQL.
pub const HEALTH_TIMEOUT_MS: u64 = 2_000;

/// A value that never prints (`Secret(***)`).
pub use service_kit::Secret;

#[derive(Debug, Clone)]
pub struct Config {
    /// `SHARD_NAME`: the name this shard is registered under.
    pub shard_name: String,
    /// `SHARD_LISTEN`, default `127.0.0.1:8091`.
    pub listen: SocketAddr,
    /// `SHARD_DATABASE_URL`: this shard's own PostgreSQL.
    pub database_url: Secret,
    /// `CLUSTER_SECRET`: HMAC key of signed principals.
    pub cluster_secret: Secret,
    /// `CONTROL_PLANE_URL` (optional for now).
    pub control_plane_url: Option<String>,
    /// `CONTROL_PLANE_SHARD_TOKEN` (optional for now: the node makes no
    /// control-plane call yet). The shard tier's own credential, which may
    /// only read placements; never the operator's admin token.
    pub control_plane_token: Option<Secret>,
    /// `METRICS_TOKEN`: the only credential `GET /metrics` accepts; unset,
    /// the node serves no page (404).
    pub metrics_token: Option<Secret>,
    /// `SHARD_POOL_SIZE`, default [`default_pool_size`].
    pub pool_size: usize,
    /// The trash purger's schedule.
    pub trash: TrashSettings,
    /// Time limits of the node's PostgreSQL sessions and the pool wait.
    pub db_limits: DbLimits,
    /// `SHARD_SCHEMA_CACHE_FIELDS`, default
    /// [`crate::schema::cache::DEFAULT_MAX_WEIGHT`]: the weight of the
    /// schema models kept (`schema::cache`).
    pub schema_cache_weight: u64,
    /// Webhook delivery, the match clock and the egress allow list.
    pub webhooks: WebhookSettings,
    /// Where attachment bytes live: `BLOB_STORE` (`local` or `s3`),
    /// `BLOB_DIR`, `S3_*` ([`blobstore::settings`] has the table).
    pub blobs: blobstore::Settings,
    /// Storage quota and thumbnail memory budgets (`ATTACHMENT_QUOTA_BYTES`,
    /// `THUMBNAIL_QUEUE_BYTES`, `THUMBNAIL_DECODE_BYTES`).
    pub attachments: crate::attachments::settings::AttachmentSettings,
    /// `PUBLIC_URL`, default `http://127.0.0.1:8080`: the router address
    /// clients reach, the base of signed attachment links (local store).
    pub public_url: String,
    /// Renders `GET /metrics` (with `metrics_token`). Not from the
    /// environment: `main` installs the process's recorder and puts its
    /// handle here; `None` (library use) serves no page.
    pub metrics: Option<service_kit::metrics::PrometheusHandle>,
}

/// Part C's delivery timings and the knobs of ARCHITECTURE.md's operator
/// contract (`WEBHOOK_RETRY_DELAYS`, `WEBHOOK_TIMEOUT`,
/// `MATCH_CLOCK_INTERVAL`, `EGRESS_ALLOW_CIDRS`), plus the deliverer's
/// concurrency.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// `WEBHOOK_RETRY_DELAYS`, default `10s,60s,300s`: the wait before each
    /// retry; attempts = retries + 1.
    pub retry_delays: Vec<std::time::Duration>,
    /// `WEBHOOK_TIMEOUT`, default `10s`: one attempt, connect to last byte.
    pub timeout: std::time::Duration,
    /// `MATCH_CLOCK_INTERVAL`, default `60s`: the time-driven
    /// `record_matches` pass.
    pub match_clock_interval: std::time::Duration,
    /// `EGRESS_ALLOW_CIDRS`, default empty: private ranges outbound requests
    /// may reach (and the only ones plain http may reach), as written.
    pub egress_allow_cidrs: Vec<String>,
    /// `WEBHOOK_CONCURRENCY`, default 64: attempts in flight on this node.
    pub concurrency: usize,
    /// `WEBHOOK_CONCURRENCY_PER_WEBHOOK`, default 4: attempts in flight to
    /// one webhook, so a slow receiver holds at most this many.
    pub concurrency_per_webhook: usize,
    /// `WEBHOOK_CONCURRENCY_PER_DATABASE`, default 32: attempts in flight
    /// for one database's webhooks on this node, however many it has.
    pub concurrency_per_database: usize,
    /// `WEBHOOK_ATTEMPTS_PER_DATABASE_PER_MINUTE`, default 6000: attempts
    /// one database's webhooks may start per minute on this node; beyond
    /// it its deliveries wait, due, uncounted.
    pub attempts_per_database_per_minute: usize,
    /// `MATCH_CLOCK_BATCH`, default 500: records one transaction of the
    /// match clock looks at (its memory holds at most this many ids and
    /// payloads).
    pub match_clock_batch: usize,
    /// `MATCH_CLOCK_ROWS_PER_PASS`, default 50000: records (and match
    /// memory rows) one pass looks at per database; the next pass carries
    /// on from there.
    pub match_clock_rows_per_pass: usize,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            retry_delays: [10, 60, 300].map(std::time::Duration::from_secs).to_vec(),
            timeout: std::time::Duration::from_secs(10),
            match_clock_interval: std::time::Duration::from_secs(60),
            egress_allow_cidrs: Vec::new(),
            concurrency: 64,
            concurrency_per_webhook: 4,
            concurrency_per_database: 32,
            attempts_per_database_per_minute: 6000,
            match_clock_batch: 500,
            match_clock_rows_per_pass: 50_000,
        }
    }
}

/// The duration syntax of the settings (`250ms`, `10s`, `5m`; `10s,60s`).
pub use service_kit::parse::{duration, durations};

/// Time limits of the node's PostgreSQL sessions, each set once per session
/// in its startup options (no statement per request), how long a request
/// waits for a pooled session, how many of them one database's requests
/// (and one owner's) may hold at once, and how many exports (each holding
/// one for its whole stream) run at once and how long each waits for its
/// client. See `db::Db` for where each one applies and
/// `shard-node --help` for the variables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DbLimits {
    /// `SHARD_STATEMENT_TIMEOUT_MS`: every statement a request runs (reads
    /// and record writes alike, lock waits included); also how long a
    /// session may sit idle inside a transaction.
    pub statement: std::time::Duration,
    /// `SHARD_SCHEMA_TIMEOUT_MS`: each statement of a structural change
    /// (tables, fields), which may rewrite a whole table. Such a change waits
    /// at most `statement` for its locks.
    pub schema: std::time::Duration,
    /// `SHARD_MAINTENANCE_TIMEOUT_MS`: each statement of background work on
    /// sessions of its own (catalog migrations, view sort index builds, the
    /// trash purger).
    pub maintenance: std::time::Duration,
    /// `SHARD_POOL_WAIT_MS`: how long a request waits for a pooled session
    /// before it is answered 503 with `Retry-After`.
    pub pool_wait: std::time::Duration,
    /// `SHARD_SESSIONS_PER_DATABASE`: pooled sessions the requests of one
    /// database may hold at once; `None` is [`sessions_per_database_for`]
    /// the pool size. A request of a database at its cap waits (at most
    /// `pool_wait`) for one of that database's own sessions, then is
    /// answered 503 with `Retry-After`.
    pub sessions_per_database: Option<usize>,
    /// `SHARD_SESSIONS_PER_OWNER`: pooled sessions the requests of all the
    /// databases of one owner may hold at once; `None` is
    /// [`sessions_per_owner_for`] the pool size. A request whose owner is
    /// at its cap waits (at most `pool_wait`) for one of the owner's own
    /// sessions, then is answered 503 with `Retry-After`.
    pub sessions_per_owner: Option<usize>,
    /// `SHARD_EXPORT_SEND_TIMEOUT_MS`, default [`EXPORT_SEND_TIMEOUT`]: how
    /// long an export (which holds its session for the whole stream) waits
    /// for the client to take the next chunk; then the export stops and
    /// its session goes back to the pool.
    pub export_send_timeout: std::time::Duration,
    /// `SHARD_MAX_EXPORTS`: exports streamed at once on the node; one more
    /// is answered 503 with `Retry-After`. `None` is [`max_exports_for`]
    /// the pool size.
    pub max_exports: Option<usize>,
    /// `SHARD_SESSION_MAX_DATABASES`, default
    /// [`SESSION_MAX_DATABASES`]: distinct databases a pooled session (of
    /// the request or the maintenance pool) serves before it is closed at
    /// its next checkout, which bounds the catalog caches its PostgreSQL
    /// backend holds (`db::touched`).
    pub session_max_databases: usize,
}

/// `SHARD_SESSION_MAX_DATABASES` when not set. A backend that served 500
/// databases of three tables holds about 100 MB of catalog caches and
/// plans (docs/capacity.md, "A shard with 10,000 databases").
pub const SESSION_MAX_DATABASES: usize = 500;

impl Default for DbLimits {
    fn default() -> Self {
        Self {
            statement: std::time::Duration::from_secs(10),
            schema: std::time::Duration::from_secs(50),
            maintenance: std::time::Duration::from_secs(600),
            pool_wait: std::time::Duration::from_secs(3),
            sessions_per_database: None,
            sessions_per_owner: None,
            export_send_timeout: EXPORT_SEND_TIMEOUT,
            max_exports: None,
            session_max_databases: SESSION_MAX_DATABASES,
        }
    }
}

impl DbLimits {
    /// The cap on one database's sessions in a pool of `pool_size`.
    pub fn sessions_per_database(&self, pool_size: usize) -> usize {
        self.sessions_per_database
            .unwrap_or_else(|| sessions_per_database_for(pool_size))
            .max(1)
    }

    /// Exports streamed at once beside a pool of `pool_size`.
    pub fn max_exports(&self, pool_size: usize) -> usize {
        self.max_exports
            .unwrap_or_else(|| max_exports_for(pool_size))
            .max(1)
    }

    /// The cap on one owner's sessions in a pool of `pool_size`.
    pub fn sessions_per_owner(&self, pool_size: usize) -> usize {
        self.sessions_per_owner
            .unwrap_or_else(|| sessions_per_owner_for(pool_size))
            .max(1)
    }
}

/// Part A: a trashed record is restorable for seven days.
pub const TRASH_RETENTION: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);
/// How often the trash purger runs by default.
pub const TRASH_PURGE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(3600);

/// When the background purger runs and what it removes.
#[derive(Debug, Clone, Copy)]
pub struct TrashSettings {
    /// `SHARD_TRASH_PURGE_INTERVAL_SECS`, default one hour.
    pub interval: std::time::Duration,
    /// `SHARD_TRASH_RETENTION_SECS`: records trashed longer ago than this
    /// are removed; default seven days.
    pub retention: std::time::Duration,
}

impl Default for TrashSettings {
    fn default() -> Self {
        Self {
            interval: TRASH_PURGE_INTERVAL,
            retention: TRASH_RETENTION,
        }
    }
}

/// Where clients reach the cluster when `PUBLIC_URL` is not set.
pub const DEFAULT_PUBLIC_URL: &str = "http://127.0.0.1:8080";

/// Fields per table (part C); a link counts on both tables.
pub const MAX_FIELDS_PER_TABLE: i64 = 500;
/// Choices per select field and characters per choice name (part C).
pub const MAX_CHOICES: usize = 1000;
pub const MAX_CHOICE_NAME_CHARS: usize = 500;
/// Picker fields on a link (part C): four, at most one an attachment.
pub const MAX_PICKER_FIELDS: usize = 4;
/// Button label characters (longer labels are truncated) and URL template length.
pub const MAX_BUTTON_LABEL_CHARS: usize = 40;
pub const MAX_BUTTON_URL_CHARS: usize = 2000;
/// Longest comment text, in characters (README "Comments").
pub const MAX_COMMENT_CHARS: usize = 10_000;
/// `page_size` of a comment listing: 1 to this, default [`COMMENT_PAGE_SIZE_DEFAULT`].
pub const COMMENT_PAGE_SIZE_MAX: i64 = 100;
pub const COMMENT_PAGE_SIZE_DEFAULT: i64 = 50;

#[cfg(test)]
mod tests {

    use super::{pool_size_for, sessions_per_database_for, DbLimits};

    #[test]
    fn pool_is_one_connection_per_cpu_and_one_more_at_least_three() {
        assert_eq!(pool_size_for(1), 3);
        assert_eq!(pool_size_for(2), 3);
        assert_eq!(pool_size_for(4), 5);
        assert_eq!(pool_size_for(16), 17);
    }

    #[test]
    fn one_database_may_hold_all_sessions_but_one_at_least_one() {
        assert_eq!(sessions_per_database_for(1), 1);
        assert_eq!(sessions_per_database_for(2), 1);
        assert_eq!(sessions_per_database_for(3), 2);
        assert_eq!(sessions_per_database_for(17), 16);
        let set = DbLimits {
            sessions_per_database: Some(5),
            ..DbLimits::default()
        };
        assert_eq!(set.sessions_per_database(3), 5);
        assert_eq!(DbLimits::default().sessions_per_database(3), 2);
    }
}
