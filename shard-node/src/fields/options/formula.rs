//! Formula settings: `expression` (compiled by formula-lang, stored back in
//! canonical form), `display_as` (what the result may wear), presentation
//! keys, and the server-written `referenced_field_ids`.

use formula_lang::{Compiled, ResultType};
use serde_json::{json, Map, Value};

use super::{opt_str, select};
use crate::error::{ApiError, ApiResult};
use crate::schema::{Costume, TableSchema};

/// Keys that only format a formula's result; cleared when an edit changes
/// the result type.
const FORMATTING_KEYS: &[&str] = &[
    "display_as",
    "decimals",
    "separators",
    "symbol",
    "symbol_position",
    "duration_format",
    "choices",
    "date_format",
    "time_format",
];

/// The costume a formula of `result` may wear through `display_as`.
fn may_wear(result: ResultType, display_as: &str) -> bool {
    match result {
        ResultType::Number => matches!(display_as, "number" | "currency" | "percent" | "duration"),
        ResultType::Text => matches!(display_as, "single_line_text" | "single_select"),
        ResultType::Date { .. } => display_as == "date",
    }
}

/// The concrete costume of a result.
pub fn costume_of(result: ResultType) -> Costume {
    match result {
        ResultType::Number => Costume::FormulaNumber,
        ResultType::Text => Costume::FormulaText,
        ResultType::Date { .. } => Costume::FormulaDate,
    }
}

/// The required expression of a formula's options.
pub fn expression(options: &Map<String, Value>) -> ApiResult<&str> {
    match opt_str(options, "expression")? {
        Some(e) if !e.trim().is_empty() => Ok(e),
        _ => Err(ApiError::bad_request("A formula needs options.expression.")),
    }
}

/// Compiles against the table as it will be; a refusal is 400 saying
/// where and what.
pub fn compile(
    expression: &str,
    table: &TableSchema,
    this_field: Option<&str>,
) -> ApiResult<Compiled> {
    let schema = crate::schema::formula_schema_of(table);
    formula_lang::compile(expression, &schema, this_field).map_err(|e| {
        ApiError::bad_request(format!(
            "Formula error at character {}: {}",
            e.position + 1,
            e.message
        ))
    })
}

/// The options to store: `sent` merged over `base` (the stored options on
/// an update, minus formatting when the result type changed), with the
/// canonical expression, the references, and a checked `display_as`.
pub fn settle(
    base: Map<String, Value>,
    sent: Map<String, Value>,
    compiled: &Compiled,
    result_changed: bool,
) -> ApiResult<Map<String, Value>> {
    let mut out = base;
    if result_changed {
        for key in FORMATTING_KEYS {
            out.remove(*key);
        }
    }
    for (k, v) in sent {
        out.insert(k, v);
    }
    if let Some(display_as) = opt_str(&out, "display_as")? {
        if !may_wear(compiled.result, display_as) {
            return Err(ApiError::bad_request(format!(
                "A {} result cannot be displayed as '{display_as}'.",
                costume_of(compiled.result).as_str()
            )));
        }
        if display_as == "single_select" {
            let choices = select::normalize_choices(out.get("choices"))?;
            out.insert("choices".into(), Value::Array(choices));
        }
    }
    out.insert("expression".into(), json!(compiled.canonical));
    out.insert(
        "referenced_field_ids".into(),
        json!(compiled.referenced_field_ids),
    );
    Ok(out)
}
