//! The pool to this shard's PostgreSQL: sessions for requests (each
//! database's and each owner's fair share), for background work and for the
//! webhook deliverer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime, Timeouts};
use service_kit::metrics as pool_metrics;
use service_kit::pg_failover;
use tokio_postgres::NoTls;

use super::touched::Touched;
use crate::cancel::PgConn;
use crate::config::{DbLimits, CONNECT_TIMEOUT};
use crate::db::DbOp;
use crate::error::ApiResult;
use crate::fair_share::{FairShare, Kind, Shares};
use crate::owners::Owners;

/// The pool to this shard's PostgreSQL.
///
/// Time limits ([`DbLimits`]) are part of each session's startup options,
/// so they cost no statement per request:
/// * pooled sessions run every statement under `statement_timeout` =
///   `limits.statement` (reads and record writes; lock waits count), and
///   `idle_in_transaction_session_timeout` = the same, so a transaction
///   left open cannot hold its locks longer than a statement could;
/// * a structural change raises its own transaction's limit to
///   `limits.schema` (`SET LOCAL`, see [`SCHEMA_LIMITS_SQL`]) and waits at
///   most `limits.statement` for locks, so it never queues the table's
///   readers behind it for long;
/// * background work (migrations, sort index builds, the trash purger)
///   runs on sessions of its own ([`Db::maintenance_client`]) under
///   `limits.maintenance`, and never holds a request's session.
///
/// The requests of one database hold at most
/// `limits.sessions_per_database(pool size)` of the pool's sessions at once,
/// and those of all one owner's databases at most
/// `limits.sessions_per_owner(pool size)` ([`Db::client_for`],
/// `crate::fair_share`), so neither one database nor one owner can take
/// every session of the shard from the others.
#[derive(Clone)]
pub struct Db {
    pool: Pool,
    /// Each database's share of `pool`.
    fair: Arc<FairShare>,
    /// Each owner's share of `pool`, across the owner's databases.
    owner_fair: Arc<FairShare>,
    /// Each database's owner, read once.
    owners: Arc<Owners>,
    /// `SHARD_POOL_WAIT_MS`: the longest wait for a share and a session.
    pool_wait: Duration,
    /// Sessions for background work, at most [`MAINTENANCE_SESSIONS`].
    maintenance: Pool,
    /// The webhook deliverer's session ([`Db::deliverer_client`]).
    deliverer: Pool,
    /// How to open a dedicated session (`LISTEN`), as the deliverer's.
    dedicated: Arc<tokio_postgres::Config>,
    /// The databases each request session served: past
    /// `limits.session_max_databases` a session is closed (`db::touched`).
    touched: Arc<Touched>,
    /// The same for the maintenance sessions.
    maintenance_touched: Arc<Touched>,
}

/// The pools' names in `tabula_db_pool_*` series.
const REQUEST_POOL: &str = "requests";
const MAINTENANCE_POOL: &str = "maintenance";
const DELIVERER_POOL: &str = "deliverer";

/// A session of `pool`, its wait recorded.
async fn timed_get(
    name: &'static str,
    pool: &Pool,
) -> Result<Object, deadpool_postgres::PoolError> {
    let start = Instant::now();
    let got = pool.get().await;
    pool_metrics::pool_wait(name, got.is_ok(), start.elapsed());
    got
}

/// Background statements running at once (each may be a whole-table index
/// build); more wait their turn rather than load the shard further.
pub const MAINTENANCE_SESSIONS: usize = 2;

/// Sessions of the webhook deliverer: it claims due deliveries and records
/// attempts one statement at a time, never across an outgoing request.
pub const DELIVERER_SESSIONS: usize = 1;

/// Run first in a structural change's transaction: its statements may take
/// `SHARD_SCHEMA_TIMEOUT_MS`, its lock waits `SHARD_STATEMENT_TIMEOUT_MS`.
/// The values travel in the session's startup options as custom settings,
/// so no caller needs the configuration.
pub const SCHEMA_LIMITS_SQL: &str = "SELECT \
     set_config('statement_timeout', current_setting('shard_node.schema_timeout'), true), \
     set_config('lock_timeout', current_setting('shard_node.schema_lock_timeout'), true)";

/// The startup options of a session: `url`'s own, then `settings`.
fn with_options(
    url: &str,
    application: &str,
    settings: &[(&str, Duration)],
) -> anyhow::Result<tokio_postgres::Config> {
    let mut cfg: tokio_postgres::Config = url.parse().context("parse SHARD_DATABASE_URL")?;
    let mut options = cfg.get_options().unwrap_or_default().to_owned();
    for (name, value) in settings {
        if !options.is_empty() {
            options.push(' ');
        }
        options.push_str(&format!("-c {name}={}", value.as_millis()));
    }
    cfg.options(&options);
    if cfg.get_application_name().is_none() {
        cfg.application_name(application);
    }
    // Short per-host connect timeout, keepalives, tcp_user_timeout: a
    // session to a vanished primary fails fast (`service_kit::pg_failover`).
    pg_failover::harden(&mut cfg);
    Ok(cfg)
}

fn build_pool(
    cfg: tokio_postgres::Config,
    size: usize,
    wait: Option<Duration>,
    touched: Option<&Arc<Touched>>,
) -> anyhow::Result<Pool> {
    let manager = Manager::from_config(
        cfg,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let mut builder = Pool::builder(manager)
        .max_size(size)
        .wait_timeout(wait)
        .create_timeout(Some(CONNECT_TIMEOUT))
        .runtime(Runtime::Tokio1)
        // Sessions opened before a failover error are not handed out again.
        .pre_recycle(pg_failover::discard_stale_sessions());
    if let Some(touched) = touched {
        // Nor are those that served too many databases (their backends'
        // catalog caches hold every relation they opened).
        builder = builder.pre_recycle(touched.retire_hook());
    }
    builder.build().context("create the postgres pool")
}

impl Db {
    /// A pool of `pool_size` sessions under the default [`DbLimits`].
    pub fn connect(url: &str, pool_size: usize) -> anyhow::Result<Self> {
        Self::connect_with(url, pool_size, DbLimits::default())
    }

    pub fn connect_with(url: &str, pool_size: usize, limits: DbLimits) -> anyhow::Result<Self> {
        let pooled = with_options(
            url,
            "shard-node",
            &[
                ("statement_timeout", limits.statement),
                ("idle_in_transaction_session_timeout", limits.statement),
                ("shard_node.schema_timeout", limits.schema),
                ("shard_node.schema_lock_timeout", limits.statement),
            ],
        )?;
        let maintenance = with_options(
            url,
            "shard-node maintenance",
            &[
                ("statement_timeout", limits.maintenance),
                ("idle_in_transaction_session_timeout", limits.maintenance),
            ],
        )?;
        let deliverer = with_options(
            url,
            "shard-node deliverer",
            &[
                ("statement_timeout", limits.statement),
                ("idle_in_transaction_session_timeout", limits.statement),
            ],
        )?;
        let pool_size = pool_size.max(1);
        let touched = Touched::new(limits.session_max_databases, pool_size);
        let maintenance_touched = Touched::new(limits.session_max_databases, MAINTENANCE_SESSIONS);
        let pool = build_pool(pooled, pool_size, Some(limits.pool_wait), Some(&touched))?;
        // Background work waits for a session as long as it takes.
        let maintenance = build_pool(
            maintenance,
            MAINTENANCE_SESSIONS,
            None,
            Some(&maintenance_touched),
        )?;
        let dedicated = Arc::new(deliverer.clone());
        // The deliverer reads and writes catalog tables only.
        let deliverer = build_pool(deliverer, DELIVERER_SESSIONS, None, None)?;
        Ok(Self {
            pool,
            fair: Arc::new(FairShare::new(
                Kind::Database,
                limits.sessions_per_database(pool_size),
            )),
            owner_fair: Arc::new(FairShare::new(
                Kind::Owner,
                limits.sessions_per_owner(pool_size),
            )),
            owners: Arc::default(),
            pool_wait: limits.pool_wait,
            maintenance,
            deliverer,
            dedicated,
            touched,
            maintenance_touched,
        })
    }

    /// A pooled session for a request of `database_id`, counted against
    /// that database's share of the pool, then against its owner's: with
    /// either share all held, it waits for one of the database's (or the
    /// owner's) own sessions (503 naming them after the pool wait). Every
    /// request on behalf of one database takes its sessions here. Held by a
    /// request that is dropped before it finishes (the client went away),
    /// it cancels its statement and is closed rather than pooled, and its
    /// shares come back when the session is closed ([`PgConn`]).
    pub async fn client_for(&self, database_id: &str) -> ApiResult<PgConn> {
        let start = Instant::now();
        let left = || self.pool_wait.saturating_sub(start.elapsed());
        let got = async {
            let database = self.fair.acquire(database_id, self.pool_wait).await?;
            let owner_id = match self.owners.get(database_id) {
                Some(owner_id) => owner_id,
                None => self.read_owner(database_id, left()).await?,
            };
            let owner = self.owner_fair.acquire(&owner_id, left()).await?;
            let session = self.session_within(left()).await?;
            self.touched.touch(&session, database_id);
            Ok(PgConn::new(session, Some(Shares { database, owner })))
        }
        .await;
        pool_metrics::pool_wait(REQUEST_POOL, got.is_ok(), start.elapsed());
        got
    }

    /// A session of the request pool, waiting at most `wait`.
    async fn session_within(&self, wait: Duration) -> ApiResult<Object> {
        let timeouts = Timeouts {
            wait: Some(wait),
            ..self.pool.timeouts()
        };
        Ok(self.pool.timeout_get(&timeouts).await?)
    }

    /// The owner of `database_id`, read from its catalog row on a session
    /// given back at once, and kept ([`Owners`]): only the first request
    /// of each database after the node starts comes here. A database this
    /// shard has no row for (its requests end in 404 or 421) counts as its
    /// own owner, and is not kept.
    async fn read_owner(&self, database_id: &str, wait: Duration) -> ApiResult<Arc<str>> {
        let session = self.session_within(wait).await?;
        let owner = crate::catalog::databases::owner_of(&session, database_id).await?;
        drop(session);
        Ok(match owner {
            Some(owner_id) => self.owners.remember(database_id, &owner_id),
            None => Arc::from(database_id),
        })
    }

    /// A pooled session for work not on behalf of one database (health,
    /// the lookup across databases, creating a database); requests of one
    /// database use [`Db::client_for`]. Dropped unfinished, as there.
    pub async fn client(&self) -> ApiResult<PgConn> {
        let session = timed_get(REQUEST_POOL, &self.pool).await?;
        Ok(PgConn::new(session, None))
    }

    /// A session for background work (not one of the request pool's),
    /// under the maintenance time limit.
    pub async fn maintenance_client(&self) -> ApiResult<Object> {
        Ok(timed_get(MAINTENANCE_POOL, &self.maintenance).await?)
    }

    /// Counts `database_id` as served by the maintenance session `client`
    /// (work that goes through many databases on one session, as the
    /// trash purger); once the session has served more than
    /// `SHARD_SESSION_MAX_DATABASES`, closes it and puts a fresh one in
    /// its place, so its backend's catalog caches stay bounded.
    pub async fn maintenance_serving(
        &self,
        client: Object,
        database_id: &str,
    ) -> ApiResult<Object> {
        self.maintenance_touched.touch(&client, database_id);
        if self.maintenance_touched.served(&client) <= self.maintenance_touched.max_databases() {
            return Ok(client);
        }
        // Out of the pool first (dropping it closes the session), so the
        // fresh one never waits for a slot this one still holds.
        drop(Object::take(client));
        self.maintenance_client().await
    }

    /// Databases the request session `session` has served (tests).
    pub fn databases_served(&self, session: &Object) -> usize {
        self.touched.served(session)
    }

    /// The webhook deliverer's session (not one of the request pool's),
    /// under the request statement limit.
    pub async fn deliverer_client(&self) -> ApiResult<Object> {
        Ok(timed_get(DELIVERER_POOL, &self.deliverer).await?)
    }

    /// The status of each pool, by its metrics name.
    pub fn pool_statuses(&self) -> [(&'static str, deadpool_postgres::Status); 3] {
        [
            (REQUEST_POOL, self.pool.status()),
            (MAINTENANCE_POOL, self.maintenance.status()),
            (DELIVERER_POOL, self.deliverer.status()),
        ]
    }

    /// Deliveries of the outbox not finished yet (for `/metrics`).
    pub async fn pending_deliveries(&self) -> ApiResult<i64> {
        self.measured(DbOp::CountPendingDeliveries, async {
            let client = self.client().await?;
            Ok(crate::catalog::deliveries::pending_count(&*client).await?)
        })
        .await
    }

    /// A session of its own, outside every pool (the deliverer's `LISTEN`):
    /// the caller drives the returned connection.
    pub async fn dedicated_session(
        &self,
    ) -> Result<
        (
            tokio_postgres::Client,
            tokio_postgres::Connection<tokio_postgres::Socket, tokio_postgres::tls::NoTlsStream>,
        ),
        tokio_postgres::Error,
    > {
        self.dedicated.connect(NoTls).await
    }
}
