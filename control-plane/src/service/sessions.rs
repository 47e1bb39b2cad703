//! Browser accounts (issue 32): sign-up, sign-in, sessions and what a
//! session may do to its own user's keys. A session token is 32 random
//! bytes (base64url) handed out once; the catalog keeps its SHA-256 only,
//! with an absolute expiry (`SESSION_TTL_SECS`) and an idle timeout
//! (`SESSION_IDLE_SECS`, measured from the last resolve).

use std::time::Duration;

use anyhow::Context;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, Utc};
use cluster_protocol::control::accounts::{
    AccountView, ChangePassword, OpenedSession, SessionCreateKey, SessionInfo, SessionUpdateKey,
    SignIn, SignUp, SESSION_ENDED, SIGNUP_CLOSED, WRONG_EMAIL_OR_PASSWORD,
};
use cluster_protocol::control::{CreateKey, CreateUser, CreatedKey, KeyInfo, UpdateKey, User};
use rand::RngCore;
use sha2::{Digest, Sha256};

use super::passwords;
use crate::catalog::{keys, sessions};
use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// Why a stored session is no longer valid, from the database's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    Live,
    Expired,
    Idle,
}

/// Whether a session last seen at `last_seen` and expiring at `expires`
/// is live at `now` with the idle timeout `idle`.
pub fn liveness(
    now: DateTime<Utc>,
    last_seen: DateTime<Utc>,
    expires: DateTime<Utc>,
    idle: Duration,
) -> Liveness {
    if now >= expires {
        return Liveness::Expired;
    }
    let idle = chrono::Duration::from_std(idle).unwrap_or(chrono::Duration::MAX);
    match last_seen.checked_add_signed(idle) {
        Some(until) if now >= until => Liveness::Idle,
        _ => Liveness::Live,
    }
}

/// SHA-256 of a session token: what the catalog stores and looks up.
pub fn token_digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// 32 random bytes, base64url without padding (43 characters).
fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

fn signed_out() -> ApiError {
    ApiError::SignedOut(SESSION_ENDED)
}

fn wrong_credentials() -> ApiError {
    ApiError::SignedOut(WRONG_EMAIL_OR_PASSWORD)
}

fn check_password(password: &str) -> ApiResult<()> {
    match passwords::refusal(password) {
        Some(why) => Err(ApiError::bad_request(why)),
        None => Ok(()),
    }
}

/// Opens a session of `user` (the caller checked the credentials).
async fn open(state: &AppState, user: User) -> ApiResult<OpenedSession> {
    let token = random_token();
    let csrf_token = random_token();
    let client = state.session().await?;
    let idle = secs(state.accounts.session_idle);
    sessions::delete_dead_of_user(&**client, &user.id, idle).await?;
    let ttl = secs(state.accounts.session_ttl);
    sessions::insert(&**client, &token_digest(&token), &user.id, &csrf_token, ttl).await?;
    Ok(OpenedSession {
        token,
        csrf_token,
        user,
    })
}

/// Creates a user with a password and signs them in (`SIGNUP=open` only).
pub async fn sign_up(state: &AppState, req: SignUp) -> ApiResult<OpenedSession> {
    if !state.accounts.signup_open {
        return Err(ApiError::Forbidden(SIGNUP_CLOSED.to_string()));
    }
    super::users::validate_email(&req.email)?;
    check_password(&req.password)?;
    let hash = passwords::hash(req.password).await?;
    let user = super::users::create_with_password(
        state,
        CreateUser {
            email: req.email,
            name: req.name,
        },
        Some(hash.as_str()),
    )
    .await?;
    open(state, user).await
}

/// Checks email and password; one 401 for an unknown email, a wrong
/// password, an account without a password and a suspended account (each
/// costs one argon2 verification).
pub async fn sign_in(state: &AppState, req: SignIn) -> ApiResult<OpenedSession> {
    let client = state.session().await?;
    let found = sessions::credentials_by_email(&**client, req.email.trim()).await?;
    drop(client);
    let (user, stored) = match found {
        Some(c) => (Some(c.user.user), c.password_hash),
        None => (None, None),
    };
    let matches = passwords::verify(req.password, stored).await?;
    match user {
        Some(user) if matches && !user.suspended => open(state, user).await,
        _ => Err(wrong_credentials()),
    }
}

/// The live session of `token`, touched (its idle clock restarted); an
/// ended session is deleted. 401 for anything but a live session of an
/// unsuspended user.
pub async fn resolve(state: &AppState, token: &str) -> ApiResult<SessionInfo> {
    let digest = token_digest(token);
    let client = state.session().await?;
    let row = sessions::get(&**client, &digest)
        .await?
        .ok_or_else(signed_out)?;
    let live = liveness(
        row.now,
        row.last_seen_at,
        row.expires_at,
        state.accounts.session_idle,
    );
    if live != Liveness::Live || row.user.user.suspended {
        sessions::delete(&**client, &digest).await?;
        return Err(signed_out());
    }
    sessions::touch(&**client, &digest).await?;
    Ok(SessionInfo {
        user: row.user.user,
        csrf_token: row.csrf_token,
    })
}

/// The account page's data.
pub async fn account(state: &AppState, token: &str) -> ApiResult<AccountView> {
    let session = resolve(state, token).await?;
    let client = state.session().await?;
    let keys = keys::of_user(&**client, &session.user.id).await?;
    drop(client);
    let access = super::access::user_access(state, &session.user.id).await?;
    Ok(AccountView {
        session,
        keys,
        databases: access.memberships,
    })
}

pub async fn sign_out(state: &AppState, token: &str) -> ApiResult<()> {
    let client = state.session().await?;
    sessions::delete(&**client, &token_digest(token)).await?;
    Ok(())
}

/// Changes the session user's password after checking the current one;
/// every session of the user ends (this one too).
pub async fn change_password(state: &AppState, req: ChangePassword) -> ApiResult<()> {
    let session = resolve(state, &req.token).await?;
    check_password(&req.new_password)?;
    let client = state.session().await?;
    let stored = sessions::password_hash(&**client, &session.user.id)
        .await?
        .flatten();
    drop(client);
    if !passwords::verify(req.current_password, stored).await? {
        return Err(ApiError::bad_request("The current password is wrong."));
    }
    let hash = passwords::hash(req.new_password).await?;
    set_password_of(state, &session.user.id, &hash).await
}

/// The operator's `users set-password`: sets the hash, ends every session.
pub async fn set_password(state: &AppState, user_id: &str, password: String) -> ApiResult<()> {
    check_password(&password)?;
    let hash = passwords::hash(password).await?;
    set_password_of(state, user_id, &hash).await
}

async fn set_password_of(state: &AppState, user_id: &str, hash: &str) -> ApiResult<()> {
    let mut client = state.session().await?;
    let tx = client.transaction().await?;
    if !sessions::set_password_hash(&*tx, user_id, hash).await? {
        return Err(super::unknown_user(user_id));
    }
    sessions::delete_of_user(&*tx, user_id).await?;
    tx.commit().await?;
    Ok(())
}

/// Deletes every ended session (expired or idle); returns how many.
pub async fn sweep(state: &AppState) -> anyhow::Result<u64> {
    let client = state.session().await.context("connect for session sweep")?;
    let idle = secs(state.accounts.session_idle);
    Ok(sessions::delete_ended(&**client, idle).await?)
}

/// Mints a key for the session's user.
pub async fn create_key(state: &AppState, req: SessionCreateKey) -> ApiResult<CreatedKey> {
    let session = resolve(state, &req.token).await?;
    super::keys::create(
        state,
        CreateKey {
            user_id: session.user.id,
            name: req.name,
            access: req.access,
            databases: req.databases,
        },
    )
    .await
}

/// 404 unless `key_id` is a key of the session's user.
async fn own_key(state: &AppState, token: &str, key_id: &str) -> ApiResult<()> {
    let session = resolve(state, token).await?;
    let client = state.session().await?;
    let owned = keys::of_user(&**client, &session.user.id)
        .await?
        .iter()
        .any(|k| k.id == key_id);
    if owned {
        Ok(())
    } else {
        Err(ApiError::not_found(format!("Unknown API key {key_id}.")))
    }
}

/// Renames, narrows or widens a key of the session's user.
pub async fn update_key(
    state: &AppState,
    key_id: &str,
    req: SessionUpdateKey,
) -> ApiResult<KeyInfo> {
    own_key(state, &req.token, key_id).await?;
    super::keys::update(
        state,
        key_id,
        UpdateKey {
            name: req.name,
            access: req.access,
            databases: req.databases,
        },
    )
    .await
}

/// Revokes a key of the session's user.
pub async fn revoke_key(state: &AppState, token: &str, key_id: &str) -> ApiResult<()> {
    own_key(state, token, key_id).await?;
    super::keys::revoke(state, key_id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap()
    }

    #[test]
    fn a_session_ends_at_its_expiry_or_after_its_idle_time() {
        let idle = Duration::from_secs(100);
        let (seen, expires) = (at(0), at(1000));
        assert_eq!(liveness(at(0), seen, expires, idle), Liveness::Live);
        assert_eq!(liveness(at(99), seen, expires, idle), Liveness::Live);
        assert_eq!(liveness(at(100), seen, expires, idle), Liveness::Idle);
        // Seen recently, but past its absolute expiry.
        assert_eq!(
            liveness(at(1000), at(999), expires, idle),
            Liveness::Expired
        );
        assert_eq!(liveness(at(999), at(950), expires, idle), Liveness::Live);
        // An enormous idle timeout never overflows.
        let forever = Duration::from_secs(u64::MAX);
        assert_eq!(liveness(at(500), seen, expires, forever), Liveness::Live);
    }

    #[test]
    fn tokens_are_random_and_stored_as_their_digest() {
        let (a, b) = (random_token(), random_token());
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        assert_eq!(token_digest(&a), token_digest(&a));
        assert_ne!(token_digest(&a), token_digest(&b));
        assert_eq!(
            hex_of(&token_digest("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    fn hex_of(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }
}
