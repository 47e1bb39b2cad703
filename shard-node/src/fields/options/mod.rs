//! Validation and normalisation of `options`, one file per costume family.
//! Every function here is pure (no SQL): it takes what the caller sent and,
//! on an update, the stored field, and returns the settings to store.

pub mod button;
pub mod formula;
pub mod link;
pub mod lookup_rollup;
pub mod scalar;
pub mod select;

use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};
use crate::http::body::json_kind;
use crate::schema::costume::KNOWN_OPTION_KEYS;

/// An unknown NEW key is 400 naming it and listing the valid keys; keys
/// already stored on the field are tolerated.
pub fn check_known_keys(
    sent: &Map<String, Value>,
    stored: Option<&Map<String, Value>>,
) -> ApiResult<()> {
    for key in sent.keys() {
        let known = KNOWN_OPTION_KEYS.contains(&key.as_str());
        let tolerated = stored.is_some_and(|s| s.contains_key(key));
        if !known && !tolerated {
            return Err(ApiError::bad_request(format!(
                "Unknown option '{key}'. Valid options: {}.",
                KNOWN_OPTION_KEYS.join(", ")
            )));
        }
    }
    Ok(())
}

/// `options` of a request body: absent or null is `{}`; anything but an
/// object is 400.
pub fn options_of(body: &Map<String, Value>) -> ApiResult<Option<Map<String, Value>>> {
    match body.get("options") {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(Map::new())),
        Some(Value::Object(m)) => Ok(Some(m.clone())),
        Some(other) => Err(ApiError::bad_request(format!(
            "options must be a JSON object, not {}.",
            json_kind(other)
        ))),
    }
}

/// An optional boolean option (null counts as absent).
pub fn opt_bool(options: &Map<String, Value>, key: &str) -> ApiResult<Option<bool>> {
    match options.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(ApiError::bad_request(format!(
            "options.{key} must be true or false, not {}.",
            json_kind(other)
        ))),
    }
}

/// An optional string option (null counts as absent).
pub fn opt_str<'a>(options: &'a Map<String, Value>, key: &str) -> ApiResult<Option<&'a str>> {
    match options.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ApiError::bad_request(format!(
            "options.{key} must be a string, not {}.",
            json_kind(other)
        ))),
    }
}

/// Keeps a frozen boolean setting: sent with another value is 400; not
/// sent keeps the stored value (an update never drops it silently).
pub fn freeze_bool(
    options: &mut Map<String, Value>,
    stored: &Map<String, Value>,
    key: &str,
    message: &str,
) -> ApiResult<()> {
    let was = stored.get(key).and_then(Value::as_bool).unwrap_or(false);
    match opt_bool(options, key)? {
        Some(now) if now != was => Err(ApiError::bad_request(message.to_owned())),
        Some(_) => Ok(()),
        None => {
            if let Some(v) = stored.get(key) {
                options.insert(key.to_owned(), v.clone());
            }
            Ok(())
        }
    }
}
