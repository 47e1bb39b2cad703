//! Shard nodes trust only principals signed by a router, and a signature
//! only for the request it was made for (method, path and query, body).

use cluster_protocol::control::{Access, Role};
use cluster_protocol::principal::{
    Principal, HEADER_PRINCIPAL, HEADER_SIGNATURE, HEADER_TIMESTAMP,
};
use e2e_tests::{cluster, id, Person};
use reqwest::header::HeaderMap;
use reqwest::Method;
use serde_json::{json, Value};

fn shard_urls() -> Vec<String> {
    cluster()
        .var("SHARD_URLS")
        .expect("SHARD_URLS in the env file")
        .split_whitespace()
        .map(String::from)
        .collect()
}

fn principal(user_id: &str, database_id: &str) -> Principal {
    Principal {
        user_id: user_id.into(),
        key_id: "key_000000000000".into(),
        access: Access::ReadWrite,
        narrowed: false,
        database_id: Some(database_id.into()),
        role: Some(Role::Owner),
        support: false,
        epoch: None,
        new_database: None,
        share: false,
    }
}

#[tokio::test]
async fn unsigned_or_forged_requests_are_refused_and_a_misplaced_one_is_421() {
    let person = Person::new().await;
    let db_id = &person.api.new_database("direct").await;
    let home = cluster().control_plane.database(db_id).await.unwrap().shard;
    let shards = cluster().control_plane.shards().await.unwrap().shards;
    let http = reqwest::Client::new();
    let path = format!("/api/databases/{db_id}/tables");
    let now = chrono::Utc::now().timestamp();

    for shard in &shards {
        let url = format!("{}{path}", shard.url);
        let unsigned = http.get(&url).send().await.unwrap();
        assert_eq!(unsigned.status().as_u16(), 401);

        let mut forged = http.get(&url).build().unwrap();
        principal(&person.user_id, db_id).sign_reqwest(b"not the cluster secret", now, &mut forged);
        let r = http.execute(forged).await.unwrap();
        assert_eq!(r.status().as_u16(), 401);

        let mut signed = http.get(&url).build().unwrap();
        principal(&person.user_id, db_id).sign_reqwest(
            cluster().cluster_secret.as_bytes(),
            now,
            &mut signed,
        );
        let r = http.execute(signed).await.unwrap();
        let expected = if shard.name == home { 200 } else { 421 };
        assert_eq!(
            r.status().as_u16(),
            expected,
            "shard {} (home {home})",
            shard.name
        );
    }
    assert!(!shard_urls().is_empty());
}

/// The home shard's URL of a database.
async fn home_url(db_id: &str) -> String {
    let home = cluster().control_plane.database(db_id).await.unwrap().shard;
    let shards = cluster().control_plane.shards().await.unwrap().shards;
    shards
        .into_iter()
        .find(|s| s.name == home)
        .expect("home shard registered")
        .url
}

/// Sends `method url` with `body` and exactly the signature headers of
/// `captured` (as if replayed by someone who saw them on the wire).
async fn replay(
    method: Method,
    url: &str,
    body: Option<&Value>,
    captured: &HeaderMap,
) -> (u16, Value) {
    let http = reqwest::Client::new();
    let mut req = http.request(method, url);
    for (name, value) in captured {
        if name.as_str().starts_with("x-cluster-") {
            req = req.header(name, value);
        }
    }
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// A signed request, captured: its signature headers.
fn capture(method: Method, url: &str, body: Option<&Value>, p: &Principal) -> HeaderMap {
    let http = reqwest::Client::new();
    let mut req = http.request(method, url);
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let mut req = req.build().unwrap();
    let now = chrono::Utc::now().timestamp();
    p.sign_reqwest(cluster().cluster_secret.as_bytes(), now, &mut req);
    req.headers().clone()
}

#[tokio::test]
async fn a_captured_signature_does_not_carry_over_to_another_method_path_or_body() {
    let person = Person::new().await;
    let db_id = person.api.new_database("replay").await;
    let table = id(&person.api.create_table(&db_id, "Items").await);
    let base = home_url(&db_id).await;
    let p = principal(&person.user_id, &db_id);

    // A read of the table list, captured: replayed as is it still works
    // (the link between router and shard is assumed private) ...
    let list_url = format!("{base}/api/databases/{db_id}/tables");
    let read = capture(Method::GET, &list_url, None, &p);
    assert_eq!(replay(Method::GET, &list_url, None, &read).await.0, 200);
    // ... but not as a delete of the table, nor of the database, nor as a
    // read with another query, nor with a body added.
    let table_url = format!("{base}/api/tables/{table}");
    let db_url = format!("{base}/api/databases/{db_id}");
    for (method, url) in [
        (Method::DELETE, &list_url),
        (Method::DELETE, &table_url),
        (Method::DELETE, &db_url),
        (Method::GET, &table_url),
        (Method::GET, &format!("{list_url}?x=1")),
    ] {
        let (status, body) = replay(method.clone(), url, None, &read).await;
        assert_eq!(status, 401, "{method} {url}: {body}");
        assert_eq!(body["error"]["code"], "unauthorized");
    }
    let (status, _) = replay(Method::GET, &list_url, Some(&json!({})), &read).await;
    assert_eq!(status, 401, "a body added to a signed GET");

    // A rename, captured: its body cannot be swapped for another.
    let rename = json!({"name": "Renamed"});
    let patch = capture(Method::PATCH, &table_url, Some(&rename), &p);
    let evil = json!({"name": "Hijacked"});
    let (status, body) = replay(Method::PATCH, &table_url, Some(&evil), &patch).await;
    assert_eq!(status, 401, "{body}");
    let (status, _) = replay(Method::PATCH, &db_url, Some(&rename), &patch).await;
    assert_eq!(status, 401, "the same body to another path");
    let (status, body) = replay(Method::PATCH, &table_url, Some(&rename), &patch).await;
    assert_eq!(status, 200, "{body}");
    let got = person.api.get(&format!("/api/tables/{table}")).await;
    assert_eq!(got.expect_ok()["table"]["name"], "Renamed");

    // A signature of the old kind (principal and timestamp only) is refused.
    let now = chrono::Utc::now().timestamp();
    let v1 = p.sign(cluster().cluster_secret.as_bytes(), now);
    let r = reqwest::Client::new()
        .get(&list_url)
        .header(HEADER_PRINCIPAL, v1.principal)
        .header(HEADER_TIMESTAMP, v1.timestamp)
        .header(HEADER_SIGNATURE, v1.signature)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
}
