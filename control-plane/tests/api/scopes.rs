//! Each tier's token against every route of the control plane's route table
//! (`control_plane::http::routes`): refused with 403 outside its scope,
//! accepted inside it; the admin token everywhere; an unknown token 401. No
//! reply a router, shard or metrics token can get holds a shard's password.

use cluster_protocol::control::AddShard;
use control_plane::http::routes::{scopes, Tier};
use reqwest::Method;

use crate::helpers::*;

const PASSWORD: &str = "pw-never-for-routers-3f9c";

fn token(tier: Tier) -> &'static str {
    match tier {
        Tier::Admin => TOKEN,
        Tier::Router => ROUTER_TOKEN,
        Tier::Shard => SHARD_TOKEN,
        Tier::Metrics => METRICS_TOKEN,
    }
}

/// The template with each `{param}` replaced by a plausible id.
fn concrete(template: &str) -> String {
    template
        .split('/')
        .map(|seg| match seg {
            "{key_id}" => "key_aaaaaaaaaaaa",
            "{user_id}" => "usr_aaaaaaaaaaaa",
            "{tag}" => "aaaaaaaa",
            "{id}" => "db_aaaaaaaaaaaa",
            "{name}" => "no-such-shard",
            s if s.starts_with('{') => panic!("no value for {s} in {template}"),
            s => s,
        })
        .collect::<Vec<_>>()
        .join("/")
}

async fn call(app: &App, method: &Method, path: &str, bearer: &str) -> (u16, serde_json::Value) {
    let r = reqwest::Client::new()
        .request(method.clone(), format!("{}{path}", app.base))
        .bearer_auth(bearer)
        .json(&serde_json::json!({}))
        .send()
        .await
        .expect("request");
    let status = r.status().as_u16();
    let text = r.text().await.expect("body");
    if bearer != TOKEN {
        assert!(
            !text.contains(PASSWORD),
            "{method} {path}: password in {text}"
        );
    }
    (status, serde_json::from_str(&text).unwrap_or_default())
}

#[tokio::test]
async fn every_token_is_refused_outside_its_scope() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    app.client
        .add_shard(&AddShard {
            name: "s1".into(),
            url: "http://s1.local".into(),
            postgres: format!("postgres://shard:{PASSWORD}@s1.local/shard"),
            weight: 100,
        })
        .await
        .expect("add shard");
    let table = scopes();
    assert!(table.len() >= 30, "the table lists every route");
    for (method, template, tiers) in &table {
        let path = concrete(template);
        for tier in [Tier::Router, Tier::Shard, Tier::Metrics] {
            let (status, body) = call(&app, method, &path, token(tier)).await;
            if tiers.contains(&tier) {
                assert!(
                    status != 401 && body["error"]["code"] != "forbidden",
                    "{tier:?} refused on {method} {template}: {status} {body}"
                );
            } else {
                assert_eq!(status, 403, "{tier:?} on {method} {template}: {body}");
                assert_eq!(body["error"]["code"], "forbidden");
                assert_eq!(
                    body["error"]["message"],
                    format!(
                        "The {} token may not call {method} {template}.",
                        tier.name()
                    )
                );
            }
        }
        for bad in ["", "not-a-token", &TOKEN[..TOKEN.len() - 1]] {
            let (status, body) = call(&app, method, &path, bad).await;
            assert_eq!(status, 401, "{bad:?} on {method} {template}: {body}");
            assert_eq!(body["error"]["code"], "unauthorized");
        }
    }
    // The admin token opens every route (GET ones only: the others would
    // change things; their 403s above show the layer ran for them).
    for (method, template, _) in table.iter().filter(|(m, _, _)| *m == Method::GET) {
        let (status, body) = call(&app, method, &concrete(template), TOKEN).await;
        assert!(
            status != 401 && status != 403,
            "admin on {method} {template}: {status} {body}"
        );
    }
    app.finish().await;
}

#[tokio::test]
async fn shard_passwords_go_to_the_admin_token_only() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    let dsn = format!("postgres://shard:{PASSWORD}@s1.local/shard");
    app.client
        .add_shard(&AddShard {
            name: "s1".into(),
            url: "http://s1.local".into(),
            postgres: dsn.clone(),
            weight: 100,
        })
        .await
        .expect("add shard");
    let user = app.user().await;
    let http = reqwest::Client::new();
    // The router's whole path to a database: allocate, confirm, placement.
    let allocated: serde_json::Value = http
        .post(format!("{}/internal/databases/allocate", app.base))
        .bearer_auth(ROUTER_TOKEN)
        .json(&serde_json::json!({"user_id": user}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(allocated["shard"]["url"], "http://s1.local", "{allocated}");
    assert!(!allocated.to_string().contains(PASSWORD));
    let id = allocated["database_id"].as_str().unwrap();
    let tag = allocated["tag"].as_str().unwrap();
    for (method, path) in [
        (Method::POST, format!("/internal/databases/{id}/confirm")),
        (Method::GET, format!("/internal/placements/{tag}")),
        (Method::GET, format!("/internal/users/{user}/access")),
    ] {
        let (status, body) = call(&app, &method, &path, ROUTER_TOKEN).await;
        assert_eq!(status, 200, "{method} {path}: {body}");
    }
    let (status, body) = call(
        &app,
        &Method::GET,
        &format!("/internal/placements/{tag}"),
        SHARD_TOKEN,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    for bearer in [ROUTER_TOKEN, SHARD_TOKEN, METRICS_TOKEN] {
        let (status, _) = call(&app, &Method::GET, "/internal/shards", bearer).await;
        assert_eq!(status, 403);
    }
    // The operator still reads the DSN it registered.
    let shards = app.client.shards().await.expect("admin lists shards");
    assert_eq!(shards.shards[0].postgres, dsn);
    app.finish().await;
}
