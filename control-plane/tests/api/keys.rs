use cluster_protocol::control::redis_keys;
use cluster_protocol::control::{Access, CreateKey, DatabaseScope, UpdateKey};
use redis::AsyncCommands;

use crate::helpers::*;

#[tokio::test]
async fn keys_liveness_revocation_and_suspension() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    let user = app.user().await;
    let req = CreateKey {
        user_id: user.clone(),
        name: "ci".into(),
        access: Access::ReadWrite,
        databases: DatabaseScope::All,
    };
    let created = app.client.create_key(&req).await.unwrap();
    let (id, secret) = created.token.split_once('.').unwrap();
    assert_eq!(id, created.id);
    assert!(id.starts_with("key_") && id.len() == 16);
    assert_eq!(secret.len(), 40);
    let live = redis_keys::key_version(&user, id);
    assert_eq!(app.redis_get(&live).await, Some(1));

    let record = app.client.key(id).await.unwrap();
    assert!(record.secret_hash.starts_with("$argon2id$"));
    use argon2::password_hash::{PasswordHash, PasswordVerifier};
    let parsed = PasswordHash::new(&record.secret_hash).unwrap();
    assert!(argon2::Argon2::default()
        .verify_password(secret.as_bytes(), &parsed)
        .is_ok());

    let narrowed = UpdateKey {
        name: None,
        access: Some(Access::ReadOnly),
        databases: Some(DatabaseScope::Only(vec!["db_abcdefghijkl".into()])),
    };
    let info = app.client.update_key(id, &narrowed).await.unwrap();
    assert_eq!(info.access, Access::ReadOnly);
    assert_eq!(app.redis_get(&live).await, Some(2));
    assert_eq!(app.client.key(id).await.unwrap().version, 2);
    let bad = UpdateKey {
        name: None,
        access: None,
        databases: Some(DatabaseScope::Only(vec!["nope".into()])),
    };
    assert_eq!(status(app.client.update_key(id, &bad).await), 400);

    // Re-seed after the liveness key disappeared.
    let mut c = app.redis.clone();
    let _: () = c.del(&live).await.unwrap();
    app.client.key(id).await.unwrap();
    assert_eq!(app.redis_get(&live).await, Some(2));

    // Suspension clears liveness; GET reports suspended and does not re-seed.
    let u = app.client.suspend_user(&user, true).await.unwrap();
    assert!(u.suspended);
    assert_eq!(app.redis_get(&live).await, None);
    assert!(app.client.key(id).await.unwrap().user.suspended);
    assert_eq!(app.redis_get(&live).await, None);
    app.client.suspend_user(&user, false).await.unwrap();
    assert_eq!(app.redis_get(&live).await, Some(2));

    // Revocation.
    app.client.revoke_key(id).await.unwrap();
    assert_eq!(app.redis_get(&live).await, None);
    assert_eq!(status(app.client.key(id).await), 404);
    assert_eq!(status(app.client.revoke_key(id).await), 404);
    let unknown = CreateKey {
        user_id: "usr_000000000000".into(),
        ..req
    };
    assert_eq!(status(app.client.create_key(&unknown).await), 404);
    app.finish().await;
}
