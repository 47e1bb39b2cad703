use cluster_protocol::control::redis_keys;
use cluster_protocol::control::Role;

use crate::helpers::*;

#[tokio::test]
async fn membership_changes_bump_versions() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    app.shard("a", 100).await;
    let owner = app.user().await;
    let guest = app.user().await;
    let db = app
        .client
        .allocate_database(&owner)
        .await
        .unwrap()
        .database_id;
    app.client.confirm_database(&db).await.unwrap();

    let v0 = app.client.user_access(&guest).await.unwrap().version;
    assert_eq!(
        app.redis_get(&redis_keys::user_version(&guest)).await,
        Some(v0)
    );
    app.client
        .add_member(&db, &guest, Role::Editor)
        .await
        .unwrap();
    let a1 = app.client.user_access(&guest).await.unwrap();
    assert!(a1.version > v0);
    assert_eq!(a1.role_in(&db), Some(Role::Editor));
    assert_eq!(
        app.redis_get(&redis_keys::user_version(&guest)).await,
        Some(a1.version)
    );

    app.client
        .add_member(&db, &guest, Role::Viewer)
        .await
        .unwrap();
    let a2 = app.client.user_access(&guest).await.unwrap();
    assert!(a2.version > a1.version);
    assert_eq!(a2.role_in(&db), Some(Role::Viewer));

    app.client.remove_member(&db, &guest).await.unwrap();
    let a3 = app.client.user_access(&guest).await.unwrap();
    assert!(a3.version > a2.version && a3.role_in(&db).is_none());

    app.client.grant_support(&db, &guest).await.unwrap();
    app.client.grant_support(&db, &guest).await.unwrap();
    let a4 = app.client.user_access(&guest).await.unwrap();
    assert!(a4.has_support(&db) && a4.version > a3.version);
    app.client.revoke_support(&db, &guest).await.unwrap();
    app.client.revoke_support(&db, &guest).await.unwrap();
    assert!(!app
        .client
        .user_access(&guest)
        .await
        .unwrap()
        .has_support(&db));

    assert_eq!(
        status(
            app.client
                .add_member("db_000000000000", &guest, Role::Viewer)
                .await
        ),
        404
    );
    assert_eq!(
        status(
            app.client
                .add_member(&db, "usr_000000000000", Role::Viewer)
                .await
        ),
        404
    );
    assert_eq!(
        status(app.client.user_access("usr_000000000000").await),
        404
    );
    app.finish().await;
}
