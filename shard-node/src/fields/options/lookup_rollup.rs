//! Lookup and rollup settings: a link of this table (`link_field_id`), a
//! field of the linked table (`target_field_id`, never a lookup or rollup;
//! none for a count), a rollup's `aggregation`, optional `conditions` over
//! the linked table. The concrete costume is inferred; the server writes
//! `source_presentation` (the surfaced field's type and settings, for
//! drawing values). Unknown keys are dropped.

use serde_json::{json, Map, Value};

use super::opt_str;
use crate::error::{ApiError, ApiResult};
use crate::schema::expansion::{counting, MAX_LOOKUP_CONDITION_COST, MAX_TABLE_CONDITION_COST};
use crate::schema::{Costume, DatabaseSchema, Family, FieldRow, StorageKind, TableSchema};

/// A validated lookup or rollup.
pub struct Settled {
    pub costume: Costume,
    pub options: Map<String, Value>,
    /// `<field> (from <link>)`, `Sum of <field> (from <link>)`, `Count of <link>`.
    pub derived_name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Aggregation {
    Sum,
    Count,
    Min,
    Max,
    Avg,
}

impl Aggregation {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "sum" => Self::Sum,
            "count" => Self::Count,
            "min" => Self::Min,
            "max" => Self::Max,
            "avg" => Self::Avg,
            _ => return None,
        })
    }
    fn title(self) -> &'static str {
        match self {
            Self::Sum => "Sum",
            Self::Count => "Count",
            Self::Min => "Min",
            Self::Max => "Max",
            Self::Avg => "Average",
        }
    }
}

/// Validates a complete configuration (create, and every update).
pub fn settle(
    family: Family,
    sent: &Map<String, Value>,
    schema: &DatabaseSchema,
    table: &TableSchema,
    env: &filter_lang::Env,
) -> ApiResult<Settled> {
    let what = if family == Family::Rollup {
        "rollup"
    } else {
        "lookup"
    };
    let Some(link_id) = opt_str(sent, "link_field_id")? else {
        return Err(ApiError::bad_request(format!(
            "A {what} needs options.link_field_id."
        )));
    };
    let link = table
        .field(link_id)
        .filter(|f| f.costume == Costume::Link)
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "options.link_field_id '{link_id}' is not a link field of this table."
            ))
        })?;
    let linked = schema
        .link_target(link)
        .ok_or_else(|| anyhow::anyhow!("link {} has no target table", link.id))?;
    let aggregation = if family == Family::Rollup {
        let Some(a) = opt_str(sent, "aggregation")? else {
            return Err(ApiError::bad_request(
                "A rollup needs options.aggregation: sum, count, min, max or avg.",
            ));
        };
        Some(Aggregation::parse(a).ok_or_else(|| {
            ApiError::bad_request(format!(
                "Unknown aggregation '{a}'. Valid aggregations: sum, count, min, max, avg."
            ))
        })?)
    } else {
        None
    };
    let target = if aggregation == Some(Aggregation::Count) {
        None
    } else {
        let Some(target_id) = opt_str(sent, "target_field_id")? else {
            return Err(ApiError::bad_request(format!(
                "A {what} needs options.target_field_id."
            )));
        };
        let t = linked.field(target_id).ok_or_else(|| {
            ApiError::bad_request(format!(
                "options.target_field_id '{target_id}' is not a field of the linked table '{}'.",
                linked.name
            ))
        })?;
        if matches!(t.costume.family(), Family::Lookup | Family::Rollup) {
            return Err(ApiError::bad_request(format!(
                "'{}' is itself a lookup or rollup and cannot be surfaced.",
                t.name
            )));
        }
        Some(t)
    };
    super::link::check_conditions(sent, schema, linked, env)?;

    let storage = target.map(|t| t.costume.storage());
    let costume = match (aggregation, storage) {
        (None, Some(StorageKind::Number)) => Costume::LookupNumber,
        (None, Some(StorageKind::Date)) => Costume::LookupDate,
        (None, Some(StorageKind::Checkbox)) => Costume::LookupCheckbox,
        (None, _) => Costume::LookupText,
        (Some(Aggregation::Count), _) => Costume::RollupNumber,
        (Some(Aggregation::Sum | Aggregation::Avg), Some(StorageKind::Number)) => {
            Costume::RollupNumber
        }
        (Some(Aggregation::Min | Aggregation::Max), Some(StorageKind::Number)) => {
            Costume::RollupNumber
        }
        (Some(Aggregation::Min | Aggregation::Max), Some(StorageKind::Date)) => Costume::RollupDate,
        (Some(a), _) => {
            let need = if matches!(a, Aggregation::Sum | Aggregation::Avg) {
                "a number field"
            } else {
                "a number or date field"
            };
            return Err(ApiError::bad_request(format!(
                "The aggregation '{}' needs {need}; '{}' is {}.",
                a.title().to_lowercase(),
                target.map(|t| t.name.as_str()).unwrap_or(""),
                target.map(|t| t.costume.as_str()).unwrap_or("")
            )));
        }
    };

    let mut options = Map::new();
    options.insert("link_field_id".into(), json!(link.id));
    options.insert(
        "target_field_id".into(),
        target.map(|t| json!(t.id)).unwrap_or(Value::Null),
    );
    if let Some(a) = aggregation {
        let name = match a {
            Aggregation::Sum => "sum",
            Aggregation::Count => "count",
            Aggregation::Min => "min",
            Aggregation::Max => "max",
            Aggregation::Avg => "avg",
        };
        options.insert("aggregation".into(), json!(name));
        for key in ["decimals", "separators"] {
            if let Some(v) = sent.get(key) {
                options.insert(key.into(), v.clone());
            }
        }
    }
    if let Some(c) = sent.get("conditions").filter(|c| !c.is_null()) {
        options.insert("conditions".into(), c.clone());
    }
    options.insert(
        "source_presentation".into(),
        match target {
            Some(t) => {
                json!({"type": t.costume.as_str(), "options": Value::Object(t.options.clone())})
            }
            None => json!({"type": "number", "options": {}}),
        },
    );
    let derived_name = match (aggregation, target) {
        (Some(Aggregation::Count), _) | (_, None) => format!("Count of {}", link.name),
        (Some(a), Some(t)) => format!("{} of {} (from {})", a.title(), t.name, link.name),
        (None, Some(t)) => format!("{} (from {})", t.name, link.name),
    };
    Ok(Settled {
        costume,
        options,
        derived_name,
    })
}

/// Refuses (400) a field change after which some conditioned lookup or
/// rollup of the database would expand past a cap of
/// [`crate::schema::expansion`] that it was within before. `changed` are
/// the created or updated rows; the whole database is recomputed on the
/// model with them in place, since a change to one lookup's conditions (or
/// a name they resolve) changes the cost of every lookup that reaches it.
pub fn check_expansion(before: &DatabaseSchema, changed: &[FieldRow]) -> ApiResult<()> {
    let conditioned = |f: &FieldRow| {
        matches!(f.costume.family(), Family::Lookup | Family::Rollup)
            && f.options.get("conditions").is_some_and(|c| !c.is_null())
    };
    if !before.all_fields().chain(changed).any(conditioned) {
        return Ok(());
    }
    let mut tables = before.tables.clone();
    for f in changed {
        let Some(t) = tables.iter_mut().find(|t| t.id == f.table_id) else {
            continue;
        };
        match t.fields.iter_mut().find(|g| g.id == f.id) {
            Some(slot) => *slot = f.clone(),
            None => t.fields.push(f.clone()),
        }
    }
    let after = DatabaseSchema::new(
        before.database_id.clone(),
        before.version,
        before.timezone.clone(),
        tables,
    );
    let known = before.condition_overruns();
    let mut new: Vec<_> = after
        .condition_overruns()
        .into_iter()
        .filter(|o| !known.contains(o))
        .collect();
    // Name the changed field when it is one of them.
    new.sort_by_key(|o| !changed.iter().any(|f| f.id == o.field_id));
    let Some(o) = new.first() else {
        return Ok(());
    };
    let field = after.field(&o.field_id).map_or("", |f| f.name.as_str());
    let table = after.table(&o.table_id).map_or("", |t| t.name.as_str());
    Err(ApiError::bad_request(
        if o.limit == MAX_LOOKUP_CONDITION_COST {
            format!(
            "options.conditions: the conditions of '{field}' (table '{table}') would cost more \
             than {MAX_LOOKUP_CONDITION_COST} ({}); a lookup's or rollup's conditions may cost at \
             most {MAX_LOOKUP_CONDITION_COST}.",
            counting()
        )
        } else {
            format!(
                "options.conditions: the conditions of the lookups and rollups of table '{table}' \
             would cost more than {MAX_TABLE_CONDITION_COST} together ({}), passing the limit at \
             '{field}'; a table's lookups and rollups may cost at most \
             {MAX_TABLE_CONDITION_COST} together.",
                counting()
            )
        },
    ))
}

/// `name`, or `name 2`, `name 3`, ... : the first not taken in `table`.
pub fn dedupe(table: &TableSchema, name: &str) -> String {
    if table.field_named(name).is_none() {
        return name.to_owned();
    }
    (2..)
        .map(|n| format!("{name} {n}"))
        .find(|candidate| table.field_named(candidate).is_none())
        .unwrap_or_else(|| name.to_owned())
}
