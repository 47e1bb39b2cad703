//! Sign up, sign out and in, mint a key on the account page, use it, revoke it.

use serde_json::json;

use crate::{browser, key_id, mint_key, sign_in, sign_out, sign_up, whoami};

#[tokio::test]
async fn a_key_minted_on_the_page_works_until_revoked_there() {
    let b = browser!();
    let account = sign_up(&b).await;
    sign_out(&b).await;
    // Signed out, the account page sends the browser to sign in.
    b.goto("/account").await;
    b.wait_for_path("/account/signin").await;
    sign_in(&b, &account).await;

    let secret = mint_key(&b, "from the browser", "read_write").await;
    // The secret is the answer to the POST, never in a URL.
    assert_eq!(b.status().await, 200);
    let url = b.url().await;
    assert!(
        !url.as_str().contains(&secret[5..]),
        "the secret is in the URL {url}"
    );
    let id = key_id(&secret).to_string();
    b.wait_for("a[href=\"/account\"]").await;

    // The copy button is there and its script runs without an error; the
    // clipboard holds the secret where headless Chromium lets us read it.
    b.cdp(
        "Browser.grantPermissions",
        json!({ "origin": b.base, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"] }),
    )
    .await;
    b.wait_for("button#copy-secret")
        .await
        .click()
        .await
        .unwrap();
    let copied = b
        .client
        .execute_async(
            "const done = arguments[0];\
             navigator.clipboard.readText().then(t => done({ text: t }), e => done({ error: String(e) }));",
            vec![],
        )
        .await
        .unwrap();
    match copied["text"].as_str() {
        Some(text) => assert_eq!(text, secret, "what the copy button put on the clipboard"),
        None => eprintln!(
            "clipboard not readable here ({}); checked the button's script only",
            copied["error"]
        ),
    }
    b.assert_no_script_errors().await;

    // The key works: 200, for this account, under the name given.
    let me = whoami(&secret).await;
    let body = me.expect_ok();
    assert_eq!(body["user"]["email"], account.email.as_str());
    assert_eq!(body["key"]["id"], id.as_str());
    assert_eq!(body["key"]["name"], "from the browser");
    assert_eq!(body["key"]["access"], "read_write");

    // The account page lists it, used now.
    b.goto("/account").await;
    let row = format!("table#keys tr.key[data-key-id=\"{id}\"]");
    b.wait_for(&row).await;
    assert_eq!(
        b.text(&format!("{row} td.key-name")).await,
        "from the browser"
    );
    assert_eq!(b.text(&format!("{row} td.key-access")).await, "read_write");
    assert_eq!(b.text(&format!("{row} td.key-databases")).await, "all");
    assert!(!b.text(&format!("{row} td.key-created")).await.is_empty());
    assert_ne!(b.text(&format!("{row} td.key-last-used")).await, "never");
    // The secret is shown once: not on the account page.
    let source = b.client.source().await.unwrap();
    assert!(
        !source.contains(&secret[id.len() + 1..]),
        "the secret is on the account page"
    );
    b.assert_no_script_errors().await;

    // Revoked on the page: the next call is 401 and the row is gone.
    b.click_to_leave(&format!("{row} form.revoke-key button.revoke"))
        .await;
    b.wait_for_path("/account").await;
    b.wait_for("table#keys").await;
    let left = b.find_all(&row).await;
    assert!(left.is_empty(), "the revoked key is still listed");
    whoami(&secret).await.expect_error(401, "unauthorized");
    b.close().await;
}

#[tokio::test]
async fn a_key_narrowed_on_the_page_is_read_only() {
    let b = browser!();
    sign_up(&b).await;
    let secret = mint_key(&b, "narrow me", "read_write").await;
    let id = key_id(&secret).to_string();
    b.goto("/account").await;
    let form = format!("tr.key[data-key-id=\"{id}\"] form.edit-key");
    b.fill(&form, &[("name", "narrowed")]).await;
    b.wait_for(&format!("{form} select[name=\"access\"]"))
        .await
        .select_by_value("read_only")
        .await
        .unwrap();
    b.click_to_leave(&format!("{form} button.save")).await;
    let row = format!("tr.key[data-key-id=\"{id}\"]");
    b.wait_for(&format!("{row} td.key-access")).await;
    assert_eq!(b.text(&format!("{row} td.key-name")).await, "narrowed");
    assert_eq!(b.text(&format!("{row} td.key-access")).await, "read_only");
    let me = whoami(&secret).await;
    assert_eq!(me.expect_ok()["key"]["access"], "read_only");
    // A read-only key cannot create a database.
    let r = e2e_tests::Api::with_token(&secret)
        .post("/api/databases", json!({ "name": "not allowed" }))
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    b.close().await;
}
