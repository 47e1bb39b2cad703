//! JSON -> AST. Checks structure, limits, field references, operators and
//! value shapes; every refusal names the path of the offending member.

use serde_json::{Map, Value};

use std::collections::{HashMap, HashSet};

use super::{
    ChoiceRef, Condition, Filter, Group, Join, Node, Operand, MAX_LEVELS, MAX_LIST_VALUES,
    MAX_NODES,
};
use crate::dates::{self, DateOperand};
use crate::error::Error;
use crate::schema::{Choice, Env, Op, Schema, Storage};

/// Which member of a condition names the field: `field` in the records API,
/// `fieldId` in a view's stored `config.filters`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldKey {
    #[default]
    Field,
    FieldId,
}

impl FieldKey {
    fn name(self) -> &'static str {
        match self {
            FieldKey::Field => "field",
            FieldKey::FieldId => "fieldId",
        }
    }
}

const ROOT: &str = "filter";

/// Parse a filter given as a JSON object.
///
/// `env` supplies the timezone for full timestamps written without an
/// offset (read on the database's wall clock).
pub fn parse(value: &Value, schema: &Schema, env: &Env, key: FieldKey) -> Result<Filter, Error> {
    let Value::Object(obj) = value else {
        return Err(Error::new(ROOT, "A filter must be a JSON object."));
    };
    let mut p = Parser {
        schema,
        env,
        key,
        nodes: 1,
    };
    let root = p.group(obj, ROOT, 1)?;
    Ok(Filter { root })
}

/// Parse a filter from request input: the URL-decoded query parameter, or
/// the POST body's member (an object, or a JSON string holding one).
pub fn parse_value(value: &Value, schema: &Schema, env: &Env) -> Result<Filter, Error> {
    match value {
        Value::String(text) => {
            let parsed: Value = serde_json::from_str(text)
                .map_err(|_| Error::new(ROOT, "The filter is not valid JSON."))?;
            parse(&parsed, schema, env, FieldKey::Field)
        }
        other => parse(other, schema, env, FieldKey::Field),
    }
}

struct Parser<'a> {
    schema: &'a Schema,
    env: &'a Env,
    key: FieldKey,
    nodes: usize,
}

impl Parser<'_> {
    fn group(
        &mut self,
        obj: &Map<String, Value>,
        path: &str,
        level: usize,
    ) -> Result<Group, Error> {
        let join = match obj.get("join") {
            None | Some(Value::Null) => Join::And,
            Some(Value::String(s)) if s == "and" => Join::And,
            Some(Value::String(s)) if s == "or" => Join::Or,
            Some(Value::String(s)) => {
                return Err(Error::new(
                    format!("{path}.join"),
                    format!("Unknown join '{s}'; use 'and' or 'or'."),
                ))
            }
            Some(_) => {
                return Err(Error::new(
                    format!("{path}.join"),
                    "'join' must be 'and' or 'or'.",
                ))
            }
        };
        let items: &[Value] = match obj.get("conditions") {
            None | Some(Value::Null) => &[],
            Some(Value::Array(items)) => items,
            Some(_) => {
                return Err(Error::new(
                    format!("{path}.conditions"),
                    "'conditions' must be a list.",
                ))
            }
        };
        let mut nodes = Vec::with_capacity(items.len().min(MAX_NODES));
        for (i, item) in items.iter().enumerate() {
            let item_path = format!("{path}.conditions[{i}]");
            self.nodes += 1;
            if self.nodes > MAX_NODES {
                return Err(Error::new(
                    item_path,
                    format!("A filter may have at most {MAX_NODES} nodes (groups and conditions)."),
                ));
            }
            let Value::Object(member) = item else {
                return Err(Error::new(
                    item_path,
                    "Each member of 'conditions' must be an object: a condition or a group.",
                ));
            };
            let is_group = member.contains_key("conditions") || member.contains_key("join");
            let is_condition = member.contains_key(self.key.name()) || member.contains_key("op");
            if is_group && is_condition {
                return Err(Error::new(
                    item_path,
                    format!(
                        "A member of 'conditions' is either a condition ({}, op, value) or a group (join, conditions), not both.",
                        self.key.name()
                    ),
                ));
            }
            if is_group {
                if level + 1 > MAX_LEVELS {
                    return Err(Error::new(
                        item_path,
                        format!("Filters nest at most {MAX_LEVELS} levels deep."),
                    ));
                }
                nodes.push(Node::Group(self.group(member, &item_path, level + 1)?));
            } else {
                nodes.push(Node::Condition(self.condition(member, &item_path)?));
            }
        }
        Ok(Group { join, nodes })
    }

    fn condition(&self, obj: &Map<String, Value>, path: &str) -> Result<Condition, Error> {
        let key = self.key.name();
        let field_path = format!("{path}.{key}");
        let reference = match obj.get(key) {
            Some(Value::String(s)) => s,
            None | Some(Value::Null) => {
                return Err(Error::new(
                    field_path,
                    format!("A condition needs '{key}'."),
                ))
            }
            Some(_) => {
                return Err(Error::new(
                    field_path,
                    format!("'{key}' must be a field id or name."),
                ))
            }
        };
        let field_index = self.schema.resolve(reference, &field_path)?;
        let field = &self.schema.fields[field_index];

        let op_path = format!("{path}.op");
        let op_name = match obj.get("op") {
            Some(Value::String(s)) => s,
            None | Some(Value::Null) => return Err(Error::new(op_path, "A condition needs 'op'.")),
            Some(_) => return Err(Error::new(op_path, "'op' must be an operator name.")),
        };
        let Some(op) = Op::from_name(op_name) else {
            return Err(Error::new(
                op_path,
                format!("Unknown operator '{op_name}'."),
            ));
        };
        let allowed = field.operators();
        if allowed.is_empty() {
            return Err(Error::new(
                op_path,
                format!(
                    "Field '{}' ({}) cannot be filtered.",
                    field.name, field.costume
                ),
            ));
        }
        if !allowed.contains(&op) {
            let list: Vec<&str> = allowed.iter().map(|o| o.name()).collect();
            return Err(Error::new(
                op_path,
                format!(
                    "Operator '{op_name}' does not apply to field '{}' ({}); use one of: {}.",
                    field.name,
                    field.costume,
                    list.join(", ")
                ),
            ));
        }

        let value_path = format!("{path}.value");
        let value = obj.get("value").filter(|v| !v.is_null());
        let operand = if matches!(op, Op::Empty | Op::NotEmpty) {
            if value.is_some() {
                return Err(Error::new(
                    value_path,
                    format!("Operator '{op_name}' takes no value."),
                ));
            }
            Operand::None
        } else {
            let Some(value) = value else {
                return Err(Error::new(
                    value_path,
                    format!("Operator '{op_name}' needs a value."),
                ));
            };
            self.operand(&field.storage, op, value, &value_path)?
        };
        Ok(Condition {
            field: field_index,
            op,
            operand,
        })
    }

    fn operand(&self, storage: &Storage, op: Op, v: &Value, path: &str) -> Result<Operand, Error> {
        let err = |msg: &str| Error::new(path, msg);
        match storage {
            Storage::Text | Storage::LongText => Ok(Operand::Text(text(v, path)?)),
            Storage::Number => match v {
                Value::Number(n) if n.as_f64().is_some_and(f64::is_finite) => {
                    Ok(Operand::Number(n.to_string()))
                }
                Value::String(_) => Err(err(
                    "Expected a number; a number written as a string is not accepted.",
                )),
                _ => Err(err("Expected a finite number.")),
            },
            Storage::Checkbox => match v {
                Value::Bool(b) => Ok(Operand::Bool(*b)),
                _ => Err(err("Expected true or false.")),
            },
            Storage::Date { include_time } => self.date(v, *include_time, path),
            Storage::SingleSelect { choices } => match op {
                Op::AnyOf | Op::NoneOf => Ok(Operand::Choices(choice_list(v, choices, path)?)),
                _ => match v {
                    Value::String(s) => Ok(Operand::Choice(resolve_choice(s, choices))),
                    _ => Err(err("Expected a choice id or name.")),
                },
            },
            Storage::MultiSelect { choices } => {
                Ok(Operand::Choices(choice_list(v, choices, path)?))
            }
            Storage::Link(_) => Ok(Operand::Records(record_ids(v, path)?)),
            Storage::Lookup { target, .. } => self.operand(target, op, v, path),
            Storage::Rollup { result, .. } => self.operand(result, op, v, path),
            // No operator takes a value on these (refused before).
            Storage::Attachment | Storage::Button => Err(err("This field takes no value.")),
        }
    }

    fn date(&self, v: &Value, include_time: bool, path: &str) -> Result<Operand, Error> {
        let shape = if include_time {
            "Expected a date (YYYY-MM-DD), a full timestamp (YYYY-MM-DDTHH:MM[:SS][Z|±HH:MM]) or a relative date {relative, offset, unit}."
        } else {
            "Expected a date (YYYY-MM-DD) or a relative date {relative, offset, unit}."
        };
        match v {
            Value::String(s) => {
                if let Some(d) = dates::parse_day(s) {
                    return Ok(Operand::Date(DateOperand::Day(d)));
                }
                if include_time {
                    if let Some(t) = dates::parse_instant(s, self.env.timezone) {
                        return Ok(Operand::Date(DateOperand::Instant(t)));
                    }
                }
                Err(Error::new(path, shape))
            }
            Value::Object(obj) => dates::parse_relative(obj)
                .map(|r| Operand::Date(DateOperand::Relative(r)))
                .map_err(|m| Error::new(path, m)),
            _ => Err(Error::new(path, shape)),
        }
    }
}

fn text(v: &Value, path: &str) -> Result<String, Error> {
    match v {
        Value::String(s) if s.contains('\0') => {
            Err(Error::new(path, "Text may not contain a NUL character."))
        }
        Value::String(s) => Ok(s.clone()),
        _ => Err(Error::new(path, "Expected a string.")),
    }
}

/// Choice id first, then exact name; anything else is the sentinel.
fn resolve_choice(s: &str, choices: &[Choice]) -> ChoiceRef {
    choices
        .iter()
        .find(|c| c.id == s)
        .or_else(|| choices.iter().find(|c| c.name == s))
        .map(|c| ChoiceRef::Id(c.id.clone()))
        .unwrap_or(ChoiceRef::Unresolved)
}

/// A list value's items, at most [`MAX_LIST_VALUES`].
fn list_items<'a>(v: &'a Value, path: &str, expected: &str) -> Result<&'a [Value], Error> {
    let Value::Array(items) = v else {
        return Err(Error::new(path, expected));
    };
    if items.len() > MAX_LIST_VALUES {
        return Err(Error::new(
            path,
            format!(
                "A list may hold at most {MAX_LIST_VALUES} values; this one has {}.",
                items.len()
            ),
        ));
    }
    Ok(items)
}

/// A list of choice ids or names, resolved (id first, then exact name) and
/// taken once each, in order: one hash lookup per item.
fn choice_list(v: &Value, choices: &[Choice], path: &str) -> Result<Vec<ChoiceRef>, Error> {
    let items = list_items(v, path, "Expected a list of choice ids or names.")?;
    let mut by_id: HashMap<&str, &str> = HashMap::with_capacity(choices.len());
    let mut by_name: HashMap<&str, &str> = HashMap::with_capacity(choices.len());
    for c in choices {
        by_id.entry(c.id.as_str()).or_insert(c.id.as_str());
        by_name.entry(c.name.as_str()).or_insert(c.id.as_str());
    }
    let mut seen: HashSet<ChoiceRef> = HashSet::with_capacity(items.len());
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::String(s) = item else {
            return Err(Error::new(
                format!("{path}[{i}]"),
                "Expected a choice id or name.",
            ));
        };
        let c = by_id
            .get(s.as_str())
            .or_else(|| by_name.get(s.as_str()))
            .map(|id| ChoiceRef::Id((*id).to_owned()))
            .unwrap_or(ChoiceRef::Unresolved);
        if seen.insert(c.clone()) {
            out.push(c);
        }
    }
    Ok(out)
}

/// `rec_` + 12 of `[0-9A-Za-z]`.
pub(crate) fn is_record_id(s: &str) -> bool {
    s.len() == 16
        && s.starts_with("rec_")
        && s.as_bytes()[4..].iter().all(u8::is_ascii_alphanumeric)
}

fn record_ids(v: &Value, path: &str) -> Result<Vec<String>, Error> {
    let items = list_items(v, path, "Expected a list of record ids (rec_...).")?;
    let mut seen: HashSet<&str> = HashSet::with_capacity(items.len());
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match item {
            Value::String(s) if is_record_id(s) => {
                if seen.insert(s) {
                    out.push(s.clone());
                }
            }
            _ => {
                return Err(Error::new(
                    format!("{path}[{i}]"),
                    "Expected a record id (rec_ followed by 12 letters or digits).",
                ))
            }
        }
    }
    Ok(out)
}
