//! Accounts (issue 32) against the real server: sign-up open and closed,
//! sign-in answering one 401 for every failure, sessions stored as their
//! SHA-256 with expiry and idle timeout, sign-out, password change and
//! suspension ending sessions, keys a session may touch (its own only), and
//! the operator's `users set-password`.

use std::time::Duration;

use cluster_protocol::control::accounts::{
    ChangePassword, SessionCreateKey, SessionUpdateKey, SignIn, SignUp, SESSION_ENDED,
    SIGNUP_CLOSED, WRONG_EMAIL_OR_PASSWORD,
};
use cluster_protocol::control::client::{ClientError, ControlPlaneClient};
use cluster_protocol::control::{Access, CreateKey, DatabaseScope};
use control_plane::config::AccountConfig;
use sha2::{Digest, Sha256};

use crate::helpers::*;

const PASSWORD: &str = "correct horse battery";

fn open() -> AccountConfig {
    AccountConfig {
        signup_open: true,
        ..AccountConfig::default()
    }
}

fn router(app: &App) -> ControlPlaneClient {
    ControlPlaneClient::new(&app.base, ROUTER_TOKEN)
}

fn refusal(r: Result<impl std::fmt::Debug, ClientError>) -> (u16, String) {
    match r.expect_err("the call should fail") {
        ClientError::Api { status, body } => (status, body.message),
        e => panic!("not an API error: {e}"),
    }
}

fn sign_up(email: &str, password: &str) -> SignUp {
    SignUp {
        email: email.into(),
        name: Some("A <b>name</b>".into()),
        password: password.into(),
    }
}

fn sign_in(email: &str, password: &str) -> SignIn {
    SignIn {
        email: email.into(),
        password: password.into(),
    }
}

#[tokio::test]
async fn sign_up_is_refused_when_closed_and_checks_passwords_when_open() {
    if skip() {
        return;
    }
    let closed = spawn_app().await;
    let (status, message) = refusal(router(&closed).sign_up(&sign_up("a@b.co", PASSWORD)).await);
    assert_eq!((status, message.as_str()), (403, SIGNUP_CLOSED));
    assert!(
        !router(&closed)
            .account_settings()
            .await
            .unwrap()
            .signup_open
    );
    closed.finish().await;

    let app = spawn_app_with_accounts(open()).await;
    let cp = router(&app);
    assert!(cp.account_settings().await.unwrap().signup_open);
    let (status, message) = refusal(cp.sign_up(&sign_up("a@b.co", "short")).await);
    assert_eq!(status, 400);
    assert!(message.contains("at least 12"), "{message}");
    let (status, message) = refusal(cp.sign_up(&sign_up("a@b.co", "Password1234")).await);
    assert_eq!(status, 400);
    assert!(message.contains("too common"), "{message}");
    let (status, _) = refusal(cp.sign_up(&sign_up("not-an-email", PASSWORD)).await);
    assert_eq!(status, 400);
    // Nothing was created by the refusals.
    assert!(app
        .client
        .users(&Default::default())
        .await
        .unwrap()
        .users
        .is_empty());

    let opened = cp.sign_up(&sign_up("A@B.co", PASSWORD)).await.unwrap();
    assert_eq!(opened.user.email, "A@B.co");
    assert_eq!(opened.token.len(), 43);
    let (status, _) = refusal(cp.sign_up(&sign_up("a@b.co", PASSWORD)).await);
    assert_eq!(status, 409);

    // Only the token's SHA-256 is stored.
    let catalog = app.catalog().await;
    let rows = catalog
        .query("SELECT token_sha256, csrf_token FROM sessions", &[])
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    let stored: Vec<u8> = rows[0].get(0);
    assert_eq!(stored, Sha256::digest(opened.token.as_bytes()).to_vec());
    let hash: String = catalog
        .query_one("SELECT password_hash FROM users", &[])
        .await
        .unwrap()
        .get(0);
    assert!(hash.starts_with("$argon2id$"));
    assert!(!hash.contains(PASSWORD));

    let info = cp.resolve_session(&opened.token).await.unwrap();
    assert_eq!(info.user.id, opened.user.id);
    assert_eq!(info.csrf_token, opened.csrf_token);
    app.finish().await;
}

#[tokio::test]
async fn every_failed_sign_in_is_the_same_401() {
    if skip() {
        return;
    }
    let app = spawn_app_with_accounts(open()).await;
    let cp = router(&app);
    let opened = cp
        .sign_up(&sign_up("who@example.com", PASSWORD))
        .await
        .unwrap();
    let operator_made = app.user().await; // no password
    let operator_email = app
        .client
        .users(&Default::default())
        .await
        .unwrap()
        .users
        .into_iter()
        .find(|u| u.id == operator_made)
        .unwrap()
        .email;

    let wrong = refusal(
        cp.sign_in(&sign_in("who@example.com", "wrong password!"))
            .await,
    );
    let unknown = refusal(cp.sign_in(&sign_in("nobody@example.com", PASSWORD)).await);
    let no_password = refusal(cp.sign_in(&sign_in(&operator_email, PASSWORD)).await);
    app.client
        .suspend_user(&opened.user.id, true)
        .await
        .unwrap();
    let suspended = refusal(cp.sign_in(&sign_in("who@example.com", PASSWORD)).await);
    for r in [&wrong, &unknown, &no_password, &suspended] {
        assert_eq!((r.0, r.1.as_str()), (401, WRONG_EMAIL_OR_PASSWORD));
    }
    // Suspension ended the session at once.
    let (status, message) = refusal(cp.resolve_session(&opened.token).await);
    assert_eq!((status, message.as_str()), (401, SESSION_ENDED));
    app.client
        .suspend_user(&opened.user.id, false)
        .await
        .unwrap();
    // Case-insensitive email; the right password signs in.
    let again = cp
        .sign_in(&sign_in("WHO@example.com", PASSWORD))
        .await
        .unwrap();
    assert_eq!(again.user.id, opened.user.id);
    app.finish().await;
}

#[tokio::test]
async fn sessions_end_at_expiry_idle_sign_out_and_password_change() {
    if skip() {
        return;
    }
    let app = spawn_app_with_accounts(AccountConfig {
        signup_open: true,
        session_ttl: Duration::from_secs(3600),
        session_idle: Duration::from_secs(600),
    })
    .await;
    let cp = router(&app);
    let catalog = app.catalog().await;
    let first = cp
        .sign_up(&sign_up("s@example.com", PASSWORD))
        .await
        .unwrap();
    let digest = |t: &str| Sha256::digest(t.as_bytes()).to_vec();

    // Idle: last seen 11 minutes ago.
    catalog
        .execute(
            "UPDATE sessions SET last_seen_at = now() - interval '11 minutes' WHERE token_sha256 = $1",
            &[&digest(&first.token)],
        )
        .await
        .unwrap();
    assert_eq!(refusal(cp.resolve_session(&first.token).await).0, 401);
    // An ended session is deleted.
    let left = catalog
        .query(
            "SELECT 1 FROM sessions WHERE token_sha256 = $1",
            &[&digest(&first.token)],
        )
        .await
        .unwrap();
    assert!(left.is_empty());

    // A resolve restarts the idle clock; the absolute expiry still ends it.
    let second = cp
        .sign_in(&sign_in("s@example.com", PASSWORD))
        .await
        .unwrap();
    catalog
        .execute(
            "UPDATE sessions SET last_seen_at = now() - interval '9 minutes' WHERE token_sha256 = $1",
            &[&digest(&second.token)],
        )
        .await
        .unwrap();
    cp.resolve_session(&second.token).await.unwrap();
    let seen: bool = catalog
        .query_one(
            "SELECT last_seen_at > now() - interval '1 minute' FROM sessions WHERE token_sha256 = $1",
            &[&digest(&second.token)],
        )
        .await
        .unwrap()
        .get(0);
    assert!(seen, "resolve touches last_seen_at");
    catalog
        .execute(
            "UPDATE sessions SET expires_at = now() - interval '1 second' WHERE token_sha256 = $1",
            &[&digest(&second.token)],
        )
        .await
        .unwrap();
    assert_eq!(refusal(cp.resolve_session(&second.token).await).0, 401);

    // Sign-out ends one session; a password change ends them all.
    let a = cp
        .sign_in(&sign_in("s@example.com", PASSWORD))
        .await
        .unwrap();
    let b = cp
        .sign_in(&sign_in("s@example.com", PASSWORD))
        .await
        .unwrap();
    let c = cp
        .sign_in(&sign_in("s@example.com", PASSWORD))
        .await
        .unwrap();
    cp.sign_out(&a.token).await.unwrap();
    assert_eq!(refusal(cp.resolve_session(&a.token).await).0, 401);
    cp.resolve_session(&b.token).await.unwrap();
    let change = |current: &str, new: &str| ChangePassword {
        token: b.token.clone(),
        current_password: current.into(),
        new_password: new.into(),
    };
    let (status, message) = refusal(
        cp.change_password(&change("not it at all", "a new long password"))
            .await,
    );
    assert_eq!(status, 400, "{message}");
    assert_eq!(
        refusal(cp.change_password(&change(PASSWORD, "short")).await).0,
        400
    );
    cp.change_password(&change(PASSWORD, "a new long password"))
        .await
        .unwrap();
    for t in [&b.token, &c.token] {
        assert_eq!(refusal(cp.resolve_session(t).await).0, 401);
    }
    assert_eq!(
        refusal(cp.sign_in(&sign_in("s@example.com", PASSWORD)).await).0,
        401
    );
    cp.sign_in(&sign_in("s@example.com", "a new long password"))
        .await
        .unwrap();
    app.finish().await;
}

#[tokio::test]
async fn a_session_touches_only_its_own_users_keys() {
    if skip() {
        return;
    }
    let app = spawn_app_with_accounts(open()).await;
    let cp = router(&app);
    let me = cp
        .sign_up(&sign_up("me@example.com", PASSWORD))
        .await
        .unwrap();
    let other = app.user().await;
    let foreign = app
        .client
        .create_key(&CreateKey {
            user_id: other.clone(),
            name: "theirs".into(),
            access: Access::ReadWrite,
            databases: DatabaseScope::All,
        })
        .await
        .unwrap();

    let created = cp
        .session_create_key(&SessionCreateKey {
            token: me.token.clone(),
            name: "laptop".into(),
            access: Access::ReadWrite,
            databases: DatabaseScope::All,
        })
        .await
        .unwrap();
    assert!(created.token.starts_with(&format!("{}.", created.id)));
    let renamed = cp
        .session_update_key(
            &created.id,
            &SessionUpdateKey {
                token: me.token.clone(),
                name: Some("desk".into()),
                access: Some(Access::ReadOnly),
                databases: Some(DatabaseScope::Only(vec!["db_abcdefghijkl".into()])),
            },
        )
        .await
        .unwrap();
    assert_eq!(renamed.name, "desk");
    assert_eq!(renamed.access, Access::ReadOnly);
    let view = cp.account(&me.token).await.unwrap();
    assert_eq!(view.keys.len(), 1);
    assert_eq!(view.keys[0].name, "desk");

    // Another user's key is unknown to this session.
    let touch_foreign = SessionUpdateKey {
        token: me.token.clone(),
        name: Some("mine now".into()),
        access: None,
        databases: None,
    };
    assert_eq!(
        refusal(cp.session_update_key(&foreign.id, &touch_foreign).await).0,
        404
    );
    assert_eq!(
        refusal(cp.session_revoke_key(&me.token, &foreign.id).await).0,
        404
    );
    assert_eq!(
        app.client.user_keys(&other).await.unwrap().keys[0].name,
        "theirs"
    );
    // A dead session may do nothing.
    assert_eq!(
        refusal(cp.session_revoke_key("not-a-session", &created.id).await).0,
        401
    );

    cp.session_revoke_key(&me.token, &created.id).await.unwrap();
    assert!(cp.account(&me.token).await.unwrap().keys.is_empty());
    app.finish().await;
}

#[tokio::test]
async fn the_operator_sets_a_password_from_standard_input() {
    if skip() {
        return;
    }
    let app = spawn_app().await;
    let user = app.user().await;
    let email = app.client.users(&Default::default()).await.unwrap().users[0]
        .email
        .clone();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_control-plane"))
        .args(["users", "set-password", &user, "--password-stdin"])
        .env("CONTROL_PLANE_URL", &app.base)
        .env("CONTROL_PLANE_TOKEN", TOKEN)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(format!("{PASSWORD}\n").as_bytes())
            .await
            .unwrap();
    }
    let out = child.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cp = router(&app);
    let opened = cp.sign_in(&sign_in(&email, PASSWORD)).await.unwrap();
    assert_eq!(opened.user.id, user);
    // The router's token may not set passwords.
    assert_eq!(refusal(cp.set_password(&user, PASSWORD).await).0, 403);
    // A weak password is refused by the operator's route too.
    assert_eq!(
        refusal(app.client.set_password(&user, "short").await).0,
        400
    );
    app.finish().await;
}
