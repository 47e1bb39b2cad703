//! Account quotas and usage against the real server and catalog (the
//! shard-side parts, which need real shards, are in the e2e suite).

use cluster_protocol::control::quotas::{defaults, QuotaChange, QuotaSetting, UsageMeasure};
use cluster_protocol::control::{redis_keys, Access, CreateKey, DatabaseScope};

use crate::helpers::*;

fn value(v: i64) -> Option<QuotaSetting> {
    Some(QuotaSetting::Value(v))
}

#[tokio::test]
async fn quotas_show_set_and_take_effect_in_the_catalog() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    app.shard("a", 100).await;
    let user = app.user().await;

    // Defaults, no overrides.
    let q = app.client.quotas(&user).await.unwrap();
    assert_eq!(q.quotas.databases, Some(defaults::DATABASES));
    assert_eq!(
        q.quotas.requests_per_minute,
        Some(defaults::REQUESTS_PER_MINUTE)
    );
    assert_eq!(q.quotas.attachment_bytes, Some(defaults::ATTACHMENT_BYTES));
    assert_eq!(q.overrides.databases, None);
    assert_eq!(status(app.client.quotas("usr_000000000000").await), 404);

    // A key's record carries the account's budget once set, with a new version.
    let key = app
        .client
        .create_key(&CreateKey {
            user_id: user.clone(),
            name: "k".into(),
            access: Access::ReadWrite,
            databases: DatabaseScope::All,
        })
        .await
        .unwrap();
    let before = app.client.key(&key.id).await.unwrap();
    assert_eq!(before.requests_per_minute, None);
    let set = QuotaChange {
        databases: value(2),
        requests_per_minute: value(5),
        ..Default::default()
    };
    let q = app.client.set_quotas(&user, &set).await.unwrap();
    assert_eq!(q.overrides.databases, Some(2));
    assert_eq!(q.quotas.requests_per_minute, Some(5));
    assert_eq!(
        q.quotas.tables_per_database,
        Some(defaults::TABLES_PER_DATABASE)
    );
    let after = app.client.key(&key.id).await.unwrap();
    assert_eq!(after.requests_per_minute, Some(5));
    assert_eq!(
        after.version,
        before.version + 1,
        "routers must re-read the key"
    );
    assert_eq!(
        app.redis_get(&redis_keys::key_version(&user, &key.id))
            .await,
        Some(after.version)
    );

    // Databases owned: the override is the cap; the allocation carries no
    // shard-side override yet.
    let first = app.client.allocate_database(&user).await.unwrap();
    assert_eq!(first.limits, Default::default());
    app.client.allocate_database(&user).await.unwrap();
    assert_eq!(status(app.client.allocate_database(&user).await), 400);

    // Refused below current use (2 owned), nothing changed.
    let lower = QuotaChange {
        databases: value(1),
        requests_per_minute: value(7),
        ..Default::default()
    };
    let e = app.client.set_quotas(&user, &lower).await.unwrap_err();
    assert_eq!(e.status(), Some(400));
    assert!(
        format!("{e:?}").contains("already owns 2 databases"),
        "{e:?}"
    );
    let q = app.client.quotas(&user).await.unwrap();
    assert_eq!(
        (q.overrides.databases, q.overrides.requests_per_minute),
        (Some(2), Some(5))
    );

    // Out of range, unknown field, empty change: 400; unknown user: 404.
    for bad in [
        QuotaChange {
            tables_per_database: value(0),
            ..Default::default()
        },
        QuotaChange {
            fields_per_table: value(1_000_000),
            ..Default::default()
        },
        QuotaChange::default(),
    ] {
        assert_eq!(
            status(app.client.set_quotas(&user, &bad).await),
            400,
            "{bad:?}"
        );
    }
    assert_eq!(
        status(app.client.set_quotas("usr_000000000000", &set).await),
        404
    );

    // "default" drops an override; the cap is back to 100.
    let reset = QuotaChange {
        databases: Some(QuotaSetting::parse_cli("default").unwrap()),
        ..Default::default()
    };
    let q = app.client.set_quotas(&user, &reset).await.unwrap();
    assert_eq!(q.overrides.databases, None);
    app.client.allocate_database(&user).await.unwrap();

    // A shard-side figure is pushed to the shards holding the account's
    // databases: this test's shard has no instance, so the change is
    // refused (503) and nothing is changed.
    let tables = QuotaChange {
        tables_per_database: value(3),
        ..Default::default()
    };
    assert_eq!(status(app.client.set_quotas(&user, &tables).await), 503);
    let q = app.client.quotas(&user).await.unwrap();
    assert_eq!(q.overrides.tables_per_database, None);

    // An account without databases takes it at once; its next allocation
    // carries it to the shard.
    let fresh = app.user().await;
    let fields = QuotaChange {
        fields_per_table: value(12),
        attachment_bytes: value(1_000),
        ..Default::default()
    };
    app.client.set_quotas(&fresh, &fields).await.unwrap();
    let a = app.client.allocate_database(&fresh).await.unwrap();
    assert_eq!(a.limits.fields_per_table, Some(12));
    assert_eq!(a.limits.attachment_bytes, Some(1_000));
    assert_eq!(a.limits.tables_per_database, None);
    app.finish().await;
}

#[tokio::test]
async fn usage_of_an_account_without_databases_and_top_validation() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    let user = app.user().await;
    let u = app.client.usage(&user).await.unwrap();
    assert_eq!(
        (u.database_count, u.records, u.requests_last_day),
        (0, 0, 0)
    );
    assert!(u.databases.is_empty());
    assert_eq!(status(app.client.usage("usr_000000000000").await), 404);
    // No shard registered: an empty fleet.
    let top = app
        .client
        .top_usage(5, UsageMeasure::Records)
        .await
        .unwrap();
    assert_eq!(top.by, UsageMeasure::Records);
    assert!(top.accounts.is_empty());
    assert_eq!(
        status(app.client.top_usage(0, UsageMeasure::Records).await),
        400
    );
    app.finish().await;
}

#[tokio::test]
async fn quotas_cli_json_shapes_and_exit_codes() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    let user = app.user().await;
    let (ok, out, _) = cli(&app, &["--json", "quotas", "show", "--user", &user]).await;
    assert!(ok);
    let v = one_json(&out);
    assert_eq!(v["user_id"], user.as_str());
    assert_eq!(v["quotas"]["databases"], 100);
    assert!(v["overrides"]["databases"].is_null());

    let (ok, out, _) = cli(
        &app,
        &[
            "--json",
            "quotas",
            "set",
            "--user",
            &user,
            "--databases",
            "7",
            "--requests-per-minute",
            "1_000",
        ],
    )
    .await;
    assert!(ok);
    let v = one_json(&out);
    assert_eq!(v["overrides"]["databases"], 7);
    assert_eq!(v["quotas"]["requests_per_minute"], 1000);

    let (ok, out, _) = cli(&app, &["quotas", "show", "--user", &user]).await;
    assert!(ok);
    assert!(out.contains("databases") && out.contains("7"), "{out}");
    assert!(out.contains("500 (default)"), "fields per table: {out}");

    // Refusals: non-zero exit, the reason on stderr, nothing on stdout.
    for args in [
        vec!["--json", "quotas", "set", "--user", user.as_str()],
        vec![
            "--json",
            "quotas",
            "set",
            "--user",
            user.as_str(),
            "--databases",
            "0",
        ],
        vec![
            "--json",
            "quotas",
            "set",
            "--user",
            user.as_str(),
            "--databases",
            "lots",
        ],
        vec!["--json", "quotas", "show", "--user", "usr_000000000000"],
        vec!["--json", "usage"],
        vec!["--json", "usage", "--top", "0"],
    ] {
        let (ok, out, err) = cli(&app, &args).await;
        assert!(!ok, "{args:?} should fail");
        assert!(out.trim().is_empty(), "{args:?}: {out}");
        assert!(!err.trim().is_empty(), "{args:?}");
    }

    let (ok, out, _) = cli(&app, &["--json", "usage", "--user", &user]).await;
    assert!(ok);
    let v = one_json(&out);
    assert_eq!(v["user_id"], user.as_str());
    assert_eq!(v["database_count"], 0);
    assert!(v["databases"].as_array().unwrap().is_empty());
    let (ok, out, _) = cli(
        &app,
        &["--json", "usage", "--top", "3", "--by", "databases"],
    )
    .await;
    assert!(ok);
    let v = one_json(&out);
    assert_eq!(v["by"], "databases");
    assert!(v["accounts"].is_array());
    app.finish().await;
}
