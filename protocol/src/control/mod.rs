//! The control plane's internal HTTP API: types shared by the control plane
//! (server), routers and shard nodes (clients) and the operator CLI.
//!
//! Every route is under `/internal/` and requires `Authorization: Bearer
//! <token>` of a tier the route allows (the operator's `CONTROL_PLANE_TOKEN`
//! on every route; the router's and shard's tokens on the routes
//! `control-plane/src/http/routes.rs` gives them). Errors use the envelope of
//! [`crate::error`]. Redis keys and the invalidation channel are in [`redis_keys`].
//!
//! | method + path | body | reply |
//! |---|---|---|
//! | GET `/internal/health` | | `{ok:true}` |
//! | GET `/internal/keys/{key_id}` | | [`KeyRecord`] (404 unknown or revoked) |
//! | GET `/internal/users/{user_id}/access` | | [`UserAccess`] |
//! | GET `/internal/placements/{tag}` | | [`Placement`] (404 unknown tag) |
//! | POST `/internal/placements/lookup` | [`PlacementLookup`] | [`Placements`] |
//! | POST `/internal/databases/allocate` | [`AllocateRequest`] | [`Allocation`] (400 over the cap) |
//! | POST `/internal/databases/{id}/confirm` | | `{ok:true}` |
//! | POST `/internal/databases/{id}/release` | | `{ok:true}` |
//! | GET `/internal/databases` | query [`DatabaseFilter`] | [`DatabaseList`] |
//! | GET `/internal/databases/{id}` | | [`DatabaseInfo`] |
//! | POST `/internal/users` | [`CreateUser`] | [`User`] |
//! | GET `/internal/users` | query [`Page`] | [`UserList`] |
//! | POST `/internal/users/{id}/suspend` and `/unsuspend` | | [`User`] |
//! | GET `/internal/users/{id}/keys` | | [`KeyList`] (404 unknown user) |
//! | POST `/internal/keys` | [`CreateKey`] | [`CreatedKey`] |
//! | PATCH `/internal/keys/{id}` | [`UpdateKey`] | [`KeyInfo`] |
//! | DELETE `/internal/keys/{id}` | | `{ok:true}` |
//! | POST `/internal/members` | [`MemberChange`] (role required) | `{ok:true}` |
//! | DELETE `/internal/members` | [`MemberChange`] | `{ok:true}` |
//! | POST `/internal/support` / DELETE `/internal/support` | [`SupportChange`] | `{ok:true}` |
//! | GET `/internal/databases/{id}/members` | | [`MemberList`] (404 unknown or not active) |
//! | POST `/internal/databases/{id}/members` | [`AddMember`] | [`MemberReply`] |
//! | PATCH `/internal/databases/{id}/members/{user_id}` | [`ChangeRole`] | [`MemberReply`] |
//! | DELETE `/internal/databases/{id}/members/{user_id}` | [`ActedBy`] | [`RemovedMember`] |
//!
//! The `/internal/databases/{id}/members` writes are the public API's member
//! management, asked for by `actor_id` with an API key: the control plane
//! checks, in one transaction, that the actor is an owner (404 for a
//! non-member, 403 with part C's messages otherwise), refuses to make
//! anyone an owner (no key may), keeps at least one owner (409), and
//! invalidates like `/internal/members`, which is the operator's route and
//! has none of these rules.
//! | GET `/internal/shards` | | [`ShardList`] (with `databases` and `bytes`) |
//! | POST `/internal/shards` | [`AddShard`] | [`Shard`] |
//! | POST `/internal/shards/{name}/drain` | [`DrainRequest`] | [`DrainReply`] (starts the moves off it) |
//! | POST `/internal/shards/{name}/activate` | | [`Shard`] |
//! | POST `/internal/moves` | [`CreateMove`] | [`Move`] (400/404/409 refused, nothing changed) |
//! | GET `/internal/moves` | query [`MoveFilter`] | [`MoveList`] (newest first) |
//! | GET `/internal/moves/{id}` | | [`Move`] |
//! | POST `/internal/moves/{id}/abort` | | [`Move`] (409 when already finished or switched over) |
//! | POST `/internal/databases/{id}/restore` | [`CreateRestore`] | 202 [`Restore`] (400/404/409 refused, nothing made) |
//! | GET `/internal/restores` | | [`RestoreList`] (newest first) |
//! | GET `/internal/restores/{id}` | | [`Restore`] |
//! | POST `/internal/rebalance` | [`RebalanceRequest`] | [`RebalanceReply`] |
//!
//! Quotas and usage: see [`quotas`]. Accounts and sessions: see [`accounts`].

pub mod accounts;
pub mod client;
pub mod moves;
pub mod quotas;
pub mod redis_keys;
pub mod restores;

pub use moves::*;
pub use restores::*;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    ReadWrite,
    ReadOnly,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::ReadWrite => "read_write",
            Access::ReadOnly => "read_only",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "read_write" => Some(Access::ReadWrite),
            "read_only" => Some(Access::ReadOnly),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Viewer,
    Editor,
    Owner,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Editor => "editor",
            Role::Owner => "owner",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "viewer" => Some(Role::Viewer),
            "editor" => Some(Role::Editor),
            "owner" => Some(Role::Owner),
            _ => None,
        }
    }
}

/// A key's database scope: `"all"` or an exact list of ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseScope {
    All,
    Only(Vec<String>),
}

impl DatabaseScope {
    pub fn allows(&self, database_id: &str) -> bool {
        match self {
            DatabaseScope::All => true,
            DatabaseScope::Only(ids) => ids.iter().any(|d| d == database_id),
        }
    }
    pub fn is_narrowed(&self) -> bool {
        matches!(self, DatabaseScope::Only(_))
    }
    /// Parses the CLI form: `all` or `db_a,db_b`.
    pub fn parse_cli(s: &str) -> Self {
        if s.trim() == "all" {
            DatabaseScope::All
        } else {
            DatabaseScope::Only(
                s.split(',')
                    .map(str::trim)
                    .filter(|x| !x.is_empty())
                    .map(String::from)
                    .collect(),
            )
        }
    }
}

impl Serialize for DatabaseScope {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            DatabaseScope::All => s.serialize_str("all"),
            DatabaseScope::Only(ids) => ids.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for DatabaseScope {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Word(String),
            List(Vec<String>),
        }
        match Raw::deserialize(d)? {
            Raw::Word(w) if w == "all" => Ok(DatabaseScope::All),
            Raw::Word(w) => Err(serde::de::Error::custom(format!(
                "databases must be \"all\" or a list of ids, got {w:?}"
            ))),
            Raw::List(ids) => Ok(DatabaseScope::Only(ids)),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct User {
    pub id: String,
    pub email: String,
    pub name: String,
    #[serde(default)]
    pub suspended: bool,
}

/// What a router needs to authenticate a key. `secret_hash` is the argon2id
/// PHC string; `version` changes on every update of the key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KeyRecord {
    pub id: String,
    pub name: String,
    pub user: User,
    pub secret_hash: String,
    pub access: Access,
    pub databases: DatabaseScope,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub version: i64,
    /// The owner's per-key request budget per minute when their account
    /// has an override (`quotas set --requests-per-minute`); `None`: the
    /// router's own setting (`ROUTER_KEY_LIMIT_PER_MIN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_minute: Option<u64>,
}

/// The public view of a key (CLI output, whoami).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KeyInfo {
    pub id: String,
    pub name: String,
    pub user_id: String,
    pub access: Access,
    pub databases: DatabaseScope,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreateKey {
    pub user_id: String,
    pub name: String,
    #[serde(default = "default_access")]
    pub access: Access,
    #[serde(default = "default_scope")]
    pub databases: DatabaseScope,
}

fn default_access() -> Access {
    Access::ReadWrite
}
fn default_scope() -> DatabaseScope {
    DatabaseScope::All
}

/// `token` is `<key_id>.<secret>`, shown once.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreatedKey {
    pub id: String,
    pub token: String,
    pub name: String,
    pub access: Access,
    pub databases: DatabaseScope,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct UpdateKey {
    /// A new name (the account page's rename).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Access>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub databases: Option<DatabaseScope>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreateUser {
    pub email: String,
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Membership {
    pub database_id: String,
    pub role: Role,
}

/// Everything a router needs to decide a user's rights; `version` changes on
/// every membership or support change of this user.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UserAccess {
    pub user_id: String,
    pub version: i64,
    pub memberships: Vec<Membership>,
    /// Databases the user holds a read-only support grant on.
    pub support: Vec<String>,
}

impl UserAccess {
    pub fn role_in(&self, database_id: &str) -> Option<Role> {
        self.memberships
            .iter()
            .find(|m| m.database_id == database_id)
            .map(|m| m.role)
    }
    pub fn has_support(&self, database_id: &str) -> bool {
        self.support.iter().any(|d| d == database_id)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemberChange {
    pub database_id: String,
    pub user_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
}

/// A member as the public API lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Member {
    pub user: MemberUser,
    pub role: Role,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// The user of a [`Member`] (a suspended user is listed too).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberUser {
    pub id: String,
    pub name: String,
    pub email: String,
}

/// A database's members by `created_at`, then user id.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemberList {
    pub members: Vec<Member>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemberReply {
    pub member: Member,
}

/// Adds a member, named by exactly one of `user_id` or `email`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AddMember {
    pub actor_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    pub role: Role,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChangeRole {
    pub actor_id: String,
    pub role: Role,
}

/// Who asks for a change that carries nothing else (removing a member).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ActedBy {
    pub actor_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RemovedMember {
    pub user_id: String,
    pub deleted: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SupportChange {
    pub database_id: String,
    pub user_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardRef {
    pub name: String,
    pub url: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShardState {
    Active,
    Draining,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Shard {
    pub name: String,
    pub url: String,
    pub postgres: String,
    pub weight: u32,
    pub state: ShardState,
    /// Databases placed on the shard (`GET /internal/shards` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub databases: Option<i64>,
    /// Size of the shard's PostgreSQL database (`pg_database_size`), when
    /// the control plane could read it in time (`GET /internal/shards` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardList {
    pub shards: Vec<Shard>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AddShard {
    pub name: String,
    pub url: String,
    pub postgres: String,
    #[serde(default = "default_weight")]
    pub weight: u32,
}

fn default_weight() -> u32 {
    100
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DatabaseState {
    /// Allocated, schema not yet confirmed by the shard.
    Creating,
    Active,
}

/// Where a database lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub database_id: String,
    pub tag: String,
    pub shard: ShardRef,
    pub epoch: i64,
    pub state: DatabaseState,
    /// Set during a move's cutover: routers hold the database's requests
    /// until the placement changes (flip or abort, announced as a placement
    /// invalidation) or until this instant, whichever comes first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_until: Option<chrono::DateTime<chrono::Utc>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlacementLookup {
    pub database_ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Placements {
    pub placements: Vec<Placement>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AllocateRequest {
    pub user_id: String,
}

/// A freshly allocated database: the shard creates it from this.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    pub database_id: String,
    pub tag: String,
    pub position: i64,
    pub shard: ShardRef,
    pub epoch: i64,
    /// The owner's overrides of the limits the shard enforces.
    #[serde(default)]
    pub limits: quotas::DatabaseLimits,
}

/// The control plane's view of one database (CLI).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DatabaseInfo {
    pub id: String,
    pub tag: String,
    pub owner_id: String,
    pub shard: String,
    pub state: DatabaseState,
    pub position: i64,
    pub epoch: i64,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// `GET /internal/databases` by position; `next_cursor` as in [`MoveList`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DatabaseList {
    pub databases: Vec<DatabaseInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// The filters and page of `GET /internal/databases` (query string).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DatabaseFilter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// `creating` or `active`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// `GET /internal/users`, oldest first; `next_cursor` as in [`MoveList`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UserList {
    pub users: Vec<User>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `GET /internal/users/{id}/keys`: the user's keys, oldest first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KeyList {
    pub keys: Vec<KeyInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ok {
    pub ok: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_serialises_as_all_or_list() {
        assert_eq!(
            serde_json::to_value(DatabaseScope::All).unwrap(),
            serde_json::json!("all")
        );
        let only = DatabaseScope::Only(vec!["db_a".into()]);
        assert_eq!(
            serde_json::to_value(&only).unwrap(),
            serde_json::json!(["db_a"])
        );
        let back: DatabaseScope = serde_json::from_value(serde_json::json!(["db_a"])).unwrap();
        assert_eq!(back, only);
        assert!(serde_json::from_value::<DatabaseScope>(serde_json::json!("some")).is_err());
    }

    #[test]
    fn scope_cli_form() {
        assert_eq!(DatabaseScope::parse_cli("all"), DatabaseScope::All);
        assert_eq!(
            DatabaseScope::parse_cli("db_a, db_b"),
            DatabaseScope::Only(vec!["db_a".into(), "db_b".into()])
        );
    }

    #[test]
    fn access_strings() {
        assert_eq!(
            serde_json::to_value(Access::ReadOnly).unwrap(),
            serde_json::json!("read_only")
        );
        assert_eq!(Access::parse("read_write"), Some(Access::ReadWrite));
        assert_eq!(Access::parse("rw"), None);
    }
}
