//! `/api/databases/{id}/members[/{user_id}]`: member management, answered
//! by the router with the control plane, which owns memberships (never
//! forwarded to a shard).
//!
//! Authorize, parse, call, serialise, like every handler:
//! 1. the database must be placed, inside the key's scope, and the caller
//!    a member or a support-grant holder (from the cached access), else 404;
//! 2. a write is refused, in the shard's precedence, for a read-only key,
//!    support access, a viewer and an editor (part C's 403 messages);
//! 3. the body is checked (400), and making someone an owner is refused
//!    (403: no API key may, part C);
//! 4. the control plane decides with its catalog in one transaction (the
//!    actor's role again, unknown users, already a member, the last owner)
//!    and invalidates exactly as the operator's `members add/remove` do, so
//!    the change reaches every router within the same bounds.

use cluster_protocol::control::client::ClientError;
use cluster_protocol::control::{Access, ActedBy, AddMember, ChangeRole, Member, Role, UserAccess};
use cluster_protocol::error::forbidden;
use cluster_protocol::ids::{self, Kind};
use http::{Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{json, Map, Value};

use crate::answers::whoami::rfc3339_ms;
use crate::edge::routes::MemberAction;
use crate::edge::trace::RequestSpan;
use crate::errors::{json, ApiError, Body};
use crate::forward::client::read_limited;
use crate::forward::hold;
use crate::gate::auth::Caller;
use crate::state::AppState;

/// Largest member-management body read.
const BODY_LIMIT: usize = 64 * 1024;

const ROLES: &str = "viewer, editor, owner";

pub async fn answer(
    state: &AppState,
    caller: &Caller,
    tag: &str,
    database_id: &str,
    action: MemberAction<'_>,
    req: http::Request<Incoming>,
    span: &RequestSpan,
) -> Result<Response<Body>, ApiError> {
    let placement = hold::placement(state, tag, span).await?;
    if placement.database_id != database_id || !caller.key.record.databases.allows(database_id) {
        return Err(ApiError::NotFound);
    }
    let access = state
        .access
        .get(caller.user_id(), caller.user_version())
        .await
        .map_err(|e| {
            span.log(|| tracing::error!(error = %e, "user access lookup failed"));
            ApiError::dependency_down()
        })?;
    let role = access.role_in(database_id);
    if role.is_none() && !access.has_support(database_id) {
        return Err(ApiError::NotFound);
    }
    if action != MemberAction::List {
        if let Some(message) = write_refusal(caller, &access, database_id) {
            return Err(ApiError::Forbidden(message));
        }
    }
    let actor_id = caller.user_id().to_string();
    match action {
        MemberAction::List => {
            let list = state
                .control
                .members(database_id)
                .await
                .map_err(|e| control_failure(span, e))?;
            let members: Vec<Value> = list.members.iter().map(member_json).collect();
            Ok(reply(json!({ "members": members })))
        }
        MemberAction::Add => {
            let body = read_object(state, req).await?;
            let role = role_in_body(&body)?;
            let (user_id, email) = reference(&body)?;
            refuse_owner_grant(role)?;
            let add = AddMember {
                actor_id,
                user_id,
                email,
                role,
            };
            let member = state
                .control
                .add_member_as(database_id, &add)
                .await
                .map_err(|e| control_failure(span, e))?
                .member;
            state.access.forget(&member.user.id);
            Ok(reply(json!({ "member": member_json(&member) })))
        }
        MemberAction::ChangeRole { user_id } => {
            let body = read_object(state, req).await?;
            let role = role_in_body(&body)?;
            refuse_owner_grant(role)?;
            known_user(user_id)?;
            let change = ChangeRole { actor_id, role };
            let member = state
                .control
                .change_member_role(database_id, user_id, &change)
                .await
                .map_err(|e| control_failure(span, e))?
                .member;
            state.access.forget(user_id);
            Ok(reply(json!({ "member": member_json(&member) })))
        }
        MemberAction::Remove { user_id } => {
            known_user(user_id)?;
            let removed = state
                .control
                .remove_member_as(database_id, user_id, &ActedBy { actor_id })
                .await
                .map_err(|e| control_failure(span, e))?;
            state.access.forget(user_id);
            Ok(reply(
                json!({ "user_id": removed.user_id, "deleted": removed.deleted }),
            ))
        }
    }
}

/// The 403 of a member-management write, in the shard's precedence: a
/// read-only key, support access, a viewer, an editor. `None` for an owner.
pub fn write_refusal(
    caller: &Caller,
    access: &UserAccess,
    database_id: &str,
) -> Option<&'static str> {
    refusal(caller.key.record.access, access.role_in(database_id))
}

fn refusal(key: Access, role: Option<Role>) -> Option<&'static str> {
    if key == Access::ReadOnly {
        return Some(forbidden::KEY_READ_ONLY);
    }
    match role {
        None => Some(forbidden::SUPPORT_READ_ONLY),
        Some(Role::Viewer) => Some(forbidden::VIEWER),
        Some(Role::Editor) => Some(forbidden::OWNER_ONLY),
        Some(Role::Owner) => None,
    }
}

fn refuse_owner_grant(role: Role) -> Result<(), ApiError> {
    if role == Role::Owner {
        return Err(ApiError::Forbidden(forbidden::KEY_OWNER_GRANT));
    }
    Ok(())
}

/// A user id in the path that cannot name a user is not a member: 404
/// without asking the control plane.
fn known_user(user_id: &str) -> Result<(), ApiError> {
    if ids::is_valid(Kind::User, user_id) {
        Ok(())
    } else {
        Err(ApiError::Upstream {
            status: 404,
            body: cluster_protocol::error::ErrorBody::new(
                cluster_protocol::error::ErrorCode::NotFound,
                format!("User {user_id} is not a member of this database."),
            ),
        })
    }
}

fn reply(body: Value) -> Response<Body> {
    json(StatusCode::OK, body.to_string())
}

/// `{user:{id,name,email}, role, created_at}` (timestamps with milliseconds).
pub fn member_json(m: &Member) -> Value {
    json!({
        "user": {"id": m.user.id, "name": m.user.name, "email": m.user.email},
        "role": m.role,
        "created_at": rfc3339_ms(m.created_at),
    })
}

/// What the control plane answered, as the client should see it: its
/// 400/403/404/409 envelopes pass through (they are written for clients);
/// anything else is a 503 when it could not be asked, else a 500.
fn control_failure(span: &RequestSpan, e: ClientError) -> ApiError {
    match e {
        ClientError::Api { status, body } if matches!(status, 400 | 403 | 404 | 409) => {
            ApiError::Upstream { status, body }
        }
        ClientError::Api { status: 503, .. } | ClientError::Transport(_) => {
            span.log(|| tracing::error!(error = %e, "control plane member change failed"));
            ApiError::dependency_down()
        }
        ClientError::Api { .. } => {
            span.log(|| tracing::error!(error = %e, "control plane member change refused"));
            ApiError::Internal
        }
    }
}

async fn read_object(
    state: &AppState,
    req: http::Request<Incoming>,
) -> Result<Map<String, Value>, ApiError> {
    let body_time = state.config.connections.body_timeout;
    let (bytes, _reserved) = read_limited(
        req.into_body(),
        None,
        BODY_LIMIT,
        body_time,
        &state.body_budget,
    )
    .await?;
    parse_object(&bytes)
}

/// The body as a JSON object (400 otherwise).
pub fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>, ApiError> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::BadRequest(
            "The body must be a JSON object.".into(),
        )),
        Err(_) => Err(ApiError::BadRequest(
            "The body is not valid JSON: send a JSON object.".into(),
        )),
    }
}

/// `role`: required, one of the three roles.
pub fn role_in_body(body: &Map<String, Value>) -> Result<Role, ApiError> {
    match body.get("role") {
        None | Some(Value::Null) => Err(ApiError::BadRequest(format!(
            "role is required: one of {ROLES}."
        ))),
        Some(Value::String(s)) => Role::parse(s).ok_or_else(|| {
            ApiError::BadRequest(format!("Unknown role {s:?}: use one of {ROLES}."))
        }),
        Some(other) => Err(ApiError::BadRequest(format!(
            "role must be a string, one of {ROLES}; got {other}."
        ))),
    }
}

/// Exactly one of `user_id` and `email` (null counts as absent), a
/// non-blank string: (user_id, email).
pub fn reference(body: &Map<String, Value>) -> Result<(Option<String>, Option<String>), ApiError> {
    let text = |key: &str| -> Result<Option<String>, ApiError> {
        match body.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
            Some(_) => Err(ApiError::BadRequest(format!(
                "{key} must be a non-empty string."
            ))),
        }
    };
    match (text("user_id")?, text("email")?) {
        (Some(id), None) => Ok((Some(id), None)),
        (None, Some(email)) => Ok((None, Some(email))),
        _ => Err(ApiError::BadRequest(
            "Send exactly one of user_id or email to name the user.".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    fn bad(r: Result<impl std::fmt::Debug, ApiError>) -> String {
        match r {
            Err(ApiError::BadRequest(m)) => m,
            other => panic!("expected a 400, got {other:?}"),
        }
    }

    #[test]
    fn bodies() {
        assert!(parse_object(br#"{"role":"viewer"}"#).is_ok());
        for raw in [&b""[..], b"[]", b"\"x\"", b"{", b"null"] {
            bad(parse_object(raw));
        }
        assert_eq!(
            role_in_body(&obj(json!({"role": "editor"}))).unwrap(),
            Role::Editor
        );
        for body in [json!({}), json!({"role": null})] {
            assert!(bad(role_in_body(&obj(body))).contains("required"));
        }
        for body in [json!({"role": "admin"}), json!({"role": 3})] {
            assert!(bad(role_in_body(&obj(body))).contains("viewer, editor, owner"));
        }
    }

    #[test]
    fn exactly_one_reference() {
        assert_eq!(
            reference(&obj(json!({"user_id": "usr_x"}))).unwrap(),
            (Some("usr_x".into()), None)
        );
        assert_eq!(
            reference(&obj(json!({"email": "a@b.c", "user_id": null}))).unwrap(),
            (None, Some("a@b.c".into()))
        );
        for body in [
            json!({}),
            json!({"user_id": "usr_x", "email": "a@b.c"}),
            json!({"user_id": 5}),
            json!({"email": " "}),
        ] {
            bad(reference(&obj(body)));
        }
    }

    #[test]
    fn refusal_precedence() {
        use Access::*;
        assert_eq!(
            refusal(ReadOnly, Some(Role::Owner)),
            Some(forbidden::KEY_READ_ONLY)
        );
        assert_eq!(refusal(ReadWrite, None), Some(forbidden::SUPPORT_READ_ONLY));
        assert_eq!(
            refusal(ReadWrite, Some(Role::Viewer)),
            Some(forbidden::VIEWER)
        );
        assert_eq!(
            refusal(ReadWrite, Some(Role::Editor)),
            Some(forbidden::OWNER_ONLY)
        );
        assert_eq!(refusal(ReadWrite, Some(Role::Owner)), None);
    }
}
