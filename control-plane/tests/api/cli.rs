use crate::helpers::*;

#[tokio::test]
async fn operator_cli() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    let email = format!("{}@example.com", cluster_protocol::ids::random_token(8));
    let (ok, out, err) = cli(
        &app,
        &[
            "users", "create", "--email", &email, "--name", "Ada", "--json",
        ],
    )
    .await;
    assert!(ok, "{err}");
    let user = one_json(&out);
    assert_eq!(user["email"], email.as_str());
    assert_eq!(user["name"], "Ada");
    let user_id = user["id"].as_str().unwrap().to_string();

    let (ok, out, err) = cli(
        &app,
        &[
            "--json",
            "keys",
            "create",
            "--user",
            &user_id,
            "--name",
            "k",
            "--access",
            "read_only",
            "--databases",
            "db_abcdefghijkl",
        ],
    )
    .await;
    assert!(ok, "{err}");
    let key = one_json(&out);
    assert_eq!(key["access"], "read_only");
    assert_eq!(key["databases"], serde_json::json!(["db_abcdefghijkl"]));
    assert!(key["token"]
        .as_str()
        .unwrap()
        .starts_with(key["id"].as_str().unwrap()));
    let key_id = key["id"].as_str().unwrap().to_string();

    let (ok, out, _) = cli(
        &app,
        &["keys", "update", &key_id, "--databases", "all", "--json"],
    )
    .await;
    assert!(ok);
    let updated = one_json(&out);
    assert_eq!(updated["id"], key_id.as_str());
    assert_eq!(updated["databases"], "all");
    assert_eq!(updated["access"], "read_only");
    let (ok, out, _) = cli(
        &app,
        &[
            "shards",
            "add",
            "--name",
            "s1",
            "--url",
            "http://s1",
            "--postgres",
            "postgres://s1",
            "--json",
        ],
    )
    .await;
    assert!(ok);
    assert_eq!(one_json(&out)["name"], "s1");
    let (ok, out, _) = cli(&app, &["shards", "list", "--json"]).await;
    assert!(ok);
    assert_eq!(one_json(&out)["shards"].as_array().unwrap().len(), 1);
    let (ok, out, _) = cli(&app, &["databases", "list", "--json"]).await;
    assert!(ok);
    assert_eq!(one_json(&out), serde_json::json!({"databases": []}));
    let (ok, out, _) = cli(&app, &["users", "suspend", &user_id]).await;
    assert!(ok && out.contains(&user_id));
    let (ok, out, _) = cli(&app, &["keys", "revoke", &key_id, "--json"]).await;
    assert!(ok);
    assert_eq!(
        one_json(&out),
        serde_json::json!({"id": key_id, "revoked": true})
    );

    let (ok, out, err) = cli(&app, &["keys", "revoke", &key_id, "--json"]).await;
    assert!(!ok && out.is_empty() && !err.is_empty());
    let (ok, _, err) = cli(&app, &["move", "db_abcdefghijkl", "--to", "s1"]).await;
    assert!(!ok && err.starts_with("error: "), "{err}");
    let (ok, _, _) = cli(&app, &["databases", "show", "db_abcdefghijkl", "--json"]).await;
    assert!(!ok);
    app.finish().await;
}
