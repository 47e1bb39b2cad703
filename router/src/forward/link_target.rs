//! The router's half of checking a link's `target_table_id`.
//!
//! Part B: a link target in another database is 400, and an id matching
//! nothing is 404 (as is one the caller may not see: a non-member's 404 is
//! indistinguishable from a missing id). A shard knows only its own
//! databases, so when the target carries another database's routing tag it
//! answers 400 with [`HEADER_FOREIGN_TABLE`] naming the id, and the router,
//! which knows the caller's memberships and key scope, settles it here:
//!
//! * the tag maps to no database, or to one the caller cannot see (not a
//!   member, no support grant, or the key is narrowed away from it): 404;
//! * it maps to a database the caller can see: one `GET /api/tables/{id}`
//!   to the shard holding it, signed with the caller's role there; 404 when
//!   that says no such table, else the shard's 400 stands.
//!
//! Cost, on this refusal only: the tag's placement (from the cache, or one
//! control-plane lookup, as for any tagged request; the caller's access is
//! the one the request was authorized with) and at most one request to a
//! shard (after a move's hold, if any: `hold`). Every other response
//! passes with one header lookup.

use bytes::Bytes;
use cluster_protocol::control::UserAccess;
use cluster_protocol::ids::{tag_of, Kind};
use cluster_protocol::{HEADER_FOREIGN_TABLE, MISPLACED_STATUS};
use http::{HeaderMap, Method, Response, StatusCode, Uri};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use crate::edge::trace::{self, RequestSpan};
use crate::errors::{empty, ApiError, Body};
use crate::forward::client::client_response;
use crate::forward::hold;
use crate::forward::principal_sign::Request;
use crate::gate::auth::Caller;
use crate::state::AppState;

/// Most bytes of a reply read (to free its connection) before dropping it.
const DRAIN_LIMIT: usize = 16 * 1024 * 1024;

/// The table id a shard's refusal names in [`HEADER_FOREIGN_TABLE`].
pub fn foreign_table(resp: &Response<Incoming>) -> Option<String> {
    let v = resp.headers().get(HEADER_FOREIGN_TABLE)?.to_str().ok()?;
    Some(v.to_owned())
}

/// What the client gets for a shard's refusal of the link target
/// `table_id`: the refusal itself (without the header) when the caller can
/// see that table, else 404.
pub async fn answer(
    state: &AppState,
    caller: &Caller,
    access: &UserAccess,
    table_id: &str,
    refusal: Response<Incoming>,
    incoming: &HeaderMap,
    span: &RequestSpan,
) -> Result<Response<Body>, ApiError> {
    if visible_table(state, caller, access, table_id, incoming, span).await? {
        let mut resp = client_response(refusal);
        resp.headers_mut().remove(HEADER_FOREIGN_TABLE);
        return Ok(resp);
    }
    drain(refusal).await;
    Err(ApiError::NotFound)
}

/// Whether `table_id` names an existing table of a database the caller can
/// see. A check that cannot be made (the other shard unreachable or
/// answering otherwise) counts as visible: the database is, so the 400
/// tells the caller nothing it could not read itself.
async fn visible_table(
    state: &AppState,
    caller: &Caller,
    access: &UserAccess,
    table_id: &str,
    incoming: &HeaderMap,
    span: &RequestSpan,
) -> Result<bool, ApiError> {
    let Some(tag) = tag_of(Kind::Table, table_id) else {
        return Ok(false);
    };
    let placement = match hold::placement(state, tag, span).await {
        Ok(p) => p,
        Err(ApiError::NotFound) => return Ok(false),
        Err(e) => return Err(e),
    };
    let db = placement.database_id.as_str();
    let role = access.role_in(db);
    let support = role.is_none() && access.has_support(db);
    if !caller.key.record.databases.allows(db) || (role.is_none() && !support) {
        return Ok(false);
    }

    let placement = hold::released(state, tag, placement.clone(), span).await?;
    let uri: Uri = format!("/api/tables/{table_id}")
        .parse()
        .map_err(|_| ApiError::NotFound)?;
    let mut headers = HeaderMap::new();
    trace::propagate(span, incoming, &mut headers);
    let epoch = Some(placement.epoch);
    state.signer.attach_with(
        &mut headers,
        &caller.key.record.id,
        |p| caller.is_principal(p, Some(db), role, support, epoch),
        || caller.principal(Some(db), role, support, epoch),
        Request {
            method: &Method::GET,
            uri: &uri,
            body: &Bytes::new(),
        },
    );
    let shard = placement.shard.url.as_str();
    let resp = match state
        .forwarder
        .send(shard, &Method::GET, &uri, headers, empty())
        .await
    {
        Ok(resp) => resp,
        Err(e) => {
            span.log(|| tracing::warn!(error = %e, shard, "link target check not answered"));
            return Ok(true);
        }
    };
    let status = resp.status();
    drain(resp).await;
    match status {
        StatusCode::NOT_FOUND => Ok(false),
        s if s.is_success() => Ok(true),
        s => {
            if s.as_u16() == MISPLACED_STATUS {
                state.placements.forget_tag(tag);
            }
            span.log(|| tracing::info!(status = %s, db, "link target check inconclusive"));
            Ok(true)
        }
    }
}

/// Reads a small reply to its end, so its connection can be reused.
async fn drain(resp: Response<Incoming>) {
    let _ = http_body_util::Limited::new(resp.into_body(), DRAIN_LIMIT)
        .collect()
        .await;
}
