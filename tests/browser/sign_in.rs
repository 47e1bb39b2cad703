//! Sign-in refusals: a wrong password and an unknown email answered alike,
//! the per-account limit (429 after repeated failures), a suspended
//! account signed out at once, a password change ending the session.

use e2e_tests::{cluster, unique};

use crate::harness::Browser;
use crate::{browser, mint_key, sign_in, sign_out, sign_up, try_sign_in, whoami};

const WRONG: &str = "Wrong email or password.";

/// The error of the sign-in page shown now, with its status.
async fn sign_in_error(b: &Browser) -> (u16, String) {
    b.wait_for_path("/account/signin").await;
    (b.status().await, b.text("p#error").await)
}

#[tokio::test]
async fn sign_in_is_throttled_after_repeated_failures() {
    let b = browser!();
    let account = sign_up(&b).await;
    sign_out(&b).await;

    // An unknown email and a wrong password get the same answer.
    try_sign_in(
        &b,
        &format!("{}@example.test", unique("nobody")),
        "whatever-password-1",
    )
    .await;
    assert_eq!(sign_in_error(&b).await, (401, WRONG.to_string()));

    // The per-account limit: 5 failed attempts; the next one is refused
    // even with the right password.
    for attempt in 1..=5 {
        try_sign_in(&b, &account.email, "not-the-password-9").await;
        assert_eq!(
            sign_in_error(&b).await,
            (401, WRONG.to_string()),
            "attempt {attempt}"
        );
    }
    try_sign_in(&b, &account.email, &account.password).await;
    let (status, error) = sign_in_error(&b).await;
    assert_eq!(status, 429, "{error}");
    let seconds = error
        .strip_prefix("Too many sign-in attempts; try again in ")
        .and_then(|rest| rest.strip_suffix(" seconds."))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("not the throttle message: {error:?}"));
    assert!(seconds > 0 && seconds <= 15 * 60, "{seconds}");
    assert_eq!(b.path().await, "/account/signin");
    // The email is limited in any letter case (the limit is per account).
    try_sign_in(&b, &account.email.to_uppercase(), &account.password).await;
    assert_eq!(sign_in_error(&b).await.0, 429);
    b.assert_no_script_errors().await;
    b.close().await;
}

#[tokio::test]
async fn a_suspended_account_is_signed_out_at_once() {
    let b = browser!();
    let account = sign_up(&b).await;
    let secret = mint_key(&b, "soon suspended", "read_write").await;
    let api = e2e_tests::Api::with_token(&secret);
    let database = e2e_tests::id(&api.create_database(&unique("suspended")).await);
    let user_id = whoami(&secret).await.expect_ok()["user"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    b.goto("/account").await;
    b.wait_for(&format!("li[data-database-id=\"{database}\"]"))
        .await;

    cluster()
        .control_plane
        .suspend_user(&user_id, true)
        .await
        .expect("suspend");
    // The next page load is the sign-in page.
    b.client.refresh().await.unwrap();
    b.wait_for_path("/account/signin").await;
    b.wait_for("form#signin").await;
    // The cookie no longer exports.
    b.goto(&format!("/api/databases/{database}/export")).await;
    assert_eq!(b.status().await, 401, "{}", b.describe().await);
    assert!(b.download_names().is_empty());
    // Signing in again is refused, with the same words as a wrong password.
    try_sign_in(&b, &account.email, &account.password).await;
    assert_eq!(sign_in_error(&b).await, (401, WRONG.to_string()));

    // Unsuspended, the account signs in again.
    cluster()
        .control_plane
        .suspend_user(&user_id, false)
        .await
        .expect("unsuspend");
    sign_in(&b, &account).await;
    b.close().await;
}

#[tokio::test]
async fn a_password_change_ends_the_session() {
    let b = browser!();
    let account = sign_up(&b).await;
    let new_password = unique("changed-Pass7");
    b.goto("/account").await;
    b.submit(
        "form#password",
        &[
            ("current_password", &account.password),
            ("new_password", &new_password),
        ],
        "#password-submit",
    )
    .await;
    b.wait_for_path("/account/signin").await;
    assert_eq!(b.text("p#notice").await, "Password changed; sign in again.");
    // Signed out: the account page sends the browser back to sign in.
    b.goto("/account").await;
    b.wait_for_path("/account/signin").await;
    try_sign_in(&b, &account.email, &account.password).await;
    assert_eq!(sign_in_error(&b).await, (401, WRONG.to_string()));
    let changed = crate::Account {
        password: new_password,
        ..account
    };
    sign_in(&b, &changed).await;
    sign_out(&b).await;
    b.close().await;
}
