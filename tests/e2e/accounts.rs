//! Accounts in the browser (issue 32), at the HTTP level through the real
//! router: sign-up and sign-in pages, one answer for a wrong password and
//! an unknown email, sign-in throttling (429 + `Retry-After`), sign-out,
//! password change and suspension ending sessions, keys minted, renamed,
//! narrowed and revoked by form (403 without the form token or from a
//! foreign origin), a session cookie alone refused on API routes (401), and
//! export by cookie (200 zip without rate-limit headers; cross-site 403).
//! The browser tests (Chromium) drive the same pages; these need no browser.

use std::collections::HashMap;
use std::io::Cursor;

use e2e_tests::{cluster, fresh_address, unique, Api};
use reqwest::header::{HeaderMap, LOCATION, RETRY_AFTER, SET_COOKIE};

const PASSWORD: &str = "a long enough password";
const SESSION: &str = "__Host-session";

/// A browser without a browser: its own address, cookie jar, no redirects.
struct Browser {
    http: reqwest::Client,
    address: String,
    cookies: HashMap<String, String>,
}

struct Page {
    status: u16,
    headers: HeaderMap,
    body: String,
}

impl Page {
    fn location(&self) -> &str {
        self.headers
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// The value of the first `csrf_token` field.
    fn csrf(&self) -> String {
        let at = self
            .body
            .find("name=\"csrf_token\" value=\"")
            .unwrap_or_else(|| panic!("no csrf_token in {}", self.body));
        let rest = &self.body[at + "name=\"csrf_token\" value=\"".len()..];
        rest[..rest.find('"').unwrap()].to_string()
    }

    fn error(&self) -> &str {
        between(&self.body, "<p id=\"error\">", "</p>").unwrap_or("")
    }
}

fn between<'a>(s: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = s.find(start)? + start.len();
    let len = s[from..].find(end)?;
    Some(&s[from..from + len])
}

fn origin() -> String {
    cluster().router_url.trim_end_matches('/').to_string()
}

impl Browser {
    fn new() -> Self {
        Browser {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            address: fresh_address(),
            cookies: HashMap::new(),
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn keep_cookies(&mut self, headers: &HeaderMap) {
        for v in headers.get_all(SET_COOKIE) {
            let v = v.to_str().unwrap();
            let (pair, attrs) = v.split_once(';').unwrap_or((v, ""));
            let (name, value) = pair.split_once('=').unwrap();
            if attrs.contains("Max-Age=0") || value.is_empty() {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_string(), value.to_string());
            }
        }
    }

    async fn send(&mut self, req: reqwest::RequestBuilder) -> Page {
        let req = req
            .header("x-forwarded-for", &self.address)
            .header("cookie", self.cookie_header());
        let resp = req.send().await.expect("router reachable");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        self.keep_cookies(&headers);
        let body = resp.text().await.unwrap_or_default();
        Page {
            status,
            headers,
            body,
        }
    }

    async fn get(&mut self, path: &str) -> Page {
        let req = self.http.get(format!("{}{path}", origin()));
        self.send(req).await
    }

    /// Posts a form as a same-origin page would (with `Origin`).
    async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> Page {
        self.post_from(path, fields, Some(&origin())).await
    }

    async fn post_from(&mut self, path: &str, fields: &[(&str, &str)], from: Option<&str>) -> Page {
        let mut req = self.http.post(format!("{}{path}", origin())).form(fields);
        if let Some(o) = from {
            req = req.header("origin", o);
        }
        self.send(req).await
    }

    async fn sign_in(&mut self, email: &str, password: &str) -> Page {
        let form = self.get("/account/signin").await;
        assert_eq!(form.status, 200);
        let csrf = form.csrf();
        self.post(
            "/account/signin",
            &[
                ("email", email),
                ("password", password),
                ("csrf_token", &csrf),
            ],
        )
        .await
    }

    /// The account page's form token (signed in).
    async fn account(&mut self) -> Page {
        let page = self.get("/account").await;
        assert_eq!(page.status, 200, "{}", page.body);
        page
    }
}

/// A user made by the operator with a password: (user id, email).
async fn operator_user() -> (String, String) {
    let cp = &cluster().control_plane;
    let email = format!("{}@example.test", unique("acct"));
    let user = cp.create_user(&email, Some("Pat")).await.unwrap();
    cp.set_password(&user.id, PASSWORD).await.unwrap();
    (user.id, email)
}

async fn signed_in() -> (Browser, String, String) {
    let (user_id, email) = operator_user().await;
    let mut b = Browser::new();
    let r = b.sign_in(&email, PASSWORD).await;
    assert_eq!((r.status, r.location()), (303, "/account"), "{}", r.body);
    assert!(b.cookies.contains_key(SESSION));
    (b, user_id, email)
}

/// Mints a key on the account page; returns (key id, token).
async fn mint(b: &mut Browser, name: &str, extra: &[(&str, &str)]) -> (String, String) {
    let csrf = b.account().await.csrf();
    let mut fields = vec![
        ("name", name),
        ("access", "read_write"),
        ("csrf_token", &csrf),
    ];
    fields.extend_from_slice(extra);
    let page = b.post("/account/keys", &fields).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.headers.get(LOCATION).is_none());
    let token = between(&page.body, "<code id=\"new-key-secret\">", "</code>")
        .expect("the secret on the page")
        .to_string();
    assert!(page.body.contains("<button id=\"copy-secret\""));
    let id = token.split_once('.').unwrap().0.to_string();
    (id, token)
}

#[tokio::test]
async fn sign_up_sign_out_and_sign_in_through_the_pages() {
    let mut b = Browser::new();
    let form = b.get("/account/signup").await;
    assert_eq!(form.status, 200, "the test cluster runs with SIGNUP=open");
    assert!(form.body.contains("<form id=\"signup\""));
    assert!(form
        .body
        .contains("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"));
    let csrf = form.csrf();
    let email = format!("{}@example.test", unique("signup"));
    let hostile = "<script>alert(1)</script>";

    let weak = b
        .post(
            "/account/signup",
            &[
                ("email", &email),
                ("name", hostile),
                ("password", "short"),
                ("csrf_token", &csrf),
            ],
        )
        .await;
    assert_eq!(weak.status, 400);
    assert!(weak.error().contains("at least 12"), "{}", weak.body);
    assert!(!weak.body.contains(hostile));

    let done = b
        .post(
            "/account/signup",
            &[
                ("email", &email),
                ("name", hostile),
                ("password", PASSWORD),
                ("csrf_token", &csrf),
            ],
        )
        .await;
    assert_eq!(
        (done.status, done.location()),
        (303, "/account"),
        "{}",
        done.body
    );
    let set = done.headers.get(SET_COOKIE).unwrap().to_str().unwrap();
    for attr in ["HttpOnly", "SameSite=Lax", "Path=/", "Secure"] {
        assert!(set.contains(attr), "{set}");
    }
    assert!(!set.contains("Domain"));

    let page = b.account().await;
    assert_eq!(
        between(&page.body, "<span id=\"user-email\">", "</span>"),
        Some(email.as_str())
    );
    assert_eq!(
        between(&page.body, "<span id=\"user-name\">", "</span>"),
        Some("&lt;script&gt;alert(1)&lt;/script&gt;")
    );
    assert!(!page.body.contains(hostile));

    let taken = {
        let mut other = Browser::new();
        let csrf = other.get("/account/signup").await.csrf();
        other
            .post(
                "/account/signup",
                &[
                    ("email", &email.to_uppercase()),
                    ("password", PASSWORD),
                    ("csrf_token", &csrf),
                ],
            )
            .await
    };
    assert_eq!(taken.status, 409, "{}", taken.body);

    let csrf = page.csrf();
    let out = b.post("/account/signout", &[("csrf_token", &csrf)]).await;
    assert_eq!((out.status, out.location()), (303, "/account/signin"));
    assert!(!b.cookies.contains_key(SESSION));
    let gone = b.get("/account").await;
    assert_eq!((gone.status, gone.location()), (303, "/account/signin"));

    let back = b.sign_in(&email, PASSWORD).await;
    assert_eq!((back.status, back.location()), (303, "/account"));
    b.account().await;
}

#[tokio::test]
async fn a_wrong_password_and_an_unknown_email_get_the_same_answer() {
    let (_, email) = operator_user().await;
    let mut b = Browser::new();
    let wrong = b.sign_in(&email, "not the password at all").await;
    let unknown = b
        .sign_in(&format!("{}@example.test", unique("nobody")), PASSWORD)
        .await;
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.error(), "Wrong email or password.");
    assert_eq!((unknown.status, &unknown.body), (401, &wrong.body));
    assert!(!b.cookies.contains_key(SESSION));
}

#[tokio::test]
async fn sign_in_is_throttled_per_account_and_per_address() {
    let (_, email) = operator_user().await;
    // Five failures from five addresses: the account's sixth attempt is refused,
    // even with the right password, from yet another address.
    for _ in 0..5 {
        let r = Browser::new().sign_in(&email, "wrong password again").await;
        assert_eq!(r.status, 401);
    }
    let r = Browser::new().sign_in(&email, PASSWORD).await;
    assert_eq!(r.status, 429, "{}", r.body);
    let retry: u64 = r.headers[RETRY_AFTER].to_str().unwrap().parse().unwrap();
    assert!(retry > 0 && retry <= 15 * 60);
    assert_eq!(
        r.error(),
        format!("Too many sign-in attempts; try again in {retry} seconds.")
    );
    // An unknown email is throttled the same way.
    let nobody = format!("{}@example.test", unique("ghost"));
    for _ in 0..5 {
        assert_eq!(Browser::new().sign_in(&nobody, PASSWORD).await.status, 401);
    }
    assert_eq!(Browser::new().sign_in(&nobody, PASSWORD).await.status, 429);

    // One address: 20 attempts on different accounts, then 429.
    let mut b = Browser::new();
    for _ in 0..20 {
        let other = format!("{}@example.test", unique("spray"));
        assert_eq!(b.sign_in(&other, PASSWORD).await.status, 401);
    }
    let other = format!("{}@example.test", unique("spray"));
    let r = b.sign_in(&other, PASSWORD).await;
    assert_eq!(r.status, 429);
    assert!(r.headers.contains_key(RETRY_AFTER));
}

#[tokio::test]
async fn keys_are_minted_renamed_narrowed_and_revoked_by_form() {
    let (mut b, user_id, _) = signed_in().await;
    let (key_id, token) = mint(&mut b, "laptop", &[]).await;
    let api = Api::with_token(&token);
    let me = api.get("/api/meta/whoami").await;
    assert_eq!(me.status, 200, "{:?}", me.body);
    assert!(me.body.to_string().contains(&user_id));
    let db = api.new_database("acct").await;

    let page = b.account().await;
    let row = format!("<tr class=\"key\" data-key-id=\"{key_id}\">");
    assert!(page.body.contains(&row), "{}", page.body);
    assert!(page
        .body
        .contains(&format!("<li data-database-id=\"{db}\">")));
    assert!(page
        .body
        .contains(&format!("href=\"/api/databases/{db}/export\"")));

    // Rename and narrow to read-only on one database.
    let csrf = page.csrf();
    let path = format!("/account/keys/{key_id}");
    let saved = b
        .post(
            &path,
            &[
                ("name", "desk"),
                ("access", "read_only"),
                ("database", &db),
                ("csrf_token", &csrf),
            ],
        )
        .await;
    assert_eq!(
        (saved.status, saved.location()),
        (303, "/account?done=saved"),
        "{}",
        saved.body
    );
    let page = b.account().await;
    let at = page.body.find(&row).unwrap();
    let row_html = &page.body[at..];
    assert_eq!(
        between(row_html, "<td class=\"key-name\">", "</td>"),
        Some("desk")
    );
    assert_eq!(
        between(row_html, "<td class=\"key-access\">", "</td>"),
        Some("read_only")
    );
    assert_eq!(
        between(row_html, "<td class=\"key-databases\">", "</td>"),
        Some(db.as_str())
    );
    let write = api
        .post("/api/databases", serde_json::json!({"name": "nope"}))
        .await;
    assert_eq!(
        write.status, 403,
        "a read-only key may not create: {:?}",
        write.body
    );

    // Without the form token, with a foreign origin, or cross-site: 403, nothing changes.
    let revoke = format!("/account/keys/{key_id}/revoke");
    let no_token = b.post(&revoke, &[]).await;
    let wrong_token = b.post(&revoke, &[("csrf_token", "forged")]).await;
    let foreign = b
        .post_from(
            &revoke,
            &[("csrf_token", &csrf)],
            Some("http://evil.example"),
        )
        .await;
    let cross = {
        let req = b
            .http
            .post(format!("{}{revoke}", origin()))
            .header("sec-fetch-site", "cross-site")
            .form(&[("csrf_token", csrf.as_str())]);
        b.send(req).await
    };
    for r in [&no_token, &wrong_token, &foreign, &cross] {
        assert_eq!(r.status, 403, "{}", r.body);
        assert_eq!(
            r.error(),
            "This form has expired or did not come from this site; reload the page and try again."
        );
    }
    assert_eq!(api.get("/api/meta/whoami").await.status, 200);

    // Another user's key cannot be touched from this session.
    let (_, stranger_email) = operator_user().await;
    let mut s = Browser::new();
    s.sign_in(&stranger_email, PASSWORD).await;
    let (their_key, their_token) = mint(&mut s, "theirs", &[]).await;
    let theirs = b
        .post(
            &format!("/account/keys/{their_key}/revoke"),
            &[("csrf_token", &csrf)],
        )
        .await;
    assert_eq!(theirs.status, 404, "{}", theirs.body);
    assert_eq!(
        Api::with_token(&their_token)
            .get("/api/meta/whoami")
            .await
            .status,
        200
    );

    let gone = b.post(&revoke, &[("csrf_token", &csrf)]).await;
    assert_eq!(
        (gone.status, gone.location()),
        (303, "/account?done=revoked")
    );
    assert_eq!(api.get("/api/meta/whoami").await.status, 401);
    assert!(!b.account().await.body.contains(&row));
}

#[tokio::test]
async fn a_cookie_alone_opens_only_the_export() {
    let (mut b, _, _) = signed_in().await;
    let (_, token) = mint(&mut b, "setup", &[]).await;
    let api = Api::with_token(&token);
    let db = api.new_database("cookie").await;
    let cookie = format!("{SESSION}={}", b.cookies[SESSION]);
    let http = reqwest::Client::new();
    let address = fresh_address();
    let call = |method: reqwest::Method, path: String| {
        http.request(method, format!("{}{path}", origin()))
            .header("cookie", &cookie)
            .header("x-forwarded-for", &address)
    };

    // API routes: the cookie alone is the spec's 401.
    for (method, path) in [
        (reqwest::Method::GET, "/api/meta/whoami".to_string()),
        (reqwest::Method::GET, "/api/databases".to_string()),
        (reqwest::Method::GET, format!("/api/databases/{db}")),
        (reqwest::Method::GET, format!("/api/databases/{db}/members")),
    ] {
        let r = call(method, path.clone()).send().await.unwrap();
        assert_eq!(r.status(), 401, "{path}");
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unauthorized", "{path}");
    }

    // The export by cookie: a zip, no rate-limit headers.
    let r = call(reqwest::Method::GET, format!("/api/databases/{db}/export"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/zip");
    assert!(r.headers().get("x-ratelimit-limit").is_none());
    assert!(r.headers().get("x-ratelimit-remaining").is_none());
    let bytes = r.bytes().await.unwrap();
    let zip = zip::ZipArchive::new(Cursor::new(bytes.to_vec())).expect("a zip");
    let names: Vec<String> = zip
        .file_names()
        .map(|n| n.expect("an entry name").to_string())
        .collect();
    assert!(names.iter().any(|n| n == "manifest.json"), "{names:?}");

    // Cross-site and same-site requests are refused (the shard's 403).
    for site in ["cross-site", "same-site"] {
        let r = call(reqwest::Method::GET, format!("/api/databases/{db}/export"))
            .header("sec-fetch-site", site)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{site}");
    }
    // Another user's database: 404 by cookie.
    let (mut other, _, _) = signed_in().await;
    let other_cookie = format!("{SESSION}={}", other.cookies.remove(SESSION).unwrap());
    let r = http
        .get(format!("{}/api/databases/{db}/export", origin()))
        .header("cookie", other_cookie)
        .header("x-forwarded-for", fresh_address())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    // A key, when sent, decides alone: a bad key with a good cookie is 401.
    let r = call(reqwest::Method::GET, format!("/api/databases/{db}/export"))
        .header("authorization", "Bearer key_aaaaaaaaaaaa.nope")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // A dead cookie: 401.
    let r = http
        .get(format!("{}/api/databases/{db}/export", origin()))
        .header("cookie", format!("{SESSION}=not-a-session"))
        .header("x-forwarded-for", fresh_address())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
}

#[tokio::test]
async fn password_change_and_suspension_end_every_session() {
    let (mut a, user_id, email) = signed_in().await;
    let mut b = Browser::new();
    assert_eq!(b.sign_in(&email, PASSWORD).await.status, 303);
    let csrf = a.account().await.csrf();
    let new_password = "another long password";
    let wrong = a
        .post(
            "/account/password",
            &[
                ("current_password", "not my password"),
                ("new_password", new_password),
                ("csrf_token", &csrf),
            ],
        )
        .await;
    assert_eq!(wrong.status, 400, "{}", wrong.body);
    assert!(!wrong.error().is_empty());
    let changed = a
        .post(
            "/account/password",
            &[
                ("current_password", PASSWORD),
                ("new_password", new_password),
                ("csrf_token", &csrf),
            ],
        )
        .await;
    assert_eq!(
        (changed.status, changed.location()),
        (303, "/account/signin?changed=1")
    );
    let notice = a.get("/account/signin?changed=1").await;
    assert!(notice
        .body
        .contains("<p id=\"notice\">Password changed; sign in again.</p>"));
    for browser in [&mut a, &mut b] {
        let r = browser.get("/account").await;
        assert_eq!((r.status, r.location()), (303, "/account/signin"));
    }
    assert_eq!(a.sign_in(&email, PASSWORD).await.status, 401);
    assert_eq!(a.sign_in(&email, new_password).await.status, 303);

    // Suspension: the next page load signs out, the next cookie export is 401.
    let (_, token) = mint(&mut a, "k", &[]).await;
    let db = Api::with_token(&token).new_database("susp").await;
    let cookie = format!("{SESSION}={}", a.cookies[SESSION]);
    cluster()
        .control_plane
        .suspend_user(&user_id, true)
        .await
        .unwrap();
    let r = a.get("/account").await;
    assert_eq!((r.status, r.location()), (303, "/account/signin"));
    let r = reqwest::Client::new()
        .get(format!("{}/api/databases/{db}/export", origin()))
        .header("cookie", cookie)
        .header("x-forwarded-for", fresh_address())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(a.sign_in(&email, new_password).await.status, 401);
}
