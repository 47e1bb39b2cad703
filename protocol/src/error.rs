//! The error envelope `{error:{code, message}}` of part C, shared by every tier.

use serde::{Deserialize, Serialize};

/// Part C's 401 message, identical for every credential failure.
pub const UNAUTHORIZED_MESSAGE: &str =
    "Missing or invalid API key. Expected: Bearer <id>.<secret>.";
/// Part C's 500 message.
pub const INTERNAL_MESSAGE: &str = "Something went wrong.";

/// The known 403 messages of part C.
pub mod forbidden {
    pub const VIEWER: &str = "Viewers can't make changes.";
    pub const VIEWER_VIEWS: &str = "Viewers can't change views.";
    pub const OWNER_ONLY: &str = "Only an owner can do that.";
    pub const OWNER_DELETE_DATABASE: &str = "Only an owner can delete a database.";
    pub const OWNER_DELETE_TABLE: &str = "Only an owner can delete a table.";
    pub const SUPPORT_READ_ONLY: &str = "Support access is read-only.";
    pub const KEY_READ_ONLY: &str = "This API key is read-only.";
    /// A key narrowed to named databases asks to create one.
    pub const NARROWED_KEY_CREATE: &str =
        "This API key is limited to specific databases and can't create one.";
    /// Part C: no API key may make someone an owner (adding one, or a role change to owner).
    pub const KEY_OWNER_GRANT: &str =
        "An API key can't make someone an owner. An owner can do that in the app.";
}

/// The stable error codes of part C.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    Conflict,
    RateLimited,
    Internal,
    /// 408: the request body did not arrive within the router's time limit.
    RequestTimeout,
    /// 503: the service cannot take the request now (a shard's connections
    /// are all busy, a table is locked by a change); `Retry-After` says when
    /// to try again.
    Unavailable,
    /// 504: the shard holding the database did not answer in time.
    GatewayTimeout,
}

impl ErrorCode {
    pub const fn status(self) -> u16 {
        match self {
            ErrorCode::BadRequest => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::Conflict => 409,
            ErrorCode::RateLimited => 429,
            ErrorCode::Internal => 500,
            ErrorCode::RequestTimeout => 408,
            ErrorCode::Unavailable => 503,
            ErrorCode::GatewayTimeout => 504,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::Internal => "internal",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::GatewayTimeout => "gateway_timeout",
        }
    }
}

/// One client-visible error. Build it only with text that is safe to show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
    /// Only the 409 of `if_updated_at` (and one upsert 409) carries this.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub records: Option<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub error: ErrorBody,
}

impl ErrorBody {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            records: None,
        }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }
    pub fn not_found() -> Self {
        Self::new(ErrorCode::NotFound, "Not found.")
    }
    pub fn unauthorized() -> Self {
        Self::new(ErrorCode::Unauthorized, UNAUTHORIZED_MESSAGE)
    }
    pub fn internal() -> Self {
        Self::new(ErrorCode::Internal, INTERNAL_MESSAGE)
    }
    pub fn rate_limited(retry_after_secs: u64) -> Self {
        Self::new(
            ErrorCode::RateLimited,
            format!("Too many requests. Retry in about {retry_after_secs}s."),
        )
    }

    /// 503 (the caller sends `Retry-After` with it).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message)
    }

    pub fn status(&self) -> u16 {
        self.code.status()
    }

    /// The JSON envelope as bytes.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(&Envelope {
            error: self.clone(),
        })
        .unwrap_or_else(|_| {
            br#"{"error":{"code":"internal","message":"Something went wrong."}}"#.to_vec()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_shape() {
        let v: serde_json::Value =
            serde_json::from_slice(&ErrorBody::not_found().to_json()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"error":{"code":"not_found","message":"Not found."}})
        );
    }

    #[test]
    fn rate_limit_message_form() {
        let e = ErrorBody::rate_limited(7);
        assert_eq!(e.message, "Too many requests. Retry in about 7s.");
        assert_eq!(e.status(), 429);
    }

    #[test]
    fn timeout_and_unavailable_codes_agree_with_their_status() {
        for (code, status, text) in [
            (ErrorCode::RequestTimeout, 408, "request_timeout"),
            (ErrorCode::Unavailable, 503, "unavailable"),
            (ErrorCode::GatewayTimeout, 504, "gateway_timeout"),
        ] {
            assert_eq!(code.status(), status);
            assert_eq!(code.as_str(), text);
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, serde_json::json!(text));
        }
    }

    #[test]
    fn records_only_when_set() {
        let mut e = ErrorBody::new(ErrorCode::Conflict, "stale");
        e.records = Some(serde_json::json!([]));
        let v: serde_json::Value = serde_json::from_slice(&e.to_json()).unwrap();
        assert_eq!(v["error"]["records"], serde_json::json!([]));
    }
}
