//! Member management of the public API (`/internal/databases/{id}/members`):
//! listing, adding by id and by email, role changes, removal, and the rules
//! (owner only, no owner grants, at least one owner), against the real
//! catalog and Redis.

use cluster_protocol::control::client::ClientError;
use cluster_protocol::control::{redis_keys, ActedBy, AddMember, ChangeRole, Role};
use cluster_protocol::error::{forbidden, ErrorCode};

use crate::helpers::*;

/// An active database owned by a new user: (owner, database id).
async fn database(app: &App) -> (String, String) {
    let owner = app.user().await;
    let db = app
        .client
        .allocate_database(&owner)
        .await
        .unwrap()
        .database_id;
    app.client.confirm_database(&db).await.unwrap();
    (owner, db)
}

fn by_id(actor: &str, user: &str, role: Role) -> AddMember {
    AddMember {
        actor_id: actor.into(),
        user_id: Some(user.into()),
        email: None,
        role,
    }
}

fn change(actor: &str, role: Role) -> ChangeRole {
    ChangeRole {
        actor_id: actor.into(),
        role,
    }
}

fn acted(actor: &str) -> ActedBy {
    ActedBy {
        actor_id: actor.into(),
    }
}

/// Status, code and message of a call that must fail.
fn refused<T: std::fmt::Debug>(r: Result<T, ClientError>) -> (u16, ErrorCode, String) {
    match r.expect_err("the call should fail") {
        ClientError::Api { status, body } => (status, body.code, body.message),
        e => panic!("no answer: {e}"),
    }
}

#[tokio::test]
async fn list_add_change_remove() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    app.shard("a", 100).await;
    let (owner, db) = database(&app).await;
    let editor = app.user().await;
    let email = format!(
        "Mixed.{}@Example.com",
        cluster_protocol::ids::random_token(6)
    );
    let by_email = app.client.create_user(&email, Some("Eve")).await.unwrap();
    let support = app.user().await;
    app.client.grant_support(&db, &support).await.unwrap();

    // The creator is the only member; a support grant is not listed.
    let list = app.client.members(&db).await.unwrap().members;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].user.id, owner);
    assert_eq!(list[0].role, Role::Owner);

    // Add by id: the target's access version moves and Redis holds the new one.
    let v0 = app.client.user_access(&editor).await.unwrap().version;
    let m = app
        .client
        .add_member_as(&db, &by_id(&owner, &editor, Role::Editor))
        .await
        .unwrap()
        .member;
    assert_eq!(
        (m.user.id.as_str(), m.role),
        (editor.as_str(), Role::Editor)
    );
    let a = app.client.user_access(&editor).await.unwrap();
    assert!(a.version > v0);
    assert_eq!(a.role_in(&db), Some(Role::Editor));
    assert_eq!(
        app.redis_get(&redis_keys::user_version(&editor)).await,
        Some(a.version)
    );

    // Add by email, case-insensitively and trimmed.
    let req = AddMember {
        actor_id: owner.clone(),
        user_id: None,
        email: Some(format!(" {} ", email.to_lowercase())),
        role: Role::Viewer,
    };
    let m = app.client.add_member_as(&db, &req).await.unwrap().member;
    assert_eq!(m.user.id, by_email.id);
    assert_eq!(m.user.email, email);
    assert_eq!(m.user.name, "Eve");
    assert_eq!(m.role, Role::Viewer);

    // Ordered by created_at, then user id; a suspended user is still listed.
    app.client.suspend_user(&by_email.id, true).await.unwrap();
    let list = app.client.members(&db).await.unwrap().members;
    let ids: Vec<&str> = list.iter().map(|m| m.user.id.as_str()).collect();
    assert_eq!(ids, [owner.as_str(), editor.as_str(), by_email.id.as_str()]);
    assert!(list.windows(2).all(|w| w[0].created_at <= w[1].created_at));

    // Change a role; the membership keeps its created_at.
    let before = list[2].created_at;
    let m = app
        .client
        .change_member_role(&db, &by_email.id, &change(&owner, Role::Editor))
        .await
        .unwrap()
        .member;
    assert_eq!((m.role, m.created_at), (Role::Editor, before));
    assert_eq!(
        app.client
            .user_access(&by_email.id)
            .await
            .unwrap()
            .role_in(&db),
        Some(Role::Editor)
    );
    // The same role again is a no-op that answers the member.
    let m = app
        .client
        .change_member_role(&db, &by_email.id, &change(&owner, Role::Editor))
        .await
        .unwrap()
        .member;
    assert_eq!(m.role, Role::Editor);

    // Remove.
    let removed = app
        .client
        .remove_member_as(&db, &editor, &acted(&owner))
        .await
        .unwrap();
    assert_eq!(
        (removed.user_id.as_str(), removed.deleted),
        (editor.as_str(), true)
    );
    assert!(app
        .client
        .user_access(&editor)
        .await
        .unwrap()
        .role_in(&db)
        .is_none());
    assert_eq!(app.client.members(&db).await.unwrap().members.len(), 2);
    app.finish().await;
}

#[tokio::test]
async fn refusals() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    app.shard("a", 100).await;
    let (owner, db) = database(&app).await;
    let editor = app.user().await;
    let viewer = app.user().await;
    let support = app.user().await;
    let stranger = app.user().await;
    app.client
        .add_member(&db, &editor, Role::Editor)
        .await
        .unwrap();
    app.client
        .add_member(&db, &viewer, Role::Viewer)
        .await
        .unwrap();
    app.client.grant_support(&db, &support).await.unwrap();

    // Only an owner changes members; a non-member cannot tell the database exists.
    let hidden = refused(app.client.members("db_000000000000").await);
    assert_eq!(hidden.0, 404);
    for (actor, status, message) in [
        (&editor, 403, forbidden::OWNER_ONLY),
        (&viewer, 403, forbidden::VIEWER),
        (&support, 403, forbidden::SUPPORT_READ_ONLY),
        (&stranger, 404, hidden.2.as_str()),
    ] {
        let add = refused(
            app.client
                .add_member_as(&db, &by_id(actor, &stranger, Role::Viewer))
                .await,
        );
        assert_eq!((add.0, add.2.as_str()), (status, message), "{actor}");
        let patch = refused(
            app.client
                .change_member_role(&db, &viewer, &change(actor, Role::Editor))
                .await,
        );
        assert_eq!((patch.0, patch.2.as_str()), (status, message));
        let delete = refused(
            app.client
                .remove_member_as(&db, &viewer, &acted(actor))
                .await,
        );
        assert_eq!((delete.0, delete.2.as_str()), (status, message));
    }
    let missing = refused(
        app.client
            .add_member_as("db_000000000000", &by_id(&owner, &stranger, Role::Viewer))
            .await,
    );
    assert_eq!(missing, hidden);

    // No key may make someone an owner: neither by adding nor by promoting.
    for r in [
        refused(
            app.client
                .add_member_as(&db, &by_id(&owner, &stranger, Role::Owner))
                .await,
        ),
        refused(
            app.client
                .change_member_role(&db, &editor, &change(&owner, Role::Owner))
                .await,
        ),
    ] {
        assert_eq!(
            (r.0, r.1, r.2.as_str()),
            (403, ErrorCode::Forbidden, forbidden::KEY_OWNER_GRANT)
        );
    }

    // Unknown users, both or neither reference, an existing member.
    let r = refused(
        app.client
            .add_member_as(&db, &by_id(&owner, "usr_000000000000", Role::Viewer))
            .await,
    );
    assert_eq!((r.0, r.1), (404, ErrorCode::NotFound));
    assert!(r.2.contains("usr_000000000000"), "{}", r.2);
    let nobody = AddMember {
        actor_id: owner.clone(),
        user_id: None,
        email: Some("nobody@example.invalid".into()),
        role: Role::Viewer,
    };
    let r = refused(app.client.add_member_as(&db, &nobody).await);
    assert_eq!(r.0, 404);
    assert!(r.2.contains("nobody@example.invalid"), "{}", r.2);
    for (user_id, email) in [
        (Some(stranger.clone()), Some("x@y.z".to_string())),
        (None, None),
    ] {
        let req = AddMember {
            actor_id: owner.clone(),
            user_id,
            email,
            role: Role::Viewer,
        };
        assert_eq!(refused(app.client.add_member_as(&db, &req).await).0, 400);
    }
    let r = refused(
        app.client
            .add_member_as(&db, &by_id(&owner, &editor, Role::Viewer))
            .await,
    );
    assert_eq!((r.0, r.1), (409, ErrorCode::Conflict));
    assert!(r.2.contains("already a member"), "{}", r.2);
    assert_eq!(
        app.client.user_access(&editor).await.unwrap().role_in(&db),
        Some(Role::Editor),
        "a refused add changes nothing"
    );

    // A user who is not a member (a support grant is not a membership).
    for target in [&stranger, &support] {
        let r = refused(
            app.client
                .change_member_role(&db, target, &change(&owner, Role::Viewer))
                .await,
        );
        assert_eq!(r.0, 404);
        assert!(r.2.contains(target.as_str()));
        assert_eq!(
            refused(
                app.client
                    .remove_member_as(&db, target, &acted(&owner))
                    .await
            )
            .0,
            404
        );
    }
    app.finish().await;
}

#[tokio::test]
async fn the_last_owner_stays() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    app.shard("a", 100).await;
    let (owner, db) = database(&app).await;
    for r in [
        refused(
            app.client
                .change_member_role(&db, &owner, &change(&owner, Role::Editor))
                .await,
        ),
        refused(
            app.client
                .remove_member_as(&db, &owner, &acted(&owner))
                .await,
        ),
    ] {
        assert_eq!((r.0, r.1), (409, ErrorCode::Conflict));
        assert!(r.2.contains("last owner"), "{}", r.2);
    }

    // With a second owner (made by the operator), one owner may leave or step down.
    let second = app.user().await;
    app.client
        .add_member(&db, &second, Role::Owner)
        .await
        .unwrap();
    let m = app
        .client
        .change_member_role(&db, &owner, &change(&owner, Role::Editor))
        .await
        .unwrap()
        .member;
    assert_eq!(m.role, Role::Editor);
    // The one who stepped down is no longer an owner: 403.
    let r = refused(
        app.client
            .remove_member_as(&db, &second, &acted(&owner))
            .await,
    );
    assert_eq!((r.0, r.2.as_str()), (403, forbidden::OWNER_ONLY));
    // The remaining owner is the last one, even for themself.
    let r = refused(
        app.client
            .remove_member_as(&db, &second, &acted(&second))
            .await,
    );
    assert_eq!(r.0, 409);
    app.client
        .remove_member_as(&db, &owner, &acted(&second))
        .await
        .unwrap();
    // `owner_id` stays the creator's (the cap of owned databases counts it).
    assert_eq!(app.client.database(&db).await.unwrap().owner_id, owner);
    app.finish().await;
}

/// Two owners demoting each other at once: the database's row lock makes
/// one of them wait and then see that the other is its last owner.
#[tokio::test]
async fn concurrent_demotions_keep_an_owner() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    app.shard("a", 100).await;
    for _ in 0..5 {
        let (a, db) = database(&app).await;
        let b = app.user().await;
        app.client.add_member(&db, &b, Role::Owner).await.unwrap();
        let (by_a, by_b) = (change(&a, Role::Editor), change(&b, Role::Editor));
        let (ra, rb) = tokio::join!(
            app.client.change_member_role(&db, &b, &by_a),
            app.client.change_member_role(&db, &a, &by_b),
        );
        assert_eq!(
            u8::from(ra.is_ok()) + u8::from(rb.is_ok()),
            1,
            "{ra:?} {rb:?}"
        );
        let owners = app
            .client
            .members(&db)
            .await
            .unwrap()
            .members
            .into_iter()
            .filter(|m| m.role == Role::Owner)
            .count();
        assert_eq!(owners, 1);
    }
    app.finish().await;
}

/// The operator contract is unchanged beside the public API's rules: the
/// CLI's `members add` on a member changes the role (no 409), may make an
/// owner, and `members remove` may remove the last owner.
#[tokio::test]
async fn operator_cli_members_keep_their_behaviour() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    app.shard("a", 100).await;
    let (owner, db) = database(&app).await;
    let guest = app.user().await;
    for role in ["editor", "owner", "viewer"] {
        let (ok, out, err) = cli(
            &app,
            &[
                "members",
                "add",
                "--database",
                &db,
                "--user",
                &guest,
                "--role",
                role,
                "--json",
            ],
        )
        .await;
        assert!(ok, "{err}");
        assert_eq!(
            one_json(&out),
            serde_json::json!({"database_id": db, "user_id": guest, "role": role})
        );
        let role_now = app.client.user_access(&guest).await.unwrap().role_in(&db);
        assert_eq!(role_now, Role::parse(role));
    }
    let (ok, out, err) = cli(
        &app,
        &[
            "members",
            "remove",
            "--database",
            &db,
            "--user",
            &owner,
            "--json",
        ],
    )
    .await;
    assert!(ok, "{err}");
    assert_eq!(
        one_json(&out),
        serde_json::json!({"database_id": db, "user_id": owner, "removed": true})
    );
    let left = app.client.members(&db).await.unwrap().members;
    assert_eq!(left.len(), 1);
    assert_eq!(
        (left[0].user.id.as_str(), left[0].role),
        (guest.as_str(), Role::Viewer)
    );
    app.finish().await;
}
