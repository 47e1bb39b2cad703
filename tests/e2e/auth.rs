//! Part C: the credential, and the one indistinguishable 401.

use cluster_protocol::error::UNAUTHORIZED_MESSAGE;
use e2e_tests::{cluster, Api, Person};
use serde_json::json;

#[tokio::test]
async fn health_needs_no_credential() {
    let r = Api::anonymous().get("/api/health").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["ok"], true);
    assert_eq!(r.body["database"], true);
    assert!(r.body["name"].is_string());
}

#[tokio::test]
async fn every_bad_credential_gets_the_same_401() {
    let person = Person::new().await;
    let token = person.api.token.clone().unwrap();
    let (key_id, secret) = token.split_once('.').unwrap();
    let cases: Vec<Option<String>> = vec![
        None,
        Some("".into()),
        Some("garbage".into()),
        Some(key_id.to_string()),
        Some(format!("{key_id}.")),
        Some(format!("{key_id}.{secret}x")),
        Some(format!("key_000000000000.{secret}")),
        Some(format!("key_short.{secret}")),
        Some(format!("usr_000000000000.{secret}")),
    ];
    for token in cases {
        let api = match &token {
            Some(t) => Api::with_token(t),
            None => Api::anonymous(),
        };
        let r = api.get("/api/meta/whoami").await;
        let msg = r.expect_error(401, "unauthorized");
        assert_eq!(msg, UNAUTHORIZED_MESSAGE, "token {token:?}");
        assert!(
            r.header("x-ratelimit-limit").is_none(),
            "no budget headers on a bad key"
        );
    }
    // Non-bearer schemes are refused the same way.
    let r = person
        .api
        .http
        .get(format!("{}/api/meta/whoami", cluster().router_url))
        .header("authorization", format!("Basic {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
}

#[tokio::test]
async fn whoami_reports_the_key_and_its_user() {
    let person = Person::new().await;
    let r = person.api.get("/api/meta/whoami").await;
    let body = r.expect_ok();
    assert_eq!(body["user"]["id"], person.user_id.as_str());
    assert_eq!(body["user"]["email"], person.email.as_str());
    assert!(body["user"]["name"].is_string());
    assert_eq!(body["key"]["id"], person.key_id.as_str());
    assert_eq!(body["key"]["name"], "test");
    assert_eq!(body["key"]["access"], "read_write");
    assert_eq!(body["key"]["databases"], "all");
    assert!(body["key"]["created_at"].is_string());
    assert!(body.get("roles").is_none() && body.get("memberships").is_none());
    // last_used_at is stamped: the second call sees the first.
    let again = person.api.get("/api/meta/whoami").await;
    assert!(
        again.expect_ok()["key"]["last_used_at"].is_string(),
        "{}",
        again.body
    );
}

#[tokio::test]
async fn a_wrong_secret_for_a_known_key_never_succeeds_even_after_a_right_one() {
    let person = Person::new().await;
    person.api.get("/api/meta/whoami").await.expect_ok();
    let token = person.api.token.clone().unwrap();
    let (key_id, _) = token.split_once('.').unwrap();
    for i in 0..20 {
        let r = Api::with_token(&format!("{key_id}.wrong{i}"))
            .get("/api/meta/whoami")
            .await;
        r.expect_error(401, "unauthorized");
    }
    person.api.get("/api/meta/whoami").await.expect_ok();
    let _ = json!(null);
}
