//! Save-time checks of a webhook body (part B "Webhooks"), in three steps
//! so nothing is written until all of them pass:
//!
//! 1. [`parse_create`] / [`parse_update`]: the body's keys and the shape of
//!    each value (no catalog needed). Unknown keys and wrong types are 400
//!    naming the key.
//! 2. [`settle`]: the body merged into the stored (or default)
//!    configuration and checked against the database's schema: `table_id`
//!    must be a table of the database (404 like any id matching nothing),
//!    `conditions` compile with the record filter compiler against that
//!    table (its depth and node caps included) and name no lookup or
//!    rollup, `watched_field_ids` name fields of that table that a write
//!    can touch. Only what the body changes is checked again, so renaming
//!    a webhook never fails on a condition a later field change broke.
//! 3. [`check_url`]: the egress guard's save-time check of the endpoint.
//!
//! Decisions where the spec is open:
//! * `conditions` are stored with every condition's `field` rewritten to
//!   the field's id, so renaming a field never changes what a webhook
//!   matches; values (select names, dates) are kept as sent.
//! * `watched_field_ids` takes field ids or names (part A rule 1) and is
//!   stored as ids, de-duplicated, in the order sent. It is checked and
//!   stored whatever the trigger (only `record_updated` reads it), so
//!   switching the trigger later keeps a valid watch list.
//! * Any non-null `conditions` or non-empty `watched_field_ids` needs a
//!   specific `table_id`.
//! * `url` is stored as parsed (`http://host` reads back `http://host/`).
//! * `name` defaults to `""`; `is_active` may be sent on create (default
//!   true).

use serde_json::{Map, Value};

use crate::catalog::webhooks::{Settings, Webhook};
use crate::egress::Egress;
use crate::error::{ApiError, ApiResult};
use crate::http::body::json_kind;
use crate::schema::{DatabaseSchema, Family, TableSchema};

/// Webhooks one database may have.
pub const MAX_WEBHOOKS_PER_DATABASE: i64 = 100;
/// Longest `name`, in characters.
pub const MAX_NAME_CHARS: usize = 255;
/// Longest `url`, in characters.
pub const MAX_URL_CHARS: usize = 2048;

/// The keys a create accepts.
const CREATE_KEYS: &[&str] = &[
    "url",
    "trigger_type",
    "name",
    "table_id",
    "conditions",
    "watched_field_ids",
    "payload_key",
    "is_active",
];
/// The keys an update accepts: a create's, and `resume`.
const UPDATE_KEYS: &[&str] = &[
    "url",
    "trigger_type",
    "name",
    "table_id",
    "conditions",
    "watched_field_ids",
    "payload_key",
    "is_active",
    "resume",
];

/// What events a webhook receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    RecordCreated,
    RecordUpdated,
    RecordMatches,
    RecordDeleted,
}

impl Trigger {
    pub const ALL: [Trigger; 4] = [
        Trigger::RecordCreated,
        Trigger::RecordUpdated,
        Trigger::RecordMatches,
        Trigger::RecordDeleted,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Trigger::RecordCreated => "record_created",
            Trigger::RecordUpdated => "record_updated",
            Trigger::RecordMatches => "record_matches",
            Trigger::RecordDeleted => "record_deleted",
        }
    }

    pub fn parse(s: &str) -> Option<Trigger> {
        Trigger::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// How a payload's cells are keyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadKey {
    Name,
    Id,
}

impl PayloadKey {
    pub const fn as_str(self) -> &'static str {
        match self {
            PayloadKey::Name => "name",
            PayloadKey::Id => "id",
        }
    }

    pub fn parse(s: &str) -> Option<PayloadKey> {
        match s {
            "name" => Some(PayloadKey::Name),
            "id" => Some(PayloadKey::Id),
            _ => None,
        }
    }
}

/// A body's keys, shapes checked. `None`: the key was not sent; for the
/// nullable attributes `Some(None)` is an explicit null.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Changes {
    pub url: Option<String>,
    pub trigger_type: Option<Trigger>,
    pub name: Option<String>,
    pub table_id: Option<Option<String>>,
    pub conditions: Option<Option<Value>>,
    pub watched_field_ids: Option<Option<Vec<String>>>,
    pub payload_key: Option<PayloadKey>,
    pub is_active: Option<bool>,
    /// `resume: true` (false is the same as not sending it).
    pub resume: bool,
}

/// A webhook's whole configuration, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub name: String,
    pub url: String,
    pub table_id: Option<String>,
    pub trigger: Trigger,
    pub payload_key: PayloadKey,
    pub conditions: Option<Value>,
    pub watched_field_ids: Option<Vec<String>>,
    pub is_active: bool,
}

impl Config {
    /// The configuration of a stored row.
    pub fn of(w: &Webhook) -> ApiResult<Config> {
        let trigger = Trigger::parse(&w.trigger_type)
            .ok_or_else(|| anyhow::anyhow!("webhook {} has trigger {:?}", w.id, w.trigger_type))?;
        let payload_key = PayloadKey::parse(&w.payload_key).ok_or_else(|| {
            anyhow::anyhow!("webhook {} has payload key {:?}", w.id, w.payload_key)
        })?;
        Ok(Config {
            name: w.name.clone(),
            url: w.url.clone(),
            table_id: w.table_id.clone(),
            trigger,
            payload_key,
            conditions: w.conditions.clone(),
            watched_field_ids: w.watched_field_ids.clone(),
            is_active: w.is_active,
        })
    }

    /// What the catalog writes.
    pub fn settings(&self) -> Settings<'_> {
        Settings {
            name: &self.name,
            url: &self.url,
            table_id: self.table_id.as_deref(),
            trigger_type: self.trigger.as_str(),
            payload_key: self.payload_key.as_str(),
            conditions: self.conditions.as_ref(),
            watched_field_ids: self.watched_field_ids.as_deref(),
            is_active: self.is_active,
        }
    }

    /// Whether going from `self` to `new` clears the match memory (part A
    /// "States and transitions / Webhook"): a change of table, trigger or
    /// conditions, or switching off or on.
    pub fn clears_matches(&self, new: &Config) -> bool {
        self.table_id != new.table_id
            || self.trigger != new.trigger
            || self.conditions != new.conditions
            || self.is_active != new.is_active
    }
}

/// A create's body: `url` and `trigger_type` required.
pub fn parse_create(body: &Map<String, Value>) -> ApiResult<Changes> {
    let changes = parse(body, CREATE_KEYS)?;
    if changes.url.is_none() {
        return Err(ApiError::bad_request("url is required."));
    }
    if changes.trigger_type.is_none() {
        return Err(ApiError::bad_request(format!(
            "trigger_type is required: one of {}.",
            trigger_list()
        )));
    }
    Ok(changes)
}

/// An update's body: at least one key.
pub fn parse_update(body: &Map<String, Value>) -> ApiResult<Changes> {
    if body.is_empty() {
        return Err(ApiError::bad_request(format!(
            "Send at least one of: {}.",
            UPDATE_KEYS.join(", ")
        )));
    }
    parse(body, UPDATE_KEYS)
}

fn parse(body: &Map<String, Value>, allowed: &[&str]) -> ApiResult<Changes> {
    if let Some(key) = body.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(ApiError::bad_request(format!(
            "Unknown key '{key}'. Valid keys: {}.",
            allowed.join(", ")
        )));
    }
    let mut c = Changes::default();
    for (key, value) in body {
        match key.as_str() {
            "url" => c.url = Some(url_text(value)?),
            "trigger_type" => c.trigger_type = Some(trigger(value)?),
            "name" => c.name = Some(name(value)?),
            "table_id" => c.table_id = Some(nullable_string(key, value)?),
            "conditions" => c.conditions = Some(conditions_shape(value)?),
            "watched_field_ids" => c.watched_field_ids = Some(watched_shape(value)?),
            "payload_key" => c.payload_key = Some(payload_key(value)?),
            "is_active" => c.is_active = Some(boolean(key, value)?),
            "resume" => c.resume = boolean(key, value)?,
            other => {
                return Err(anyhow::anyhow!("webhook key {other:?} allowed but not parsed").into())
            }
        }
    }
    Ok(c)
}

fn wrong_type(key: &str, expected: &str, got: &Value) -> ApiError {
    ApiError::bad_request(format!("{key} must be {expected}, not {}.", json_kind(got)))
}

fn string<'a>(key: &str, v: &'a Value) -> ApiResult<&'a str> {
    v.as_str().ok_or_else(|| wrong_type(key, "a string", v))
}

fn nullable_string(key: &str, v: &Value) -> ApiResult<Option<String>> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        other => Err(wrong_type(key, "a string or null", other)),
    }
}

fn boolean(key: &str, v: &Value) -> ApiResult<bool> {
    v.as_bool()
        .ok_or_else(|| wrong_type(key, "true or false", v))
}

fn url_text(v: &Value) -> ApiResult<String> {
    let s = string("url", v)?;
    if s.trim().is_empty() {
        return Err(ApiError::bad_request("url must not be blank."));
    }
    let chars = s.chars().count();
    if chars > MAX_URL_CHARS {
        return Err(ApiError::bad_request(format!(
            "url may be at most {MAX_URL_CHARS} characters; this one has {chars}."
        )));
    }
    Ok(s.to_owned())
}

fn name(v: &Value) -> ApiResult<String> {
    let s = string("name", v)?;
    let chars = s.chars().count();
    if chars > MAX_NAME_CHARS {
        return Err(ApiError::bad_request(format!(
            "name may be at most {MAX_NAME_CHARS} characters; this one has {chars}."
        )));
    }
    Ok(s.to_owned())
}

fn trigger_list() -> String {
    Trigger::ALL.map(Trigger::as_str).join(", ")
}

fn trigger(v: &Value) -> ApiResult<Trigger> {
    let s = string("trigger_type", v)?;
    Trigger::parse(s).ok_or_else(|| {
        ApiError::bad_request(format!(
            "Unknown trigger_type '{s}'. Valid trigger types: {}.",
            trigger_list()
        ))
    })
}

fn payload_key(v: &Value) -> ApiResult<PayloadKey> {
    let s = string("payload_key", v)?;
    PayloadKey::parse(s).ok_or_else(|| {
        ApiError::bad_request(format!(
            "Unknown payload_key '{s}'. Valid payload keys: name, id."
        ))
    })
}

fn conditions_shape(v: &Value) -> ApiResult<Option<Value>> {
    match v {
        Value::Null => Ok(None),
        Value::Object(_) => Ok(Some(v.clone())),
        other => Err(wrong_type(
            "conditions",
            "a filter object ({join, conditions}) or null",
            other,
        )),
    }
}

fn watched_shape(v: &Value) -> ApiResult<Option<Vec<String>>> {
    let items = match v {
        Value::Null => return Ok(None),
        Value::Array(items) => items,
        other => {
            return Err(wrong_type(
                "watched_field_ids",
                "a list of field ids or null",
                other,
            ))
        }
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(s) => Ok(s.clone()),
            other => Err(wrong_type(
                &format!("watched_field_ids[{i}]"),
                "a field id",
                other,
            )),
        })
        .collect::<ApiResult<Vec<String>>>()
        .map(Some)
}

/// A new webhook's configuration before [`settle`]: the defaults, with
/// the body's keys applied. `url` is the body's (checked by [`check_url`]).
pub fn draft_new(changes: &Changes) -> Config {
    let base = Config {
        name: String::new(),
        url: String::new(),
        table_id: None,
        trigger: Trigger::RecordCreated,
        payload_key: PayloadKey::Name,
        conditions: None,
        watched_field_ids: None,
        is_active: true,
    };
    apply(&base, changes)
}

/// `base` with the body's keys applied (no schema checks yet).
pub fn apply(base: &Config, c: &Changes) -> Config {
    Config {
        name: c.name.clone().unwrap_or_else(|| base.name.clone()),
        url: c.url.clone().unwrap_or_else(|| base.url.clone()),
        table_id: c.table_id.clone().unwrap_or_else(|| base.table_id.clone()),
        trigger: c.trigger_type.unwrap_or(base.trigger),
        payload_key: c.payload_key.unwrap_or(base.payload_key),
        conditions: c
            .conditions
            .clone()
            .unwrap_or_else(|| base.conditions.clone()),
        watched_field_ids: c
            .watched_field_ids
            .clone()
            .unwrap_or_else(|| base.watched_field_ids.clone()),
        is_active: c.is_active.unwrap_or(base.is_active),
    }
}

/// Checks `merged` (a configuration with `changes` applied) against the
/// database's schema, re-checking only what `changes` touch (a new table
/// re-checks the conditions and watch list it keeps). Returns it with
/// conditions and watched fields in their stored form (field ids).
pub fn settle(schema: &DatabaseSchema, mut merged: Config, changes: &Changes) -> ApiResult<Config> {
    let table = match &merged.table_id {
        None => None,
        Some(id) => Some(schema.table(id).ok_or(ApiError::NotFound)?),
    };
    let table_changed = changes.table_id.is_some();
    if table_changed || changes.conditions.is_some() {
        if let Some(conditions) = &merged.conditions {
            let Some(table) = table else {
                return Err(ApiError::bad_request(
                    "conditions need a specific table_id: conditions are checked against \
                     one table's fields.",
                ));
            };
            merged.conditions = Some(compile_conditions(schema, table, conditions)?);
        }
    }
    if table_changed || changes.watched_field_ids.is_some() {
        if let Some(refs) = &merged.watched_field_ids {
            merged.watched_field_ids = Some(match table {
                Some(table) => resolve_watched(table, refs)?,
                None if refs.is_empty() => Vec::new(),
                None => {
                    return Err(ApiError::bad_request(
                        "watched_field_ids need a specific table_id: watched fields are \
                         fields of one table.",
                    ))
                }
            });
        }
    }
    Ok(merged)
}

/// Compiles `conditions` with the record filter compiler against `table`
/// (unknown fields and operators, values, depth and node caps), refuses
/// lookup and rollup fields, and returns the filter with every condition's
/// `field` as the field id. Errors start with `conditions`.
pub fn compile_conditions(
    schema: &DatabaseSchema,
    table: &TableSchema,
    conditions: &Value,
) -> ApiResult<Value> {
    let fschema = schema.filter_schema(table);
    let env = crate::fields::filter_env(schema)?;
    filter_lang::filter::parse(conditions, &fschema, &env, filter_lang::FieldKey::Field).map_err(
        |e| {
            let path = match e.path.strip_prefix("filter") {
                Some(rest) => format!("conditions{rest}"),
                None => format!("conditions: {}", e.path),
            };
            ApiError::bad_request(format!("{path}: {}", e.message))
        },
    )?;
    let mut stored = conditions.clone();
    canonical_group(&mut stored, &fschema, "conditions")?;
    Ok(stored)
}

/// Rewrites each condition's `field` of an already parsed group to the
/// field id, refusing lookups and rollups.
fn canonical_group(group: &mut Value, fschema: &filter_lang::Schema, path: &str) -> ApiResult<()> {
    let Some(Value::Array(items)) = group.get_mut("conditions") else {
        return Ok(());
    };
    for (i, item) in items.iter_mut().enumerate() {
        let item_path = format!("{path}.conditions[{i}]");
        let Value::Object(member) = item else {
            continue;
        };
        if member.contains_key("conditions") || member.contains_key("join") {
            canonical_group(item, fschema, &item_path)?;
            continue;
        }
        let Some(Value::String(reference)) = member.get("field") else {
            continue;
        };
        let index = fschema
            .resolve(reference, &item_path)
            .map_err(|e| ApiError::bad_request(format!("{item_path}.field: {}", e.message)))?;
        let def = &fschema.fields[index];
        if matches!(
            def.storage,
            filter_lang::Storage::Lookup { .. } | filter_lang::Storage::Rollup { .. }
        ) {
            return Err(ApiError::bad_request(format!(
                "{item_path}.field: field '{}' is a {}; lookup and rollup fields can't be \
                 webhook conditions.",
                def.name, def.costume
            )));
        }
        member.insert("field".into(), Value::String(def.id.clone()));
    }
    Ok(())
}

/// The watched fields as ids (each an id or exact name of a field of
/// `table`), de-duplicated in the order sent. Formula, lookup, rollup and
/// button fields are refused: no write touches them.
pub fn resolve_watched(table: &TableSchema, refs: &[String]) -> ApiResult<Vec<String>> {
    let mut ids: Vec<String> = Vec::with_capacity(refs.len().min(table.fields.len()));
    for (i, r) in refs.iter().enumerate() {
        let path = format!("watched_field_ids[{i}]");
        let field = match table.field(r) {
            Some(f) => f,
            None => {
                let mut named = table.fields.iter().filter(|f| &f.name == r);
                match (named.next(), named.next()) {
                    (Some(f), None) => f,
                    (Some(_), Some(_)) => {
                        return Err(ApiError::bad_request(format!(
                            "{path}: more than one field is named '{r}'; use its id."
                        )))
                    }
                    _ => {
                        return Err(ApiError::bad_request(format!(
                            "{path}: unknown field '{r}' in table '{}'.",
                            table.name
                        )))
                    }
                }
            }
        };
        let family = field.costume.family();
        if matches!(
            family,
            Family::Formula | Family::Lookup | Family::Rollup | Family::Button
        ) {
            return Err(ApiError::bad_request(format!(
                "{path}: field '{}' is a {}; formula, lookup, rollup and button fields \
                 can't be watched (no write touches them).",
                field.name,
                field.costume.as_str()
            )));
        }
        if !ids.contains(&field.id) {
            ids.push(field.id.clone());
        }
    }
    Ok(ids)
}

/// The save-time check of the endpoint (scheme, host resolving only to
/// addresses the egress guard allows); returns the URL as parsed.
pub async fn check_url(egress: &Egress, url: &str) -> ApiResult<String> {
    egress
        .check_url(url)
        .await
        .map(|u| u.to_string())
        .map_err(|refusal| ApiError::bad_request(format!("url: {refusal}")))
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
