//! The catalog in PostgreSQL: one small function per query, grouped by
//! concern. Functions take any client (`&Client` or `&Transaction`) so the
//! service layer decides transaction boundaries.

pub mod databases;
pub mod keys;
pub mod load;
pub mod members;
pub mod moves;
pub mod quotas;
pub mod restores;
pub mod sessions;
pub mod shards;
pub mod users;

use std::str::FromStr;

use anyhow::Context;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};

pub use tokio_postgres::GenericClient as Db;

use crate::pg_tls::PgTls;

/// How many catalog connections one control plane keeps at most.
const POOL_SIZE: usize = 16;
/// The longest wait for a new catalog session (every host of the URL
/// tried): past it, the request answers 503.
const CREATE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The catalog's pool, its sessions made with `tls` (`CONTROL_PLANE_PG_SSLMODE`).
pub fn pool(database_url: &str, tls: &PgTls) -> anyhow::Result<Pool> {
    let mut pg = tokio_postgres::Config::from_str(database_url)
        .context("parse CONTROL_PLANE_DATABASE_URL")?;
    tls.apply(&mut pg);
    // Short per-host connect timeout and keepalives: with a multi-host URL
    // and `target_session_attrs=read-write` a new session finds the
    // primary, and one to a vanished primary fails fast.
    service_kit::pg_failover::harden(&mut pg);
    let manager = Manager::from_config(
        pg,
        tls.clone(),
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(POOL_SIZE)
        .create_timeout(Some(CREATE_TIMEOUT))
        .runtime(deadpool_postgres::Runtime::Tokio1)
        // Sessions opened before a failover error are not handed out again.
        .pre_recycle(service_kit::pg_failover::discard_stale_sessions())
        .build()
        .context("build catalog pool")
}

/// The unique-violation SQLSTATE.
pub fn is_unique_violation(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
}
