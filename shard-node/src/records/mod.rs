//! Record routes of part B: reading (list, list by body, one record),
//! writing (create, update, upsert, trash) and pressing a button.
//!
//! * [`table`]: the table a request addresses, resolved once per request.
//! * [`store`]: every statement over a tenant's record table (no SQL
//!   elsewhere in this module).
//! * [`reply`]: how records are shaped for a reply (`key_by`, `flat`,
//!   companion maps); [`page`] writes a list page's reply in that shape
//!   straight from the rows.
//! * [`statistics`]: `ANALYZE` of a table after large writes, so a table
//!   just loaded is planned for its real size.

pub mod bookmarks;
pub mod cells;
pub mod create;
pub mod delete;
pub mod get;
pub mod kept_plans;
pub mod list;
pub mod list_params;
pub mod page;
pub mod page_sql;
pub mod press;
pub mod reply;
pub mod statistics;
pub mod store;
pub mod table;
pub mod update;
pub mod upsert;
pub mod write;

use serde_json::Value;

use crate::error::{ApiError, ApiResult};

/// Part C: records per write batch (also trash restore/purge ids).
pub const MAX_BATCH: usize = 100;

/// A batch's `records` list: present, a list, 1..=100 items.
pub fn batch<'a>(body: &'a serde_json::Map<String, Value>, key: &str) -> ApiResult<&'a [Value]> {
    let items = match body.get(key) {
        Some(Value::Array(items)) => items,
        None | Some(Value::Null) => {
            return Err(ApiError::bad_request(format!("{key} is required.")))
        }
        Some(_) => return Err(ApiError::bad_request(format!("{key} must be a list."))),
    };
    if items.is_empty() {
        return Err(ApiError::bad_request(format!("{key} must not be empty.")));
    }
    check_batch_len(items.len())?;
    Ok(items)
}

/// 400 when a batch names more than [`MAX_BATCH`] records.
pub fn check_batch_len(len: usize) -> ApiResult<()> {
    if len > MAX_BATCH {
        return Err(ApiError::bad_request(format!(
            "A batch holds at most {MAX_BATCH} records; this one has {len}."
        )));
    }
    Ok(())
}

/// 404 unless every id is a record of the table; 400 with
/// `trashed(id)` when one is in the trash. `states` are
/// `(id, created_by, trashed)` as [`store::states`] reads them.
pub fn check_live(
    ids: &[String],
    states: &[(String, Option<String>, bool)],
    trashed: impl Fn(&str) -> String,
) -> ApiResult<()> {
    for id in ids {
        match states.iter().find(|(i, _, _)| i == id) {
            None => return Err(ApiError::NotFound),
            Some((_, _, true)) => return Err(ApiError::bad_request(trashed(id))),
            Some(_) => {}
        }
    }
    Ok(())
}

/// A list of `rec_` ids (strings), duplicates taken once, order kept.
pub fn record_ids(items: &[Value], what: &str) -> ApiResult<Vec<String>> {
    let mut seen = std::collections::HashSet::with_capacity(items.len());
    let mut ids: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let Value::String(id) = item else {
            return Err(ApiError::bad_request(format!(
                "{what} must be record ids (strings)."
            )));
        };
        if seen.insert(id.as_str()) {
            ids.push(id.clone());
        }
    }
    Ok(ids)
}

/// Part C: `page_size` bounds and default (record list, trash list).
pub const PAGE_SIZE_MAX: i64 = 1000;
pub const PAGE_SIZE_DEFAULT: i64 = 100;

/// `page_size`: a whole number 1..=1000 (text or JSON number); default 100.
pub fn page_size(raw: Option<&Value>) -> ApiResult<i64> {
    let n = match raw {
        None | Some(Value::Null) => return Ok(PAGE_SIZE_DEFAULT),
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.trim().parse::<i64>().ok(),
        Some(_) => None,
    };
    match n {
        Some(n) if (1..=PAGE_SIZE_MAX).contains(&n) => Ok(n),
        _ => Err(ApiError::bad_request(format!(
            "page_size must be a whole number from 1 to {PAGE_SIZE_MAX}."
        ))),
    }
}

/// A filter-lang refusal as the API's 400.
pub fn filter_error(e: filter_lang::Error) -> ApiError {
    ApiError::bad_request(format!("{}: {}", e.path, e.message))
}
