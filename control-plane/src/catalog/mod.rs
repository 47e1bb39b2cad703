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
pub mod shards;
pub mod users;

use std::str::FromStr;

use anyhow::Context;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};

pub use tokio_postgres::GenericClient as Db;

use crate::pg_tls::PgTls;

/// How many catalog connections one control plane keeps at most.
const POOL_SIZE: usize = 16;

/// The catalog's pool, its sessions made with `tls` (`CONTROL_PLANE_PG_SSLMODE`).
pub fn pool(database_url: &str, tls: &PgTls) -> anyhow::Result<Pool> {
    let mut pg = tokio_postgres::Config::from_str(database_url)
        .context("parse CONTROL_PLANE_DATABASE_URL")?;
    tls.apply(&mut pg);
    let manager = Manager::from_config(
        pg,
        tls.clone(),
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(POOL_SIZE)
        .build()
        .context("build catalog pool")
}

/// The unique-violation SQLSTATE.
pub fn is_unique_violation(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
}
