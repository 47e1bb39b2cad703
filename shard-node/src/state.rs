//! Shared state handed to every handler: the pool, the schema cache, the
//! cluster secret and the node's other shared services.

use std::sync::Arc;

use crate::config::{Config, Secret};
use crate::db::Db;

#[derive(Clone)]
pub struct AppState {
    pub db: Db,
    /// The schema model of each database, reloaded when its version moves.
    pub schemas: Arc<crate::schema::cache::SchemaCache>,
    pub secret: Arc<Secret>,
    pub shard_name: Arc<str>,
    /// The guard and clients of every outbound request (`EGRESS_ALLOW_CIDRS`).
    pub egress: crate::egress::Egress,
    /// Webhook delivery timings and the match clock.
    pub webhooks: Arc<crate::config::WebhookSettings>,
    /// The cluster-wide store of attachment bytes (shared by every shard,
    /// keyed by database and attachment id).
    pub blobs: blobstore::BlobStore,
    /// Signs the links of attachment cells and uploads (`PUBLIC_URL`).
    pub links: crate::attachments::links::Links,
    /// The bounded pool image derivatives are made on (one per CPU, under
    /// the node's thumbnail memory budgets).
    pub thumbnailer: crate::attachments::thumbnails::Pool,
    /// The storage quota per database (`ATTACHMENT_QUOTA_BYTES`).
    pub attachment_quota: i64,
    /// `GET /metrics`, when the node has a recorder and an admin token.
    pub metrics: Option<crate::metrics::Page>,
    /// Rows written per record table since its last `ANALYZE`.
    pub statistics: crate::records::statistics::Statistics,
    /// The first key of each record table's indexes, read now and then
    /// (whether a filtered page may keep one plan).
    pub index_leads: crate::records::kept_plans::IndexLeads,
    /// The node's export slots and their send timeout
    /// (`SHARD_MAX_EXPORTS`, `SHARD_EXPORT_SEND_TIMEOUT_MS`).
    pub exports: crate::export::limits::Exports,
    /// Requests per database not yet flushed to `request_counts`.
    pub requests: Arc<crate::request_counts::RequestCounts>,
}

impl AppState {
    /// Fails on a setting that does not parse (`EGRESS_ALLOW_CIDRS`) and on
    /// a local blob directory that cannot be created.
    pub fn new(config: &Config, db: Db) -> anyhow::Result<Self> {
        let blobs = blobstore::BlobStore::open(&config.blobs)?;
        Ok(Self {
            db,
            schemas: Arc::new(crate::schema::cache::SchemaCache::bounded(
                config.schema_cache_weight,
            )),
            secret: Arc::new(config.cluster_secret.clone()),
            shard_name: Arc::from(config.shard_name.as_str()),
            egress: crate::egress::Egress::new(&config.webhooks.egress_allow_cidrs)?,
            webhooks: Arc::new(config.webhooks.clone()),
            blobs: blobs.clone(),
            links: crate::attachments::links::Links::new(
                config.cluster_secret.expose().as_bytes(),
                &config.public_url,
                blobs,
            ),
            thumbnailer: crate::attachments::thumbnails::Pool::with_budgets(&config.attachments),
            attachment_quota: config.attachments.database_quota_bytes,
            metrics: crate::metrics::Page::new(
                config.metrics.clone(),
                config.metrics_token.clone(),
            ),
            statistics: Default::default(),
            index_leads: Default::default(),
            exports: crate::export::limits::Exports::new(
                config.db_limits.max_exports(config.pool_size),
                config.db_limits.export_send_timeout,
            ),
            requests: Default::default(),
        })
    }
}
