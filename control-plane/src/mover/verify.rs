//! Verification before the flip: for every replicated table (the tenant
//! tables whole, the catalog tables for this database) the row count and
//! an MD5 of a sample (the first and the last 50 rows by primary key) must
//! be equal on both sides. Both sides are read concurrently, one round
//! trip each.

use anyhow::Context;
use tokio_postgres::GenericClient;

use super::ddl::SchemaCopy;
use super::shard_catalog::CATALOG_TABLES;
use super::sql::{self, quote_ident};

/// Rows at each end of a table that the sample hashes.
const SAMPLE_ROWS: u32 = 50;

/// One table's figures on one side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Figures {
    pub table: String,
    pub rows: i64,
    pub sample_md5: Option<String>,
}

/// `ORDER BY` of a key (`k1, k2` ascending or descending).
fn order_by(key: &[String], desc: bool) -> String {
    key.iter()
        .map(|k| format!("{}{}", quote_ident(k), if desc { " DESC" } else { "" }))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `SELECT label, count, md5` over `relation` (with `filter`, a condition
/// on `$1` or `true`).
fn table_query(label: &str, relation: &str, filter: &str, key: &[String]) -> String {
    let asc = order_by(key, false);
    let desc = order_by(key, true);
    format!(
        "SELECT {label}::text, (SELECT count(*) FROM {relation} WHERE {filter}),
                (SELECT md5(string_agg(s.r, '|' ORDER BY s.part, s.n)) FROM (
                    (SELECT 1 AS part, row_number() OVER () AS n, t::text AS r
                       FROM (SELECT * FROM {relation} WHERE {filter} ORDER BY {asc} LIMIT {SAMPLE_ROWS}) t)
                    UNION ALL
                    (SELECT 2, row_number() OVER (), t::text
                       FROM (SELECT * FROM {relation} WHERE {filter} ORDER BY {desc} LIMIT {SAMPLE_ROWS}) t)
                ) s)",
        label = sql::quote_literal(label),
    )
}

/// The one query that reads every table's figures (`$1` = database id).
pub fn figures_sql(database_id: &str, copy: &SchemaCopy) -> anyhow::Result<String> {
    let mut parts = Vec::new();
    for t in &copy.tables {
        parts.push(table_query(
            &t.name,
            &sql::qualified(database_id, &t.name)?,
            "$1::text IS NOT NULL",
            &t.key,
        ));
    }
    for (table, column, key) in CATALOG_TABLES {
        let key: Vec<String> = key.split(", ").map(str::to_string).collect();
        parts.push(table_query(
            &format!("catalog.{table}"),
            &quote_ident(table),
            &format!("{} = $1", quote_ident(column)),
            &key,
        ));
    }
    Ok(parts.join("\nUNION ALL\n"))
}

async fn figures(
    c: &impl GenericClient,
    sql: &str,
    database_id: &str,
) -> anyhow::Result<Vec<Figures>> {
    c.query(sql, &[&database_id])
        .await
        .context("count and sample the copy")?
        .iter()
        .map(|r| {
            Ok(Figures {
                table: r.try_get(0)?,
                rows: r.try_get(1)?,
                sample_md5: r.try_get(2)?,
            })
        })
        .collect()
}

/// The tables whose figures differ, as a message; `None` when equal.
pub fn compare(source: &[Figures], target: &[Figures]) -> Option<String> {
    let mut diffs = Vec::new();
    for s in source {
        match target.iter().find(|t| t.table == s.table) {
            None => diffs.push(format!("{} missing on the target", s.table)),
            Some(t) if t.rows != s.rows => diffs.push(format!(
                "{}: {} rows on the source, {} on the target",
                s.table, s.rows, t.rows
            )),
            Some(t) if t.sample_md5 != s.sample_md5 => {
                diffs.push(format!("{}: sampled rows differ", s.table))
            }
            Some(_) => {}
        }
    }
    (!diffs.is_empty()).then(|| format!("verification failed: {}", diffs.join("; ")))
}

/// Reads both sides concurrently; `Ok(Some(message))` on a mismatch.
pub async fn verify(
    source: &impl GenericClient,
    target: &impl GenericClient,
    database_id: &str,
    copy: &SchemaCopy,
) -> anyhow::Result<Option<String>> {
    let sql = figures_sql(database_id, copy)?;
    let (s, t) = tokio::join!(
        figures(source, &sql, database_id),
        figures(target, &sql, database_id)
    );
    Ok(compare(
        &s.context("verify the source")?,
        &t.context("verify the target")?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mover::ddl::Table;

    fn f(table: &str, rows: i64, md5: &str) -> Figures {
        Figures {
            table: table.into(),
            rows,
            sample_md5: Some(md5.into()),
        }
    }

    #[test]
    fn equal_figures_pass_and_differences_are_named() {
        let a = vec![f("tbl_a", 3, "x"), f("catalog.fields", 2, "y")];
        assert_eq!(compare(&a, &a), None);
        let b = vec![f("tbl_a", 2, "x"), f("catalog.fields", 2, "z")];
        let msg = compare(&a, &b).unwrap();
        assert!(msg.contains("tbl_a: 3 rows on the source, 2 on the target"));
        assert!(msg.contains("catalog.fields: sampled rows differ"));
        assert!(compare(&a, &[]).unwrap().contains("missing on the target"));
    }

    #[test]
    fn one_query_covers_every_table() {
        let copy = SchemaCopy {
            tables: vec![Table {
                name: "lnk_fld_Ab3dZccccccc".into(),
                columns: vec![],
                key: vec!["from_id".into(), "to_id".into()],
            }],
            ..SchemaCopy::default()
        };
        let sql = figures_sql("db_Ab3dZ1234567", &copy).unwrap();
        assert_eq!(
            sql.matches("UNION ALL\nSELECT").count(),
            CATALOG_TABLES.len()
        );
        assert!(sql.contains("ORDER BY \"from_id\" DESC, \"to_id\" DESC LIMIT 50"));
        assert!(sql.contains("FROM \"db_Ab3dZ1234567\".\"lnk_fld_Ab3dZccccccc\""));
        assert!(sql.contains("\"database_id\" = $1"));
        assert!(figures_sql("nope", &copy).is_err());
    }
}
