//! The two routes whose bodies the router streams to the shard unread
//! (`cluster_protocol::principal::is_streamed_route`): attachment uploads
//! (100 MB per file) and imports (a 20 MB file). Everything else is read
//! whole and signed by digest (`proxy`).
//!
//! Per request: a declared `Content-Length` over the route's cap is refused
//! before anything is read; an upload is charged to its account's upload
//! limit; the principal is signed with the streamed-body marker; the body
//! goes to the shard as it arrives, counted and cut off past the cap
//! (chunked bodies too) or after [`ConnectionLimits::stream_idle_timeout`]
//! without a byte (the whole-body timeout does not apply: a 100 MB upload
//! at a steady pace may take minutes). A streamed body cannot be sent
//! twice: a move's hold is waited out before it is sent (`proxy`), and a
//! 421 answer is a 503 with `Retry-After: 1`, not a retry.
//!
//! [`ConnectionLimits::stream_idle_timeout`]: crate::config::ConnectionLimits

use cluster_protocol::control::{Placement, Role};
use cluster_protocol::principal::is_streamed_route;
use cluster_protocol::MISPLACED_STATUS;
use http::{HeaderMap, Method, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use crate::auth::Caller;
use crate::errors::{ApiError, Body};
use crate::forward::{
    client_response, declared_length, read_limited, request_headers, shard_failure,
};
use crate::state::AppState;
use crate::stream_body::{Cut, StreamedBody};
use crate::trace::{self, RequestSpan};

const MIB: u64 = 1024 * 1024;
/// Most bytes of an upload request: a 100 MB file ("100 MB", read as MiB,
/// as the shard does) plus 1 MB for the multipart framing and other parts.
pub const ATTACHMENT_CAP_BYTES: u64 = 100 * MIB + MIB;
/// Most bytes of an import request: a 20 MB file plus the rest of the form.
pub const IMPORT_CAP_BYTES: u64 = 22 * MIB;
/// A refused body declared this small is read and dropped first, so the
/// client reads the answer rather than a reset connection.
const DRAIN_BYTES: u64 = MIB;

/// A streamed route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamedRoute {
    /// `POST /api/tables/{id}/attachments`
    Attachment,
    /// `POST /api/databases/{id}/import`
    Import,
}

impl StreamedRoute {
    /// The streamed route `method` and `path` name, if any.
    pub fn of(method: &Method, path: &str) -> Option<Self> {
        if !is_streamed_route(method.as_str(), path) {
            return None;
        }
        Some(if path.ends_with("/attachments") {
            StreamedRoute::Attachment
        } else {
            StreamedRoute::Import
        })
    }

    /// Most bytes a request body of this route may have.
    pub fn cap(self) -> u64 {
        match self {
            StreamedRoute::Attachment => ATTACHMENT_CAP_BYTES,
            StreamedRoute::Import => IMPORT_CAP_BYTES,
        }
    }

    /// The 400 of a body over [`StreamedRoute::cap`].
    pub fn too_large(self) -> ApiError {
        ApiError::BadRequest(
            match self {
                StreamedRoute::Attachment => {
                    "The upload is larger than the 100 MB per file limit \
                     (a request may carry at most 100 MB of file plus 1 MB of form)."
                }
                StreamedRoute::Import => {
                    "The file is larger than the 20 MB import limit \
                     (a request may carry at most 22 MB)."
                }
            }
            .into(),
        )
    }

    /// Refuses a declared `Content-Length` over the cap, before any byte
    /// of the body is read.
    pub fn check_declared(self, headers: &HeaderMap) -> Result<(), ApiError> {
        match declared_length(headers) {
            Some(n) if n > self.cap() => Err(self.too_large()),
            _ => Ok(()),
        }
    }

    fn cut_error(self, cut: Cut) -> ApiError {
        match cut {
            Cut::TooLarge => self.too_large(),
            Cut::Idle => ApiError::RequestTimeout,
            Cut::Unreadable => ApiError::BadRequest("Request body could not be read.".into()),
        }
    }
}

/// Where the request goes and as whom (settled by `proxy`).
pub struct Destination<'a> {
    pub tag: &'a str,
    pub placement: &'a Placement,
    pub role: Option<Role>,
    pub support: bool,
}

/// Forwards a streamed request to the shard of `to`; the caller has
/// authorized it and checked the declared length.
pub async fn forward(
    state: &AppState,
    caller: &Caller,
    route: StreamedRoute,
    to: Destination<'_>,
    req: http::Request<Incoming>,
    span: &RequestSpan,
) -> Result<Response<Body>, ApiError> {
    let (parts, incoming) = req.into_parts();
    if route == StreamedRoute::Attachment {
        if let Err(refused) = state.uploads.charge(&state.limiter, caller.user_id()).await {
            drain_small(&parts.headers, incoming, state).await;
            return Err(refused);
        }
    }
    let limits = &state.config.connections;
    let (body, progress) = StreamedBody::new(incoming, route.cap(), limits.stream_idle_timeout);
    let db = to.placement.database_id.as_str();
    let epoch = to.placement.epoch;
    let mut headers = request_headers(&parts.headers, &caller.address);
    trace::propagate(span, &parts.headers, &mut headers);
    state.signer.attach_streamed(
        &mut headers,
        &caller.key.record.id,
        |p| caller.is_principal(p, Some(db), to.role, to.support, Some(epoch)),
        || caller.principal(Some(db), to.role, to.support, Some(epoch)),
        &parts.method,
        &parts.uri,
    );
    let shard_url = &to.placement.shard.url;
    let sent = state
        .forwarder
        .send_streamed(
            shard_url,
            &parts.method,
            &parts.uri,
            headers,
            body.boxed_unsync(),
            &progress,
        )
        .await;
    let resp = match sent {
        Ok(resp) => resp,
        Err(e) => {
            return Err(match progress.cut() {
                Some(cut) => {
                    span.log(|| tracing::info!(?cut, db, "streamed request body cut off"));
                    route.cut_error(cut)
                }
                None => shard_failure(span, shard_url, e),
            })
        }
    };
    if resp.status().as_u16() == MISPLACED_STATUS {
        // The body went (partly) to the wrong shard and cannot be sent again.
        state.placements.forget_tag(to.tag);
        span.log(|| {
            let what = "misplaced: a streamed body cannot be replayed; answering 503";
            tracing::info!(shard = %shard_url, db, "{what}")
        });
        return Err(ApiError::dependency_down());
    }
    Ok(client_response(resp))
}

/// Reads and drops a refused body declared at most [`DRAIN_BYTES`] long
/// (within the whole-body timeout); a larger or undeclared one is left
/// unread, and the connection closes after the answer.
async fn drain_small(headers: &HeaderMap, body: Incoming, state: &AppState) {
    let declared = declared_length(headers);
    if declared.is_some_and(|n| n <= DRAIN_BYTES) {
        let time = state.config.connections.body_timeout;
        let budget = &state.body_budget;
        let _ = read_limited(body, declared, DRAIN_BYTES as usize, time, budget).await;
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn the_two_streamed_routes_and_nothing_else() {
        let of = |m: Method, p: &str| StreamedRoute::of(&m, p);
        assert_eq!(
            of(Method::POST, "/api/tables/tbl_Ab3dZ1234567/attachments"),
            Some(StreamedRoute::Attachment)
        );
        assert_eq!(
            of(Method::POST, "/api/databases/db_Ab3dZ1234567/import"),
            Some(StreamedRoute::Import)
        );
        assert_eq!(
            of(Method::GET, "/api/databases/db_Ab3dZ1234567/import"),
            None
        );
        assert_eq!(
            of(Method::PATCH, "/api/tables/tbl_Ab3dZ1234567/attachments"),
            None
        );
        assert_eq!(
            of(Method::POST, "/api/tables/tbl_Ab3dZ1234567/records"),
            None
        );
        assert_eq!(
            of(Method::POST, "/api/databases/db_Ab3dZ1234567/tables"),
            None
        );
    }

    #[test]
    fn caps_are_the_file_limits_plus_the_form() {
        assert_eq!(StreamedRoute::Attachment.cap(), 101 * 1024 * 1024);
        assert_eq!(StreamedRoute::Import.cap(), 22 * 1024 * 1024);
    }

    fn declaring(n: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            http::header::CONTENT_LENGTH,
            HeaderValue::from_str(n).unwrap(),
        );
        h
    }

    fn message(e: ApiError) -> String {
        match e {
            ApiError::BadRequest(m) => m,
            other => panic!("not a 400: {other:?}"),
        }
    }

    #[test]
    fn a_declared_length_over_the_cap_is_refused_naming_the_limit() {
        let upload = StreamedRoute::Attachment;
        assert!(upload.check_declared(&declaring("105906176")).is_ok());
        let m = message(upload.check_declared(&declaring("105906177")).unwrap_err());
        assert!(m.contains("100 MB per file limit"), "{m}");
        let m = message(upload.check_declared(&declaring("209715200")).unwrap_err());
        assert!(m.contains("100 MB per file limit"), "{m}");

        let import = StreamedRoute::Import;
        assert!(import.check_declared(&declaring("23068672")).is_ok());
        let m = message(import.check_declared(&declaring("23068673")).unwrap_err());
        assert!(m.contains("20 MB import limit"), "{m}");
        // Nothing declared (chunked): counted while streaming instead.
        assert!(import.check_declared(&HeaderMap::new()).is_ok());
    }

    #[test]
    fn cuts_answer_400_for_size_and_408_for_a_pause() {
        let m = message(StreamedRoute::Import.cut_error(Cut::TooLarge));
        assert!(m.contains("20 MB import limit"), "{m}");
        assert!(matches!(
            StreamedRoute::Attachment.cut_error(Cut::Idle),
            ApiError::RequestTimeout
        ));
        assert!(matches!(
            StreamedRoute::Attachment.cut_error(Cut::Unreadable),
            ApiError::BadRequest(_)
        ));
    }
}
