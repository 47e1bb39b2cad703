//! Creating, suspending and unsuspending users.

use anyhow::Context;
use cluster_protocol::control::{CreateUser, KeyList, Page, User, UserList};
use cluster_protocol::ids::{self, Kind};

use super::{redis_refused, unknown_user};
use crate::catalog::{keys, users};
use crate::error::{ApiError, ApiResult};
use crate::AppState;

const MAX_EMAIL_LEN: usize = 254;
const MAX_NAME_LEN: usize = 200;

/// A plausible address: one `@`, non-empty local part, a dotted domain, no spaces.
pub fn validate_email(raw: &str) -> ApiResult<String> {
    let email = raw.trim();
    let bad = || ApiError::bad_request(format!("{raw:?} is not a valid email address."));
    if email.len() > MAX_EMAIL_LEN || email.chars().any(char::is_whitespace) {
        return Err(bad());
    }
    let (local, domain) = email.split_once('@').ok_or_else(bad)?;
    let labels_ok = domain.split('.').all(|l| !l.is_empty());
    if local.is_empty() || domain.contains('@') || !domain.contains('.') || !labels_ok {
        return Err(bad());
    }
    Ok(email.to_string())
}

pub async fn create(state: &AppState, req: CreateUser) -> ApiResult<User> {
    create_with_password(state, req, None).await
}

/// [`create`], with the user's password hash (sign-up) stored in the same
/// transaction: no user is left without the password it signed up with.
pub async fn create_with_password(
    state: &AppState,
    req: CreateUser,
    password_hash: Option<&str>,
) -> ApiResult<User> {
    let email = validate_email(&req.email)?;
    let name = match req.name.as_deref().map(str::trim) {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => email.split('@').next().unwrap_or_default().to_string(),
    };
    if name.chars().count() > MAX_NAME_LEN {
        return Err(ApiError::bad_request(format!(
            "name must be at most {MAX_NAME_LEN} characters."
        )));
    }
    let mut client = state.session().await?;
    let tx = client.transaction().await?;
    let id = ids::new_untagged(Kind::User);
    let row = users::insert(&*tx, &id, &email, &name)
        .await?
        .ok_or_else(|| ApiError::conflict(format!("A user with email {email} already exists.")))?;
    if let Some(hash) = password_hash {
        crate::catalog::sessions::set_password_hash(&*tx, &row.user.id, hash).await?;
    }
    tx.commit().await?;
    Ok(row.user)
}

/// Users oldest first, one page of them when `page` has a limit.
pub async fn list(state: &AppState, page: &Page) -> ApiResult<UserList> {
    let limit = super::moves::page_limit(page.limit)?;
    let client = state.session().await?;
    let cursor = page.cursor.as_deref().filter(|c| !c.is_empty());
    if let Some(cursor) = cursor {
        if users::get(&**client, cursor).await?.is_none() {
            return Err(ApiError::bad_request(format!("Unknown cursor {cursor:?}.")));
        }
    }
    let mut found: Vec<User> = users::list(&**client, cursor, limit.map(|n| n + 1))
        .await?
        .into_iter()
        .map(|r| r.user)
        .collect();
    let next_cursor = super::moves::cut_page(&mut found, limit, |u| u.id.clone());
    Ok(UserList {
        users: found,
        next_cursor,
    })
}

/// The user's keys, oldest first (404 for an unknown user).
pub async fn keys_of(state: &AppState, id: &str) -> ApiResult<KeyList> {
    let client = state.session().await?;
    if users::get(&**client, id).await?.is_none() {
        return Err(unknown_user(id));
    }
    Ok(KeyList {
        keys: keys::of_user(&**client, id).await?,
    })
}

/// Suspends or unsuspends a user. Suspension deletes the user's browser
/// sessions (in the same transaction) and clears the liveness of every
/// key of the user in Redis before and after the catalog commit, and fails
/// if Redis cannot be cleared: failing before the commit (503) nothing
/// changes; failing after it (500) the user is suspended in the catalog and
/// retrying the (idempotent) suspension clears Redis.
pub async fn set_suspended(state: &AppState, id: &str, suspended: bool) -> ApiResult<User> {
    let mut client = state.session().await?;
    let tx = client.transaction().await?;
    let row = users::set_suspended(&*tx, id, suspended)
        .await?
        .ok_or_else(|| unknown_user(id))?;
    let user_keys = keys::versions_of_user(&*tx, id).await?;
    let key_ids: Vec<String> = user_keys.iter().map(|(k, _)| k.clone()).collect();
    if suspended {
        // Its browser sessions end with the suspension's commit.
        crate::catalog::sessions::delete_of_user(&*tx, id).await?;
        if let Err(e) = state.redis.clear_keys(id, &key_ids).await {
            drop(tx);
            return Err(redis_refused("clear the liveness of the user's keys", e));
        }
    }
    tx.commit().await?;
    if suspended {
        state
            .redis
            .clear_keys(id, &key_ids)
            .await
            .context("clear key liveness after suspension")?;
    }
    for (key_id, version) in &user_keys {
        state
            .redis
            .announce_key(id, key_id, (!suspended).then_some(*version))
            .await;
    }
    state.redis.announce_user(id, row.access_version).await;
    Ok(row.user)
}

#[cfg(test)]
mod tests {
    use super::validate_email;

    #[test]
    fn emails() {
        assert_eq!(validate_email(" a@b.co ").unwrap(), "a@b.co");
        for bad in [
            "", "a", "a@", "@b.co", "a@b", "a b@c.de", "a@b@c.de", "a@b..de", "a@.de",
        ] {
            assert!(validate_email(bad).is_err(), "{bad} should be refused");
        }
    }
}
