//! Forged form posts are refused (403, the contract's message) and change
//! nothing: a page on another site or another origin that submits a form to
//! the account pages by itself, and a form on the router's own origin that
//! lacks the per-session token or carries a wrong one.

use e2e_tests::cluster;
use serde_json::json;

use crate::harness::Browser;
use crate::site::{self, Site};
use crate::{browser, key_id, mint_key, sign_up, whoami};

const REFUSED: &str =
    "This form has expired or did not come from this site; reload the page and try again.";

/// The names of the user's keys, as the control plane has them.
async fn key_names(user_id: &str) -> Vec<String> {
    let keys = cluster()
        .control_plane
        .user_keys(user_id)
        .await
        .expect("user keys");
    keys.keys.into_iter().map(|k| k.name).collect()
}

async fn assert_refused(b: &Browser, what: &str) {
    b.wait_for("#error").await;
    assert_eq!(b.status().await, 403, "{what}: {}", b.describe().await);
    assert_eq!(b.text("#error").await, REFUSED, "{what}");
}

/// Submits, from the router's own origin (the account page), a form to
/// `action` with these fields, made by a script the way a page's own
/// script could.
async fn post_from_own_origin(b: &Browser, action: &str, fields: &[(&str, &str)]) {
    b.goto("/account").await;
    b.wait_for("span#user-email").await;
    let fields: serde_json::Map<String, serde_json::Value> = fields
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    b.client
        .execute(
            "const f = document.createElement('form');\
             f.method = 'post'; f.action = arguments[0];\
             for (const [k, v] of Object.entries(arguments[1])) {\
               const i = document.createElement('input'); i.type = 'hidden'; i.name = k; i.value = v; f.appendChild(i);\
             }\
             document.body.appendChild(f); f.submit();",
            vec![json!(action), json!(fields)],
        )
        .await
        .unwrap();
    b.wait_for_path(action).await;
}

#[tokio::test]
async fn forged_posts_to_the_account_pages_are_refused() {
    let b = browser!();
    sign_up(&b).await;
    let secret = mint_key(&b, "real", "read_write").await;
    let user_id = whoami(&secret).await.expect_ok()["user"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mint = format!("{}/account/keys", b.base);
    let revoke = format!("{}/account/keys/{}/revoke", b.base, key_id(&secret));

    // Another site: the Lax cookie stays home, so the router sees a
    // signed-out post and sends it to sign in (a 403 refusal would do too:
    // the contract's CSRF refusal; either way nothing is minted).
    let minting = Site::serve(site::auto_post(
        &mint,
        &[("name", "forged cross-site"), ("access", "read_write")],
    ))
    .await;
    b.goto(&minting.cross_site()).await;
    b.wait_for("#error, form#signin").await;
    match b.path().await.as_str() {
        "/account/signin" => {}
        "/account/keys" => assert_refused(&b, "a mint posted from another site").await,
        other => panic!(
            "a mint posted from another site ended on {other}: {}",
            b.describe().await
        ),
    }

    // The same site on another port: the Lax cookie goes along, the Origin
    // (and Sec-Fetch-Site: same-site) give the forgery away.
    b.goto(&minting.same_site()).await;
    b.wait_for_path("/account/keys").await;
    assert_refused(&b, "a mint posted from another origin of the site").await;

    let revoking = Site::serve(site::auto_post(&revoke, &[])).await;
    b.goto(&revoking.same_site()).await;
    b.wait_for_path(&format!("/account/keys/{}/revoke", key_id(&secret)))
        .await;
    assert_refused(&b, "a revoke posted from another origin of the site").await;

    // The router's own origin, without the form token, then with a wrong one.
    post_from_own_origin(
        &b,
        "/account/keys",
        &[("name", "forged without token"), ("access", "read_write")],
    )
    .await;
    assert_refused(&b, "a mint without csrf_token").await;
    post_from_own_origin(
        &b,
        "/account/keys",
        &[
            ("name", "forged with a wrong token"),
            ("access", "read_write"),
            ("csrf_token", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
        ],
    )
    .await;
    assert_refused(&b, "a mint with a wrong csrf_token").await;

    // Nothing happened: the one real key, still working.
    assert_eq!(key_names(&user_id).await, vec!["real".to_string()]);
    whoami(&secret).await.expect_ok();
    // And the page's own form still works after all that.
    let second = mint_key(&b, "second", "read_only").await;
    whoami(&second).await.expect_ok();
    b.close().await;
}
