//! Ordinary stored costumes: text, number, date, checkbox, member and
//! attachment settings. Presentation keys are stored verbatim; only the
//! switches the server acts on are type-checked.

use serde_json::{Map, Value};

use super::{freeze_bool, opt_bool};
use crate::error::ApiResult;
use crate::schema::FieldRow;

/// Normalises the settings of a scalar (or select) field. On an update
/// (`stored`), `include_time` and `unique` are frozen.
pub fn normalize(
    mut options: Map<String, Value>,
    stored: Option<&FieldRow>,
) -> ApiResult<Map<String, Value>> {
    for key in ["unique", "include_time", "rich"] {
        opt_bool(&options, key)?;
    }
    if let Some(stored) = stored {
        freeze_bool(
            &mut options,
            &stored.options,
            "include_time",
            "include_time cannot be changed after the field is created.",
        )?;
        freeze_bool(
            &mut options,
            &stored.options,
            "unique",
            "unique cannot be added or removed after the field is created.",
        )?;
    }
    Ok(options)
}

/// Whether the settings ask for the unique index (only meaningful for the
/// costumes that support it).
pub fn wants_unique(options: &Map<String, Value>) -> bool {
    options.get("unique").and_then(Value::as_bool) == Some(true)
}

pub fn include_time(options: &Map<String, Value>) -> bool {
    options.get("include_time").and_then(Value::as_bool) == Some(true)
}
