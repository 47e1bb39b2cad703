//! Part C roles: viewer, editor, owner, support access and non-members.

use cluster_protocol::control::Role;
use cluster_protocol::error::forbidden;
use e2e_tests::{cluster, Person};
use serde_json::json;

#[tokio::test]
async fn roles_decide_what_a_member_may_do() {
    let owner = Person::new().await;
    let editor = Person::new().await;
    let viewer = Person::new().await;
    let stranger = Person::new().await;
    let db_id = &owner.api.new_database("roles").await;
    editor.join(db_id, Role::Editor).await;
    viewer.join(db_id, Role::Viewer).await;
    let tables = format!("/api/databases/{db_id}/tables");

    // Reads: every member; a stranger sees 404 exactly like a missing id.
    for p in [&owner, &editor, &viewer] {
        p.api.get(&tables).await.expect_ok();
    }
    let missing = stranger
        .api
        .get("/api/databases/db_000000000000/tables")
        .await;
    let hidden = stranger.api.get(&tables).await;
    hidden.expect_error(404, "not_found");
    assert_eq!(hidden.body, missing.body);

    // Writes.
    let msg = viewer
        .api
        .post(&tables, json!({"name": "v"}))
        .await
        .expect_error(403, "forbidden");
    assert_eq!(msg, forbidden::VIEWER);
    let t = editor.api.create_table(db_id, "by editor").await;
    let tpath = format!("/api/tables/{}", t["id"].as_str().unwrap());
    editor
        .api
        .patch(&tpath, json!({"name": "renamed"}))
        .await
        .expect_ok();
    assert_eq!(
        viewer
            .api
            .patch(&tpath, json!({"name": "v"}))
            .await
            .expect_error(403, "forbidden"),
        forbidden::VIEWER
    );
    stranger
        .api
        .patch(&tpath, json!({"name": "s"}))
        .await
        .expect_error(404, "not_found");

    // Deleting a table is the owner's act.
    assert_eq!(
        editor
            .api
            .delete(&tpath)
            .await
            .expect_error(403, "forbidden"),
        forbidden::OWNER_DELETE_TABLE
    );
    assert_eq!(
        viewer
            .api
            .delete(&tpath)
            .await
            .expect_error(403, "forbidden"),
        forbidden::VIEWER
    );
    stranger
        .api
        .delete(&tpath)
        .await
        .expect_error(404, "not_found");
    owner.api.delete(&tpath).await.expect_ok();
}

#[tokio::test]
async fn support_access_reads_everything_and_writes_nothing() {
    let owner = Person::new().await;
    let support = Person::new().await;
    let db_id = &owner.api.new_database("sup").await;
    let t = owner.api.create_table(db_id, "T").await;
    let tpath = format!("/api/tables/{}", t["id"].as_str().unwrap());
    support.api.get(&tpath).await.expect_error(404, "not_found");

    cluster()
        .control_plane
        .grant_support(db_id, &support.user_id)
        .await
        .unwrap();
    support.api.get(&tpath).await.expect_ok();
    support
        .api
        .get(&format!("/api/databases/{db_id}/tables"))
        .await
        .expect_ok();
    let msg = support
        .api
        .patch(&tpath, json!({"name": "x"}))
        .await
        .expect_error(403, "forbidden");
    assert_eq!(msg, forbidden::SUPPORT_READ_ONLY);
    let msg = support
        .api
        .post(
            &format!("/api/databases/{db_id}/tables"),
            json!({"name": "x"}),
        )
        .await
        .expect_error(403, "forbidden");
    assert_eq!(msg, forbidden::SUPPORT_READ_ONLY);

    cluster()
        .control_plane
        .revoke_support(db_id, &support.user_id)
        .await
        .unwrap();
    support.api.get(&tpath).await.expect_error(404, "not_found");
}

#[tokio::test]
async fn membership_changes_reach_the_router_at_once() {
    let owner = Person::new().await;
    let guest = Person::new().await;
    let db_id = &owner.api.new_database("m").await;
    let path = format!("/api/databases/{db_id}/tables");
    guest.api.get(&path).await.expect_error(404, "not_found");
    guest.join(db_id, Role::Viewer).await;
    guest.api.get(&path).await.expect_ok();
    guest
        .api
        .post(&path, json!({"name": "x"}))
        .await
        .expect_error(403, "forbidden");
    guest.join(db_id, Role::Editor).await;
    guest
        .api
        .post(&path, json!({"name": "x"}))
        .await
        .expect_ok();
    cluster()
        .control_plane
        .remove_member(db_id, &guest.user_id)
        .await
        .unwrap();
    guest.api.get(&path).await.expect_error(404, "not_found");
    owner.api.get(&path).await.expect_ok();
}
