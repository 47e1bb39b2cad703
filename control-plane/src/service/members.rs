//! Member management of the public API (`/api/databases/{id}/members`),
//! which routers answer by calling these routes on behalf of the acting
//! user. The rules, decided here in one transaction that locks the
//! database's row (so two owners demoting each other cannot both win):
//!
//! 1. the database must exist and be active, and the actor must be a
//!    member or hold a support grant, else 404 exactly like a missing id;
//! 2. only an owner may change members: a support grant, a viewer and an
//!    editor get part C's 403 messages (the router checks the key's access
//!    before asking);
//! 3. no API key may make someone an owner (part C), and every public call
//!    is made with a key: adding an owner or changing a role to owner is 403;
//! 4. the last owner can be neither removed nor demoted (409);
//! 5. an unknown user (id or email) or a user id that is not a member is
//!    404 naming it; adding someone who already is a member is 409 (a role
//!    changes with PATCH, never by adding again).
//!
//! Every change bumps the target's access version and invalidates exactly
//! as the operator's `members add/remove` do (`access::commit_access_change`).
//! The database's `owner_id` (its creator, which the cap of owned databases
//! counts) is never changed by a membership change.

use cluster_protocol::control::{
    ActedBy, AddMember, ChangeRole, DatabaseState, Member, RemovedMember, Role,
};
use cluster_protocol::error::forbidden;
use deadpool_postgres::Transaction;

use super::access::commit_access_change;
use crate::catalog::{databases, members, users};
use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// The same body as a missing database (part C: a non-member cannot tell).
fn hidden() -> ApiError {
    ApiError::not_found("Not found.")
}

fn not_a_member(user_id: &str) -> ApiError {
    ApiError::not_found(format!("User {user_id} is not a member of this database."))
}

fn last_owner(user_id: &str) -> ApiError {
    ApiError::conflict(format!(
        "User {user_id} is the database's last owner: a database keeps at least one owner. \
         Make another member an owner in the app first."
    ))
}

/// Members of an active database (no actor: the router has checked that
/// the caller may read the database).
pub async fn list(state: &AppState, database_id: &str) -> ApiResult<Vec<Member>> {
    let client = state.pool.get().await?;
    match databases::get(&**client, database_id).await? {
        Some(d) if d.state == DatabaseState::Active => {}
        _ => return Err(hidden()),
    }
    Ok(members::list_members(&**client, database_id).await?)
}

/// Locks the database's row and checks that `actor_id` is one of its owners.
async fn owner_acting(tx: &Transaction<'_>, database_id: &str, actor_id: &str) -> ApiResult<()> {
    match databases::state_for_update(&**tx, database_id).await? {
        Some(DatabaseState::Active) => {}
        Some(DatabaseState::Creating) | None => return Err(hidden()),
    }
    let refusal = match members::role_of(&**tx, database_id, actor_id).await? {
        Some(Role::Owner) => return Ok(()),
        Some(Role::Editor) => forbidden::OWNER_ONLY,
        Some(Role::Viewer) => forbidden::VIEWER,
        None if members::has_support(&**tx, database_id, actor_id).await? => {
            forbidden::SUPPORT_READ_ONLY
        }
        None => return Err(hidden()),
    };
    Err(ApiError::Forbidden(refusal.to_string()))
}

/// Part C: "making someone an owner" is one of the two acts no key may perform.
fn refuse_owner_grant(role: Role) -> ApiResult<()> {
    if role == Role::Owner {
        return Err(ApiError::Forbidden(forbidden::KEY_OWNER_GRANT.to_string()));
    }
    Ok(())
}

pub async fn add(state: &AppState, database_id: &str, req: AddMember) -> ApiResult<Member> {
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    owner_acting(&tx, database_id, &req.actor_id).await?;
    refuse_owner_grant(req.role)?;
    let user = match (req.user_id.as_deref(), req.email.as_deref()) {
        (Some(id), None) => users::get(&*tx, id)
            .await?
            .ok_or_else(|| ApiError::not_found(format!("No user has the id {id}.")))?,
        (None, Some(email)) => users::get_by_email(&*tx, email.trim())
            .await?
            .ok_or_else(|| {
                ApiError::not_found(format!("No user has the email address {email}."))
            })?,
        _ => {
            return Err(ApiError::bad_request(
                "Send exactly one of user_id or email.",
            ))
        }
    };
    let user_id = user.user.id;
    if !members::insert(&*tx, database_id, &user_id, req.role).await? {
        let role = members::role_of(&*tx, database_id, &user_id)
            .await?
            .map_or("", Role::as_str);
        return Err(ApiError::conflict(format!(
            "User {user_id} is already a member of this database (role {role}). \
             Change a member's role with PATCH /api/databases/{database_id}/members/{user_id}."
        )));
    }
    let member = members::member(&*tx, database_id, &user_id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("membership {database_id}/{user_id} vanished"))?;
    commit_access_change(state, tx, &user_id).await?;
    Ok(member)
}

pub async fn change_role(
    state: &AppState,
    database_id: &str,
    user_id: &str,
    req: ChangeRole,
) -> ApiResult<Member> {
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    owner_acting(&tx, database_id, &req.actor_id).await?;
    refuse_owner_grant(req.role)?;
    let current = members::role_of(&*tx, database_id, user_id)
        .await?
        .ok_or_else(|| not_a_member(user_id))?;
    if current == req.role {
        let member = members::member(&*tx, database_id, user_id)
            .await?
            .ok_or_else(|| not_a_member(user_id))?;
        tx.commit().await?;
        return Ok(member);
    }
    if current == Role::Owner && members::count_owners(&*tx, database_id).await? <= 1 {
        return Err(last_owner(user_id));
    }
    members::set_role(&*tx, database_id, user_id, req.role).await?;
    let member = members::member(&*tx, database_id, user_id)
        .await?
        .ok_or_else(|| anyhow::anyhow!("membership {database_id}/{user_id} vanished"))?;
    commit_access_change(state, tx, user_id).await?;
    Ok(member)
}

pub async fn remove(
    state: &AppState,
    database_id: &str,
    user_id: &str,
    req: ActedBy,
) -> ApiResult<RemovedMember> {
    let mut client = state.pool.get().await?;
    let tx = client.transaction().await?;
    owner_acting(&tx, database_id, &req.actor_id).await?;
    let current = members::role_of(&*tx, database_id, user_id)
        .await?
        .ok_or_else(|| not_a_member(user_id))?;
    if current == Role::Owner && members::count_owners(&*tx, database_id).await? <= 1 {
        return Err(last_owner(user_id));
    }
    members::delete(&*tx, database_id, user_id).await?;
    commit_access_change(state, tx, user_id).await?;
    Ok(RemovedMember {
        user_id: user_id.to_string(),
        deleted: true,
    })
}
