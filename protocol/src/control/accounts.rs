//! Accounts in the browser (issue 32): the control plane's routes the
//! router's account pages call with the router's token. Every session route
//! carries the session token in its body (never in a URL); the control
//! plane stores only its SHA-256.
//!
//! | method + path | body | reply |
//! |---|---|---|
//! | GET `/internal/accounts/settings` | | [`AccountSettings`] |
//! | POST `/internal/accounts/signup` | [`SignUp`] | [`OpenedSession`] (403 closed, 409 taken, 400 weak password) |
//! | POST `/internal/accounts/signin` | [`SignIn`] | [`OpenedSession`] (401 wrong email or password, unknown or suspended alike) |
//! | POST `/internal/sessions/resolve` | [`SessionToken`] | [`SessionInfo`] (401 unknown, expired, idle or suspended) |
//! | POST `/internal/sessions/account` | [`SessionToken`] | [`AccountView`] |
//! | POST `/internal/sessions/signout` | [`SessionToken`] | `{ok:true}` |
//! | POST `/internal/sessions/password` | [`ChangePassword`] | `{ok:true}` (every session of the user ends) |
//! | POST `/internal/sessions/keys` | [`SessionCreateKey`] | [`super::CreatedKey`] |
//! | POST `/internal/sessions/keys/{key_id}` | [`SessionUpdateKey`] | [`super::KeyInfo`] (404 not the session user's) |
//! | POST `/internal/sessions/keys/{key_id}/revoke` | [`SessionToken`] | `{ok:true}` |
//! | PUT `/internal/users/{user_id}/password` | [`SetPassword`] | `{ok:true}` (operator; ends the user's sessions) |

use serde::{Deserialize, Serialize};

use super::{Access, DatabaseScope, KeyInfo, User};

/// The message of every failed sign-in (unknown email, wrong password,
/// suspended account): one answer, so an address cannot be probed.
pub const WRONG_EMAIL_OR_PASSWORD: &str = "Wrong email or password.";
/// The 401 of a session that is unknown, ended, or of a suspended user.
pub const SESSION_ENDED: &str = "The session has ended; sign in again.";
/// The 403 of a sign-up on a deployment with `SIGNUP=closed`.
pub const SIGNUP_CLOSED: &str =
    "Sign-up is closed on this deployment; ask an operator for an account.";
/// Shortest password accepted (characters).
pub const MIN_PASSWORD_CHARS: usize = 12;
/// Longest password accepted (bytes; bounds the hashing work).
pub const MAX_PASSWORD_BYTES: usize = 1024;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SignUp {
    pub email: String,
    #[serde(default)]
    pub name: Option<String>,
    pub password: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SignIn {
    pub email: String,
    pub password: String,
}

/// A new session: `token` goes into the cookie (shown once), `csrf_token`
/// into the session's forms.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpenedSession {
    pub token: String,
    pub csrf_token: String,
    pub user: User,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionToken {
    pub token: String,
}

/// A live session: its user and its form token.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionInfo {
    pub user: User,
    pub csrf_token: String,
}

/// What the account page shows: the session, the user's keys (oldest
/// first) and the databases the user is a member of (with the role).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AccountView {
    pub session: SessionInfo,
    pub keys: Vec<KeyInfo>,
    pub databases: Vec<super::Membership>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChangePassword {
    pub token: String,
    pub current_password: String,
    pub new_password: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SetPassword {
    pub password: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionCreateKey {
    pub token: String,
    pub name: String,
    pub access: Access,
    pub databases: DatabaseScope,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionUpdateKey {
    pub token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Access>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub databases: Option<DatabaseScope>,
}

/// What the sign-in and sign-up pages need to know of the deployment.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct AccountSettings {
    /// `SIGNUP=open`.
    pub signup_open: bool,
}
