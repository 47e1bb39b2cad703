//! Member management (`/api/databases/{id}/members`): answered by the
//! router with the control plane, never forwarded to a shard; the router's
//! own 404s and 403s (from the cached access and the key), its body checks,
//! the owner-grant refusal, and the control plane's answers passed through.

use super::*;

/// The fake control plane's member routes: records the call, then answers
/// `member_answer` or a plausible reply built from the request.
pub async fn cp_members(
    State(cp): State<Arc<Cp>>,
    method: axum::http::Method,
    uri: Uri,
    body: axum::body::Bytes,
) -> axum::response::Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    cp.member_calls.lock().unwrap().push((
        method.to_string(),
        uri.path().to_string(),
        body.clone(),
    ));
    if let Some((status, reply)) = cp.member_answer.lock().unwrap().clone() {
        return (StatusCode::from_u16(status).unwrap(), Json(reply)).into_response();
    }
    let member = |id: &str, role: &Value| {
        json!({
            "user": {"id": id, "name": "Nia", "email": "nia@example.com"},
            "role": role,
            "created_at": "2026-11-27T08:00:00.123456Z",
        })
    };
    let last = uri
        .path()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string();
    let reply = match method.as_str() {
        "GET" => json!({"members": [member("usr_aaaaaaaaaaaa", &json!("owner"))]}),
        "POST" => {
            let id = body["user_id"].as_str().unwrap_or("usr_byemail00000");
            json!({"member": member(id, &body["role"])})
        }
        "PATCH" => json!({"member": member(&last, &body["role"])}),
        _ => json!({"user_id": last, "deleted": true}),
    };
    Json(reply).into_response()
}

struct Case {
    e: Env,
    shard: Arc<Shard>,
    db: String,
}

async fn case() -> Case {
    let e = env(1000, 1000).await;
    let shard = Arc::new(Shard::default());
    let url = spawn_shard(shard.clone()).await;
    let (db, _) = e.database(&[&url]);
    Case { e, shard, db }
}

impl Case {
    /// A key of a new user with `role` in the database (or none).
    fn caller(&self, access: Access, role: Option<Role>) -> (String, String) {
        let (user_id, _, token) = self.e.user_with_key(access, DatabaseScope::All);
        if let Some(role) = role {
            self.e.member(&user_id, &self.db, role);
        }
        (user_id, token)
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<&str>,
    ) -> (u16, Value) {
        let mut req = self
            .e
            .http
            .request(method, format!("{}{path}", self.e.router))
            .header("x-forwarded-for", &self.e.address)
            .header("authorization", format!("Bearer {token}"));
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    fn members(&self) -> String {
        format!("/api/databases/{}/members", self.db)
    }

    fn calls(&self) -> Vec<(String, String, Value)> {
        self.e.cp.member_calls.lock().unwrap().clone()
    }
}

fn message(v: &Value) -> &str {
    v["error"]["message"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn list_is_answered_by_the_router_for_any_member_and_support() {
    let c = case().await;
    let (_, viewer) = c.caller(Access::ReadOnly, Some(Role::Viewer));
    let (status, v) = c
        .send(reqwest::Method::GET, &c.members(), &viewer, None)
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v,
        json!({"members": [{
            "user": {"id": "usr_aaaaaaaaaaaa", "name": "Nia", "email": "nia@example.com"},
            "role": "owner",
            "created_at": "2026-11-27T08:00:00.123Z",
        }]})
    );
    // A support grant reads the list too.
    let (support_id, support) = c.caller(Access::ReadWrite, None);
    {
        let mut access = c.e.cp.access.lock().unwrap();
        access.insert(
            support_id.clone(),
            UserAccess {
                user_id: support_id.clone(),
                version: 2,
                memberships: vec![],
                support: vec![c.db.clone()],
            },
        );
    }
    let (status, _) = c
        .send(reqwest::Method::GET, &c.members(), &support, None)
        .await;
    assert_eq!(status, 200);
    // ... and writes nothing.
    let (status, v) = c
        .send(
            reqwest::Method::POST,
            &c.members(),
            &support,
            Some(r#"{"user_id":"usr_bbbbbbbbbbbb","role":"viewer"}"#),
        )
        .await;
    assert_eq!((status, message(&v)), (403, forbidden::SUPPORT_READ_ONLY));
    let calls = c.calls();
    assert_eq!(calls.len(), 2);
    assert!(calls
        .iter()
        .all(|(m, p, _)| m == "GET" && *p == format!("/internal/databases/{}/members", c.db)));
    assert_eq!(c.shard.hits.load(Ordering::SeqCst), 0, "never a shard");
}

#[tokio::test]
async fn strangers_narrowed_keys_and_unknown_databases_get_404_without_asking() {
    let c = case().await;
    let (_, stranger) = c.caller(Access::ReadWrite, None);
    let (uid, _, narrowed) =
        c.e.user_with_key(Access::ReadWrite, DatabaseScope::Only(vec![]));
    c.e.member(&uid, &c.db, Role::Owner);
    let (_, owner) = c.caller(Access::ReadWrite, Some(Role::Owner));
    let other_db = new_tagged(Kind::Database, &random_token(5));
    // Same tag, another id: not this database.
    let tag = &c.db["db_".len().."db_".len() + 5];
    let same_tag = new_tagged(Kind::Database, tag);
    let cases = [
        (stranger.as_str(), c.members()),
        (narrowed.as_str(), c.members()),
        (owner.as_str(), format!("/api/databases/{other_db}/members")),
        (owner.as_str(), format!("/api/databases/{same_tag}/members")),
    ];
    for (token, path) in &cases {
        for (method, path, body) in [
            (reqwest::Method::GET, path.clone(), None),
            (
                reqwest::Method::POST,
                path.clone(),
                Some(r#"{"user_id":"usr_bbbbbbbbbbbb","role":"viewer"}"#),
            ),
            (
                reqwest::Method::PATCH,
                format!("{path}/usr_bbbbbbbbbbbb"),
                Some(r#"{"role":"viewer"}"#),
            ),
            (
                reqwest::Method::DELETE,
                format!("{path}/usr_bbbbbbbbbbbb"),
                None,
            ),
        ] {
            let (status, v) = c.send(method.clone(), &path, token, body).await;
            assert_eq!(status, 404, "{method} {path}: {v}");
            assert_eq!(v["error"]["code"], "not_found");
            assert_eq!(message(&v), "Not found.");
        }
    }
    // Unsupported methods on member paths: 404 as well.
    let (status, _) = c
        .send(reqwest::Method::PUT, &c.members(), &owner, Some("{}"))
        .await;
    assert_eq!(status, 404);
    assert!(c.calls().is_empty());
    assert_eq!(c.shard.hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn writes_are_refused_by_key_and_role_before_the_body_is_read() {
    let c = case().await;
    let path = format!("{}/usr_bbbbbbbbbbbb", c.members());
    for (access, role, expected) in [
        (Access::ReadOnly, Role::Owner, forbidden::KEY_READ_ONLY),
        (Access::ReadWrite, Role::Viewer, forbidden::VIEWER),
        (Access::ReadWrite, Role::Editor, forbidden::OWNER_ONLY),
    ] {
        let (_, token) = c.caller(access, Some(role));
        for (method, path, body) in [
            (reqwest::Method::POST, c.members(), Some("not json")),
            (reqwest::Method::PATCH, path.clone(), Some("{}")),
            (reqwest::Method::DELETE, path.clone(), None),
        ] {
            let (status, v) = c.send(method.clone(), &path, &token, body).await;
            assert_eq!(status, 403, "{method} {v}");
            assert_eq!(v["error"]["code"], "forbidden");
            assert_eq!(message(&v), expected);
        }
        // Reading is fine for all of them.
        let (status, _) = c
            .send(reqwest::Method::GET, &c.members(), &token, None)
            .await;
        assert_eq!(status, 200);
    }
    assert!(c.calls().iter().all(|(m, _, _)| m == "GET"));
}

#[tokio::test]
async fn owners_bodies_are_checked_and_owner_grants_refused() {
    let c = case().await;
    let (_, owner) = c.caller(Access::ReadWrite, Some(Role::Owner));
    let one = format!("{}/usr_bbbbbbbbbbbb", c.members());
    for (method, path, body, wanted) in [
        (reqwest::Method::POST, c.members(), "nope", "JSON"),
        (reqwest::Method::POST, c.members(), "[1]", "JSON object"),
        (
            reqwest::Method::POST,
            c.members(),
            r#"{"user_id":"usr_bbbbbbbbbbbb"}"#,
            "role is required",
        ),
        (
            reqwest::Method::POST,
            c.members(),
            r#"{"user_id":"usr_bbbbbbbbbbbb","role":"admin"}"#,
            "viewer, editor, owner",
        ),
        (
            reqwest::Method::POST,
            c.members(),
            r#"{"role":"viewer"}"#,
            "exactly one of user_id or email",
        ),
        (
            reqwest::Method::POST,
            c.members(),
            r#"{"role":"viewer","user_id":"usr_bbbbbbbbbbbb","email":"a@b.c"}"#,
            "exactly one",
        ),
        (
            reqwest::Method::POST,
            c.members(),
            r#"{"role":"viewer","email":7}"#,
            "email must be",
        ),
        (
            reqwest::Method::PATCH,
            one.clone(),
            "{}",
            "role is required",
        ),
        (
            reqwest::Method::PATCH,
            one.clone(),
            r#"{"role":["editor"]}"#,
            "viewer, editor, owner",
        ),
    ] {
        let (status, v) = c.send(method.clone(), &path, &owner, Some(body)).await;
        assert_eq!(status, 400, "{method} {body}: {v}");
        assert_eq!(v["error"]["code"], "bad_request");
        assert!(message(&v).contains(wanted), "{body}: {v}");
    }
    for (method, path, body) in [
        (
            reqwest::Method::POST,
            c.members(),
            r#"{"user_id":"usr_bbbbbbbbbbbb","role":"owner"}"#,
        ),
        (
            reqwest::Method::POST,
            c.members(),
            r#"{"email":"a@b.c","role":"owner"}"#,
        ),
        (reqwest::Method::PATCH, one.clone(), r#"{"role":"owner"}"#),
    ] {
        let (status, v) = c.send(method, &path, &owner, Some(body)).await;
        assert_eq!((status, message(&v)), (403, forbidden::KEY_OWNER_GRANT));
    }
    // A path segment that cannot be a user id is not a member.
    let (status, v) = c
        .send(
            reqwest::Method::DELETE,
            &format!("{}/someone", c.members()),
            &owner,
            None,
        )
        .await;
    assert_eq!(status, 404);
    assert!(message(&v).contains("someone"), "{v}");
    assert!(c.calls().is_empty(), "nothing reached the control plane");
}

#[tokio::test]
async fn owners_changes_go_to_the_control_plane_as_the_actor() {
    let c = case().await;
    let (owner_id, owner) = c.caller(Access::ReadWrite, Some(Role::Owner));
    let one = format!("{}/usr_bbbbbbbbbbbb", c.members());

    let (status, v) = c
        .send(
            reqwest::Method::POST,
            &c.members(),
            &owner,
            Some(r#"{"user_id":"usr_bbbbbbbbbbbb","role":"editor","extra":1}"#),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["member"]["user"]["id"], "usr_bbbbbbbbbbbb");
    assert_eq!(v["member"]["role"], "editor");
    assert_eq!(v["member"]["created_at"], "2026-11-27T08:00:00.123Z");

    let (status, v) = c
        .send(
            reqwest::Method::POST,
            &c.members(),
            &owner,
            Some(r#"{"email":"Nia@Example.com","role":"viewer","user_id":null}"#),
        )
        .await;
    assert_eq!(status, 200, "{v}");

    let (status, v) = c
        .send(
            reqwest::Method::PATCH,
            &one,
            &owner,
            Some(r#"{"role":"viewer"}"#),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["member"]["role"], "viewer");

    let (status, v) = c.send(reqwest::Method::DELETE, &one, &owner, None).await;
    assert_eq!(status, 200);
    assert_eq!(v, json!({"user_id": "usr_bbbbbbbbbbbb", "deleted": true}));

    let calls = c.calls();
    let base = format!("/internal/databases/{}/members", c.db);
    let one_internal = format!("{base}/usr_bbbbbbbbbbbb");
    let expected = [
        (
            "POST",
            &base,
            json!({"actor_id": owner_id, "user_id": "usr_bbbbbbbbbbbb", "role": "editor"}),
        ),
        (
            "POST",
            &base,
            json!({"actor_id": owner_id, "email": "Nia@Example.com", "role": "viewer"}),
        ),
        (
            "PATCH",
            &one_internal,
            json!({"actor_id": owner_id, "role": "viewer"}),
        ),
        ("DELETE", &one_internal, json!({"actor_id": owner_id})),
    ];
    assert_eq!(calls.len(), expected.len());
    for ((m, p, b), (em, ep, eb)) in calls.iter().zip(expected.iter()) {
        assert_eq!((m.as_str(), p, b), (*em, *ep, eb));
    }
    assert_eq!(c.shard.hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn control_plane_refusals_pass_through_and_failures_do_not_leak() {
    let c = case().await;
    let (_, owner) = c.caller(Access::ReadWrite, Some(Role::Owner));
    let one = format!("{}/usr_bbbbbbbbbbbb", c.members());
    for (status, code, text) in [
        (
            409,
            "conflict",
            "User usr_bbbbbbbbbbbb is the database's last owner.",
        ),
        (
            404,
            "not_found",
            "User usr_bbbbbbbbbbbb is not a member of this database.",
        ),
        (403, "forbidden", forbidden::OWNER_ONLY),
        (400, "bad_request", "Send exactly one of user_id or email."),
    ] {
        *c.e.cp.member_answer.lock().unwrap() =
            Some((status, json!({"error": {"code": code, "message": text}})));
        let (got, v) = c.send(reqwest::Method::DELETE, &one, &owner, None).await;
        assert_eq!(got, status);
        assert_eq!(v["error"]["code"], code);
        assert_eq!(message(&v), text);
    }
    // Redis refused the change on the control plane: a retryable 503 that
    // names no internals; a 401 (a token mismatch inside the cluster): 500.
    *c.e.cp.member_answer.lock().unwrap() = Some((
        503,
        json!({"error": {"code": "unavailable", "message": "Redis did not accept the change"}}),
    ));
    let (got, v) = c.send(reqwest::Method::DELETE, &one, &owner, None).await;
    assert_eq!(got, 503);
    assert!(!message(&v).contains("Redis"), "{v}");
    *c.e.cp.member_answer.lock().unwrap() = Some((
        401,
        json!({"error": {"code": "unauthorized", "message": "Missing or invalid control-plane token."}}),
    ));
    let (got, v) = c
        .send(reqwest::Method::GET, &c.members(), &owner, None)
        .await;
    assert_eq!(got, 500);
    assert_eq!(message(&v), "Something went wrong.");
}
