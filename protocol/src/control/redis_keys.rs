//! Redis keys and channels the control plane writes and routers read.

/// Channel carrying [`Invalidation`] messages as JSON.
pub const INVALIDATION_CHANNEL: &str = "cluster:invalidate";

// Every per-user name carries the user id as its hash tag (`{u_...}`), so
// what a request reads and writes for one key (its liveness, its user's
// access version, its last-used stamp and its budget) lies in one Redis
// Cluster slot and one script can touch it all.

/// Current version of a live key; absent when revoked, its user suspended,
/// or simply not seeded yet (a router then asks the control plane, which
/// re-seeds it for a live key).
pub fn key_version(user_id: &str, key_id: &str) -> String {
    format!("cluster:{{{user_id}}}:key:{key_id}")
}

/// Current access version of a user (memberships, support grants).
pub fn user_version(user_id: &str) -> String {
    format!("cluster:{{{user_id}}}:user")
}

/// Last time a key was used, unix milliseconds (written by routers).
pub fn key_last_used(user_id: &str, key_id: &str) -> String {
    format!("cluster:{{{user_id}}}:lastused:{key_id}")
}

/// Sorted set of live routers: member = a router's id (random per process),
/// score = unix milliseconds of its last heartbeat. A router whose
/// heartbeat is older than [`ROUTER_LIVE_MS`] counts as gone.
pub const ROUTERS: &str = "cluster:routers";

/// How often a router heartbeats into [`ROUTERS`].
pub const ROUTER_HEARTBEAT_MS: u64 = 1_000;

/// A router whose last heartbeat is older than this is not waited for.
pub const ROUTER_LIVE_MS: u64 = 5_000;

/// Hash of the placement epochs routers acknowledged for a database:
/// field = router id, value = the epoch the router now routes by. Written
/// by a router after it applied a placement invalidation and fetched the
/// placement again; read by the control plane before it drops a moved
/// database's old copy. Expires (the control plane sets a TTL).
pub fn placement_acks(database_id: &str) -> String {
    format!("cluster:acks:{database_id}")
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum Invalidation {
    Key(String),
    User(String),
    /// A database's placement changed (by database id).
    Placement(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keys_names_share_its_users_hash_tag() {
        assert_eq!(key_version("u_1", "k_2"), "cluster:{u_1}:key:k_2");
        assert_eq!(user_version("u_1"), "cluster:{u_1}:user");
        assert_eq!(key_last_used("u_1", "k_2"), "cluster:{u_1}:lastused:k_2");
    }
}
