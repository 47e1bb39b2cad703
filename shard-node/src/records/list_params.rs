//! The parameters of a records listing (`GET .../records` query, `POST
//! .../records/list` body), read and bounded before anything is resolved.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::page_size;
use super::reply::{Raw, Shape};
use crate::error::{ApiError, ApiResult};

/// Most entries the `fields` parameter may name: the fields a table may
/// have (part C), so naming every field once always fits. Each entry is
/// resolved against the table, so an unbounded list was unbounded work.
pub const MAX_FIELDS_PARAM: usize = crate::config::MAX_FIELDS_PER_TABLE as usize;

/// `fields` within [`MAX_FIELDS_PARAM`] entries.
fn check_fields_len(fields: Option<Vec<String>>) -> ApiResult<Option<Vec<String>>> {
    match fields {
        Some(f) if f.len() > MAX_FIELDS_PARAM => Err(ApiError::bad_request(format!(
            "fields may name at most {MAX_FIELDS_PARAM} fields; this request names {}.",
            f.len()
        ))),
        other => Ok(other),
    }
}

/// Every list parameter, as sent.
pub struct ListParams {
    pub view: Option<String>,
    pub filter: Option<Value>,
    pub sort: Option<String>,
    pub search: Option<String>,
    pub fields: Option<Vec<String>>,
    pub page_size: i64,
    pub bookmark: Option<String>,
    pub shape: Shape,
}

fn text_param(v: Option<&Value>, name: &str) -> ApiResult<Option<String>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::bad_request(format!("{name} must be a string."))),
    }
}

fn comma_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect()
}

impl ListParams {
    pub fn from_query(q: &HashMap<String, String>) -> ApiResult<ListParams> {
        let filter = match q.get("filter") {
            None => None,
            Some(s) if s.trim().is_empty() => None,
            Some(s) => Some(
                serde_json::from_str::<Value>(s)
                    .map_err(|_| ApiError::bad_request("filter must be valid JSON."))?,
            ),
        };
        let mut shape = Shape::from_query(q)?;
        shape.link_display_cap = q
            .get("link_display_cap")
            .and_then(|s| s.parse::<usize>().ok())
            .filter(|n| (1..=1000).contains(n));
        Ok(ListParams {
            view: q.get("view").cloned(),
            filter,
            sort: q.get("sort").cloned(),
            search: q.get("search").cloned(),
            fields: check_fields_len(q.get("fields").map(|s| comma_list(s)))?,
            page_size: page_size(
                q.get("page_size")
                    .map(|s| Value::String(s.clone()))
                    .as_ref(),
            )?,
            bookmark: q.get("bookmark").cloned(),
            shape,
        })
    }

    pub fn from_body(b: &Map<String, Value>) -> ApiResult<ListParams> {
        let fields = match b.get("fields") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(comma_list(s)),
            Some(Value::Array(items)) if items.len() > MAX_FIELDS_PARAM => {
                return Err(ApiError::bad_request(format!(
                    "fields may name at most {MAX_FIELDS_PARAM} fields; this request names {}.",
                    items.len()
                )))
            }
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .map(|i| i.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| ApiError::bad_request("fields must be a list of strings."))?,
            ),
            Some(_) => {
                return Err(ApiError::bad_request(
                    "fields must be a list or a comma list.",
                ))
            }
        };
        let filter = match b.get("filter") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.clone()),
        };
        Ok(ListParams {
            view: text_param(b.get("view"), "view")?,
            filter,
            sort: text_param(b.get("sort"), "sort")?,
            search: text_param(b.get("search"), "search")?,
            fields: check_fields_len(fields)?,
            page_size: page_size(b.get("page_size"))?,
            bookmark: text_param(b.get("bookmark"), "bookmark")?,
            shape: Shape::parse(|k| b.get(k).map(Raw::Json))?,
        })
    }
}
