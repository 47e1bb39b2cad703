//! Link settings. Create: `target_table_id` (same database), `allow_multiple`
//! (default true), `reverse_field_name` (the mirror's name, default this
//! table's name), `conditions` (a filter over the target), and
//! `picker_field_ids`; the server writes `direction` and `pair_field_id`.
//! Update: only `conditions` and `picker_field_ids` change.

use std::collections::HashSet;

use cluster_protocol::ids::{self, Kind};
use serde_json::{json, Map, Value};

use super::{opt_bool, opt_str};
use crate::config::MAX_PICKER_FIELDS;
use crate::error::{ApiError, ApiResult};
use crate::http::body::json_kind;
use crate::schema::{Costume, DatabaseSchema, FieldRow, TableSchema};

/// Keys of a link frozen after creation.
pub const LOCKED_KEYS: [&str; 4] = [
    "target_table_id",
    "direction",
    "pair_field_id",
    "allow_multiple",
];

/// What creating a link makes: the forward field's settings, the mirror's
/// name and settings, and the target table.
pub struct LinkPlan {
    pub target_table_id: String,
    pub forward: Map<String, Value>,
    pub mirror_name: String,
    pub mirror: Map<String, Value>,
}

/// The target table named by `options.target_table_id`: 400 when missing;
/// 404 when it has this database's routing tag (or none) but names no
/// table here; [`ApiError::ForeignLinkTarget`] when its tag is another
/// database's, which the router settles (404 unless the caller can see
/// such a table, else this 400): a shard does not know what else the
/// caller can see.
pub fn target<'a>(
    options: &Map<String, Value>,
    schema: &'a DatabaseSchema,
    database_tag: &str,
) -> ApiResult<&'a TableSchema> {
    let Some(id) = opt_str(options, "target_table_id")? else {
        return Err(ApiError::bad_request(
            "A link needs options.target_table_id.",
        ));
    };
    if let Some(t) = schema.table(id) {
        return Ok(t);
    }
    if ids::tag_of(Kind::Table, id).is_some_and(|tag| tag != database_tag) {
        return Err(ApiError::ForeignLinkTarget(id.to_owned()));
    }
    Err(ApiError::NotFound)
}

#[allow(clippy::too_many_arguments)]
pub fn plan_create(
    sent: Map<String, Value>,
    schema: &DatabaseSchema,
    table: &TableSchema,
    database_tag: &str,
    forward_id: &str,
    forward_name: &str,
    mirror_id: &str,
    env: &filter_lang::Env,
) -> ApiResult<LinkPlan> {
    let target = target(&sent, schema, database_tag)?;
    let allow_multiple = opt_bool(&sent, "allow_multiple")?.unwrap_or(true);
    let mirror_name = match opt_str(&sent, "reverse_field_name")? {
        Some(n) if !n.trim().is_empty() => n.trim().to_owned(),
        _ => table.name.trim().to_owned(),
    };
    if target.id == table.id && mirror_name == forward_name {
        return Err(ApiError::Conflict(format!(
            "A link from a table to itself needs two distinct field names; '{mirror_name}' is \
             used for both sides (pass options.reverse_field_name)."
        )));
    }
    if target.field_named(&mirror_name).is_some() {
        return Err(ApiError::Conflict(format!(
            "The table '{}' already has a field named '{mirror_name}'; pass \
             options.reverse_field_name to name the linked field.",
            target.name
        )));
    }
    check_conditions(&sent, schema, target, env)?;
    check_pickers(&sent, target)?;
    let mut forward = sent;
    forward.insert("target_table_id".into(), json!(target.id));
    forward.insert("allow_multiple".into(), json!(allow_multiple));
    forward.insert("reverse_field_name".into(), json!(mirror_name));
    forward.insert("direction".into(), json!("forward"));
    forward.insert("pair_field_id".into(), json!(mirror_id));
    let mut mirror = Map::new();
    mirror.insert("target_table_id".into(), json!(table.id));
    mirror.insert("allow_multiple".into(), json!(true));
    mirror.insert("direction".into(), json!("reverse"));
    mirror.insert("pair_field_id".into(), json!(forward_id));
    Ok(LinkPlan {
        target_table_id: target.id.clone(),
        forward,
        mirror_name,
        mirror,
    })
}

/// Update: the locked keys may only be repeated; `conditions` and
/// `picker_field_ids` are replaced; anything else sent is dropped.
pub fn patch(
    sent: Map<String, Value>,
    stored: &FieldRow,
    schema: &DatabaseSchema,
    env: &filter_lang::Env,
) -> ApiResult<Map<String, Value>> {
    for key in LOCKED_KEYS {
        if let Some(v) = sent.get(key) {
            if stored.options.get(key) != Some(v) {
                return Err(ApiError::bad_request(format!(
                    "options.{key} of a link cannot be changed."
                )));
            }
        }
    }
    let target = schema
        .link_target(stored)
        .ok_or_else(|| anyhow::anyhow!("link {} has no target table", stored.id))?;
    check_conditions(&sent, schema, target, env)?;
    check_pickers(&sent, target)?;
    let mut out = stored.options.clone();
    for key in ["conditions", "picker_field_ids"] {
        match sent.get(key) {
            Some(v) if !v.is_null() => {
                out.insert(key.into(), v.clone());
            }
            _ => {
                out.remove(key);
            }
        }
    }
    Ok(out)
}

/// `conditions` must compile against the target table.
pub fn check_conditions(
    sent: &Map<String, Value>,
    schema: &DatabaseSchema,
    target: &TableSchema,
    env: &filter_lang::Env,
) -> ApiResult<()> {
    match sent.get("conditions") {
        None | Some(Value::Null) => Ok(()),
        Some(conditions) => {
            let fs = schema.filter_schema(target);
            filter_lang::filter::parse_value(conditions, &fs, env)
                .map(|_| ())
                .map_err(|e| {
                    ApiError::bad_request(format!(
                        "options.conditions does not fit the table '{}': {} ({})",
                        target.name, e.message, e.path
                    ))
                })
        }
    }
}

/// Up to four fields of the target (at most one attachment, as the
/// thumbnail), never a button, never the target's display field.
fn check_pickers(sent: &Map<String, Value>, target: &TableSchema) -> ApiResult<()> {
    let list = match sent.get("picker_field_ids") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(l)) => l,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "options.picker_field_ids must be a list, not {}.",
                json_kind(other)
            )))
        }
    };
    if list.len() > MAX_PICKER_FIELDS {
        return Err(ApiError::bad_request(format!(
            "A link can show at most {MAX_PICKER_FIELDS} picker fields."
        )));
    }
    let mut seen = HashSet::new();
    let mut attachments = 0;
    for v in list {
        let Some(id) = v.as_str() else {
            return Err(ApiError::bad_request(
                "options.picker_field_ids must hold field ids.",
            ));
        };
        let Some(f) = target.field(id) else {
            return Err(ApiError::bad_request(format!(
                "Picker field '{id}' is not a field of the table '{}'.",
                target.name
            )));
        };
        if !seen.insert(id) {
            return Err(ApiError::bad_request(format!(
                "Picker field '{}' is listed twice.",
                f.name
            )));
        }
        if f.costume == Costume::Button {
            return Err(ApiError::bad_request(format!(
                "Picker field '{}' is a button; buttons cannot be picker fields.",
                f.name
            )));
        }
        if target.display_field_id.as_deref() == Some(id) {
            return Err(ApiError::bad_request(format!(
                "Picker field '{}' is the linked table's display field, which the picker always shows.",
                f.name
            )));
        }
        if f.costume == Costume::Attachment {
            attachments += 1;
            if attachments > 1 {
                return Err(ApiError::bad_request(
                    "A link can show at most one attachment field among its picker fields.",
                ));
            }
        }
    }
    Ok(())
}
