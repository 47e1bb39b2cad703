//! Reads a tenant schema from the source's `pg_catalog` and makes it on the
//! target: the schema (owned by the source schema's owner), tables with
//! their columns, keys, checks and foreign keys before the copy; the
//! secondary indexes and statistics after it. Anything in the schema the
//! mover does not know how to copy (views, functions, triggers, types,
//! partitions, stray sequences, exclusion constraints, row security) stops
//! the move with an error that names it.

use anyhow::Context;
use tokio_postgres::GenericClient;

use super::context::fatal;
use super::ddl::{self, Column, Constraint, Index, SchemaCopy, Table};
use super::sql::{self, quote_ident};

/// Objects of the schema the mover cannot copy, as `kind name` strings.
const UNKNOWN_OBJECTS: &str = "
SELECT 'relation ' || c.relname || ' (relkind ' || c.relkind::text || ')'
  FROM pg_class c
 WHERE c.relnamespace = $1::text::regnamespace
   AND (c.relkind NOT IN ('r', 'i', 'S') OR c.relispartition OR c.relrowsecurity
        OR (c.relkind = 'S' AND NOT EXISTS (
              SELECT 1 FROM pg_depend d
               WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'i')))
UNION ALL
SELECT 'function ' || p.proname FROM pg_proc p WHERE p.pronamespace = $1::text::regnamespace
UNION ALL
SELECT 'trigger ' || t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace = $1::text::regnamespace AND NOT t.tgisinternal
UNION ALL
SELECT 'type ' || t.typname FROM pg_type t
 WHERE t.typnamespace = $1::text::regnamespace AND t.typrelid = 0
   AND NOT (t.typcategory = 'A' AND EXISTS (
         SELECT 1 FROM pg_type e WHERE e.oid = t.typelem AND e.typrelid <> 0))
UNION ALL
SELECT 'constraint ' || n.conname || ' (contype ' || n.contype::text || ')' FROM pg_constraint n
 WHERE n.connamespace = $1::text::regnamespace AND n.contype NOT IN ('p', 'u', 'c', 'f')
UNION ALL
SELECT 'foreign key ' || n.conname || ' to another schema' FROM pg_constraint n
  JOIN pg_class r ON r.oid = n.confrelid
 WHERE n.connamespace = $1::text::regnamespace AND n.contype = 'f'
   AND r.relnamespace <> $1::text::regnamespace";

const COLUMNS: &str = "
SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod) AS type_sql,
       a.attnotnull, a.attidentity::text AS identity, a.attgenerated::text AS generated,
       pg_get_expr(d.adbin, d.adrelid) AS expr,
       CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation
            THEN cn.nspname END AS coll_schema,
       CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation
            THEN co.collname END AS coll_name
  FROM pg_class c
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  JOIN pg_type t ON t.oid = a.atttypid
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
  LEFT JOIN pg_collation co ON co.oid = a.attcollation
  LEFT JOIN pg_namespace cn ON cn.oid = co.collnamespace
 WHERE c.relnamespace = $1::text::regnamespace AND c.relkind = 'r'
 ORDER BY c.relname, a.attnum";

const KEYS: &str = "
SELECT c.relname, a.attname
  FROM pg_constraint n
  JOIN pg_class c ON c.oid = n.conrelid
  CROSS JOIN LATERAL unnest(n.conkey) WITH ORDINALITY AS k(attnum, ord)
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
 WHERE n.connamespace = $1::text::regnamespace AND n.contype = 'p'
 ORDER BY c.relname, k.ord";

const CONSTRAINTS: &str = "
SELECT c.relname, n.conname, n.contype::text AS contype, pg_get_constraintdef(n.oid) AS def
  FROM pg_constraint n JOIN pg_class c ON c.oid = n.conrelid
 WHERE n.connamespace = $1::text::regnamespace AND n.contype IN ('p', 'u', 'c', 'f')
 ORDER BY c.relname, n.conname";

const INDEXES: &str = "
SELECT ic.relname, pg_get_indexdef(i.indexrelid) AS def
  FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
 WHERE ic.relnamespace = $1::text::regnamespace AND i.indisvalid
   AND NOT EXISTS (SELECT 1 FROM pg_constraint n
                    WHERE n.conindid = i.indexrelid AND n.conrelid = i.indrelid
                      AND n.contype IN ('p', 'u', 'x'))
 ORDER BY ic.relname";

fn one_char(s: Option<String>) -> Option<char> {
    s.and_then(|s| s.chars().next()).filter(|c| *c != '\0')
}

/// Reads the tenant schema of `database_id` on the source.
pub async fn introspect(c: &impl GenericClient, database_id: &str) -> anyhow::Result<SchemaCopy> {
    let nsp = sql::schema(database_id)?;
    let owner: Option<String> = c
        .query_opt(
            "SELECT r.rolname FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner
              WHERE n.nspname = $1",
            &[&database_id],
        )
        .await
        .context("read the tenant schema's owner")?
        .map(|r| r.try_get(0))
        .transpose()?;
    let Some(owner) = owner else {
        return Err(fatal(format!(
            "the source has no schema {nsp} for this database"
        )));
    };
    let unknown: Vec<String> = c
        .query(UNKNOWN_OBJECTS, &[&nsp])
        .await
        .context("look for objects the mover cannot copy")?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()?;
    if !unknown.is_empty() {
        return Err(fatal(format!(
            "the tenant schema holds what a move cannot copy: {}",
            unknown.join(", ")
        )));
    }
    let mut tables: Vec<Table> = Vec::new();
    for r in c.query(COLUMNS, &[&nsp]).await.context("read columns")? {
        let table: String = r.try_get("relname")?;
        if !sql::is_known_table_name(&table) {
            return Err(fatal(format!(
                "the tenant schema holds a table the mover does not know: {table:?}"
            )));
        }
        let expr: Option<String> = r.try_get("expr")?;
        let generated = one_char(r.try_get("generated")?) == Some('s');
        let coll_schema: Option<String> = r.try_get("coll_schema")?;
        let coll_name: Option<String> = r.try_get("coll_name")?;
        let column = Column {
            name: r.try_get("attname")?,
            type_sql: r.try_get("type_sql")?,
            collation: coll_schema.zip(coll_name),
            not_null: r.try_get("attnotnull")?,
            identity: one_char(r.try_get("identity")?),
            generated: if generated { expr.clone() } else { None },
            default: if generated { None } else { expr },
        };
        match tables.last_mut() {
            Some(t) if t.name == table => t.columns.push(column),
            _ => tables.push(Table {
                name: table,
                columns: vec![column],
                key: Vec::new(),
            }),
        }
    }
    for r in c.query(KEYS, &[&nsp]).await.context("read primary keys")? {
        let table: String = r.try_get(0)?;
        if let Some(t) = tables.iter_mut().find(|t| t.name == table) {
            t.key.push(r.try_get(1)?);
        }
    }
    if let Some(t) = tables.iter().find(|t| t.key.is_empty()) {
        return Err(fatal(format!(
            "table {} has no primary key: logical replication could not apply its updates",
            t.name
        )));
    }
    let mut constraints = Vec::new();
    for r in c
        .query(CONSTRAINTS, &[&nsp])
        .await
        .context("read constraints")?
    {
        constraints.push(Constraint {
            table: r.try_get("relname")?,
            name: r.try_get("conname")?,
            kind: one_char(r.try_get("contype")?).unwrap_or('?'),
            definition: r.try_get("def")?,
        });
    }
    let mut indexes = Vec::new();
    for r in c.query(INDEXES, &[&nsp]).await.context("read indexes")? {
        indexes.push(Index {
            name: r.try_get(0)?,
            definition: r.try_get(1)?,
        });
    }
    Ok(SchemaCopy {
        owner,
        tables,
        constraints,
        indexes,
    })
}

/// Makes the schema, tables and constraints on the target, in one
/// transaction, as the source schema's owner.
pub async fn create_before_copy(
    c: &mut tokio_postgres::Client,
    database_id: &str,
    copy: &SchemaCopy,
) -> anyhow::Result<()> {
    let tx = c.transaction().await.context("begin schema copy")?;
    create_in(&tx, database_id, copy).await?;
    tx.commit().await.context("commit schema copy")
}

/// The schema, tables and constraints inside the caller's transaction, made
/// as the schema's owner (the session's role is reset after).
pub async fn create_in(
    tx: &tokio_postgres::Transaction<'_>,
    database_id: &str,
    copy: &SchemaCopy,
) -> anyhow::Result<()> {
    let statements = ddl::before_copy(database_id, copy)?;
    let owner = quote_ident(&copy.owner);
    tx.batch_execute(&format!(
        "CREATE SCHEMA {} AUTHORIZATION {owner}",
        sql::schema(database_id)?
    ))
    .await
    .context("create the tenant schema on the target (does the owner role exist there?)")?;
    tx.batch_execute(&format!("SET LOCAL ROLE {owner}"))
        .await
        .context("become the schema's owner")?;
    for s in &statements {
        tx.batch_execute(s)
            .await
            .with_context(|| format!("make the target's tables: {s}"))?;
    }
    tx.batch_execute("RESET ROLE")
        .await
        .context("back to the administrator role")
}

/// The secondary indexes, then fresh statistics, on the target.
pub async fn create_after_copy(
    c: &impl GenericClient,
    database_id: &str,
    copy: &SchemaCopy,
) -> anyhow::Result<()> {
    for s in ddl::after_copy(copy) {
        c.batch_execute(&s)
            .await
            .with_context(|| format!("build a secondary index on the target: {s}"))?;
    }
    for t in &copy.tables {
        c.batch_execute(&format!(
            "ANALYZE {}",
            sql::qualified(database_id, &t.name)?
        ))
        .await
        .context("analyze the target's tables")?;
    }
    Ok(())
}

/// The identity columns of the schema: (qualified table, column).
pub fn identity_columns(
    database_id: &str,
    copy: &SchemaCopy,
) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for t in &copy.tables {
        for col in t.columns.iter().filter(|c| c.identity.is_some()) {
            out.push((sql::qualified(database_id, &t.name)?, col.name.clone()));
        }
    }
    Ok(out)
}
