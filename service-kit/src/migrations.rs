//! Catalog migrations: numbered `.sql` files embedded in the binary, each
//! applied once in its own transaction and recorded in `schema_migrations`,
//! serialised across processes sharing a PostgreSQL by a session advisory
//! lock. The control plane's catalog and the shard catalog each pass their
//! own [`Catalog`]: its lock key, its list, and how its table records an
//! applied migration (the two tables predate this runner and stay as they
//! are deployed).

use anyhow::Context;
use tokio_postgres::Client;

/// One migration. Never edit an applied one: add the next number.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    pub number: i32,
    pub name: &'static str,
    pub sql: &'static str,
}

impl Migration {
    /// `0001_name`, as files and messages name it.
    pub fn label(&self) -> String {
        format!("{:04}_{}", self.number, self.name)
    }
}

/// How `schema_migrations` records an applied migration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ledger {
    /// `(id integer PRIMARY KEY, name text, applied_at)`: the number and the
    /// name (the control plane's catalog).
    NumberAndName,
    /// `(id text PRIMARY KEY, applied_at)`: the [`Migration::label`] (the
    /// shard catalog).
    Label,
}

/// A catalog's migrations.
#[derive(Debug, Clone, Copy)]
pub struct Catalog {
    /// Advisory lock key held for the whole run.
    pub lock: i64,
    pub ledger: Ledger,
    /// In increasing [`Migration::number`] order.
    pub migrations: &'static [Migration],
}

impl Catalog {
    /// Whether the numbers start at 1 and only increase (a test of each
    /// catalog's list).
    pub fn is_ordered(&self) -> bool {
        self.migrations.first().is_some_and(|m| m.number == 1)
            && self
                .migrations
                .windows(2)
                .all(|w| w[0].number < w[1].number)
    }

    fn create_table(&self) -> &'static str {
        match self.ledger {
            Ledger::NumberAndName => {
                "CREATE TABLE IF NOT EXISTS schema_migrations (
                    id integer PRIMARY KEY,
                    name text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now()
                )"
            }
            Ledger::Label => {
                "CREATE TABLE IF NOT EXISTS schema_migrations (
                     id text PRIMARY KEY,
                     applied_at timestamptz NOT NULL DEFAULT now()
                 )"
            }
        }
    }
}

/// Applies every migration of `catalog` not yet recorded, under its
/// advisory lock. Returns the numbers it applied.
pub async fn run(client: &mut Client, catalog: &Catalog) -> anyhow::Result<Vec<i32>> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&catalog.lock])
        .await
        .context("take the migration lock")?;
    let result = apply_pending(client, catalog).await;
    let unlock = client
        .execute("SELECT pg_advisory_unlock($1)", &[&catalog.lock])
        .await
        .context("release the migration lock");
    let applied = result?;
    unlock?;
    Ok(applied)
}

async fn apply_pending(client: &mut Client, catalog: &Catalog) -> anyhow::Result<Vec<i32>> {
    client
        .batch_execute(catalog.create_table())
        .await
        .context("create schema_migrations")?;
    let mut applied = Vec::new();
    for m in catalog.migrations {
        let label = m.label();
        let tx = client.transaction().await.context("begin migration")?;
        let done = match catalog.ledger {
            Ledger::NumberAndName => {
                tx.query_opt(
                    "SELECT 1 FROM schema_migrations WHERE id = $1",
                    &[&m.number],
                )
                .await
            }
            Ledger::Label => {
                tx.query_opt("SELECT 1 FROM schema_migrations WHERE id = $1", &[&label])
                    .await
            }
        }
        .context("read schema_migrations")?
        .is_some();
        if done {
            continue;
        }
        tx.batch_execute(m.sql)
            .await
            .with_context(|| format!("apply migration {label}"))?;
        match catalog.ledger {
            Ledger::NumberAndName => {
                tx.execute(
                    "INSERT INTO schema_migrations (id, name) VALUES ($1, $2)",
                    &[&m.number, &m.name],
                )
                .await
            }
            Ledger::Label => {
                tx.execute("INSERT INTO schema_migrations (id) VALUES ($1)", &[&label])
                    .await
            }
        }
        .with_context(|| format!("record migration {label}"))?;
        tx.commit()
            .await
            .with_context(|| format!("commit migration {label}"))?;
        tracing::info!(migration = %label, "applied catalog migration");
        applied.push(m.number);
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &[Migration] = &[
        Migration {
            number: 1,
            name: "init",
            sql: "",
        },
        Migration {
            number: 2,
            name: "more",
            sql: "",
        },
    ];

    #[test]
    fn labels_are_numbered_file_names() {
        assert_eq!(LIST[1].label(), "0002_more");
    }

    #[test]
    fn order_is_checked() {
        let mut c = Catalog {
            lock: 1,
            ledger: Ledger::Label,
            migrations: LIST,
        };
        assert!(c.is_ordered());
        c.migrations = &LIST[1..];
        assert!(!c.is_ordered());
    }
}
