//! Catalog migrations: numbered `.sql` files, applied by
//! `service_kit::migrations` (each once in its own transaction, recorded in
//! `schema_migrations` by its `0001_name` label, serialised across nodes
//! sharing a PostgreSQL by an advisory lock).

use service_kit::migrations::{Catalog, Ledger, Migration};

/// Every migration, in order. Append only; never edit an applied file.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        number: 1,
        name: "catalog",
        sql: include_str!("../../migrations/0001_catalog.sql"),
    },
    Migration {
        number: 2,
        name: "fields",
        sql: include_str!("../../migrations/0002_fields.sql"),
    },
    Migration {
        number: 3,
        name: "webhooks",
        sql: include_str!("../../migrations/0003_webhooks.sql"),
    },
    Migration {
        number: 4,
        name: "delivery_claims",
        sql: include_str!("../../migrations/0004_delivery_claims.sql"),
    },
    Migration {
        number: 5,
        name: "attachments",
        sql: include_str!("../../migrations/0005_attachments.sql"),
    },
    Migration {
        number: 6,
        name: "moves",
        sql: include_str!("../../migrations/0006_moves.sql"),
    },
    Migration {
        number: 7,
        name: "social",
        sql: include_str!("../../migrations/0007_social.sql"),
    },
    Migration {
        number: 8,
        name: "match_clock_cursor",
        sql: include_str!("../../migrations/0008_match_clock_cursor.sql"),
    },
    Migration {
        number: 9,
        name: "quotas",
        sql: include_str!("../../migrations/0009_quotas.sql"),
    },
];

/// The shard catalog: its lock key ("shardmig" in ASCII) and list.
pub const CATALOG: Catalog = Catalog {
    lock: 0x7368_6172_646d_6967,
    ledger: Ledger::Label,
    migrations: MIGRATIONS,
};

/// Applies every pending migration; returns the numbers applied now.
pub async fn run(client: &mut tokio_postgres::Client) -> anyhow::Result<Vec<i32>> {
    service_kit::migrations::run(client, &CATALOG).await
}

#[cfg(test)]
mod tests {
    #[test]
    fn migrations_are_numbered_in_order() {
        assert!(super::CATALOG.is_ordered());
    }
}
