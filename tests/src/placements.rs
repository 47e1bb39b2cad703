//! Where the control plane places things, as the move tests read it: a
//! database's placement and the shards registered now. Below both
//! [`crate::moves`] and [`crate::leftovers`].

use cluster_protocol::control::DatabaseInfo;

use crate::cluster;

/// The database's placement in the control plane's catalog.
pub async fn database(database_id: &str) -> DatabaseInfo {
    cluster()
        .control_plane
        .database(database_id)
        .await
        .unwrap_or_else(|e| panic!("databases show {database_id}: {e:?}"))
}

/// The shard names registered now, in order.
pub async fn shard_names() -> Vec<String> {
    let list = cluster().control_plane.shards().await.expect("shards list");
    let mut names: Vec<String> = list.shards.into_iter().map(|s| s.name).collect();
    names.sort_by_key(|n| shard_number(n));
    names
}

fn shard_number(name: &str) -> u32 {
    name.trim_start_matches("shard-")
        .parse()
        .unwrap_or(u32::MAX)
}
