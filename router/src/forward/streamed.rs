//! The two routes whose bodies the router streams to the shard unread
//! (`Body::Streamed` in the route table, `cluster_protocol::routes`, with
//! their caps): attachment uploads (100 MB per file) and imports (a 20 MB
//! file). Everything else is read
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

use cluster_protocol::control::Role;
use cluster_protocol::routes::Streamed;
use cluster_protocol::MISPLACED_STATUS;
use http::{HeaderMap, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use crate::edge::trace::{self, RequestSpan};
use crate::errors::{ApiError, Body};
use crate::forward::client::{
    client_response, declared_length, read_limited, request_headers, shard_failure,
};
use crate::forward::placement::Placement;
use crate::forward::stream_body::{Cut, StreamedBody};
use crate::gate::auth::Caller;
use crate::state::AppState;

const MIB: u64 = 1024 * 1024;
/// A refused body declared this small is read and dropped first, so the
/// client reads the answer rather than a reset connection.
const DRAIN_BYTES: u64 = MIB;

/// The 400 of a body over the route's cap.
pub fn too_large(route: Streamed) -> ApiError {
    ApiError::BadRequest(
        match route {
            Streamed::Attachment => {
                "The upload is larger than the 100 MB per file limit \
                 (a request may carry at most 100 MB of file plus 1 MB of form)."
            }
            Streamed::Import => {
                "The file is larger than the 20 MB import limit \
                 (a request may carry at most 22 MB)."
            }
        }
        .into(),
    )
}

/// Refuses a declared `Content-Length` over the route's cap, before any
/// byte of the body is read.
pub fn check_declared(route: Streamed, headers: &HeaderMap) -> Result<(), ApiError> {
    match declared_length(headers) {
        Some(n) if n > route.cap() => Err(too_large(route)),
        _ => Ok(()),
    }
}

fn cut_error(route: Streamed, cut: Cut) -> ApiError {
    match cut {
        Cut::TooLarge => too_large(route),
        Cut::Idle => ApiError::RequestTimeout,
        Cut::Unreadable => ApiError::BadRequest("Request body could not be read.".into()),
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
    route: Streamed,
    to: Destination<'_>,
    req: http::Request<Incoming>,
    span: &RequestSpan,
) -> Result<Response<Body>, ApiError> {
    let (parts, incoming) = req.into_parts();
    if route == Streamed::Attachment {
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
                    cut_error(route, cut)
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
        let upload = Streamed::Attachment;
        assert!(check_declared(upload, &declaring("105906176")).is_ok());
        let m = message(check_declared(upload, &declaring("105906177")).unwrap_err());
        assert!(m.contains("100 MB per file limit"), "{m}");
        let m = message(check_declared(upload, &declaring("209715200")).unwrap_err());
        assert!(m.contains("100 MB per file limit"), "{m}");

        let import = Streamed::Import;
        assert!(check_declared(import, &declaring("23068672")).is_ok());
        let m = message(check_declared(import, &declaring("23068673")).unwrap_err());
        assert!(m.contains("20 MB import limit"), "{m}");
        // Nothing declared (chunked): counted while streaming instead.
        assert!(check_declared(import, &HeaderMap::new()).is_ok());
    }

    #[test]
    fn cuts_answer_400_for_size_and_408_for_a_pause() {
        let m = message(cut_error(Streamed::Import, Cut::TooLarge));
        assert!(m.contains("20 MB import limit"), "{m}");
        assert!(matches!(
            cut_error(Streamed::Attachment, Cut::Idle),
            ApiError::RequestTimeout
        ));
        assert!(matches!(
            cut_error(Streamed::Attachment, Cut::Unreadable),
            ApiError::BadRequest(_)
        ));
    }
}
