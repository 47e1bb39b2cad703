//! The run's two JSON parts, `target` and `plan` (part B "Import"), parsed
//! into types. Shape only: whether a field or table exists, and whether
//! a column's cells fit, is decided in [`crate::import::columns`].
//!
//! Every refusal is a 400 naming the part and the key (`plan[2].action.kind
//! ...`). Unknown keys are refused, so a misspelt `targetFieldID` is not
//! silently read as "column not imported".

use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};
use crate::http::body::json_kind;
use crate::schema::{Costume, Family};

/// Where the rows go.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A table created by the run, named `name` (stored untrimmed, as a
    /// table create does).
    NewTable {
        name: String,
    },
    ExistingTable {
        table_id: String,
    },
}

/// What one column of the file becomes.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Skip,
    Map {
        target_field_id: String,
    },
    Create {
        /// Trimmed, not blank.
        name: String,
        costume: Costume,
        options: Map<String, Value>,
    },
}

/// One plan entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub column_index: usize,
    /// When sent, must equal the file's header of that column (trimmed).
    pub source_header: Option<String>,
    pub action: Action,
}

/// The 14 costumes a column can be imported as (part B).
pub const IMPORTABLE: [Costume; 14] = [
    Costume::SingleLineText,
    Costume::LongText,
    Costume::Email,
    Costume::Phone,
    Costume::Url,
    Costume::Number,
    Costume::Currency,
    Costume::Percent,
    Costume::Rating,
    Costume::Duration,
    Costume::Date,
    Costume::Checkbox,
    Costume::SingleSelect,
    Costume::MultiSelect,
];

pub fn importable(costume: Costume) -> bool {
    IMPORTABLE.contains(&costume)
}

/// The refusal of a costume that cannot take imported values, naming it.
pub fn not_importable(what: &str, costume: Costume) -> ApiError {
    let why = match costume.family() {
        Family::Link => "a link",
        Family::Attachment => "an attachment field",
        Family::Formula => "a formula",
        Family::Lookup => "a lookup",
        Family::Rollup => "a rollup",
        Family::Button => "a button",
        Family::Scalar | Family::Select => "not one of the importable types",
    };
    let names: Vec<&str> = IMPORTABLE.iter().map(|c| c.as_str()).collect();
    ApiError::bad_request(format!(
        "{what}: a column cannot be imported as '{}' ({why}). Importable types: {}.",
        costume.as_str(),
        names.join(", ")
    ))
}

fn parse_json(part: &str, text: &str) -> ApiResult<Value> {
    serde_json::from_str(text)
        .map_err(|e| ApiError::bad_request(format!("The {part} part is not valid JSON: {e}.")))
}

fn only_keys(obj: &Map<String, Value>, at: &str, allowed: &[&str]) -> ApiResult<()> {
    match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => Err(ApiError::bad_request(format!(
            "{at} has an unknown key '{k}'; its keys are {}.",
            allowed.join(", ")
        ))),
    }
}

fn string<'a>(obj: &'a Map<String, Value>, at: &str, key: &str) -> ApiResult<&'a str> {
    match obj.get(key) {
        Some(Value::String(s)) => Ok(s),
        None | Some(Value::Null) => Err(ApiError::bad_request(format!("{at}.{key} is required."))),
        Some(other) => Err(ApiError::bad_request(format!(
            "{at}.{key} must be a string, not {}.",
            json_kind(other)
        ))),
    }
}

fn object<'a>(v: &'a Value, at: &str) -> ApiResult<&'a Map<String, Value>> {
    v.as_object().ok_or_else(|| {
        ApiError::bad_request(format!("{at} must be an object, not {}.", json_kind(v)))
    })
}

/// The `target` part.
pub fn parse_target(text: &str) -> ApiResult<Target> {
    let v = parse_json("target", text)?;
    let obj = object(&v, "target")?;
    match string(obj, "target", "mode")? {
        "new_table" => {
            only_keys(obj, "target", &["mode", "name"])?;
            let name = string(obj, "target", "name")?;
            if name.trim().is_empty() {
                return Err(ApiError::bad_request("target.name must not be blank."));
            }
            Ok(Target::NewTable {
                name: name.to_owned(),
            })
        }
        "existing_table" => {
            only_keys(obj, "target", &["mode", "tableId"])?;
            Ok(Target::ExistingTable {
                table_id: string(obj, "target", "tableId")?.to_owned(),
            })
        }
        other => Err(ApiError::bad_request(format!(
            "target.mode must be 'new_table' or 'existing_table', not '{other}'."
        ))),
    }
}

/// The `plan` part: a list of entries, each column at most once.
pub fn parse_plan(text: &str) -> ApiResult<Vec<Entry>> {
    let v = parse_json("plan", text)?;
    let Value::Array(items) = v else {
        return Err(ApiError::bad_request(format!(
            "plan must be a list of {{columnIndex, sourceHeader, action}}, not {}.",
            json_kind(&v)
        )));
    };
    let mut entries: Vec<Entry> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("plan[{i}]");
        let entry = parse_entry(item, &at)?;
        if let Some(j) = entries
            .iter()
            .position(|e| e.column_index == entry.column_index)
        {
            return Err(ApiError::bad_request(format!(
                "{at} names column {} again (plan[{j}] already does); each column appears at most once.",
                entry.column_index
            )));
        }
        entries.push(entry);
    }
    Ok(entries)
}

fn parse_entry(item: &Value, at: &str) -> ApiResult<Entry> {
    let obj = object(item, at)?;
    only_keys(obj, at, &["columnIndex", "sourceHeader", "action"])?;
    let column_index = match obj.get("columnIndex") {
        Some(Value::Number(n)) => n.as_u64().and_then(|n| usize::try_from(n).ok()),
        None | Some(Value::Null) => {
            return Err(ApiError::bad_request(format!(
                "{at}.columnIndex is required."
            )))
        }
        Some(_) => None,
    }
    .ok_or_else(|| {
        ApiError::bad_request(format!(
            "{at}.columnIndex must be a whole number from 0 (the first column)."
        ))
    })?;
    let source_header = match obj.get("sourceHeader") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "{at}.sourceHeader must be a string, not {}.",
                json_kind(other)
            )))
        }
    };
    let action_at = format!("{at}.action");
    let action = match obj.get("action") {
        None | Some(Value::Null) => {
            return Err(ApiError::bad_request(format!("{action_at} is required.")))
        }
        Some(v) => parse_action(object(v, &action_at)?, &action_at)?,
    };
    Ok(Entry {
        column_index,
        source_header,
        action,
    })
}

fn parse_action(obj: &Map<String, Value>, at: &str) -> ApiResult<Action> {
    match string(obj, at, "kind")? {
        "skip" => {
            only_keys(obj, at, &["kind"])?;
            Ok(Action::Skip)
        }
        "map" => {
            only_keys(obj, at, &["kind", "targetFieldId"])?;
            Ok(Action::Map {
                target_field_id: string(obj, at, "targetFieldId")?.to_owned(),
            })
        }
        "create" => {
            only_keys(obj, at, &["kind", "name", "costume", "options"])?;
            let name = string(obj, at, "name")?.trim();
            if name.is_empty() {
                return Err(ApiError::bad_request(format!(
                    "{at}.name must not be blank."
                )));
            }
            let costume_name = string(obj, at, "costume")?;
            if matches!(costume_name, "formula" | "lookup" | "rollup") {
                return Err(ApiError::bad_request(format!(
                    "{at}: a column cannot be imported as '{costume_name}' (computed fields take no values)."
                )));
            }
            let costume = Costume::parse(costume_name).ok_or_else(|| {
                let names: Vec<&str> = IMPORTABLE.iter().map(|c| c.as_str()).collect();
                ApiError::bad_request(format!(
                    "{at}.costume '{costume_name}' is not a field type. Importable types: {}.",
                    names.join(", ")
                ))
            })?;
            if !importable(costume) {
                return Err(not_importable(at, costume));
            }
            let options = match obj.get("options") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(o)) => o.clone(),
                Some(other) => {
                    return Err(ApiError::bad_request(format!(
                        "{at}.options must be an object, not {}.",
                        json_kind(other)
                    )))
                }
            };
            Ok(Action::Create {
                name: name.to_owned(),
                costume,
                options,
            })
        }
        other => Err(ApiError::bad_request(format!(
            "{at}.kind must be 'skip', 'map' or 'create', not '{other}'."
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(e: ApiError) -> String {
        match e {
            ApiError::BadRequest(m) => m,
            other => panic!("not a 400: {other:?}"),
        }
    }

    #[test]
    fn targets() {
        assert_eq!(
            parse_target(r#"{"mode":"new_table","name":" People "}"#).unwrap(),
            Target::NewTable {
                name: " People ".into()
            }
        );
        assert_eq!(
            parse_target(r#"{"mode":"existing_table","tableId":"tbl_x"}"#).unwrap(),
            Target::ExistingTable {
                table_id: "tbl_x".into()
            }
        );
        let m = |t: &str| message(parse_target(t).unwrap_err());
        assert!(m("nope").contains("target part is not valid JSON"));
        assert!(m("[]").contains("target must be an object, not an array"));
        assert!(m(r#"{"mode":"other"}"#).contains("'new_table' or 'existing_table'"));
        assert!(m(r#"{"mode":"new_table"}"#).contains("target.name is required"));
        assert!(m(r#"{"mode":"new_table","name":"  "}"#).contains("must not be blank"));
        assert!(m(r#"{"mode":"new_table","name":3}"#).contains("target.name must be a string"));
        assert!(m(r#"{"mode":"existing_table","tableID":"t"}"#).contains("unknown key 'tableID'"));
        assert!(m(r#"{"mode":"existing_table"}"#).contains("target.tableId is required"));
    }

    #[test]
    fn plan_entries() {
        let plan = parse_plan(
            r#"[
              {"columnIndex":0,"sourceHeader":"Name","action":{"kind":"create","name":" Name ","costume":"single_line_text"}},
              {"columnIndex":2,"action":{"kind":"map","targetFieldId":"fld_x"}},
              {"columnIndex":1,"sourceHeader":"Skip me","action":{"kind":"skip"}},
              {"columnIndex":3,"action":{"kind":"create","name":"S","costume":"single_select","options":{"choices":[{"name":"A"}]}}}
            ]"#,
        )
        .unwrap();
        assert_eq!(plan.len(), 4);
        assert_eq!(plan[0].source_header.as_deref(), Some("Name"));
        assert!(
            matches!(&plan[0].action, Action::Create { name, costume: Costume::SingleLineText, .. } if name == "Name")
        );
        assert_eq!(
            plan[1].action,
            Action::Map {
                target_field_id: "fld_x".into()
            }
        );
        assert_eq!(plan[2].action, Action::Skip);
        assert!(
            matches!(&plan[3].action, Action::Create { options, .. } if options["choices"][0]["name"] == "A")
        );
        assert_eq!(parse_plan("[]").unwrap(), Vec::new());
    }

    #[test]
    fn plan_refusals_name_the_key() {
        let m = |t: &str| message(parse_plan(t).unwrap_err());
        assert!(m("{}").contains("plan must be a list"));
        assert!(m("[1]").contains("plan[0] must be an object, not a number"));
        assert!(m(r#"[{"action":{"kind":"skip"}}]"#).contains("plan[0].columnIndex is required"));
        assert!(m(r#"[{"columnIndex":-1,"action":{"kind":"skip"}}]"#).contains("whole number"));
        assert!(m(r#"[{"columnIndex":"0","action":{"kind":"skip"}}]"#).contains("whole number"));
        assert!(m(r#"[{"columnIndex":0}]"#).contains("plan[0].action is required"));
        assert!(
            m(r#"[{"columnIndex":0,"action":{"kind":"skip"},"extra":1}]"#)
                .contains("plan[0] has an unknown key 'extra'")
        );
        assert!(
            m(r#"[{"columnIndex":0,"sourceHeader":5,"action":{"kind":"skip"}}]"#)
                .contains("plan[0].sourceHeader must be a string, not a number")
        );
        assert!(m(r#"[{"columnIndex":0,"action":{"kind":"drop"}}]"#)
            .contains("plan[0].action.kind must be 'skip', 'map' or 'create', not 'drop'"));
        assert!(m(r#"[{"columnIndex":0,"action":{"kind":"map"}}]"#)
            .contains("plan[0].action.targetFieldId is required"));
        assert!(
            m(r#"[{"columnIndex":0,"action":{"kind":"map","targetFieldID":"f"}}]"#)
                .contains("unknown key 'targetFieldID'")
        );
        assert!(m(
            r#"[{"columnIndex":0,"action":{"kind":"create","name":"","costume":"number"}}]"#
        )
        .contains("plan[0].action.name must not be blank"));
        assert!(
            m(r#"[{"columnIndex":0,"action":{"kind":"create","name":"n","costume":"blob"}}]"#)
                .contains("'blob' is not a field type")
        );
        assert!(m(r#"[{"columnIndex":0,"action":{"kind":"create","name":"n","costume":"number","options":[]}}]"#)
            .contains("plan[0].action.options must be an object"));
        assert!(m(r#"[{"columnIndex":0,"action":{"kind":"skip"}},{"columnIndex":0,"action":{"kind":"skip"}}]"#)
            .contains("plan[1] names column 0 again"));
    }

    #[test]
    fn computed_and_linked_costumes_are_refused_as_create_targets() {
        for costume in [
            "link",
            "attachment",
            "formula_number",
            "lookup_text",
            "rollup_number",
            "button",
            "member",
            "formula",
            "lookup",
        ] {
            let m = message(
                parse_plan(&format!(
                    r#"[{{"columnIndex":0,"action":{{"kind":"create","name":"n","costume":"{costume}"}}}}]"#
                ))
                .unwrap_err(),
            );
            assert!(
                m.contains(&format!("cannot be imported as '{costume}'")),
                "{m}"
            );
        }
        assert_eq!(IMPORTABLE.len(), 14);
    }
}
