//! Buttons: label truncation, action inference, url_template rules, webhook
//! existence (404), relative dates in `condition`; re-validated on update.

use serde_json::{json, Value};

use super::{id, Db};

#[tokio::test]
async fn buttons_are_validated() {
    let d = Db::new().await;
    let t = d.table("T").await;
    let button = |name: &str, options: Value| {
        d.create(
            &t,
            json!({"name": name, "type": "button", "options": options}),
        )
    };
    let b = button(
        "Open",
        json!({"url_template": "https://example.test/{id}", "color": "nile"}),
    )
    .await;
    let b = b.expect_ok()["field"].clone();
    assert_eq!(
        b["options"],
        json!({"label": "Button", "action": "link", "color": "nile", "url_template": "https://example.test/{id}"})
    );
    assert_eq!(b["operators"], json!([]));
    assert_eq!(d.column_type(&t, &id(&b)).await, None);
    assert_eq!(d.get_table(&t).await["display_field_id"], Value::Null);
    let long = "ä".repeat(45);
    let r = button(
        "Long",
        json!({"label": long, "url_template": "HTTP://x.test"}),
    )
    .await;
    assert_eq!(r.expect_ok()["field"]["options"]["label"], "ä".repeat(40));
    let at_limit = format!("https://x.test/{}", "a".repeat(2000 - 15));
    assert_eq!(at_limit.chars().count(), 2000);
    button("Edge", json!({"url_template": at_limit}))
        .await
        .expect_ok();
    for (options, needle) in [
        (json!({}), "url_template"),
        (json!({"action": "link"}), "url_template"),
        (json!({"url_template": "ftp://x.test"}), "http"),
        (json!({"url_template": "javascript:alert(1)"}), "http"),
        (json!({"url_template": format!("{at_limit}a")}), "2000"),
        (json!({"action": "webhook"}), "webhook_id"),
        (
            json!({"action": "email", "url_template": "https://x.test"}),
            "email",
        ),
        (
            json!({"url_template": "https://x.test", "condition": {"conditions": [
            {"field": "D", "op": "is", "value": {"relative": "yesterday"}}]}}),
            "condition",
        ),
        (
            json!({"url_template": "https://x.test", "condition": {"conditions": [
            {"field": "D", "op": "is", "value": {"relative": "today", "offset": 400}}]}}),
            "condition",
        ),
    ] {
        let msg = button("Bad", options)
            .await
            .expect_error(400, "bad_request");
        assert!(msg.contains(needle), "{needle}: {msg}");
    }
    let r = button("Soon", json!({"url_template": "https://x.test", "condition": {"conditions": [
        {"field": "D", "op": "is", "value": {"relative": "today", "offset": -3, "unit": "week"}}]}}))
    .await;
    assert!(r.expect_ok()["field"]["options"]["condition"].is_object());

    // A webhook button: action inferred from webhook_id, which must exist (404).
    let ghost = format!("whk_{}zzzzzzz", &d.id[3..8]);
    button("Hook", json!({"webhook_id": ghost}))
        .await
        .expect_error(404, "not_found");
    let hook = d.webhook(&t, "hook001", None).await;
    let h = button("Hook", json!({"webhook_id": hook, "label": "Ping"}))
        .await
        .expect_ok()["field"]
        .clone();
    assert_eq!(
        h["options"],
        json!({"label": "Ping", "action": "webhook", "webhook_id": hook})
    );
    // An explicit link action with a webhook_id still needs a URL.
    button("Mixed", json!({"action": "link", "webhook_id": hook}))
        .await
        .expect_error(400, "bad_request");

    // Update: fully re-validated and replaced.
    let r = d
        .patch(
            &id(&h),
            json!({"options": {"url_template": "https://y.test", "stray": 1}}),
        )
        .await;
    assert_eq!(
        r.expect_ok()["field"]["options"],
        json!({"label": "Button", "action": "link", "url_template": "https://y.test"})
    );
    d.patch(&id(&h), json!({"options": {"webhook_id": ghost}}))
        .await
        .expect_error(404, "not_found");
    d.patch(&id(&h), json!({"options": {"url_template": "mailto:x"}}))
        .await
        .expect_error(400, "bad_request");
    d.patch(&id(&h), json!({"type": "single_line_text"}))
        .await
        .expect_error(400, "bad_request");
    // Button cells are not writable; the press route is another issue.
    let res = d
        .owner
        .api
        .post(
            &format!("/api/tables/{t}/records"),
            json!({"records": [{"fields": {"Open": "x"}}]}),
        )
        .await;
    res.expect_error(400, "bad_request");
}
