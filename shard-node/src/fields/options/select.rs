//! Select choices: `{id, name, color}`; ids kept or minted (8 characters),
//! names trimmed, at most 500 characters and 1000 choices, the reserved
//! sentinel refused, and a new id-less entry may not repeat a name.

use std::collections::HashSet;

use cluster_protocol::ids;
use serde_json::{json, Map, Value};

use crate::config::{MAX_CHOICES, MAX_CHOICE_NAME_CHARS};
use crate::error::{ApiError, ApiResult};
use crate::http::body::json_kind;

/// The choice name the filter language uses as "matches nothing".
pub const RESERVED_CHOICE: &str = "__service_no_such_choice__";
pub const CHOICE_ID_LEN: usize = 8;

/// Normalises `choices` (absent or null is no choices).
pub fn normalize_choices(value: Option<&Value>) -> ApiResult<Vec<Value>> {
    let list = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "options.choices must be a list, not {}.",
                json_kind(other)
            )))
        }
    };
    if list.len() > MAX_CHOICES {
        return Err(ApiError::bad_request(format!(
            "A select field can have at most {MAX_CHOICES} choices."
        )));
    }
    let mut out = Vec::with_capacity(list.len());
    let mut names = HashSet::new();
    let mut seen_ids = HashSet::new();
    for (i, entry) in list.iter().enumerate() {
        let Value::Object(entry) = entry else {
            return Err(ApiError::bad_request(format!(
                "options.choices[{i}] must be an object with a name."
            )));
        };
        let name = match entry.get("name") {
            Some(Value::String(s)) => s.trim().to_owned(),
            None | Some(Value::Null) => {
                return Err(ApiError::bad_request(format!(
                    "options.choices[{i}] needs a name."
                )))
            }
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "options.choices[{i}].name must be a string, not {}.",
                    json_kind(other)
                )))
            }
        };
        if name.is_empty() {
            return Err(ApiError::bad_request(format!(
                "options.choices[{i}] needs a name."
            )));
        }
        if name.chars().count() > MAX_CHOICE_NAME_CHARS {
            return Err(ApiError::bad_request(format!(
                "A choice name can be at most {MAX_CHOICE_NAME_CHARS} characters (options.choices[{i}])."
            )));
        }
        if name == RESERVED_CHOICE {
            return Err(ApiError::bad_request(format!(
                "'{RESERVED_CHOICE}' is reserved and cannot be a choice name."
            )));
        }
        let id = match entry.get("id") {
            None | Some(Value::Null) => {
                if names.contains(&name) {
                    return Err(ApiError::bad_request(format!(
                        "Duplicate choice name '{name}'."
                    )));
                }
                ids::random_token(CHOICE_ID_LEN)
            }
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(_) => {
                return Err(ApiError::bad_request(format!(
                    "options.choices[{i}].id must be a non-empty string."
                )))
            }
        };
        if !seen_ids.insert(id.clone()) {
            return Err(ApiError::bad_request(format!(
                "Duplicate choice id '{id}'."
            )));
        }
        names.insert(name.clone());
        let color = entry.get("color").cloned().unwrap_or(Value::Null);
        out.push(json!({ "id": id, "name": name, "color": color }));
    }
    Ok(out)
}

/// Select settings. On an update, a payload without `choices` keeps the
/// stored ones; an explicit `[]` (or null) clears them.
pub fn normalize(
    mut options: Map<String, Value>,
    stored: Option<&Map<String, Value>>,
) -> ApiResult<Map<String, Value>> {
    let choices = match (options.get("choices"), stored) {
        (None, Some(stored)) => stored.get("choices").cloned().unwrap_or(json!([])),
        (sent, _) => Value::Array(normalize_choices(sent)?),
    };
    options.insert("choices".into(), choices);
    Ok(options)
}

/// Adds `label`/`value` aliases to each choice (writable listing).
pub fn with_aliases(options: &mut Map<String, Value>) {
    if let Some(Value::Array(list)) = options.get_mut("choices") {
        for c in list.iter_mut() {
            if let Value::Object(c) = c {
                let name = c.get("name").cloned().unwrap_or(Value::Null);
                let id = c.get("id").cloned().unwrap_or(Value::Null);
                c.insert("label".into(), name);
                c.insert("value".into(), id);
            }
        }
    }
}

/// Choice ids in order.
pub fn choice_ids(options: &Map<String, Value>) -> Vec<String> {
    options
        .get("choices")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(|c| c.get("id")?.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_are_minted_trimmed_and_checked() {
        let out = normalize_choices(Some(&json!([
            {"name": "  A "}, {"id": "keepme12", "name": "B", "color": "red"}
        ])))
        .unwrap();
        assert_eq!(out[0]["name"], "A");
        assert_eq!(out[0]["id"].as_str().unwrap().len(), 8);
        assert_eq!(out[1]["id"], "keepme12");
        assert!(normalize_choices(Some(&json!([{"name": "A"}, {"name": " A"}]))).is_err());
        assert!(normalize_choices(Some(&json!([{"color": "x"}]))).is_err());
        assert!(normalize_choices(Some(&json!([{"name": RESERVED_CHOICE}]))).is_err());
        assert!(normalize_choices(Some(&json!([{"name": "x".repeat(501)}]))).is_err());
        assert!(normalize_choices(Some(&json!([{"name": "x".repeat(500)}]))).is_ok());
        let many: Vec<Value> = (0..1001)
            .map(|i| json!({"name": format!("c{i}")}))
            .collect();
        assert!(normalize_choices(Some(&Value::Array(many))).is_err());
    }
}
