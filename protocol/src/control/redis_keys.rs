//! Redis keys and channels the control plane writes and routers read.

/// Channel carrying [`Invalidation`] messages as JSON.
pub const INVALIDATION_CHANNEL: &str = "cluster:invalidate";

/// Current version of a live key; absent when revoked, its user suspended,
/// or simply not seeded yet (a router then asks the control plane, which
/// re-seeds it for a live key).
pub fn key_version(key_id: &str) -> String {
    format!("cluster:key:{key_id}")
}

/// Current access version of a user (memberships, support grants).
pub fn user_version(user_id: &str) -> String {
    format!("cluster:user:{user_id}")
}

/// Last time a key was used, unix milliseconds (written by routers).
pub fn key_last_used(key_id: &str) -> String {
    format!("cluster:lastused:{key_id}")
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum Invalidation {
    Key(String),
    User(String),
    /// A database's placement changed (by database id).
    Placement(String),
}
