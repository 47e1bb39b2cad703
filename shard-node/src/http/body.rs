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

/// Parses raw bytes into a JSON object. A NUL character anywhere in it (a
/// string or a key) is refused here, naming where: PostgreSQL `text` and
/// `jsonb` cannot hold one, so it could only fail later, as a 500.
pub fn parse_object(bytes: &[u8]) -> ApiResult<Map<String, Value>> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|_| ApiError::bad_request("Request body must be valid JSON."))?;
    match value {
        Value::Object(map) => {
            refuse_nul_in(&map)?;
            Ok(map)
        }
        _ => Err(ApiError::bad_request("Request body must be a JSON object.")),
    }
}

/// The message of a NUL character found at `path` (a JSON path such as
/// `records[0].fields.Title`, or a parameter name).
pub fn nul_refused(path: &str) -> ApiError {
    ApiError::bad_request(format!(
        "{path} must not contain the NUL character (\\u0000): names and text cannot hold it."
    ))
}

/// 400 [`nul_refused`] for the first string or key holding a NUL.
pub fn refuse_nul_in(map: &Map<String, Value>) -> ApiResult<()> {
    fn walk(v: &Value, path: &mut String) -> Result<(), String> {
        match v {
            Value::String(s) if s.contains('\0') => Err(path.clone()),
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    walk(item, path)?;
                    path.truncate(len);
                }
                Ok(())
            }
            Value::Object(map) => {
                for (k, item) in map {
                    let len = path.len();
                    if !path.is_empty() {
                        path.push('.');
                    }
                    if k.contains('\0') {
                        path.push_str(&k.replace('\0', "\\u0000"));
                        return Err(path.clone());
                    }
                    path.push_str(k);
                    walk(item, path)?;
                    path.truncate(len);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
    let mut path = String::new();
    for (k, v) in map {
        if k.contains('\0') {
            return Err(nul_refused(&format!(
                "The key {}",
                k.replace('\0', "\\u0000")
            )));
        }
        path.clear();
        path.push_str(k);
        walk(v, &mut path).map_err(|p| nul_refused(&p))?;
    }
    Ok(())
}

/// The 400 of a body over the limit (also used by the principal check).
pub fn too_large() -> ApiError {
    ApiError::bad_request(format!(
        "Request body is larger than the {BODY_LIMIT_TEXT} limit."
    ))
}

/// A request body read whole, at most [`BODY_LIMIT_BYTES`]: the one way a
/// handler takes a body that may not be JSON (axum's `Bytes` would apply
/// its own 2 MB limit and answer a plain-text 413).
#[derive(Debug)]
pub struct RawBody(pub axum::body::Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, _state: &S) -> ApiResult<Self> {
        read_bounded(request).await.map(RawBody)
    }
}

impl<S: Send + Sync> FromRequest<S> for JsonObject {
    type Rejection = ApiError;

    async fn from_request(request: Request, _state: &S) -> ApiResult<Self> {
        let bytes = read_bounded(request).await?;
        parse_object(&bytes).map(JsonObject)
    }
}

/// How much of a body over the limit is read (and dropped) before the 400
/// is answered: a peer that is still writing (the router streams bodies)
/// only reads a reply once its write is done, so answering at once would
/// close the connection under it and the client would see the router's 500
/// instead of this 400. Past this, the node answers and closes.
const DRAIN_LIMIT_BYTES: usize = 4 * BODY_LIMIT_BYTES;

/// The body, refused (400 naming the limit) past [`BODY_LIMIT_BYTES`],
/// whether declared or streamed; a body over the limit is drained (up to
/// [`DRAIN_LIMIT_BYTES`]) before the refusal, never kept.
async fn read_bounded(request: Request) -> ApiResult<axum::body::Bytes> {
    use http_body_util::BodyExt;
    let declared = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > DRAIN_LIMIT_BYTES as u64) {
        return Err(too_large());
    }
    let mut over = declared.is_some_and(|n| n > BODY_LIMIT_BYTES as u64);
    let mut kept: Vec<u8> = Vec::new();
    let mut seen = 0usize;
    let mut body = request.into_body();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| ApiError::bad_request("Request body could not be read."))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        seen += data.len();
        if seen > DRAIN_LIMIT_BYTES {
            return Err(too_large());
        }
        if !over && kept.len() + data.len() > BODY_LIMIT_BYTES {
            over = true;
            kept = Vec::new();
        }
        if !over {
            kept.extend_from_slice(&data);
        }
    }
    if over {
        return Err(too_large());
    }
    Ok(axum::body::Bytes::from(kept))
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
    fn nul_anywhere_in_a_body_is_refused_naming_where() {
        assert_eq!(
            msg(parse_object(br#"{"name":"a\u0000b"}"#).unwrap_err()),
            "name must not contain the NUL character (\\u0000): names and text cannot hold it."
        );
        let m = msg(parse_object(
            br#"{"records":[{"fields":{"A":"x"}},{"fields":{"Title":["ok","\u0000"]}}]}"#,
        )
        .unwrap_err());
        assert!(m.starts_with("records[1].fields.Title[1] must not"), "{m}");
        let m = msg(parse_object(br#"{"options":{"k\u0000":1}}"#).unwrap_err());
        assert!(m.starts_with("options.k\\u0000 must not"), "{m}");
        assert!(parse_object(br#"{"name":"a\\u0000 written out is fine"}"#).is_ok());
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
