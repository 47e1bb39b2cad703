//! Trash routes (part B, Trash): the newest-first listing with bookmark
//! paging, restore and purge (by ids or all), plus the background purger
//! that removes records trashed longer than the retention setting.
//!
//! A viewer may list the trash; restore and purge need an editor, and an
//! editor may act only on records it created (owners on any).

pub mod list;
pub mod purge;
pub mod purger;
pub mod restore;

use deadpool_postgres::GenericClient;
use serde_json::{Map, Value};

use crate::auth::Access;
use crate::error::{ApiError, ApiResult};
use crate::records::delete::check_own;
use crate::records::table::RecordTable;
use crate::records::{check_batch_len, record_ids, store};

/// `{ids:[...]}`: 1..=100 record ids, duplicates taken once.
pub fn ids(body: &Map<String, Value>) -> ApiResult<Vec<String>> {
    let items = match body.get("ids") {
        Some(Value::Array(items)) => items,
        None | Some(Value::Null) => return Err(ApiError::bad_request("ids is required.")),
        Some(_) => return Err(ApiError::bad_request("ids must be a list.")),
    };
    if items.is_empty() {
        return Err(ApiError::bad_request("ids must not be empty."));
    }
    check_batch_len(items.len())?;
    record_ids(items, "ids")
}

/// The step restore and purge by ids share (the table is already loaded,
/// 404 when missing): 400 unless every id is in its trash, 403 when an
/// editor names a record it did not create.
pub async fn trashed_batch(
    tx: &impl GenericClient,
    access: &Access,
    table: &RecordTable,
    ids: &[String],
) -> ApiResult<()> {
    let states = store::states(tx, table, ids, true).await?;
    all_in_trash(ids, &states)?;
    check_own(access, &states)
}

/// 400 unless every id is a trashed record of the table.
pub fn all_in_trash(ids: &[String], states: &[(String, Option<String>, bool)]) -> ApiResult<()> {
    for id in ids {
        if !states.iter().any(|(i, _, trashed)| i == id && *trashed) {
            return Err(ApiError::bad_request(format!(
                "Record {id} is not in the trash."
            )));
        }
    }
    Ok(())
}
