//! The one way handlers read a body: raw bytes (bounded) -> JSON object,
//! with messages that say what is wrong. Axum's `Json` rejections are not
//! used: their statuses and wording differ from part C.

use axum::extract::{FromRequest, Request};
use serde_json::{Map, Value};

use crate::config::{BODY_LIMIT_BYTES, BODY_LIMIT_TEXT};
use crate::error::{ApiError, ApiResult};

/// A request body that parsed as a JSON object.
#[derive(Debug)]
pub struct JsonObject(pub Map<String, Value>);

/// Parses raw bytes into a JSON object.
pub fn parse_object(bytes: &[u8]) -> ApiResult<Map<String, Value>> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|_| ApiError::bad_request("Request body must be valid JSON."))?;
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(ApiError::bad_request("Request body must be a JSON object.")),
    }
}

/// The 400 of a body over the limit (also used by the principal check).
pub(crate) fn too_large() -> ApiError {
    ApiError::bad_request(format!(
        "Request body is larger than the {BODY_LIMIT_TEXT} limit."
    ))
}

impl<S: Send + Sync> FromRequest<S> for JsonObject {
    type Rejection = ApiError;

    async fn from_request(request: Request, _state: &S) -> ApiResult<Self> {
        let declared = request
            .headers()
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > BODY_LIMIT_BYTES as u64) {
            return Err(too_large());
        }
        let bytes = axum::body::to_bytes(request.into_body(), BODY_LIMIT_BYTES)
            .await
            .map_err(|e| {
                let over =
                    std::iter::successors(Some(&e as &(dyn std::error::Error + 'static)), |err| {
                        err.source()
                    })
                    .any(|err| err.is::<http_body_util::LengthLimitError>());
                if over {
                    too_large()
                } else {
                    ApiError::bad_request("Request body could not be read.")
                }
            })?;
        parse_object(&bytes).map(JsonObject)
    }
}

/// A required string that is non-empty after trimming; returned untrimmed.
pub fn required_name<'a>(body: &'a Map<String, Value>, key: &str) -> ApiResult<&'a str> {
    match body.get(key) {
        None | Some(Value::Null) => Err(ApiError::bad_request(format!("{key} is required."))),
        Some(Value::String(s)) if s.trim().is_empty() => {
            Err(ApiError::bad_request(format!("{key} must not be blank.")))
        }
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(ApiError::bad_request(format!(
            "{key} must be a string, not {}.",
            json_kind(other)
        ))),
    }
}

/// How a JSON value's type is named in messages.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(e: ApiError) -> String {
        match e {
            ApiError::BadRequest(m) => m,
            other => panic!("expected 400, got {other:?}"),
        }
    }

    #[test]
    fn body_must_be_a_json_object() {
        assert_eq!(
            msg(parse_object(b"{nope").unwrap_err()),
            "Request body must be valid JSON."
        );
        assert_eq!(
            msg(parse_object(b"").unwrap_err()),
            "Request body must be valid JSON."
        );
        assert_eq!(
            msg(parse_object(b"[1]").unwrap_err()),
            "Request body must be a JSON object."
        );
        assert_eq!(
            msg(parse_object(b"null").unwrap_err()),
            "Request body must be a JSON object."
        );
        assert!(parse_object(br#"{"a":1}"#).is_ok());
    }

    #[test]
    fn names_are_checked_trimmed_and_kept_untrimmed() {
        let body = |v: Value| v.as_object().cloned().unwrap();
        assert_eq!(
            required_name(&body(json!({"name": "  x "})), "name").unwrap(),
            "  x "
        );
        assert_eq!(
            msg(required_name(&body(json!({})), "name").unwrap_err()),
            "name is required."
        );
        assert_eq!(
            msg(required_name(&body(json!({"name": null})), "name").unwrap_err()),
            "name is required."
        );
        assert_eq!(
            msg(required_name(&body(json!({"name": 5})), "name").unwrap_err()),
            "name must be a string, not a number."
        );
        assert_eq!(
            msg(required_name(&body(json!({"name": " \t"})), "name").unwrap_err()),
            "name must not be blank."
        );
    }
}
