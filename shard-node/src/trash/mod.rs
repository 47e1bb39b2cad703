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

use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};
use crate::records::{record_ids, MAX_BATCH};

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
    if items.len() > MAX_BATCH {
        return Err(ApiError::bad_request(format!(
            "A batch holds at most {MAX_BATCH} records; this one has {}.",
            items.len()
        )));
    }
    record_ids(items, "ids")
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
