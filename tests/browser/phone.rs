//! The pages at a phone's size (390 x 844 CSS pixels, a touch screen): no
//! page is wider than the screen, so nothing needs a sideways scroll.

use e2e_tests::{unique, Api};
use serde_json::json;

use crate::harness::Browser;
use crate::{browser, mint_key, sign_out, sign_up};

const WIDTH: u32 = 390;
const HEIGHT: u32 = 844;

/// Asserts that the page fits the screen's width and has the viewport tag.
async fn fits(b: &Browser, what: &str) {
    b.wait_for("body").await;
    let m = b
        .script(
            "return { scroll: document.documentElement.scrollWidth, inner: window.innerWidth,\
             viewport: (document.querySelector('meta[name=viewport]') || {}).content || null };",
        )
        .await;
    let (scroll, inner) = (m["scroll"].as_u64().unwrap(), m["inner"].as_u64().unwrap());
    assert_eq!(
        inner,
        u64::from(WIDTH),
        "{what}: the viewport is not the phone's width: {m}"
    );
    assert!(
        scroll <= inner,
        "{what} scrolls sideways: {m} on {}",
        b.describe().await
    );
    assert_eq!(
        m["viewport"], "width=device-width, initial-scale=1",
        "{what}: the viewport tag"
    );
    b.assert_no_script_errors().await;
}

#[tokio::test]
async fn the_pages_fit_a_phone_screen() {
    let b = browser!();
    b.client.set_window_size(WIDTH, HEIGHT).await.unwrap();
    b.cdp(
        "Emulation.setDeviceMetricsOverride",
        json!({ "width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 3, "mobile": true }),
    )
    .await;
    b.goto("/account/signup").await;
    fits(&b, "the sign-up page").await;
    b.goto("/account/signin").await;
    fits(&b, "the sign-in page").await;

    sign_up(&b).await;
    fits(&b, "the account page, new").await;
    // The page with the longest words: a key's secret, just minted.
    let secret = mint_key(
        &b,
        &unique("a rather long key name for a small screen"),
        "read_write",
    )
    .await;
    fits(&b, "the new key's page").await;
    // An account page with a key and a database listed.
    Api::with_token(&secret)
        .create_database(&unique("a database with a long name too"))
        .await;
    b.goto("/account").await;
    b.wait_for("ul#databases li a.export").await;
    fits(&b, "the account page with a key and a database").await;
    sign_out(&b).await;
    fits(&b, "the page after sign-out").await;
    // An error page.
    crate::try_sign_in(&b, "nobody@example.test", "wrong-password-1").await;
    b.wait_for("p#error").await;
    fits(&b, "the sign-in page with its error").await;
    b.close().await;
}
