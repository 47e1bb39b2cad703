//! The one index a view's ordering earns: a btree over live records on the
//! column of the view's first sort field (on its first
//! `filter_lang::SORT_PREFIX_CHARS` characters for text, which any text
//! fits and text keys order by first), so a sorted page (and a deep
//! bookmark page in descending order) is an index walk, not a sort of the
//! whole table. Only a view's *first* sort term gets one (the rest is an
//! incremental sort within equal keys), only plain column keys (number,
//! date, text; not single select, whose key is an expression, nor checkbox,
//! whose two values leave the id order within each to a full sort anyway),
//! and each field at most once. Indexes are never created for an ad hoc
//! `sort` parameter: each one taxes every write of the table, so they
//! follow what a view declares. The index outlives the view (dropped with
//! the column when the field is deleted).

use serde_json::Value;

use crate::catalog::placements;
use crate::db::Db;
use crate::schema::{Costume, Family};

/// The field whose column a view config's first sort would index, if any,
/// and whether the column is text.
fn first_sort_column(
    schema: &crate::schema::DatabaseSchema,
    table_id: &str,
    config: &Value,
) -> Option<(String, bool)> {
    let table = schema.table(table_id)?;
    let reference = config
        .get("sorts")?
        .as_array()?
        .first()?
        .get("fieldId")?
        .as_str()?;
    let f = table
        .field(reference)
        .or_else(|| table.fields.iter().find(|f| f.name == reference))?;
    let plain = matches!(
        f.sql_type.as_deref(),
        Some("text" | "numeric" | "date" | "timestamptz")
    ) && f.costume.family() != Family::Select
        && !(f.costume == Costume::FormulaText
            && f.option_str("display_as") == Some("single_select"));
    plain.then(|| (f.id.clone(), f.sql_type.as_deref() == Some("text")))
}

/// Builds the index for `config`'s first sort (concurrently, after the view
/// is saved), only while the database's placement is `owned` (a view saved
/// just before a move began gets none). A failure is logged and the view
/// stands: the index only makes reads faster. The build runs as a task of
/// its own on a maintenance session (its own, longer time limit; no
/// request session held): the request waits for it, but a request
/// abandoned meanwhile does not cancel it half-built.
pub async fn ensure(db: &Db, database_id: &str, table_id: &str, config: &Value) {
    let (db, database_id, table_id) = (db.clone(), database_id.to_owned(), table_id.to_owned());
    let config = config.clone();
    let build = tokio::spawn(async move {
        let result = async {
            let client = db.maintenance_client().await?;
            // An index built during a move may miss the target's copy
            // (secondary indexes are read from the source once), so build
            // only for a database served here and not moving.
            if placements::state(&client, &database_id).await? != Some(placements::State::Owned) {
                return Ok(());
            }
            let schema = crate::schema::cache::load(&client, &database_id).await?;
            if let Some((field_id, text)) = first_sort_column(&schema, &table_id, &config) {
                crate::tenant_schema::create_sort_index(
                    &client,
                    &database_id,
                    &table_id,
                    &field_id,
                    text,
                )
                .await?;
            }
            Ok::<_, crate::error::ApiError>(())
        }
        .await;
        if let Err(e) = result {
            tracing::warn!(table = %table_id, error = ?e, "view sort index not built");
        }
    });
    if let Err(e) = build.await {
        tracing::warn!(error = %e, "view sort index task failed");
    }
}
