//! The shard node's settings: one clap struct read from flags and the
//! environment (`shard-node --help` lists each with its variable and
//! default), and how it becomes a [`Config`].

use std::net::SocketAddr;
use std::time::Duration;

use service_kit::parse::{self, Durations};

use crate::attachments::settings::AttachmentSettings;
use crate::config::{Config, DbLimits, Secret, TrashSettings, WebhookSettings, DEFAULT_PUBLIC_URL};

/// Every setting of a shard node.
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "shard-node",
    version,
    about = "A shard node: serves the /api routes of the databases placed on it, from its own PostgreSQL."
)]
pub struct Settings {
    /// The name this shard is registered under.
    #[arg(long, env = "SHARD_NAME")]
    pub shard_name: String,
    /// Listen address (host:port).
    #[arg(long, env = "SHARD_LISTEN", default_value = "127.0.0.1:8091")]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub log: service_kit::telemetry::LogSettings,
    /// This shard's own PostgreSQL.
    #[arg(long, env = "SHARD_DATABASE_URL", hide_env_values = true)]
    pub database_url: Secret,
    /// HMAC key of the principals routers sign.
    #[arg(long, env = "CLUSTER_SECRET", hide_env_values = true)]
    pub cluster_secret: Secret,
    /// The control plane's internal API (no call made yet).
    #[arg(long, env = "CONTROL_PLANE_URL")]
    pub control_plane_url: Option<String>,
    /// The shard tier's control-plane token (placement reads only).
    #[arg(
        long = "control-plane-shard-token",
        value_name = "TOKEN",
        env = "CONTROL_PLANE_SHARD_TOKEN",
        hide_env_values = true
    )]
    pub control_plane_token: Option<Secret>,
    /// The only credential `GET /metrics` takes; unset: no page (404).
    #[arg(long, env = "METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<Secret>,
    /// Connections to its PostgreSQL (request sessions) [default: 1 per CPU
    /// + 1, at least 3, plus 1 in reserve for other databases].
    #[arg(long, env = "SHARD_POOL_SIZE", value_parser = parse::positive::<usize>)]
    pub pool_size: Option<usize>,
    /// Milliseconds a request waits for a pooled session; then 503
    /// `unavailable` with `Retry-After: 1`.
    #[arg(long, env = "SHARD_POOL_WAIT_MS", default_value = "3000", value_parser = parse::millis)]
    pub pool_wait_ms: Duration,
    /// Pooled sessions the requests of one database may hold at once
    /// [default: pool size - 1, at least 1].
    ///
    /// So one busy database cannot stall the others on its shard: a request
    /// of a database at its cap waits (within SHARD_POOL_WAIT_MS) for one of
    /// that database's own sessions, then is answered 503 `unavailable` with
    /// `Retry-After: 1` saying the database has too many requests in
    /// progress.
    #[arg(long, env = "SHARD_SESSIONS_PER_DATABASE", value_parser = parse::positive::<usize>)]
    pub sessions_per_database: Option<usize>,
    /// Pooled sessions the requests of all one owner's databases may hold
    /// at once [default: pool size - 1, at least 1].
    ///
    /// The owner is read once per database from the catalog and kept;
    /// beyond the cap, after SHARD_POOL_WAIT_MS, 503 `unavailable` with
    /// `Retry-After: 1`.
    #[arg(long, env = "SHARD_SESSIONS_PER_OWNER", value_parser = parse::positive::<usize>)]
    pub sessions_per_owner: Option<usize>,
    /// Exports streaming at once on the node [default: pool size / 2, at
    /// least 1]; one more is 503 `unavailable` with `Retry-After: 1`.
    #[arg(long, env = "SHARD_MAX_EXPORTS", value_parser = parse::positive::<usize>)]
    pub max_exports: Option<usize>,
    /// Distinct databases a pooled PostgreSQL session may serve before it is
    /// closed and opened afresh (at its next checkout).
    ///
    /// A PostgreSQL backend keeps the catalog entries (relcache, catcache)
    /// of every relation it has touched until it ends; on a shard of
    /// thousands of tenant schemas a long-lived session would grow to hold
    /// them all. Background sessions (the trash purger's pass over every
    /// table) are retired by the same bound.
    #[arg(long, env = "SHARD_SESSION_MAX_DATABASES", default_value = "500", value_parser = parse::positive::<usize>)]
    pub session_max_databases: usize,
    /// Schema models the node keeps in memory, by weight: one per database
    /// plus one per table, field and webhook; past it the least recently
    /// used are dropped (and read again when next needed).
    #[arg(long, env = "SHARD_SCHEMA_CACHE_FIELDS", default_value = "200000", value_parser = parse::positive::<u64>)]
    pub schema_cache_fields: u64,
    /// Milliseconds an export waits for its client to take the next chunk;
    /// then it stops and its session and thread are released.
    #[arg(long, env = "SHARD_EXPORT_SEND_TIMEOUT_MS", default_value = "30000", value_parser = parse::millis)]
    pub export_send_timeout_ms: Duration,
    /// `statement_timeout` (ms) of every request session, and its
    /// `idle_in_transaction_session_timeout`.
    ///
    /// Reads and record writes alike, lock waits included; set once per
    /// session in its startup options. A statement stopped by it answers
    /// 400 naming the time limit, nothing written.
    #[arg(long, env = "SHARD_STATEMENT_TIMEOUT_MS", default_value = "10000", value_parser = parse::millis)]
    pub statement_timeout_ms: Duration,
    /// Statement limit (ms) inside a structural change (tables, fields).
    ///
    /// `SET LOCAL` in its transaction; its lock waits stay bounded by
    /// SHARD_STATEMENT_TIMEOUT_MS (then 503, `Retry-After: 1`).
    #[arg(long, env = "SHARD_SCHEMA_TIMEOUT_MS", default_value = "50000", value_parser = parse::millis)]
    pub schema_timeout_ms: Duration,
    /// Statement limit (ms) of background work (catalog migrations, view
    /// sort index builds, trash purger), run on two sessions of their own,
    /// never a request's.
    #[arg(long, env = "SHARD_MAINTENANCE_TIMEOUT_MS", default_value = "600000", value_parser = parse::millis)]
    pub maintenance_timeout_ms: Duration,
    /// Seconds between runs of the trash purger.
    #[arg(long, env = "SHARD_TRASH_PURGE_INTERVAL_SECS", default_value = "3600", value_parser = parse::secs)]
    pub trash_purge_interval_secs: Duration,
    /// Seconds a trashed record stays restorable (seven days).
    #[arg(long, env = "SHARD_TRASH_RETENTION_SECS", default_value = "604800", value_parser = parse::secs)]
    pub trash_retention_secs: Duration,
    /// Private ranges outbound requests may reach, comma-separated; plain
    /// http reaches only these [default: none; dev cluster
    /// 127.0.0.0/8,::1/128].
    #[arg(long, env = "EGRESS_ALLOW_CIDRS")]
    pub egress_allow_cidrs: Option<String>,
    /// Waits before each webhook retry (units ms, s, m, h); attempts =
    /// retries + 1.
    #[arg(long, env = "WEBHOOK_RETRY_DELAYS", default_value = "10s,60s,300s", value_parser = parse::duration_list)]
    pub webhook_retry_delays: Durations,
    /// One webhook attempt, connect to the last byte read.
    #[arg(long, env = "WEBHOOK_TIMEOUT", default_value = "10s", value_parser = parse::duration)]
    pub webhook_timeout: Duration,
    /// Webhook attempts in flight on the node; an attempt waiting over
    /// 500 ms stops counting, at most 16 times this in flight.
    #[arg(long, env = "WEBHOOK_CONCURRENCY", default_value = "64", value_parser = parse::positive::<usize>)]
    pub webhook_concurrency: usize,
    /// Webhook attempts in flight to one webhook.
    #[arg(long, env = "WEBHOOK_CONCURRENCY_PER_WEBHOOK", default_value = "4", value_parser = parse::positive::<usize>)]
    pub webhook_concurrency_per_webhook: usize,
    /// Webhook attempts in flight for one database's webhooks on the node.
    #[arg(long, env = "WEBHOOK_CONCURRENCY_PER_DATABASE", default_value = "32", value_parser = parse::positive::<usize>)]
    pub webhook_concurrency_per_database: usize,
    /// Webhook attempts one database may start per minute on the node.
    #[arg(long, env = "WEBHOOK_ATTEMPTS_PER_DATABASE_PER_MINUTE", default_value = "6000", value_parser = parse::positive::<usize>)]
    pub webhook_attempts_per_database_per_minute: usize,
    /// The time-driven `record_matches` pass.
    #[arg(long, env = "MATCH_CLOCK_INTERVAL", default_value = "60s", value_parser = parse::duration)]
    pub match_clock_interval: Duration,
    /// Records one transaction of the match clock looks at.
    #[arg(long, env = "MATCH_CLOCK_BATCH", default_value = "500", value_parser = parse::positive::<usize>)]
    pub match_clock_batch: usize,
    /// Records one match clock pass looks at per database.
    #[arg(long, env = "MATCH_CLOCK_ROWS_PER_PASS", default_value = "50000", value_parser = parse::positive::<usize>)]
    pub match_clock_rows_per_pass: usize,
    /// Where attachment bytes live: `local` (a directory) or `s3`.
    ///
    /// Every shard node of a cluster must name the same store (keys are
    /// `<database_id>/<attachment_id>/<variant>`, never a shard, so moves
    /// copy no bytes).
    #[arg(long, env = "BLOB_STORE", default_value = "local")]
    pub blob_store: String,
    /// Root of the local store, created when missing (relative to the
    /// working directory; dev cluster: .dev-cluster/blobs).
    #[arg(long, env = "BLOB_DIR", default_value = "blobs")]
    pub blob_dir: String,
    /// Endpoint of an S3-compatible service (http://127.0.0.1:9000)
    /// [default: AWS].
    #[arg(long, env = "S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    /// S3 signing region.
    #[arg(long, env = "S3_REGION", default_value = "us-east-1")]
    pub s3_region: String,
    /// S3 bucket (required with `s3`); it must exist.
    #[arg(long, env = "S3_BUCKET")]
    pub s3_bucket: Option<String>,
    /// S3 access key id (required with `s3`).
    #[arg(long, env = "S3_ACCESS_KEY_ID", hide_env_values = true)]
    pub s3_access_key_id: Option<Secret>,
    /// S3 secret access key (required with `s3`).
    #[arg(long, env = "S3_SECRET_ACCESS_KEY", hide_env_values = true)]
    pub s3_secret_access_key: Option<Secret>,
    /// `true`: `https://host/bucket/key` rather than `https://bucket.host/key`
    /// [default: true when S3_ENDPOINT is set, else false].
    #[arg(long, env = "S3_FORCE_PATH_STYLE")]
    pub s3_force_path_style: Option<String>,
    /// Original bytes one database may hold (100 GiB).
    #[arg(long, env = "ATTACHMENT_QUOTA_BYTES", default_value = "107374182400", value_parser = parse::positive::<u64>)]
    pub attachment_quota_bytes: u64,
    /// Image sources held in memory at once for their thumbnails (256 MiB).
    #[arg(long, env = "THUMBNAIL_QUEUE_BYTES", default_value = "268435456", value_parser = parse::positive::<u64>)]
    pub thumbnail_queue_bytes: u64,
    /// What every thumbnail decode may allocate at once (1 GiB).
    #[arg(long, env = "THUMBNAIL_DECODE_BYTES", default_value = "1073741824", value_parser = parse::positive::<u64>)]
    pub thumbnail_decode_bytes: u64,
    /// Where clients reach the cluster (dev cluster: the router's URL); the
    /// base of the local store's signed attachment links.
    #[arg(long, env = "PUBLIC_URL", default_value = DEFAULT_PUBLIC_URL)]
    pub public_url: String,
}

impl Config {
    /// From the environment alone (no command line).
    pub fn from_env() -> anyhow::Result<Self> {
        Self::from_settings(parse::try_args_from::<Settings, _, _>(["shard-node"])?)
    }

    /// From parsed settings.
    pub fn from_settings(s: Settings) -> anyhow::Result<Self> {
        let blobs = blobstore::Settings::from_lookup(|name| match name {
            "BLOB_STORE" => Some(s.blob_store.clone()),
            "BLOB_DIR" => Some(s.blob_dir.clone()),
            "S3_ENDPOINT" => s.s3_endpoint.clone(),
            "S3_REGION" => Some(s.s3_region.clone()),
            "S3_BUCKET" => s.s3_bucket.clone(),
            "S3_ACCESS_KEY_ID" => s.s3_access_key_id.as_ref().map(|v| v.expose().to_owned()),
            "S3_SECRET_ACCESS_KEY" => s
                .s3_secret_access_key
                .as_ref()
                .map(|v| v.expose().to_owned()),
            "S3_FORCE_PATH_STYLE" => s.s3_force_path_style.clone(),
            _ => None,
        })?;
        Ok(Self {
            shard_name: s.shard_name,
            listen: s.listen,
            database_url: s.database_url,
            cluster_secret: s.cluster_secret,
            control_plane_url: s.control_plane_url,
            control_plane_token: s.control_plane_token,
            metrics_token: s.metrics_token,
            pool_size: s.pool_size.unwrap_or_else(crate::config::default_pool_size),
            trash: TrashSettings {
                interval: s.trash_purge_interval_secs,
                retention: s.trash_retention_secs,
            },
            db_limits: DbLimits {
                statement: s.statement_timeout_ms,
                schema: s.schema_timeout_ms,
                maintenance: s.maintenance_timeout_ms,
                pool_wait: s.pool_wait_ms,
                sessions_per_database: s.sessions_per_database,
                sessions_per_owner: s.sessions_per_owner,
                export_send_timeout: s.export_send_timeout_ms,
                max_exports: s.max_exports,
                session_max_databases: s.session_max_databases,
            },
            schema_cache_weight: s.schema_cache_fields,
            webhooks: WebhookSettings {
                retry_delays: s.webhook_retry_delays.0,
                timeout: s.webhook_timeout,
                match_clock_interval: s.match_clock_interval,
                egress_allow_cidrs: s
                    .egress_allow_cidrs
                    .as_deref()
                    .map(parse::list)
                    .unwrap_or_default(),
                concurrency: s.webhook_concurrency,
                concurrency_per_webhook: s.webhook_concurrency_per_webhook,
                concurrency_per_database: s.webhook_concurrency_per_database,
                attempts_per_database_per_minute: s.webhook_attempts_per_database_per_minute,
                match_clock_batch: s.match_clock_batch,
                match_clock_rows_per_pass: s.match_clock_rows_per_pass,
            },
            blobs,
            attachments: AttachmentSettings {
                database_quota_bytes: s.attachment_quota_bytes.min(i64::MAX as u64) as i64,
                thumbnail_queue_bytes: s.thumbnail_queue_bytes,
                thumbnail_decode_bytes: s.thumbnail_decode_bytes,
            },
            public_url: s.public_url,
            metrics: None,
        })
    }
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn defaults_are_the_configs_defaults() {
        let s = service_kit::parse::try_args_only::<Settings, _, _>([
            "shard-node",
            "--shard-name",
            "s",
            "--database-url",
            "postgres://x",
            "--cluster-secret",
            "k",
        ])
        .unwrap();
        let c = Config::from_settings(s).unwrap();
        assert_eq!(c.db_limits, DbLimits::default());
        assert_eq!(
            c.schema_cache_weight,
            crate::schema::cache::DEFAULT_MAX_WEIGHT
        );
        let w = WebhookSettings::default();
        assert_eq!(
            (c.webhooks.retry_delays, c.webhooks.timeout),
            (w.retry_delays, w.timeout)
        );
        assert_eq!(c.webhooks.match_clock_interval, w.match_clock_interval);
        assert_eq!(
            (
                c.webhooks.concurrency,
                c.webhooks.concurrency_per_webhook,
                c.webhooks.concurrency_per_database,
                c.webhooks.attempts_per_database_per_minute,
                c.webhooks.match_clock_batch,
                c.webhooks.match_clock_rows_per_pass,
            ),
            (
                w.concurrency,
                w.concurrency_per_webhook,
                w.concurrency_per_database,
                w.attempts_per_database_per_minute,
                w.match_clock_batch,
                w.match_clock_rows_per_pass,
            )
        );
        assert!(c.webhooks.egress_allow_cidrs.is_empty());
        let t = TrashSettings::default();
        assert_eq!(
            (c.trash.interval, c.trash.retention),
            (t.interval, t.retention)
        );
        assert_eq!(c.attachments, AttachmentSettings::default());
        assert_eq!(c.public_url, DEFAULT_PUBLIC_URL);
        assert_eq!(c.listen.to_string(), "127.0.0.1:8091");
        assert!(matches!(c.blobs, blobstore::Settings::Local(_)));
    }

    #[test]
    fn durations_and_counts_keep_their_syntax() {
        let s = service_kit::parse::try_args_only::<Settings, _, _>([
            "shard-node",
            "--shard-name=s",
            "--database-url=postgres://x",
            "--cluster-secret=k",
            "--webhook-retry-delays=250ms,1s",
            "--webhook-timeout=2s",
            "--egress-allow-cidrs=10.0.0.0/8, ::1/128",
        ])
        .unwrap();
        let c = Config::from_settings(s).unwrap();
        assert_eq!(
            c.webhooks.retry_delays,
            [Duration::from_millis(250), Duration::from_secs(1)]
        );
        assert_eq!(c.webhooks.timeout, Duration::from_secs(2));
        assert_eq!(c.webhooks.egress_allow_cidrs, ["10.0.0.0/8", "::1/128"]);
        for bad in ["--webhook-concurrency=0", "--webhook-timeout=10x"] {
            let parsed = service_kit::parse::try_args_only::<Settings, _, _>([
                "shard-node",
                "--shard-name=s",
                "--database-url=postgres://x",
                "--cluster-secret=k",
                bad,
            ]);
            assert!(parsed.is_err(), "{bad}");
        }
    }
}
