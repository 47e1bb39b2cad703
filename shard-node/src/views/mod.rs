//! View routes: list and create under a table, rename/reconfigure and delete
//! by id. A view is saved view-bar state stored verbatim; the only server
//! validation of its `config` is on nested relative-date values.

pub mod create;
pub mod delete;
pub mod list;
pub mod sort_index;
pub mod update;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use cluster_protocol::error::forbidden;
use serde_json::Value;

use crate::auth::{Access, Editor};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// How deep `config` is searched for relative-date values: the config
/// object is level 1, an object or list inside it level 2, and so on.
pub const RELATIVE_DATE_DEPTH: usize = 8;

/// A caller allowed to change views: an editor, with the viewer refusal
/// worded for views (`Viewers can't change views.`).
pub struct ViewEditor(pub Access);

impl FromRequestParts<AppState> for ViewEditor {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        match Editor::from_request_parts(parts, state).await {
            Ok(Editor(access)) => Ok(ViewEditor(access)),
            Err(ApiError::Forbidden(m)) if m == forbidden::VIEWER => {
                Err(ApiError::Forbidden(forbidden::VIEWER_VIEWS))
            }
            Err(e) => Err(e),
        }
    }
}

/// `config` must be an object (null means `{}`) with at most
/// `filter_lang::MAX_SORT_TERMS` `sorts`; every object carrying a
/// `relative` key within [`RELATIVE_DATE_DEPTH`] levels must be a valid
/// relative date `{relative, offset?, unit?}`.
pub fn parse_config(value: Option<&Value>) -> ApiResult<Value> {
    match value {
        None | Some(Value::Null) => Ok(Value::Object(Default::default())),
        Some(v @ Value::Object(_)) => {
            check_relative_dates(v, 1, "config")?;
            if let Some(Value::Array(sorts)) = v.get("sorts") {
                if sorts.len() > filter_lang::MAX_SORT_TERMS {
                    return Err(ApiError::bad_request(format!(
                        "config.sorts may have at most {} terms; this one has {}.",
                        filter_lang::MAX_SORT_TERMS,
                        sorts.len()
                    )));
                }
            }
            Ok(v.clone())
        }
        Some(other) => Err(ApiError::bad_request(format!(
            "config must be an object, not {}.",
            crate::http::body::json_kind(other)
        ))),
    }
}

fn check_relative_dates(value: &Value, level: usize, path: &str) -> ApiResult<()> {
    if level > RELATIVE_DATE_DEPTH {
        return Ok(());
    }
    match value {
        Value::Object(map) => {
            if map.contains_key("relative") {
                filter_lang::dates::parse_relative(map)
                    .map_err(|m| ApiError::bad_request(format!("{path}: {m}")))?;
                return Ok(());
            }
            for (k, v) in map {
                check_relative_dates(v, level + 1, &format!("{path}.{k}"))?;
            }
            Ok(())
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                check_relative_dates(v, level + 1, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nest(levels: usize, inner: Value) -> Value {
        (1..levels).fold(inner, |acc, _| json!({ "x": acc }))
    }

    #[test]
    fn relative_dates_are_checked_down_to_eight_levels() {
        let bad = json!({"relative": "yesterday"});
        let good = json!({"relative": "today", "offset": -3, "unit": "week"});
        assert!(parse_config(Some(&nest(8, good.clone()))).is_ok());
        assert!(parse_config(Some(&nest(8, bad.clone()))).is_err());
        // Level 9 is beyond the search.
        assert!(parse_config(Some(&nest(9, bad.clone()))).is_ok());
        let in_list =
            json!({"filters": {"conditions": [{"value": {"relative": "now", "offset": 400}}]}});
        assert!(parse_config(Some(&in_list)).is_err());
        let extra = json!({"v": {"relative": "today", "foo": 1}});
        assert!(parse_config(Some(&extra)).is_err());
        assert_eq!(parse_config(None).unwrap(), json!({}));
        assert!(parse_config(Some(&json!([1]))).is_err());
        let kept = json!({"type": "kanban", "unknown": {"deep": [1, 2]}});
        assert_eq!(parse_config(Some(&kept)).unwrap(), kept);
    }
}
