use cluster_protocol::control::AddShard;

use crate::helpers::*;

#[tokio::test]
async fn auth_and_envelope() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    let http = reqwest::Client::new();
    let r = http
        .get(format!("{}/internal/shards", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthorized");
    let r = http
        .get(format!("{}/internal/shards", app.base))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = http
        .get(format!("{}/internal/health", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = http
        .get(format!("{}/internal/nope", app.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = http
        .post(format!("{}/internal/members", app.base))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"database_id":"db_x","user_id":"usr_y","role":"boss"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "bad_request");
    app.finish().await;
}

#[tokio::test]
async fn users_validation_and_conflicts() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    assert_eq!(
        status(app.client.create_user("not-an-email", None).await),
        400
    );
    let email = format!("{}@Example.com", cluster_protocol::ids::random_token(8));
    let u = app.client.create_user(&email, None).await.unwrap();
    assert!(u.id.starts_with("usr_") && u.id.len() == 16);
    assert_eq!(u.name, email.split('@').next().unwrap());
    assert_eq!(
        status(app.client.create_user(&email.to_lowercase(), None).await),
        409
    );
    assert_eq!(
        status(app.client.suspend_user("usr_000000000000", true).await),
        404
    );
    assert_eq!(
        status(
            app.client
                .add_shard(&AddShard {
                    name: "s1".into(),
                    url: "x".into(),
                    postgres: "p".into(),
                    weight: 1
                })
                .await
        ),
        400
    );
    app.shard("s1", 100).await;
    assert_eq!(
        status(
            app.client
                .add_shard(&AddShard {
                    name: "s1".into(),
                    url: "http://y".into(),
                    postgres: "p".into(),
                    weight: 1
                })
                .await
        ),
        409
    );
    app.finish().await;
}
