//! `GET /api/databases/{id}/export` by session cookie (part B: the export
//! route "also accepts a session cookie"). Only when the request carries no
//! `Authorization` header (a key, when sent, decides alone). The session is
//! resolved at the control plane, the user's memberships (read fresh) decide
//! as for a key with scope "all", and the principal sent to the shard has
//! no key (`key_id` empty). The answer carries no `X-RateLimit-*` headers
//! (part C). The shard keeps refusing a cross-site `Sec-Fetch-Site`.

use bytes::Bytes;
use cluster_protocol::control::client::ClientError;
use cluster_protocol::control::{Access, User};
use cluster_protocol::principal::Principal;
use http::{header, HeaderMap, Method, Response};
use hyper::body::Incoming;

use super::cookies::Cookies;
use super::forms::cookie;
use crate::edge::trace::{self, RequestSpan};
use crate::errors::{full, ApiError, Body};
use crate::forward::client::{client_response, request_headers, shard_failure};
use crate::forward::principal_sign::Request;
use crate::forward::{hold, misplaced};
use crate::gate::auth;
use crate::state::AppState;

/// Whether `method path` is the export route.
pub fn is_export(method: &Method, path: &str) -> bool {
    if method != Method::GET && method != Method::HEAD {
        return false;
    }
    path.strip_prefix("/api/databases/")
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(id, tail)| !id.is_empty() && tail == "export")
}

/// The session cookie a request would be judged by: present, and no
/// `Authorization` header.
pub fn session_cookie<'a>(state: &AppState, headers: &'a HeaderMap) -> Option<&'a str> {
    if headers.contains_key(header::AUTHORIZATION) {
        return None;
    }
    let cookies = Cookies {
        secure: state.config.accounts.cookie_secure,
    };
    cookie(headers, cookies.session_name())
}

/// The principal of a cookie export by `user` of `database_id`.
pub fn principal(
    user: &User,
    database_id: &str,
    role: cluster_protocol::control::Role,
    epoch: i64,
) -> Principal {
    Principal {
        user_id: user.id.clone(),
        key_id: String::new(),
        access: Access::ReadOnly,
        narrowed: false,
        database_id: Some(database_id.to_owned()),
        role: Some(role),
        support: false,
        epoch: Some(epoch),
        new_database: None,
        share: false,
    }
}

/// Forwards the export of the database tagged `tag` for the session `token`.
pub async fn forward(
    state: &AppState,
    token: &str,
    tag: &str,
    req: http::Request<Incoming>,
    address: &str,
    span: &RequestSpan,
) -> Result<Response<Body>, ApiError> {
    auth::shield(state, req.headers(), address).await?;
    let session = match state.control.resolve_session(token).await {
        Ok(s) => s,
        Err(ClientError::Api { status: 401, .. }) => return Err(ApiError::Unauthorized),
        Err(e) => {
            span.log(|| tracing::error!(error = %e, "session lookup failed"));
            return Err(ApiError::dependency_down());
        }
    };
    let placement = hold::placement(state, tag, span).await?;
    let db = placement.database_id.clone();
    // `Some(None)`: read the memberships fresh, not from the cache.
    let access = state
        .access
        .get(&session.user.id, Some(None))
        .await
        .map_err(|e| {
            span.log(|| tracing::error!(error = %e, "user access lookup failed"));
            ApiError::dependency_down()
        })?;
    let Some(role) = access.role_in(&db) else {
        return Err(ApiError::NotFound);
    };
    let (parts, _body) = req.into_parts();
    let (method, uri) = (&parts.method, &parts.uri);
    let empty = Bytes::new();
    let one_attempt = |p: std::sync::Arc<crate::forward::placement::Placement>| {
        let mut headers = request_headers(&parts.headers, address);
        trace::propagate(span, &parts.headers, &mut headers);
        let principal = principal(&session.user, &db, role, p.epoch);
        let signed = Request {
            method,
            uri,
            body: &empty,
        };
        state.signer.attach(&mut headers, &principal, signed);
        async move {
            let shard_url = p.shard.url.as_str();
            state
                .forwarder
                .send(shard_url, method, uri, headers, full(Bytes::new()))
                .await
                .map_err(|e| shard_failure(span, shard_url, e))
        }
    };
    let resp = misplaced::send(state, tag, placement.clone(), span, one_attempt).await?;
    Ok(client_response(resp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_export_route_is_the_export_route() {
        assert!(is_export(&Method::GET, "/api/databases/db_abc/export"));
        assert!(is_export(&Method::HEAD, "/api/databases/db_abc/export"));
        assert!(!is_export(&Method::POST, "/api/databases/db_abc/export"));
        assert!(!is_export(&Method::GET, "/api/databases/db_abc"));
        assert!(!is_export(&Method::GET, "/api/databases//export"));
        assert!(!is_export(&Method::GET, "/api/databases/db_abc/export/x"));
        assert!(!is_export(&Method::GET, "/api/databases/db_abc/members"));
    }
}
