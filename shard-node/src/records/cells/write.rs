//! Write shapes of part A: JSON cells in, column values (as the JSON that
//! `jsonb_to_recordset` reads into typed columns) and link lists out.
//! Every refusal is a 400 naming the field.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Number, Value};

use crate::attachments::items::{self, Item};
use crate::error::{ApiError, ApiResult};
use crate::schema::{Costume, DatabaseSchema, Family, FieldRow, TableSchema};

/// Most records one link cell may name (distinct ids). Part C sets no
/// number; a cell is written as one connector row per linked record, and
/// this keeps one cell's write (and its read) bounded.
pub const MAX_LINKS_PER_CELL: usize = 10_000;
/// Most members one multi-member cell may hold (distinct e-mails).
pub const MAX_MEMBERS_PER_CELL: usize = 1_000;
/// Dates and instants a date cell may hold: years 0001 to 9999 (what
/// PostgreSQL reads back as written and `YYYY-MM-DD` can show).
pub const DATE_RANGE_TEXT: &str = "0001-01-01 to 9999-12-31";

/// One record's converted cells.
#[derive(Debug, Default, Clone)]
pub struct Prepared {
    /// Column (field id) -> value in the form its SQL type reads from JSON.
    pub columns: Map<String, Value>,
    /// Link field id -> linked record ids, in order.
    pub links: Vec<(String, Vec<String>)>,
    /// Attachment field id -> the cell's items as written; turned into the
    /// column's ids by `attachments::place::settle` inside the write.
    pub attachments: Vec<(String, Vec<Item>)>,
    /// Position of the record in its batch (names its fetched URLs).
    pub index: usize,
}

/// The field a cell key names: a `fld_` id first, then the exact name.
pub fn resolve<'a>(table: &'a TableSchema, key: &str) -> ApiResult<&'a FieldRow> {
    if let Some(f) = table.field(key) {
        return Ok(f);
    }
    let mut named = table.fields.iter().filter(|f| f.name == key);
    match (named.next(), named.next()) {
        (Some(f), None) => Ok(f),
        (Some(_), Some(_)) => Err(ApiError::bad_request(format!(
            "More than one field is named '{key}'; use its id."
        ))),
        _ => Err(ApiError::bad_request(format!("Unknown field '{key}'."))),
    }
}

fn bad(f: &FieldRow, what: &str) -> ApiError {
    ApiError::bad_request(format!("Field '{}' {what}", f.name))
}

/// Converts one record's `fields` object.
pub fn prepare(
    schema: &DatabaseSchema,
    table: &TableSchema,
    cells: &Map<String, Value>,
    env: &filter_lang::Env,
) -> ApiResult<Prepared> {
    let mut out = Prepared::default();
    let mut seen: HashSet<&str> = HashSet::with_capacity(cells.len());
    for (key, value) in cells {
        let f = resolve(table, key)?;
        if !seen.insert(f.id.as_str()) {
            return Err(bad(f, "is named twice in one record."));
        }
        match f.costume.family() {
            Family::Formula | Family::Lookup | Family::Rollup => {
                return Err(bad(f, "is computed and cannot be written."))
            }
            Family::Button => return Err(bad(f, "is a button and holds no value.")),
            Family::Link => out.links.push((f.id.clone(), link_ids(f, value)?)),
            Family::Attachment => out
                .attachments
                .push((f.id.clone(), items::parse_cell(&f.name, value)?)),
            _ => {
                let v = scalar(f, value, env)?;
                out.columns.insert(f.id.clone(), v);
            }
        }
    }
    let _ = schema;
    Ok(out)
}

fn text(f: &FieldRow, v: &Value) -> ApiResult<Value> {
    match v {
        Value::Null => Ok(Value::Null),
        Value::String(s) if s.contains('\0') => Err(bad(f, "cannot hold a NUL character.")),
        Value::String(s) => Ok(Value::String(s.clone())),
        _ => Err(bad(f, "takes a string.")),
    }
}

fn number(f: &FieldRow, v: &Value) -> ApiResult<Option<f64>> {
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => n
            .as_f64()
            .filter(|x| x.is_finite())
            .map(Some)
            .ok_or_else(|| bad(f, "takes a finite number.")),
        _ => Err(bad(f, "takes a number.")),
    }
}

fn num(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9e15 {
        Value::Number(Number::from(x as i64))
    } else {
        Number::from_f64(x)
            .map(Value::Number)
            .unwrap_or(Value::Null)
    }
}

/// `h:mm`, `h:mm:ss`, `mm:ss` (per the field's `duration_format`) or a
/// count of seconds; negatives refused.
pub fn duration_seconds(text: &str, format: &str) -> Option<f64> {
    let t = text.trim();
    if let Ok(n) = t.parse::<f64>() {
        return (n.is_finite() && n >= 0.0).then_some(n);
    }
    let parts: Vec<&str> = t.split(':').collect();
    let whole = |s: &str| -> Option<f64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse::<f64>().ok())?
    };
    let secs = |s: &str| -> Option<f64> {
        let n: f64 = s.parse().ok()?;
        (n.is_finite() && n >= 0.0 && !s.starts_with('+') && !s.starts_with('-')).then_some(n)
    };
    match parts.as_slice() {
        [a, b] if format == "mm:ss" => Some(whole(a)? * 60.0 + secs(b)?),
        [h, m] => Some(whole(h)? * 3600.0 + whole(m)? * 60.0),
        [h, m, s] => Some(whole(h)? * 3600.0 + whole(m)? * 60.0 + secs(s)?),
        _ => None,
    }
}

fn scalar(f: &FieldRow, v: &Value, env: &filter_lang::Env) -> ApiResult<Value> {
    use Costume::*;
    match f.costume {
        SingleLineText | LongText | Email | Phone | Url | Member => text(f, v),
        Number | Currency | Percent => Ok(number(f, v)?.map(num).unwrap_or(Value::Null)),
        Rating => {
            let max = f
                .options
                .get("max")
                .and_then(Value::as_f64)
                .unwrap_or(5.0)
                .max(1.0);
            Ok(match number(f, v)? {
                None => Value::Null,
                Some(x) => {
                    let r = x.round().min(max.floor());
                    if r <= 0.0 {
                        Value::Null
                    } else {
                        num(r)
                    }
                }
            })
        }
        Duration => match v {
            Value::Null => Ok(Value::Null),
            Value::Number(_) => match number(f, v)? {
                Some(x) if x >= 0.0 => Ok(num(x)),
                _ => Err(bad(f, "takes a duration that is not negative.")),
            },
            Value::String(s) => {
                let format = f.option_str("duration_format").unwrap_or("h:mm");
                duration_seconds(s, format).map(num).ok_or_else(|| {
                    bad(
                        f,
                        &format!("takes a duration like 1:30 or a number of seconds, not '{s}'."),
                    )
                })
            }
            _ => Err(bad(f, "takes a duration like 1:30 or a number of seconds.")),
        },
        Checkbox => match v {
            Value::Null => Ok(Value::Null),
            Value::Bool(b) => Ok(Value::Bool(*b)),
            _ => Err(bad(f, "takes true or false.")),
        },
        Date => match v {
            Value::Null => Ok(Value::Null),
            Value::String(s) if f.has_time() => {
                let instant = match filter_lang::dates::parse_day(s) {
                    Some(day) => Some(filter_lang::dates::start_of_day(env.timezone, day)),
                    None => filter_lang::dates::parse_instant(s, env.timezone),
                };
                let instant = instant.ok_or_else(|| {
                    bad(
                        f,
                        &format!("takes a date or a timestamp with hours and minutes, not '{s}'."),
                    )
                })?;
                if !in_date_range(instant.date_naive()) {
                    return Err(out_of_range(f, s));
                }
                Ok(Value::String(
                    instant.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                ))
            }
            Value::String(s) => {
                let day = filter_lang::dates::parse_day(s).ok_or_else(|| {
                    bad(f, &format!("takes a real date as YYYY-MM-DD, not '{s}'."))
                })?;
                if !in_date_range(day) {
                    return Err(out_of_range(f, s));
                }
                Ok(Value::String(day.format("%Y-%m-%d").to_string()))
            }
            _ => Err(bad(f, "takes a date string.")),
        },
        SingleSelect => match v {
            Value::Null => Ok(Value::Null),
            Value::String(s) => choice(f, s).map(Value::String),
            _ => Err(bad(f, "takes a choice name or id.")),
        },
        MultiSelect | MultiMember => match v {
            Value::Null => Ok(Value::Null),
            Value::Array(items) => {
                let choices = Choices::of(f);
                let mut seen: HashSet<&str> = HashSet::new();
                let mut out: Vec<Value> = Vec::new();
                for item in items {
                    let Value::String(s) = item else {
                        return Err(bad(f, "takes a list of strings."));
                    };
                    let v = if f.costume == MultiSelect {
                        choices.resolve(f, s)?
                    } else {
                        s.as_str()
                    };
                    if seen.insert(v) {
                        out.push(Value::String(v.to_owned()));
                    }
                }
                // Distinct choices cannot exceed the field's (at most 1000).
                if f.costume == MultiMember && out.len() > MAX_MEMBERS_PER_CELL {
                    return Err(bad(
                        f,
                        &format!(
                            "holds at most {MAX_MEMBERS_PER_CELL} members; this cell names {}.",
                            out.len()
                        ),
                    ));
                }
                Ok(if out.is_empty() {
                    Value::Null
                } else {
                    Value::Array(out)
                })
            }
            _ => Err(bad(f, "takes a list.")),
        },
        _ => Err(bad(f, "cannot be written.")),
    }
}

fn in_date_range(day: chrono::NaiveDate) -> bool {
    use chrono::Datelike;
    (1..=9999).contains(&day.year())
}

fn out_of_range(f: &FieldRow, s: &str) -> ApiError {
    bad(
        f,
        &format!("takes dates from {DATE_RANGE_TEXT} (UTC), not '{s}'."),
    )
}

/// A select field's choices by id and by name, for one cell's items.
struct Choices {
    by_id: HashSet<String>,
    by_name: HashMap<String, String>,
}

impl Choices {
    fn of(f: &FieldRow) -> Choices {
        let list = f.choices();
        let mut by_name = HashMap::with_capacity(list.len());
        let mut by_id = HashSet::with_capacity(list.len());
        for (id, name) in list {
            by_name.entry(name).or_insert_with(|| id.clone());
            by_id.insert(id);
        }
        Choices { by_id, by_name }
    }

    /// A choice id from an id or a name (id first); 400 naming an unknown one.
    fn resolve<'a>(&'a self, f: &FieldRow, s: &'a str) -> ApiResult<&'a str> {
        if self.by_id.contains(s) {
            return Ok(s);
        }
        self.by_name
            .get(s)
            .map(String::as_str)
            .ok_or_else(|| bad(f, &format!("has no choice '{s}'.")))
    }
}

/// A choice id from an id or a name (id first); 400 naming an unknown one.
fn choice(f: &FieldRow, s: &str) -> ApiResult<String> {
    Choices::of(f).resolve(f, s).map(str::to_owned)
}

/// Linked ids from `[rec ids]` or `[{id, ...}]`; a single-record link
/// refuses more than one.
fn link_ids(f: &FieldRow, v: &Value) -> ApiResult<Vec<String>> {
    let items = match v {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        _ => return Err(bad(f, "takes a list of record ids.")),
    };
    let mut seen: HashSet<&str> = HashSet::new();
    let mut ids: Vec<String> = Vec::new();
    for item in items {
        let id = match item {
            Value::String(s) => s,
            Value::Object(o) => match o.get("id") {
                Some(Value::String(s)) => s,
                _ => return Err(bad(f, "takes record ids or objects with an id.")),
            },
            _ => return Err(bad(f, "takes record ids or objects with an id.")),
        };
        if !cluster_protocol::ids::is_valid(cluster_protocol::ids::Kind::Record, id) {
            return Err(bad(f, &format!("cannot link '{id}': not a record id.")));
        }
        if seen.insert(id) {
            if ids.len() == MAX_LINKS_PER_CELL {
                return Err(bad(
                    f,
                    &format!("links at most {MAX_LINKS_PER_CELL} records in one cell."),
                ));
            }
            ids.push(id.clone());
        }
    }
    if ids.len() > 1 && f.options.get("allow_multiple") == Some(&Value::Bool(false)) {
        return Err(bad(f, "links to a single record; send at most one."));
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::duration_seconds;

    #[test]
    fn durations() {
        assert_eq!(duration_seconds("1:30", "h:mm"), Some(5400.0));
        assert_eq!(duration_seconds("1:30", "mm:ss"), Some(90.0));
        assert_eq!(duration_seconds("1:02:03", "h:mm"), Some(3723.0));
        assert_eq!(duration_seconds("90", "h:mm"), Some(90.0));
        assert_eq!(duration_seconds("-1", "h:mm"), None);
        assert_eq!(duration_seconds("1:-3", "h:mm"), None);
        assert_eq!(duration_seconds("abc", "h:mm"), None);
    }
}
