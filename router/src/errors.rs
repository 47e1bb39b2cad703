//! The router's one error type and its mapping to the part C envelope, plus
//! small response builders shared by every module.

use bytes::Bytes;
use cluster_protocol::error::{ErrorBody, ErrorCode};
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Empty, Full};

use crate::gate::limiter::retry_after_secs;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type Body = UnsyncBoxBody<Bytes, BoxError>;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

pub fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed_unsync()
}

/// A JSON response with the given status.
pub fn json(status: StatusCode, bytes: impl Into<Bytes>) -> Response<Body> {
    let mut resp = Response::new(full(bytes));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// Everything the router itself can answer with.
#[derive(Debug)]
pub enum ApiError {
    Unauthorized,
    NotFound,
    Forbidden(&'static str),
    BadRequest(String),
    RateLimited {
        retry_after_ms: u64,
    },
    /// 503 with `Retry-After`: the router is too busy for this request now.
    Unavailable {
        message: &'static str,
        retry_after_secs: u64,
    },
    /// An envelope another tier produced, passed through as is.
    Upstream {
        status: u16,
        body: ErrorBody,
    },
    /// The request body did not arrive whole in time (408; the connection
    /// is closed after the answer).
    RequestTimeout,
    /// The shard did not answer in time (504).
    GatewayTimeout,
    /// Logged where it happens; the client sees only `internal`.
    Internal,
}

/// The 503 of a request a dependency (control plane, shard) could not
/// serve right now: retryable, unlike `internal`.
pub const DEPENDENCY_DOWN_MESSAGE: &str =
    "Part of the service cannot be reached right now. Retry in about 1s.";

impl ApiError {
    /// 503 with `Retry-After: 1` for an unreachable dependency (logged by
    /// the caller).
    pub fn dependency_down() -> Self {
        ApiError::Unavailable {
            message: DEPENDENCY_DOWN_MESSAGE,
            retry_after_secs: 1,
        }
    }
}

pub const REQUEST_TIMEOUT_MESSAGE: &str =
    "The request body did not arrive in time. Send it again, at a steady pace.";
pub const GATEWAY_TIMEOUT_MESSAGE: &str =
    "The shard holding this database did not answer in time. Retry shortly.";

impl ApiError {
    pub fn into_response(self) -> Response<Body> {
        let (body, retry) = match self {
            ApiError::Unauthorized => (ErrorBody::unauthorized(), None),
            ApiError::NotFound => (ErrorBody::not_found(), None),
            ApiError::Forbidden(message) => (ErrorBody::forbidden(message), None),
            ApiError::BadRequest(message) => (ErrorBody::bad_request(message), None),
            ApiError::RateLimited { retry_after_ms } => {
                let secs = retry_after_secs(retry_after_ms);
                (ErrorBody::rate_limited(secs), Some(secs))
            }
            ApiError::Unavailable {
                message,
                retry_after_secs,
            } => (ErrorBody::unavailable(message), Some(retry_after_secs)),
            ApiError::Upstream { status, body } => {
                let code_status = body.code.status();
                let status = if status == code_status {
                    status
                } else {
                    code_status
                };
                let mut resp = json(
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                    body.to_json(),
                );
                // A retryable envelope of another tier keeps its retry hint.
                if matches!(body.code, ErrorCode::RateLimited | ErrorCode::Unavailable) {
                    resp.headers_mut()
                        .insert(header::RETRY_AFTER, HeaderValue::from(1u64));
                }
                return resp;
            }
            ApiError::RequestTimeout => {
                let body = ErrorBody::new(ErrorCode::RequestTimeout, REQUEST_TIMEOUT_MESSAGE);
                let mut resp = json(StatusCode::REQUEST_TIMEOUT, body.to_json());
                // The rest of the body is not read: the connection cannot be reused.
                resp.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
                return resp;
            }
            ApiError::GatewayTimeout => (
                ErrorBody::new(ErrorCode::GatewayTimeout, GATEWAY_TIMEOUT_MESSAGE),
                None,
            ),
            ApiError::Internal => (ErrorBody::internal(), None),
        };
        let status =
            StatusCode::from_u16(body.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut resp = json(status, body.to_json());
        if let Some(secs) = retry {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limited_carries_retry_after() {
        let r = ApiError::RateLimited {
            retry_after_ms: 1500,
        }
        .into_response();
        assert_eq!(r.status(), 429);
        assert_eq!(r.headers()[header::RETRY_AFTER], "2");
    }

    #[test]
    fn unavailable_is_503_with_retry_after() {
        let r = ApiError::Unavailable {
            message: "busy",
            retry_after_secs: 1,
        }
        .into_response();
        assert_eq!(r.status(), 503);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
    }

    #[test]
    fn timeouts_answer_their_status_and_code() {
        let r = ApiError::RequestTimeout.into_response();
        assert_eq!(r.status(), 408);
        assert_eq!(r.headers()[header::CONNECTION], "close");
        assert_eq!(ApiError::GatewayTimeout.into_response().status(), 504);
    }

    #[test]
    fn upstream_status_follows_its_code() {
        let r = ApiError::Upstream {
            status: 400,
            body: ErrorBody::bad_request("cap"),
        }
        .into_response();
        assert_eq!(r.status(), 400);
    }
}
