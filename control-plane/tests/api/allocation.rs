use cluster_protocol::control::{DatabaseState, Role};

use crate::helpers::*;

#[tokio::test]
async fn allocation_cap_positions_and_draining() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    let no_shard_user = app.user().await;
    assert_eq!(
        status(app.client.allocate_database(&no_shard_user).await),
        500
    );
    app.shard("a", 100).await;
    app.shard("b", 100).await;
    app.client.drain_shard("b").await.unwrap();
    assert_eq!(status(app.client.drain_shard("zzz").await), 404);
    assert_eq!(
        status(app.client.allocate_database("usr_000000000000").await),
        404
    );

    let owner = app.user().await;
    let allocations =
        futures::future::join_all((0..100).map(|_| app.client.allocate_database(&owner))).await;
    let mut positions: Vec<i64> = Vec::new();
    for a in allocations {
        let a = a.expect("allocation under the cap");
        assert_eq!(a.shard.name, "a", "draining shard b must get nothing");
        assert_eq!(a.epoch, 1);
        assert!(a.database_id.starts_with(&format!("db_{}", a.tag)));
        positions.push(a.position);
    }
    positions.sort();
    positions.dedup();
    assert_eq!(positions.len(), 100, "positions are unique");
    assert_eq!(status(app.client.allocate_database(&owner).await), 400);

    let other = app.user().await;
    let next = app.client.allocate_database(&other).await.unwrap();
    assert!(
        next.position > *positions.last().unwrap(),
        "positions increase"
    );
    let list = app.client.databases(Some("b")).await.unwrap();
    assert!(list.databases.is_empty());

    // Placement, confirm, release.
    let p = app.client.placement(&next.tag).await.unwrap();
    assert_eq!(p.state, DatabaseState::Creating);
    assert_eq!(status(app.client.placement("ZZZZZ").await), 404);
    app.client
        .confirm_database(&next.database_id)
        .await
        .unwrap();
    assert_eq!(
        app.client.database(&next.database_id).await.unwrap().state,
        DatabaseState::Active
    );
    assert_eq!(
        status(app.client.release_database(&next.database_id).await),
        409
    );
    let access = app.client.user_access(&other).await.unwrap();
    assert_eq!(access.role_in(&next.database_id), Some(Role::Owner));

    let gone = app.client.allocate_database(&other).await.unwrap();
    assert!(
        app.client
            .user_access(&other)
            .await
            .unwrap()
            .role_in(&gone.database_id)
            .is_none(),
        "creating is invisible"
    );
    app.client
        .release_database(&gone.database_id)
        .await
        .unwrap();
    assert_eq!(status(app.client.database(&gone.database_id).await), 404);
    let found = app
        .client
        .placements(vec![next.database_id.clone(), gone.database_id.clone()])
        .await
        .unwrap();
    assert_eq!(found.placements.len(), 1);
    app.finish().await;
}
