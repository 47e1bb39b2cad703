//! Member management over the public API (`/api/databases/{id}/members`),
//! through the real router and control plane: listing, adding by id and by
//! email, role changes and removals that take effect on the next requests
//! (within one second on every router), and the rules: owners only, no
//! owner grant by a key, the last owner stays, read-only keys, support
//! access, narrowed keys and strangers.

use std::time::{Duration, Instant};

use cluster_protocol::control::{Access, DatabaseScope, Role};
use cluster_protocol::error::forbidden;
use e2e_tests::{cluster, Api, Person};
use serde_json::{json, Value};

/// ARCHITECTURE.md: membership changes reach every router within one second.
const PROPAGATION: Duration = Duration::from_secs(1);

/// Polls `GET path` as `api` until it answers `status`; fails after
/// [`PROPAGATION`] (measured from the change, which returned just before).
async fn within_a_second(api: &Api, path: &str, status: u16) {
    let deadline = Instant::now() + PROPAGATION;
    loop {
        let r = api.get(path).await;
        if r.status == status {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "GET {path}: still {} after {PROPAGATION:?}, wanted {status}: {}",
            r.status,
            r.body
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Like [`within_a_second`] for a table creation's status.
async fn can_create_table_within_a_second(api: &Api, database_id: &str, status: u16) -> Value {
    let deadline = Instant::now() + PROPAGATION;
    let path = format!("/api/databases/{database_id}/tables");
    loop {
        let r = api.post(&path, json!({"name": "t"})).await;
        if r.status == status {
            return r.body;
        }
        assert!(
            Instant::now() < deadline,
            "POST {path}: still {} after {PROPAGATION:?}, wanted {status}: {}",
            r.status,
            r.body
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn ids(list: &Value) -> Vec<String> {
    list["members"]
        .as_array()
        .expect("members is a list")
        .iter()
        .map(|m| m["user"]["id"].as_str().expect("user id").to_string())
        .collect()
}

#[tokio::test]
async fn owners_list_add_change_and_remove_members() {
    let owner = Person::new().await;
    let bob = Person::new().await;
    let carol = Person::new().await;
    let db = owner.api.new_database("members").await;
    let members = format!("/api/databases/{db}/members");
    let tables = format!("/api/databases/{db}/tables");

    // The creator is the one member.
    let list = owner.api.get(&members).await.expect_ok().clone();
    assert_eq!(ids(&list), [owner.user_id.as_str()]);
    let me = &list["members"][0];
    assert_eq!(me["role"], "owner");
    assert_eq!(me["user"]["email"], owner.email.as_str());
    assert!(me["user"]["name"].is_string());
    assert!(me["created_at"].as_str().is_some_and(|t| t.ends_with('Z')));
    bob.api.get(&members).await.expect_error(404, "not_found");
    bob.api.get(&tables).await.expect_error(404, "not_found");

    // Add by id: Bob can read within a second, and may not write.
    let m = owner
        .api
        .post(&members, json!({"user_id": bob.user_id, "role": "viewer"}))
        .await
        .expect_ok()["member"]
        .clone();
    assert_eq!(m["user"]["id"], bob.user_id.as_str());
    assert_eq!(m["role"], "viewer");
    within_a_second(&bob.api, &tables, 200).await;
    let msg = bob
        .api
        .post(&tables, json!({"name": "no"}))
        .await
        .expect_error(403, "forbidden");
    assert_eq!(msg, forbidden::VIEWER);

    // Add by email (any case): Carol, an editor.
    let m = owner
        .api
        .post(
            &members,
            json!({"email": carol.email.to_uppercase(), "role": "editor"}),
        )
        .await
        .expect_ok()["member"]
        .clone();
    assert_eq!(m["user"]["id"], carol.user_id.as_str());
    assert_eq!(m["role"], "editor");
    can_create_table_within_a_second(&carol.api, &db, 200).await;

    // Listed by created_at, then user id; any member may list.
    let list = bob.api.get(&members).await.expect_ok().clone();
    assert_eq!(
        ids(&list),
        [
            owner.user_id.as_str(),
            bob.user_id.as_str(),
            carol.user_id.as_str()
        ]
    );

    // Already a member; unknown users; bad bodies.
    let msg = owner
        .api
        .post(&members, json!({"user_id": bob.user_id, "role": "editor"}))
        .await
        .expect_error(409, "conflict");
    assert!(msg.contains("already a member"), "{msg}");
    let msg = owner
        .api
        .post(
            &members,
            json!({"user_id": "usr_000000000000", "role": "viewer"}),
        )
        .await
        .expect_error(404, "not_found");
    assert!(msg.contains("usr_000000000000"), "{msg}");
    let msg = owner
        .api
        .post(
            &members,
            json!({"email": "nobody@nowhere.example.test", "role": "viewer"}),
        )
        .await
        .expect_error(404, "not_found");
    assert!(msg.contains("nobody@nowhere.example.test"), "{msg}");
    owner
        .api
        .post(
            &members,
            json!({"user_id": bob.user_id, "email": bob.email, "role": "viewer"}),
        )
        .await
        .expect_error(400, "bad_request");
    let msg = owner
        .api
        .post(&members, json!({"user_id": bob.user_id, "role": "admin"}))
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("viewer, editor, owner"), "{msg}");

    // Only owners manage members.
    let bob_path = format!("{members}/{}", bob.user_id);
    let carol_path = format!("{members}/{}", carol.user_id);
    for (who, expected) in [(&bob, forbidden::VIEWER), (&carol, forbidden::OWNER_ONLY)] {
        let msg = who
            .api
            .post(
                &members,
                json!({"user_id": owner.user_id, "role": "viewer"}),
            )
            .await
            .expect_error(403, "forbidden");
        assert_eq!(msg, expected);
        let msg = who
            .api
            .patch(&carol_path, json!({"role": "viewer"}))
            .await
            .expect_error(403, "forbidden");
        assert_eq!(msg, expected);
        let msg = who
            .api
            .delete(&bob_path)
            .await
            .expect_error(403, "forbidden");
        assert_eq!(msg, expected);
    }

    // A role change takes effect on the next requests: Bob becomes an editor.
    let m = owner
        .api
        .patch(&bob_path, json!({"role": "editor"}))
        .await
        .expect_ok()["member"]
        .clone();
    assert_eq!(m["role"], "editor");
    can_create_table_within_a_second(&bob.api, &db, 200).await;
    // ... and back to viewer.
    owner
        .api
        .patch(&bob_path, json!({"role": "viewer"}))
        .await
        .expect_ok();
    can_create_table_within_a_second(&bob.api, &db, 403).await;

    // No key may make someone an owner.
    for r in [
        owner.api.patch(&bob_path, json!({"role": "owner"})).await,
        owner
            .api
            .post(
                &members,
                json!({"user_id": Person::new().await.user_id, "role": "owner"}),
            )
            .await,
    ] {
        assert_eq!(r.expect_error(403, "forbidden"), forbidden::KEY_OWNER_GRANT);
    }

    // The last owner can be neither demoted nor removed.
    let owner_path = format!("{members}/{}", owner.user_id);
    let msg = owner
        .api
        .patch(&owner_path, json!({"role": "editor"}))
        .await
        .expect_error(409, "conflict");
    assert!(msg.contains("last owner"), "{msg}");
    owner
        .api
        .delete(&owner_path)
        .await
        .expect_error(409, "conflict");

    // Remove Bob: 404 for him within a second; removing again is 404.
    let r = owner.api.delete(&bob_path).await.expect_ok().clone();
    assert_eq!(r, json!({"user_id": bob.user_id, "deleted": true}));
    within_a_second(&bob.api, &tables, 404).await;
    bob.api.get(&members).await.expect_error(404, "not_found");
    owner
        .api
        .delete(&bob_path)
        .await
        .expect_error(404, "not_found");
    owner
        .api
        .patch(&bob_path, json!({"role": "viewer"}))
        .await
        .expect_error(404, "not_found");

    // A suspended member is still listed.
    cluster()
        .control_plane
        .suspend_user(&carol.user_id, true)
        .await
        .unwrap();
    let list = owner.api.get(&members).await.expect_ok().clone();
    assert_eq!(ids(&list), [owner.user_id.as_str(), carol.user_id.as_str()]);
}

#[tokio::test]
async fn keys_support_and_strangers() {
    let owner = Person::new().await;
    let db = owner.api.new_database("members-keys").await;
    let other_db = owner.api.new_database("members-other").await;
    let members = format!("/api/databases/{db}/members");
    let guest = Person::new().await;
    let add_guest = json!({"user_id": guest.user_id, "role": "viewer"});

    // A read-only key of the owner reads, and changes nothing.
    let (_, read_only) = owner
        .another_key(Access::ReadOnly, DatabaseScope::All)
        .await;
    read_only.get(&members).await.expect_ok();
    let msg = read_only
        .post(&members, add_guest.clone())
        .await
        .expect_error(403, "forbidden");
    assert_eq!(msg, forbidden::KEY_READ_ONLY);

    // A key narrowed away from the database: 404, identical to a stranger's.
    let (_, narrowed) = owner
        .another_key(Access::ReadWrite, DatabaseScope::Only(vec![other_db]))
        .await;
    let hidden = narrowed.get(&members).await;
    hidden.expect_error(404, "not_found");
    narrowed
        .post(&members, add_guest.clone())
        .await
        .expect_error(404, "not_found");
    let stranger = Person::new().await;
    let r = stranger.api.get(&members).await;
    assert_eq!(r.body, hidden.body);
    stranger
        .api
        .post(&members, add_guest.clone())
        .await
        .expect_error(404, "not_found");
    let missing = owner
        .api
        .get("/api/databases/db_000000000000/members")
        .await;
    assert_eq!(missing.body, hidden.body);

    // Support access reads the list (and is not in it), and writes nothing.
    let support = Person::new().await;
    cluster()
        .control_plane
        .grant_support(&db, &support.user_id)
        .await
        .unwrap();
    within_a_second(&support.api, &members, 200).await;
    let list = support.api.get(&members).await.expect_ok().clone();
    assert_eq!(ids(&list), [owner.user_id.as_str()]);
    let msg = support
        .api
        .post(&members, add_guest.clone())
        .await
        .expect_error(403, "forbidden");
    assert_eq!(msg, forbidden::SUPPORT_READ_ONLY);

    // The operator's CLI path still works beside the API: a second owner
    // made by the operator lets the first one step down over the API.
    cluster()
        .control_plane
        .add_member(&db, &guest.user_id, Role::Owner)
        .await
        .unwrap();
    let m = owner
        .api
        .patch(
            &format!("{members}/{}", owner.user_id),
            json!({"role": "editor"}),
        )
        .await
        .expect_ok()["member"]
        .clone();
    assert_eq!(m["role"], "editor");
    // Now an editor: no longer allowed to manage members.
    let deadline = Instant::now() + PROPAGATION;
    loop {
        let r = owner
            .api
            .delete(&format!("{members}/{}", guest.user_id))
            .await;
        if r.status == 403 {
            assert_eq!(r.body["error"]["message"], forbidden::OWNER_ONLY);
            break;
        }
        assert!(Instant::now() < deadline, "still {}: {}", r.status, r.body);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The database's recorded owner stays its creator.
    let info = cluster().control_plane.database(&db).await.unwrap();
    assert_eq!(info.owner_id, owner.user_id);
}
