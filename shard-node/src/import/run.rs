//! The import run (part B "Import", `file` + `target` + `plan`): check the
//! plan and convert every cell first ([`columns`], off the async runtime,
//! keeping nothing), then write: a blocking task reads the file once more
//! and hands converted batches over a channel of one, so at most two
//! batches are held at once.
//!
//! * `new_table`: the table and its fields are made by the table and field
//!   create paths, then the rows are written; any failure after the table
//!   exists deletes it (table delete path), so nothing is left.
//! * `existing_table`: the plan's new fields are made and choices added to
//!   mapped selects, then the rows are written. A failure while making
//!   fields leaves the fields already made (part B) and says so; a failure
//!   while writing rows (a clash with a unique value already in the table)
//!   says how many rows were added and how many were not.
//!
//! Rows are written in batches ([`BATCH`] on an existing table,
//! [`NEW_TABLE_BATCH`] on a table the run made), each its own transaction, by
//! the record write path (`records::write::insert`: one statement per
//! batch) on one pooled session held for the whole run, with its events
//! handed to webhooks as any write's are: a batch of 50 or more fires none.

use std::collections::HashMap;

use cluster_protocol::ids::{self, Kind};
use serde_json::{json, Value};

use crate::auth::Access;
use crate::catalog::placements::Need;
use crate::db::{fenced_transaction_on, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::fields;
use crate::import::check;
use crate::import::columns::{self, Column, Converter, Source};
use crate::import::plan::{Entry, Target};
use crate::import::sheet::{self, Sheet};
use crate::records::cells::write::Prepared;
use crate::records::{store, write};
use crate::schema::costume::Requested;
use crate::schema::DatabaseSchema;
use crate::state::AppState;
use crate::tables;
use crate::webhooks::outbox::{Outbox, RecordEvent, Written};

/// Rows per transaction on an existing table (part B).
pub const BATCH: usize = 100;
/// Rows per transaction (and statement) on a table the run made: part B
/// fixes no size there (a failure deletes the table whatever landed), and
/// fewer round trips make a large import markedly faster.
pub const NEW_TABLE_BATCH: usize = 1_000;
/// Most cells in one batch: a wide file gets batches of fewer rows on a
/// table the run made (never fewer than [`BATCH`], as a file has at most
/// 500 columns), so a batch's converted cells stay a few MB.
pub const MAX_BATCH_CELLS: usize = 50_000;
/// An import of this many rows or more refreshes the table's statistics.
pub const ANALYZE_FROM: usize = 1_000;

/// Runs the import; the reply is `{tableId, created}`.
pub async fn run(
    state: &AppState,
    access: &Access,
    target: Target,
    plan: Vec<Entry>,
    filename: String,
    bytes: Vec<u8>,
) -> ApiResult<Value> {
    let database_id = access.database_id.as_str();
    let user_id = access.user_id();
    let schema = {
        let mut client = state.db.client_for(database_id).await?;
        state
            .schemas
            .get_at(&mut client, database_id, access.schema_version)
            .await?
    };
    let table = match &target {
        Target::NewTable { .. } => None,
        Target::ExistingTable { table_id } => {
            Some(schema.table(table_id).ok_or(ApiError::NotFound)?.clone())
        }
    };
    let started = std::time::Instant::now();
    let env = env(&schema)?;
    let (file, cols, total) = tokio::task::spawn_blocking(move || {
        let mut sheet = sheet::open(&filename, bytes)?;
        let cols = columns::resolve(table.as_ref(), &plan, &mut sheet)?;
        let converter = Converter::new(&schema, table.as_ref(), &cols, &env);
        let total = check::check(&converter, &mut sheet)?;
        let file = Checked {
            sheet,
            schema,
            table,
            columns: cols.clone(),
            env,
        };
        Ok::<_, ApiError>((file, cols, total))
    })
    .await
    .map_err(|e| ApiError::Internal(e.into()))??;
    let checked = started.elapsed();

    let (table_id, created) = match target {
        Target::NewTable { name } => {
            new_table(state, database_id, user_id, &name, &cols, file).await?
        }
        Target::ExistingTable { table_id } => {
            let created =
                existing_table(state, database_id, user_id, &table_id, &cols, file, total).await?;
            (table_id, created)
        }
    };
    tracing::info!(
        %table_id,
        created,
        columns = cols.len(),
        read_and_checked_ms = checked.as_millis() as u64,
        total_ms = started.elapsed().as_millis() as u64,
        "import finished"
    );
    Ok(json!({ "tableId": table_id, "created": created }))
}

/// Rows per batch: `base`, fewer when `columns` wide rows would pass
/// [`MAX_BATCH_CELLS`] (never fewer than [`BATCH`]).
fn batch_rows(base: usize, columns: usize) -> usize {
    base.min(MAX_BATCH_CELLS / columns.max(1)).max(BATCH)
}

/// The checked file with what converts its rows, handed to the writer.
struct Checked {
    sheet: Sheet,
    schema: std::sync::Arc<DatabaseSchema>,
    table: Option<crate::schema::TableSchema>,
    columns: Vec<Column>,
    env: filter_lang::Env,
}

impl Checked {
    /// Reads the file again on a blocking task, sending its rows converted
    /// in batches of `size` (an error ends the stream).
    fn batches(self, size: usize) -> tokio::sync::mpsc::Receiver<ApiResult<Vec<Prepared>>> {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tokio::task::spawn_blocking(move || {
            let Checked {
                mut sheet,
                schema,
                table,
                columns,
                env,
            } = self;
            let converter = Converter::new(&schema, table.as_ref(), &columns, &env);
            let mut batch = Vec::with_capacity(size);
            let read = sheet.for_each_row(|r, row| {
                batch.push(converter.row(r, row)?);
                if batch.len() == size {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(size));
                    // The writer stopped: end this pass.
                    tx.blocking_send(Ok(full)).map_err(|_| ApiError::NotFound)?;
                }
                Ok(())
            });
            let last = match read {
                Ok(_) if batch.is_empty() => return,
                Ok(_) => Ok(batch),
                Err(e) => Err(e),
            };
            let _ = tx.blocking_send(last);
        });
        rx
    }
}

/// The database's timezone and now, against which cells are read (as a
/// record write's `Ctx` does, UTC when the timezone is not known).
fn env(schema: &DatabaseSchema) -> ApiResult<filter_lang::Env> {
    let now = chrono::Utc::now();
    Ok(filter_lang::Env::new(&schema.timezone, now)
        .or_else(|_| filter_lang::Env::new("UTC", now))
        .map_err(|e| anyhow::anyhow!("{e}"))?)
}

async fn new_table(
    state: &AppState,
    database_id: &str,
    user_id: &str,
    name: &str,
    cols: &[Column],
    file: Checked,
) -> ApiResult<(String, usize)> {
    let table = tables::create::create(&state.db, database_id, user_id, name).await?;
    let filled = async {
        let made = make_fields(state, database_id, user_id, &table.id, cols)
            .await
            .map_err(|(_, e)| e)?;
        write_rows(
            state,
            database_id,
            user_id,
            &table.id,
            file.batches(batch_rows(NEW_TABLE_BATCH, cols.len())),
            &made,
        )
        .await
        .map_err(|(_, e)| e)
    }
    .await;
    match filled {
        Ok(created) => Ok((table.id, created)),
        Err(e) => {
            if let Err(cleanup) =
                tables::delete::delete(state, database_id, user_id, &table.id).await
            {
                tracing::error!(
                    table_id = %table.id,
                    error = %cleanup,
                    "could not delete the table of a failed import"
                );
            }
            Err(e)
        }
    }
}

async fn existing_table(
    state: &AppState,
    database_id: &str,
    user_id: &str,
    table_id: &str,
    cols: &[Column],
    file: Checked,
    total: usize,
) -> ApiResult<usize> {
    let made = make_fields(state, database_id, user_id, table_id, cols)
        .await
        .map_err(|(made, e)| fields_failure(made, e))?;
    for c in cols {
        if let Source::Map {
            new_options: Some(options),
        } = &c.source
        {
            let patch = fields::update::Patch {
                name: None,
                costume: None,
                options: Some(options.clone()),
            };
            state
                .db
                .measured(
                    DbOp::UpdateField,
                    fields::update::update(state, database_id, user_id, &c.field.id, patch),
                )
                .await
                .map_err(|e| fields_failure(made.len(), e))?;
        }
    }
    write_rows(
        state,
        database_id,
        user_id,
        table_id,
        file.batches(BATCH),
        &made,
    )
    .await
    .map_err(|(added, e)| late_failure(added, total, e))
}

/// Makes the fields of the `create` columns, in plan order, through the
/// field create path; returns stand-in id -> new field id. On failure,
/// how many were made before it.
async fn make_fields(
    state: &AppState,
    database_id: &str,
    user_id: &str,
    table_id: &str,
    cols: &[Column],
) -> Result<HashMap<String, String>, (usize, ApiError)> {
    let mut made = HashMap::new();
    for c in cols.iter().filter(|c| c.source == Source::Create) {
        let new = fields::create::NewField {
            name: Some(c.field.name.clone()),
            requested: Requested::Stored(c.field.costume),
            options: c.field.options.clone(),
        };
        let field = state
            .db
            .measured(
                DbOp::CreateField,
                fields::create::create(state, database_id, user_id, table_id, new),
            )
            .await
            .map_err(|e| (made.len(), e))?;
        let id = field["id"].as_str().ok_or_else(|| {
            (
                made.len(),
                anyhow::anyhow!("created field without id").into(),
            )
        })?;
        made.insert(c.field.id.clone(), id.to_owned());
    }
    Ok(made)
}

/// Writes the batches `rows` sends (stand-in ids replaced by `made`'s),
/// each its own transaction, on one session; returns how many rows were
/// written, or how many were written before the failure.
async fn write_rows(
    state: &AppState,
    database_id: &str,
    user_id: &str,
    table_id: &str,
    mut rows: tokio::sync::mpsc::Receiver<ApiResult<Vec<Prepared>>>,
    made: &HashMap<String, String>,
) -> Result<usize, (usize, ApiError)> {
    let mut client = state.db.client_for(database_id).await.map_err(|e| (0, e))?;
    let mut added = 0;
    let mut record_table = None;
    while let Some(batch) = rows.recv().await {
        let batch = columns::rekey(batch.map_err(|e| (added, e))?, made);
        let n = batch.len();
        let written = state
            .db
            .measured(DbOp::ImportRecords, async {
                fenced_transaction_on(&mut client, database_id, Need::Write, async |tx| {
                    let ctx =
                        write::Ctx::load(tx, &state.schemas, &state.links, database_id, table_id)
                            .await?;
                    let batch = with_ids(&ctx, batch)?;
                    let ids: Vec<String> = batch.iter().map(|(id, _)| id.clone()).collect();
                    let mut outbox = Outbox::open(&ctx, n);
                    write::insert(tx, &ctx, user_id, &batch).await?;
                    outbox
                        .written(tx, &[Written::new(RecordEvent::Created, &ids)])
                        .await?;
                    Ok(ctx.record_table)
                })
                .await
            })
            .await;
        match written {
            Ok(t) => record_table = Some(t),
            Err(e) => return Err((added, e)),
        }
        added += n;
    }
    if let Some(t) = record_table.filter(|_| added >= ANALYZE_FROM) {
        let analyzed = state
            .db
            .measured(DbOp::AnalyzeTable, async {
                Ok(store::analyze(&*client, &t).await?)
            })
            .await;
        if let Err(e) = analyzed {
            tracing::warn!(table_id, error = %e, "ANALYZE after an import failed");
        }
    }
    Ok(added)
}

/// The batch with new record ids; 400 when a field it writes was deleted
/// since the run was checked (its values would otherwise be dropped).
fn with_ids(ctx: &write::Ctx, batch: Vec<Prepared>) -> ApiResult<Vec<(String, Prepared)>> {
    let table = ctx.table()?;
    if let Some(gone) = batch
        .iter()
        .flat_map(|p| p.columns.keys())
        .find(|id| table.field(id).is_none())
    {
        return Err(ApiError::bad_request(format!(
            "A field this import writes ({gone}) was deleted while it ran."
        )));
    }
    Ok(batch
        .into_iter()
        .map(|p| (ids::new_tagged(Kind::Record, &ctx.record_table.tag), p))
        .collect())
}

/// A failure while making the plan's fields on an existing table: the
/// fields already made remain (part B), and the message says so.
pub fn fields_failure(made: usize, cause: ApiError) -> ApiError {
    let tail = format!(
        " {made} new field{} already added to the table remain{}; no rows were imported.",
        if made == 1 { "" } else { "s" },
        if made == 1 { "s" } else { "" }
    );
    match cause {
        ApiError::BadRequest(m) => ApiError::BadRequest(format!("{m}{tail}")),
        ApiError::Conflict(m) => ApiError::Conflict(format!("{m}{tail}")),
        other => other,
    }
}

/// A failure while writing rows to an existing table: how many rows were
/// already added (they stay) and how many were not (part B, part C "Import
/// failures after the first batch say how many rows landed").
pub fn late_failure(added: usize, total: usize, cause: ApiError) -> ApiError {
    let remaining = total.saturating_sub(added);
    let say = |m: &str| {
        format!(
            "The import stopped at data row {}: {m} {added} of {total} rows were already added \
             to the table and remain; {remaining} rows were not imported.",
            added + 1
        )
    };
    match cause {
        ApiError::BadRequest(m) => ApiError::BadRequest(say(&m)),
        ApiError::Conflict(m) => ApiError::Conflict(say(&m)),
        other => {
            tracing::warn!(added, remaining, "import stopped by an error");
            other
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(e: ApiError) -> String {
        match e {
            ApiError::BadRequest(m) | ApiError::Conflict(m) => m,
            other => panic!("not a 400/409: {other:?}"),
        }
    }

    #[test]
    fn a_late_failure_says_how_many_rows_landed_and_remain() {
        let m = message(late_failure(
            200,
            450,
            ApiError::bad_request(
                "Field 'Code' must be unique: another record already holds this value.",
            ),
        ));
        assert_eq!(
            m,
            "The import stopped at data row 201: Field 'Code' must be unique: another record \
             already holds this value. 200 of 450 rows were already added to the table and \
             remain; 250 rows were not imported."
        );
        assert!(matches!(
            late_failure(0, 5, ApiError::Conflict("c".into())),
            ApiError::Conflict(_)
        ));
        assert!(matches!(
            late_failure(0, 5, ApiError::NotFound),
            ApiError::NotFound
        ));
    }

    #[test]
    fn a_field_failure_says_the_made_fields_remain() {
        let m = message(fields_failure(
            2,
            ApiError::bad_request("A table can have at most 500 fields ('T' is full)."),
        ));
        assert!(
            m.ends_with("2 new fields already added to the table remain; no rows were imported."),
            "{m}"
        );
        let m = message(fields_failure(1, ApiError::Conflict("taken.".into())));
        assert!(
            m.ends_with("1 new field already added to the table remains; no rows were imported."),
            "{m}"
        );
    }
}
