//! The accounts pages (issue 32) in a real browser: headless Chromium,
//! driven through chromedriver, end to end through the router of the
//! cluster the e2e suite uses (`CLUSTER_ENV_FILE`; `deploy/test` starts it).
//! Each test has a browser of its own (`harness`) and makes its own
//! accounts, so the tests run in parallel in any order.

// Test code: an unwrap that fails is a failed test with its location.
#![allow(clippy::unwrap_used)]

mod harness;
mod site;

mod export;
mod forgery;
mod keys;
mod phone;
mod sign_in;

use e2e_tests::{unique, Api, Reply};
use harness::Browser;

/// An account made through the sign-up page.
pub struct Account {
    pub email: String,
    pub name: String,
    pub password: String,
}

impl Account {
    fn new() -> Account {
        Account {
            email: format!("{}@example.test", unique("browser")),
            name: unique("Browser User"),
            // Long enough (12+) and never on a list of common passwords.
            password: unique("pass-Word9"),
        }
    }
}

/// Signs up a new account on the sign-up page; the browser ends on /account.
pub async fn sign_up(b: &Browser) -> Account {
    let account = Account::new();
    b.goto("/account/signup").await;
    b.submit(
        "form#signup",
        &[
            ("email", &account.email),
            ("name", &account.name),
            ("password", &account.password),
        ],
        "#signup-submit",
    )
    .await;
    b.wait_for_path("/account").await;
    assert_eq!(b.text("span#user-email").await, account.email);
    assert_eq!(b.text("span#user-name").await, account.name);
    b.assert_no_script_errors().await;
    account
}

/// Fills and submits the sign-in form (from wherever the browser is).
pub async fn try_sign_in(b: &Browser, email: &str, password: &str) {
    b.goto("/account/signin").await;
    b.submit(
        "form#signin",
        &[("email", email), ("password", password)],
        "#signin-submit",
    )
    .await;
}

/// Signs in; the browser ends on /account.
pub async fn sign_in(b: &Browser, account: &Account) {
    try_sign_in(b, &account.email, &account.password).await;
    b.wait_for_path("/account").await;
    assert_eq!(b.text("span#user-email").await, account.email);
}

/// Signs out with the account page's button; the browser ends on the sign-in page.
pub async fn sign_out(b: &Browser) {
    b.goto("/account").await;
    b.wait_for("button#signout-submit")
        .await
        .click()
        .await
        .unwrap();
    b.wait_for_path("/account/signin").await;
    b.wait_for("form#signin").await;
}

/// Mints a key on the account page; returns the secret read off the page.
pub async fn mint_key(b: &Browser, name: &str, access: &str) -> String {
    b.goto("/account").await;
    let form = "form#mint-key";
    b.fill(form, &[("name", name)]).await;
    let select = b.wait_for(&format!("{form} select[name=\"access\"]")).await;
    select.select_by_value(access).await.unwrap();
    b.wait_for("button#mint-submit")
        .await
        .click()
        .await
        .unwrap();
    let secret = b.text("code#new-key-secret").await;
    assert!(
        secret.starts_with("key_") && secret.contains('.'),
        "a key secret: {secret:?}"
    );
    secret
}

/// The key id of a secret (`key_….SECRET`).
pub fn key_id(secret: &str) -> &str {
    secret.split('.').next().unwrap()
}

/// `GET /api/meta/whoami` with `secret`.
pub async fn whoami(secret: &str) -> Reply {
    Api::with_token(secret).get("/api/meta/whoami").await
}
