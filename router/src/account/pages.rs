//! One handler per page and form. Each signed-in request resolves its
//! session at the control plane (nothing is cached here); each POST is
//! checked by `csrf` before anything changes.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use cluster_protocol::control::accounts::{
    AccountView, ChangePassword, SessionCreateKey, SessionInfo, SessionUpdateKey, SignIn, SignUp,
    SIGNUP_CLOSED, WRONG_EMAIL_OR_PASSWORD,
};
use cluster_protocol::control::client::ClientError;
use cluster_protocol::control::{redis_keys, Access, DatabaseScope};
use http::{header, HeaderMap, HeaderValue, Response, StatusCode};
use hyper::body::Incoming;
use rand::RngCore;
use std::sync::LazyLock;

use super::cookies::Cookies;
use super::forms::{cookie, Form};
use super::{csrf, html, page, see_other, throttle};
use crate::errors::{Body, DEPENDENCY_DOWN_MESSAGE};
use crate::forward::client::{declared_length, read_limited};
use crate::gate::redis_conn::Script;
use crate::gate::resp::{Reply, ScriptCall};
use crate::state::AppState;

/// Largest form body read.
const FORM_LIMIT: usize = 16 * 1024;

type Answer = Response<Body>;

fn cookies(state: &AppState) -> Cookies {
    Cookies {
        secure: state.config.accounts.cookie_secure,
    }
}

fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

fn with_header(mut resp: Answer, name: header::HeaderName, value: Option<HeaderValue>) -> Answer {
    if let Some(v) = value {
        resp.headers_mut().append(name, v);
    }
    resp
}

fn refused() -> Answer {
    page(
        StatusCode::FORBIDDEN,
        html::message_page("Refused", csrf::REFUSED),
    )
}

fn unavailable(e: &ClientError) -> Answer {
    tracing::error!(error = %e, "account page: control plane call failed");
    let mut resp = page(
        StatusCode::SERVICE_UNAVAILABLE,
        html::message_page("Unavailable", DEPENDENCY_DOWN_MESSAGE),
    );
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(1u64));
    resp
}

/// The control plane's message of a 4xx, or the 503 page (boxed: a
/// response is large beside the message).
fn refusal_of(e: ClientError) -> Result<(StatusCode, String), Box<Answer>> {
    match e {
        ClientError::Api { status, body } if (400..500).contains(&status) => Ok((
            StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST),
            body.message,
        )),
        e => Err(Box::new(unavailable(&e))),
    }
}

fn throttled(retry_after_secs: u64) -> Answer {
    let message = format!("Too many sign-in attempts; try again in {retry_after_secs} seconds.");
    let mut resp = page(
        StatusCode::TOO_MANY_REQUESTS,
        html::message_page("Too many attempts", &message),
    );
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
    resp
}

fn signed_out_to_signin(state: &AppState) -> Answer {
    let mut resp = see_other("/account/signin");
    resp.headers_mut()
        .append(header::SET_COOKIE, cookies(state).clear_session());
    resp
}

fn session_token(state: &AppState, headers: &HeaderMap) -> Option<String> {
    cookie(headers, cookies(state).session_name()).map(str::to_owned)
}

async fn read_form(
    state: &AppState,
    req: http::Request<Incoming>,
) -> Result<(HeaderMap, Form), Answer> {
    let (parts, body) = req.into_parts();
    let declared = declared_length(&parts.headers);
    let timeout = state.config.connections.body_timeout;
    match read_limited(body, declared, FORM_LIMIT, timeout, &state.body_budget).await {
        Ok((bytes, _reserved)) => Ok((parts.headers, Form::parse(&bytes))),
        Err(e) => Err(e.into_response()),
    }
}

/// The signed-in session of the request, else the answer to send (303 to
/// the sign-in page, or 503).
async fn signed_in(state: &AppState, headers: &HeaderMap) -> Result<(String, SessionInfo), Answer> {
    let Some(token) = session_token(state, headers) else {
        return Err(see_other("/account/signin"));
    };
    match state.control.resolve_session(&token).await {
        Ok(info) => Ok((token, info)),
        Err(ClientError::Api { status: 401, .. }) => Err(signed_out_to_signin(state)),
        Err(e) => Err(unavailable(&e)),
    }
}

/// A signed-in form post: its session and fields, once the origin and the
/// session's form token are checked.
async fn signed_in_form(
    state: &AppState,
    req: http::Request<Incoming>,
) -> Result<(String, Form), Answer> {
    let (headers, form) = read_form(state, req).await?;
    // The origin first: a cross-site post is refused as such (403), even
    // though it arrives without the session cookie (SameSite=Lax).
    if !csrf::same_origin(&headers) {
        return Err(refused());
    }
    let (token, info) = signed_in(state, &headers).await?;
    if !csrf::tokens_match(form.get("csrf_token"), &info.csrf_token) {
        return Err(refused());
    }
    Ok((token, form))
}

/// A signed-out form post (sign-in, sign-up): the origin and the
/// double-submit token of the csrf cookie.
async fn signed_out_form(
    state: &AppState,
    req: http::Request<Incoming>,
) -> Result<(HeaderMap, Form), Answer> {
    let (headers, form) = read_form(state, req).await?;
    let expected = cookie(&headers, cookies(state).csrf_name()).unwrap_or_default();
    if !csrf::same_origin(&headers) || !csrf::tokens_match(form.get("csrf_token"), expected) {
        return Err(refused());
    }
    Ok((headers, form))
}

/// The signed-out forms' token: the csrf cookie's when the browser has one,
/// else a new one (with the `Set-Cookie` to send).
fn csrf_for(state: &AppState, headers: &HeaderMap) -> (String, Option<HeaderValue>) {
    match cookie(headers, cookies(state).csrf_name()) {
        Some(t) => (t.to_owned(), None),
        None => {
            let t = random_token();
            let set = cookies(state).set_csrf(&t);
            (t, set)
        }
    }
}

fn query_has(req: &http::Request<Incoming>, pair: &str) -> bool {
    req.uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == pair))
}

async fn signup_open(state: &AppState) -> bool {
    match state.control.account_settings().await {
        Ok(s) => s.signup_open,
        Err(e) => {
            tracing::warn!(error = %e, "account settings unavailable: sign-up shown as closed");
            false
        }
    }
}

pub async fn signin_form(state: &AppState, req: http::Request<Incoming>) -> Answer {
    let (token, set) = csrf_for(state, req.headers());
    let notice = query_has(&req, "changed=1").then_some("Password changed; sign in again.");
    let open = signup_open(state).await;
    let text = html::signin(&token, "", None, notice, open);
    with_header(page(StatusCode::OK, text), header::SET_COOKIE, set)
}

pub async fn signin(state: &AppState, req: http::Request<Incoming>, address: &str) -> Answer {
    let (headers, form) = match signed_out_form(state, req).await {
        Ok(f) => f,
        Err(resp) => return resp,
    };
    let limits = state.config.accounts;
    if let Some(secs) =
        throttle::charge_address(&state.limiter, address, limits.signin_per_address).await
    {
        return throttled(secs);
    }
    let account = throttle::account_name(form.get("email"));
    if let Some(secs) =
        throttle::account_blocked(&state.limiter, &account, limits.signin_per_account).await
    {
        return throttled(secs);
    }
    let req = SignIn {
        email: form.get("email").trim().to_owned(),
        password: form.get("password").to_owned(),
    };
    match state.control.sign_in(&req).await {
        Ok(opened) => {
            throttle::forget(&state.limiter, &account).await;
            let set = cookies(state).set_session(&opened.token);
            with_header(see_other("/account"), header::SET_COOKIE, set)
        }
        Err(ClientError::Api { status: 401, .. }) => {
            throttle::count_failure(&state.limiter, &account).await;
            let (token, _) = csrf_for(state, &headers);
            let open = signup_open(state).await;
            let text = html::signin(&token, "", Some(WRONG_EMAIL_OR_PASSWORD), None, open);
            page(StatusCode::UNAUTHORIZED, text)
        }
        Err(e) => unavailable(&e),
    }
}

pub async fn signup_form(state: &AppState, req: http::Request<Incoming>) -> Answer {
    if !signup_open(state).await {
        return page(
            StatusCode::FORBIDDEN,
            html::message_page("Sign-up closed", SIGNUP_CLOSED),
        );
    }
    let (token, set) = csrf_for(state, req.headers());
    let text = html::signup(&token, "", "", None);
    with_header(page(StatusCode::OK, text), header::SET_COOKIE, set)
}

pub async fn signup(state: &AppState, req: http::Request<Incoming>, address: &str) -> Answer {
    let (headers, form) = match signed_out_form(state, req).await {
        Ok(f) => f,
        Err(resp) => return resp,
    };
    // Sign-ups hash a password too: they count against the address.
    let limit = state.config.accounts.signin_per_address;
    if let Some(secs) = throttle::charge_address(&state.limiter, address, limit).await {
        return throttled(secs);
    }
    let name = form.get("name").trim();
    let req = SignUp {
        email: form.get("email").trim().to_owned(),
        name: (!name.is_empty()).then(|| name.to_owned()),
        password: form.get("password").to_owned(),
    };
    match state.control.sign_up(&req).await {
        Ok(opened) => {
            let set = cookies(state).set_session(&opened.token);
            with_header(see_other("/account"), header::SET_COOKIE, set)
        }
        Err(e) => match refusal_of(e) {
            Ok((StatusCode::FORBIDDEN, message)) => page(
                StatusCode::FORBIDDEN,
                html::message_page("Sign-up closed", &message),
            ),
            Ok((status, message)) => {
                let (token, _) = csrf_for(state, &headers);
                let text = html::signup(&token, &req.email, name, Some(&message));
                page(status, text)
            }
            Err(resp) => *resp,
        },
    }
}

pub async fn signout(state: &AppState, req: http::Request<Incoming>) -> Answer {
    let token = match signed_in_form(state, req).await {
        Ok((token, _)) => token,
        Err(resp) => return resp,
    };
    match state.control.sign_out(&token).await {
        Ok(_) => signed_out_to_signin(state),
        Err(e) => unavailable(&e),
    }
}

/// The last-used stamp of a key (unix ms) as routers record it in Redis.
static LAST_USED: LazyLock<Script> =
    LazyLock::new(|| Script::new("return redis.call('GET', KEYS[1])"));

async fn last_used(state: &AppState, view: &AccountView) -> Vec<Option<i64>> {
    let mut out = Vec::with_capacity(view.keys.len());
    for k in &view.keys {
        let name = redis_keys::key_last_used(&k.user_id, &k.id);
        let call = |call: &mut ScriptCall<'_>| call.key(&[name.as_str()], None);
        let stamp = match state.limiter.eval(&LAST_USED, call).await {
            Some(reply @ Reply::Bulk(Some(_))) => reply.as_i64(),
            _ => None,
        };
        out.push(stamp);
    }
    out
}

/// The account page with an optional message, as `status`.
async fn account_page(
    state: &AppState,
    token: &str,
    status: StatusCode,
    error: Option<&str>,
    notice: Option<&str>,
) -> Answer {
    match state.control.account(token).await {
        Ok(view) => {
            let used = last_used(state, &view).await;
            page(status, html::account(&view, &used, error, notice))
        }
        Err(ClientError::Api { status: 401, .. }) => signed_out_to_signin(state),
        Err(e) => unavailable(&e),
    }
}

pub async fn account(state: &AppState, req: http::Request<Incoming>) -> Answer {
    let Some(token) = session_token(state, req.headers()) else {
        return see_other("/account/signin");
    };
    let notice = [
        ("done=saved", "Key saved."),
        ("done=revoked", "Key revoked."),
    ]
    .into_iter()
    .find(|(q, _)| query_has(&req, q))
    .map(|(_, n)| n);
    account_page(state, &token, StatusCode::OK, None, notice).await
}

pub async fn password(state: &AppState, req: http::Request<Incoming>) -> Answer {
    let (token, form) = match signed_in_form(state, req).await {
        Ok(f) => f,
        Err(resp) => return resp,
    };
    let req = ChangePassword {
        token: token.clone(),
        current_password: form.get("current_password").to_owned(),
        new_password: form.get("new_password").to_owned(),
    };
    match state.control.change_password(&req).await {
        Ok(_) => {
            let mut resp = see_other("/account/signin?changed=1");
            resp.headers_mut()
                .append(header::SET_COOKIE, cookies(state).clear_session());
            resp
        }
        Err(e) => match refusal_of(e) {
            Ok((StatusCode::UNAUTHORIZED, _)) => signed_out_to_signin(state),
            Ok((status, message)) => {
                account_page(state, &token, status, Some(&message), None).await
            }
            Err(resp) => *resp,
        },
    }
}

/// A key form's access and databases (none checked: all).
fn key_fields(form: &Form) -> Result<(Access, DatabaseScope), String> {
    let access = Access::parse(form.get("access"))
        .ok_or_else(|| "Access must be read_write or read_only.".to_string())?;
    let ids = form.all("database");
    let scope = if ids.is_empty() {
        DatabaseScope::All
    } else {
        DatabaseScope::Only(ids)
    };
    Ok((access, scope))
}

/// The account page with the control plane's refusal (or 503).
async fn refused_change(state: &AppState, token: &str, e: ClientError) -> Answer {
    match refusal_of(e) {
        Ok((StatusCode::UNAUTHORIZED, _)) => signed_out_to_signin(state),
        Ok((status, message)) => account_page(state, token, status, Some(&message), None).await,
        Err(resp) => *resp,
    }
}

/// A signed-in key form (mint, edit): its session, fields, access and
/// databases, or the page that refuses it (400 on the account page for
/// bad key fields).
async fn key_form(
    state: &AppState,
    req: http::Request<Incoming>,
) -> Result<(String, Form, Access, DatabaseScope), Answer> {
    let (token, form) = signed_in_form(state, req).await?;
    match key_fields(&form) {
        Ok((access, databases)) => Ok((token, form, access, databases)),
        Err(m) => Err(account_page(state, &token, StatusCode::BAD_REQUEST, Some(&m), None).await),
    }
}

pub async fn mint(state: &AppState, req: http::Request<Incoming>) -> Answer {
    let (token, form, access, databases) = match key_form(state, req).await {
        Ok(f) => f,
        Err(resp) => return resp,
    };
    let req = SessionCreateKey {
        token: token.clone(),
        name: form.get("name").to_owned(),
        access,
        databases,
    };
    match state.control.session_create_key(&req).await {
        // A page, never a redirect: the secret must not reach a URL.
        Ok(created) => page(StatusCode::OK, html::new_key(&created)),
        Err(e) => refused_change(state, &token, e).await,
    }
}

pub async fn edit(state: &AppState, req: http::Request<Incoming>, key_id: &str) -> Answer {
    let (token, form, access, databases) = match key_form(state, req).await {
        Ok(f) => f,
        Err(resp) => return resp,
    };
    let req = SessionUpdateKey {
        token: token.clone(),
        name: Some(form.get("name").to_owned()),
        access: Some(access),
        databases: Some(databases),
    };
    match state.control.session_update_key(key_id, &req).await {
        Ok(_) => see_other("/account?done=saved"),
        Err(e) => refused_change(state, &token, e).await,
    }
}

pub async fn revoke(state: &AppState, req: http::Request<Incoming>, key_id: &str) -> Answer {
    let (token, _) = match signed_in_form(state, req).await {
        Ok(f) => f,
        Err(resp) => return resp,
    };
    match state.control.session_revoke_key(&token, key_id).await {
        Ok(_) => see_other("/account?done=revoked"),
        Err(e) => refused_change(state, &token, e).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_forms_read_access_and_databases() {
        let f = Form::parse(b"name=n&access=read_only&database=db_a&database=db_b");
        let (a, s) = key_fields(&f).unwrap();
        assert_eq!(a, Access::ReadOnly);
        assert_eq!(s, DatabaseScope::Only(vec!["db_a".into(), "db_b".into()]));
        let all = key_fields(&Form::parse(b"access=read_write")).unwrap();
        assert_eq!(all.1, DatabaseScope::All);
        assert!(key_fields(&Form::parse(b"access=admin")).is_err());
    }
}
