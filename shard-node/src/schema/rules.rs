//! The webhooks a record write consults, as the cached schema model
//! carries them ([`super::DatabaseSchema::webhooks`]): a change of
//! anything here bumps `databases.schema_version` (webhook routes, the
//! match clock), so a write reads its rules with no query of its own and a
//! table without a rule costs nothing.

use serde_json::Value;

use super::{DatabaseSchema, TableSchema};

/// `trigger_type` (part A, Webhook).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    RecordCreated,
    RecordUpdated,
    RecordMatches,
    RecordDeleted,
}

impl Trigger {
    pub fn parse(s: &str) -> Option<Trigger> {
        Some(match s {
            "record_created" => Trigger::RecordCreated,
            "record_updated" => Trigger::RecordUpdated,
            "record_matches" => Trigger::RecordMatches,
            "record_deleted" => Trigger::RecordDeleted,
            _ => return None,
        })
    }
}

/// `payload_key`: cells (and the companion map) by field name or by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PayloadKey {
    #[default]
    Name,
    Id,
}

impl PayloadKey {
    pub fn parse(s: &str) -> PayloadKey {
        if s == "id" {
            PayloadKey::Id
        } else {
            PayloadKey::Name
        }
    }
}

/// One webhook of the database, as far as record writes and the match
/// clock care.
#[derive(Debug, Clone)]
pub struct Rule {
    pub id: String,
    pub name: String,
    /// None: every table of the database.
    pub table_id: Option<String>,
    pub trigger: Trigger,
    pub payload_key: PayloadKey,
    pub is_active: bool,
    pub paused: bool,
    /// The stored filter object, or None.
    pub conditions: Option<Value>,
    pub watched_field_ids: Option<Vec<String>>,
    /// `record_matches`: whether the match memory holds what matched at
    /// the last pass (false until the clock's first, silent, pass).
    pub matches_recorded: bool,
}

impl Rule {
    /// Whether the rule is about records of `table_id`.
    pub fn covers(&self, table_id: &str) -> bool {
        self.table_id.as_deref().is_none_or(|t| t == table_id)
    }

    /// Switched on and not auto-paused: its events are enqueued.
    pub fn delivers(&self) -> bool {
        self.is_active && !self.paused
    }

    /// The stored conditions, unless null. (A filter that constrains
    /// nothing compiles to `TRUE`: every event of the type fires.)
    pub fn conditions(&self) -> Option<&Value> {
        self.conditions.as_ref().filter(|c| !c.is_null())
    }

    /// `record_updated` only: whether an update that supplied `supplied`
    /// touches a watched field (null or empty watches every field).
    pub fn watches_any(&self, supplied: &[String]) -> bool {
        match &self.watched_field_ids {
            Some(watched) if !watched.is_empty() => watched.iter().any(|w| supplied.contains(w)),
            _ => true,
        }
    }

    /// Compiles the conditions against `table` as record reads do (the
    /// same filter language, expansion caps included): a boolean SQL
    /// expression over the row alias `r`, its values pushed on `params`.
    /// None when they cannot be evaluated (a field deleted, a choice
    /// renamed away, over a cap): the record counts as not matching.
    pub fn compile_conditions(
        &self,
        schema: &DatabaseSchema,
        table: &TableSchema,
        env: &filter_lang::Env,
        params: &mut filter_lang::Params,
    ) -> Option<String> {
        let value = self.conditions()?;
        let fschema = schema.filter_schema(table);
        let filter = match filter_lang::filter::parse_value(value, &fschema, env) {
            Ok(f) => f,
            Err(e) => {
                tracing::debug!(webhook = %self.id, error = %e.message, "webhook conditions cannot be evaluated");
                return None;
            }
        };
        if super::expansion::check_filter(&filter, &fschema).is_err() {
            tracing::debug!(webhook = %self.id, "webhook conditions over the expansion cap");
            return None;
        }
        Some(filter_lang::filter::compile(
            &filter, &fschema, env, "r", params,
        ))
    }

    /// Whether the conditions name a relative date (`{relative: ...}`), so
    /// the record set they match moves with the clock.
    pub fn names_relative_date(&self) -> bool {
        self.conditions().is_some_and(names_relative)
    }
}

/// Any object value with a `relative` key inside a filter object.
fn names_relative(v: &Value) -> bool {
    match v {
        Value::Object(o) => {
            o.get("value")
                .is_some_and(|val| val.get("relative").is_some())
                || o.get("conditions")
                    .and_then(Value::as_array)
                    .is_some_and(|members| members.iter().any(names_relative))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(conditions: Option<Value>, watched: Option<Vec<&str>>) -> Rule {
        Rule {
            id: "whk_x".into(),
            name: String::new(),
            table_id: Some("tbl_a".into()),
            trigger: Trigger::RecordUpdated,
            payload_key: PayloadKey::Name,
            is_active: true,
            paused: false,
            conditions,
            watched_field_ids: watched.map(|w| w.into_iter().map(String::from).collect()),
            matches_recorded: true,
        }
    }

    #[test]
    fn coverage_and_delivery() {
        let mut r = rule(None, None);
        assert!(r.covers("tbl_a") && !r.covers("tbl_b"));
        r.table_id = None;
        assert!(r.covers("tbl_b"));
        assert!(r.delivers());
        r.paused = true;
        assert!(!r.delivers());
        r.paused = false;
        r.is_active = false;
        assert!(!r.delivers());
    }

    #[test]
    fn watches() {
        let supplied = vec!["fld_a".to_owned()];
        assert!(rule(None, None).watches_any(&supplied));
        assert!(rule(None, Some(vec![])).watches_any(&supplied));
        assert!(rule(None, Some(vec!["fld_b", "fld_a"])).watches_any(&supplied));
        assert!(!rule(None, Some(vec!["fld_b"])).watches_any(&supplied));
        assert!(!rule(None, Some(vec!["fld_b"])).watches_any(&[]));
    }

    #[test]
    fn relative_dates() {
        let today =
            json!({"conditions": [{"field": "Due", "op": "is", "value": {"relative": "today"}}]});
        let nested = json!({"join": "or", "conditions": [
            {"field": "A", "op": "empty"},
            {"conditions": [{"field": "Due", "op": "before", "value": {"relative": "now", "offset": 2}}]}
        ]});
        let fixed = json!({"conditions": [{"field": "Due", "op": "is", "value": "2026-01-01"}]});
        assert!(rule(Some(today), None).names_relative_date());
        assert!(rule(Some(nested), None).names_relative_date());
        assert!(!rule(Some(fixed), None).names_relative_date());
        assert!(!rule(None, None).names_relative_date());
    }
}
