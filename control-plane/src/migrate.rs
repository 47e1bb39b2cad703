//! Versioned catalog migrations: numbered `.sql` files embedded in the
//! binary, applied by `service_kit::migrations` (each in its own
//! transaction, recorded in `schema_migrations` by number and name, under
//! an advisory lock that serialises control planes starting at once).

use anyhow::Context;
use deadpool_postgres::Pool;
use service_kit::migrations::{Catalog, Ledger, Migration};

/// Every migration, in order. Never edit an applied migration: add one.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        number: 1,
        name: "init",
        sql: include_str!("../migrations/0001_init.sql"),
    },
    Migration {
        number: 2,
        name: "moves",
        sql: include_str!("../migrations/0002_moves.sql"),
    },
    Migration {
        number: 3,
        name: "move_batches",
        sql: include_str!("../migrations/0003_move_batches.sql"),
    },
    Migration {
        number: 4,
        name: "quotas",
        sql: include_str!("../migrations/0004_quotas.sql"),
    },
    Migration {
        number: 5,
        name: "restores",
        sql: include_str!("../migrations/0005_restores.sql"),
    },
    Migration {
        number: 6,
        name: "accounts",
        sql: include_str!("../migrations/0006_accounts.sql"),
    },
];

/// The control plane's catalog: its lock id ("cpmigrat" as bytes) and list.
pub const CATALOG: Catalog = Catalog {
    lock: 0x63706d6967726174,
    ledger: Ledger::NumberAndName,
    migrations: MIGRATIONS,
};

/// Applies every migration not yet recorded. Returns the ids it applied.
pub async fn run(pool: &Pool) -> anyhow::Result<Vec<i32>> {
    let mut client = pool.get().await.context("connect for migrations")?;
    service_kit::migrations::run(&mut client, &CATALOG).await
}

#[cfg(test)]
mod tests {
    #[test]
    fn migration_ids_are_increasing() {
        assert!(super::CATALOG.is_ordered());
    }
}
