//! A client for the control plane's internal API, used by routers, shard
//! nodes and the operator CLI alike.
//!
//! Every call runs in a `client` span named after its method, with
//! OpenTelemetry's HTTP attribute names (`http.request.method`, `url.full`,
//! `server.address`, `server.port`, `http.response.status_code`,
//! `error.type`); a client made [`ControlPlaneClient::traced`] puts that
//! span's W3C trace context on the request, so the control plane's span of
//! it joins the caller's trace.

use std::time::Duration;

use serde::{de::DeserializeOwned, Serialize};
use tracing::field::Empty;
use tracing::Instrument;

use super::accounts::{
    AccountSettings, AccountView, ChangePassword, OpenedSession, SessionCreateKey, SessionInfo,
    SessionToken, SessionUpdateKey, SetPassword, SignIn, SignUp,
};
use super::quotas::{AccountQuotas, AccountUsage, QuotaChange, TopUsage, UsageMeasure};
use super::*;
use crate::error::{Envelope, ErrorBody};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The control plane answered with an error envelope.
    #[error("control plane answered {status}: {}", .body.message)]
    Api { status: u16, body: ErrorBody },
    /// The control plane could not be reached or answered nonsense.
    #[error("control plane unreachable: {0}")]
    Transport(String),
}

impl ClientError {
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            ClientError::Transport(_) => None,
        }
    }
    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }
}

/// Puts a span's trace context on outgoing headers
/// (`service_kit::trace::inject`).
pub type InjectTrace = fn(&tracing::Span, &mut http::HeaderMap);

#[derive(Clone)]
pub struct ControlPlaneClient {
    base: String,
    token: String,
    http: reqwest::Client,
    /// `server.address` and `server.port` of the spans.
    host: String,
    port: u16,
    inject: Option<InjectTrace>,
}

impl std::fmt::Debug for ControlPlaneClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlaneClient")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl ControlPlaneClient {
    pub fn new(base_url: &str, token: &str) -> Self {
        Self::build(base_url, token, true)
    }

    /// A client that keeps no idle connection: for callers that use one
    /// client from several tokio runtimes (each test has its own), where a
    /// pooled connection would die with the runtime that opened it.
    pub fn unpooled(base_url: &str, token: &str) -> Self {
        Self::build(base_url, token, false)
    }

    fn build(base_url: &str, token: &str, pooled: bool) -> Self {
        let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(10));
        builder = if pooled {
            builder.pool_idle_timeout(Duration::from_secs(60))
        } else {
            builder.pool_max_idle_per_host(0)
        };
        let http = builder.build().expect("reqwest client builds");
        let url = reqwest::Url::parse(base_url).ok();
        Self {
            base: base_url.trim_end_matches('/').to_string(),
            token: token.to_string(),
            http,
            host: url
                .as_ref()
                .and_then(|u| u.host_str().map(str::to_owned))
                .unwrap_or_default(),
            port: url.and_then(|u| u.port_or_known_default()).unwrap_or(0),
            inject: None,
        }
    }

    /// This client, putting each call's trace context on its request with
    /// `inject`.
    pub fn traced(mut self, inject: InjectTrace) -> Self {
        self.inject = Some(inject);
        self
    }

    async fn send<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        url: String,
        req: reqwest::RequestBuilder,
    ) -> Result<T, ClientError> {
        let span = tracing::info_span!(
            "control-plane call",
            otel.name = %method,
            otel.kind = "client",
            otel.status_code = Empty,
            http.request.method = %method,
            url.full = %url,
            server.address = %self.host,
            server.port = self.port,
            http.response.status_code = Empty,
            error.type = Empty,
        );
        let mut headers = http::HeaderMap::new();
        if let Some(inject) = self.inject {
            inject(&span, &mut headers);
        }
        let result = self
            .exchange(req.headers(headers))
            .instrument(span.clone())
            .await;
        let error = match &result {
            Err(ClientError::Api { status, .. }) if *status >= 500 => Some(status.to_string()),
            Err(ClientError::Transport(_)) => Some("transport".to_owned()),
            _ => None,
        };
        if let Some(error) = error {
            span.record("error.type", error);
            span.record("otel.status_code", "ERROR");
        }
        result
    }

    async fn exchange<T: DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
    ) -> Result<T, ClientError> {
        let resp = req
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        let status = resp.status().as_u16();
        tracing::Span::current().record("http.response.status_code", status);
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        if (200..300).contains(&status) {
            serde_json::from_slice(&bytes)
                .map_err(|e| ClientError::Transport(format!("undecodable reply: {e}")))
        } else {
            let body = serde_json::from_slice::<Envelope>(&bytes)
                .map(|e| e.error)
                .unwrap_or_else(|_| ErrorBody::internal());
            Err(ClientError::Api { status, body })
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let url = self.url(path);
        let req = self.http.get(&url);
        self.send(reqwest::Method::GET, url, req).await
    }
    async fn get_query<Q: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        query: &Q,
    ) -> Result<T, ClientError> {
        let url = self.url(path);
        let req = self.http.get(&url).query(query);
        self.send(reqwest::Method::GET, url, req).await
    }
    async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        let url = self.url(path);
        let req = self.http.post(&url).json(body);
        self.send(reqwest::Method::POST, url, req).await
    }
    async fn patch<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        let url = self.url(path);
        let req = self.http.patch(&url).json(body);
        self.send(reqwest::Method::PATCH, url, req).await
    }
    async fn delete<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        let url = self.url(path);
        let req = self.http.delete(&url).json(body);
        self.send(reqwest::Method::DELETE, url, req).await
    }

    pub async fn health(&self) -> Result<Ok, ClientError> {
        self.get("/internal/health").await
    }

    // ---- for routers ----
    pub async fn key(&self, key_id: &str) -> Result<KeyRecord, ClientError> {
        self.get(&format!("/internal/keys/{key_id}")).await
    }
    pub async fn user_access(&self, user_id: &str) -> Result<UserAccess, ClientError> {
        self.get(&format!("/internal/users/{user_id}/access")).await
    }
    pub async fn placement(&self, tag: &str) -> Result<Placement, ClientError> {
        self.get(&format!("/internal/placements/{tag}")).await
    }
    pub async fn placements(&self, database_ids: Vec<String>) -> Result<Placements, ClientError> {
        self.post(
            "/internal/placements/lookup",
            &PlacementLookup { database_ids },
        )
        .await
    }
    pub async fn allocate_database(&self, user_id: &str) -> Result<Allocation, ClientError> {
        self.post(
            "/internal/databases/allocate",
            &AllocateRequest {
                user_id: user_id.into(),
            },
        )
        .await
    }
    pub async fn confirm_database(&self, database_id: &str) -> Result<Ok, ClientError> {
        self.post(
            &format!("/internal/databases/{database_id}/confirm"),
            &serde_json::json!({}),
        )
        .await
    }
    pub async fn release_database(&self, database_id: &str) -> Result<Ok, ClientError> {
        self.post(
            &format!("/internal/databases/{database_id}/release"),
            &serde_json::json!({}),
        )
        .await
    }

    // ---- for the router's account pages (`accounts`) ----
    pub async fn account_settings(&self) -> Result<AccountSettings, ClientError> {
        self.get("/internal/accounts/settings").await
    }
    pub async fn sign_up(&self, req: &SignUp) -> Result<OpenedSession, ClientError> {
        self.post("/internal/accounts/signup", req).await
    }
    pub async fn sign_in(&self, req: &SignIn) -> Result<OpenedSession, ClientError> {
        self.post("/internal/accounts/signin", req).await
    }
    pub async fn resolve_session(&self, token: &str) -> Result<SessionInfo, ClientError> {
        self.post("/internal/sessions/resolve", &session(token))
            .await
    }
    pub async fn account(&self, token: &str) -> Result<AccountView, ClientError> {
        self.post("/internal/sessions/account", &session(token))
            .await
    }
    pub async fn sign_out(&self, token: &str) -> Result<Ok, ClientError> {
        self.post("/internal/sessions/signout", &session(token))
            .await
    }
    pub async fn change_password(&self, req: &ChangePassword) -> Result<Ok, ClientError> {
        self.post("/internal/sessions/password", req).await
    }
    pub async fn session_create_key(
        &self,
        req: &SessionCreateKey,
    ) -> Result<CreatedKey, ClientError> {
        self.post("/internal/sessions/keys", req).await
    }
    pub async fn session_update_key(
        &self,
        key_id: &str,
        req: &SessionUpdateKey,
    ) -> Result<KeyInfo, ClientError> {
        self.post(&format!("/internal/sessions/keys/{key_id}"), req)
            .await
    }
    pub async fn session_revoke_key(&self, token: &str, key_id: &str) -> Result<Ok, ClientError> {
        self.post(
            &format!("/internal/sessions/keys/{key_id}/revoke"),
            &session(token),
        )
        .await
    }
    pub async fn set_password(&self, user_id: &str, password: &str) -> Result<Ok, ClientError> {
        let url = self.url(&format!("/internal/users/{user_id}/password"));
        let body = SetPassword {
            password: password.into(),
        };
        let req = self.http.put(&url).json(&body);
        self.send(reqwest::Method::PUT, url, req).await
    }

    // ---- for the operator CLI ----
    pub async fn create_user(&self, email: &str, name: Option<&str>) -> Result<User, ClientError> {
        self.post(
            "/internal/users",
            &CreateUser {
                email: email.into(),
                name: name.map(String::from),
            },
        )
        .await
    }
    pub async fn suspend_user(&self, user_id: &str, suspended: bool) -> Result<User, ClientError> {
        let verb = if suspended { "suspend" } else { "unsuspend" };
        self.post(
            &format!("/internal/users/{user_id}/{verb}"),
            &serde_json::json!({}),
        )
        .await
    }
    pub async fn users(&self, page: &Page) -> Result<UserList, ClientError> {
        self.get_query("/internal/users", page).await
    }
    pub async fn user_keys(&self, user_id: &str) -> Result<KeyList, ClientError> {
        self.get(&format!("/internal/users/{user_id}/keys")).await
    }
    pub async fn create_key(&self, req: &CreateKey) -> Result<CreatedKey, ClientError> {
        self.post("/internal/keys", req).await
    }
    pub async fn update_key(&self, key_id: &str, req: &UpdateKey) -> Result<KeyInfo, ClientError> {
        self.patch(&format!("/internal/keys/{key_id}"), req).await
    }
    pub async fn revoke_key(&self, key_id: &str) -> Result<Ok, ClientError> {
        self.delete(&format!("/internal/keys/{key_id}"), &serde_json::json!({}))
            .await
    }
    pub async fn add_member(
        &self,
        database_id: &str,
        user_id: &str,
        role: Role,
    ) -> Result<Ok, ClientError> {
        let body = MemberChange {
            database_id: database_id.into(),
            user_id: user_id.into(),
            role: Some(role),
        };
        self.post("/internal/members", &body).await
    }
    pub async fn remove_member(&self, database_id: &str, user_id: &str) -> Result<Ok, ClientError> {
        let body = MemberChange {
            database_id: database_id.into(),
            user_id: user_id.into(),
            role: None,
        };
        self.delete("/internal/members", &body).await
    }
    pub async fn grant_support(&self, database_id: &str, user_id: &str) -> Result<Ok, ClientError> {
        let body = SupportChange {
            database_id: database_id.into(),
            user_id: user_id.into(),
        };
        self.post("/internal/support", &body).await
    }
    pub async fn revoke_support(
        &self,
        database_id: &str,
        user_id: &str,
    ) -> Result<Ok, ClientError> {
        let body = SupportChange {
            database_id: database_id.into(),
            user_id: user_id.into(),
        };
        self.delete("/internal/support", &body).await
    }
    // ---- member management of the public API (routers) ----
    pub async fn members(&self, database_id: &str) -> Result<MemberList, ClientError> {
        self.get(&format!("/internal/databases/{database_id}/members"))
            .await
    }
    pub async fn add_member_as(
        &self,
        database_id: &str,
        req: &AddMember,
    ) -> Result<MemberReply, ClientError> {
        self.post(&format!("/internal/databases/{database_id}/members"), req)
            .await
    }
    pub async fn change_member_role(
        &self,
        database_id: &str,
        user_id: &str,
        req: &ChangeRole,
    ) -> Result<MemberReply, ClientError> {
        self.patch(
            &format!("/internal/databases/{database_id}/members/{user_id}"),
            req,
        )
        .await
    }
    pub async fn remove_member_as(
        &self,
        database_id: &str,
        user_id: &str,
        req: &ActedBy,
    ) -> Result<RemovedMember, ClientError> {
        self.delete(
            &format!("/internal/databases/{database_id}/members/{user_id}"),
            req,
        )
        .await
    }

    pub async fn shards(&self) -> Result<ShardList, ClientError> {
        self.get("/internal/shards").await
    }
    pub async fn add_shard(&self, req: &AddShard) -> Result<Shard, ClientError> {
        self.post("/internal/shards", req).await
    }
    pub async fn drain_shard(&self, name: &str) -> Result<DrainReply, ClientError> {
        self.drain_shard_with(name, &DrainRequest::default()).await
    }
    pub async fn drain_shard_with(
        &self,
        name: &str,
        req: &DrainRequest,
    ) -> Result<DrainReply, ClientError> {
        self.post(&format!("/internal/shards/{name}/drain"), req)
            .await
    }
    pub async fn activate_shard(&self, name: &str) -> Result<Shard, ClientError> {
        self.post(
            &format!("/internal/shards/{name}/activate"),
            &serde_json::json!({}),
        )
        .await
    }

    // ---- moves ----
    pub async fn create_move(&self, req: &CreateMove) -> Result<Move, ClientError> {
        self.post("/internal/moves", req).await
    }
    pub async fn moves(&self) -> Result<MoveList, ClientError> {
        self.get("/internal/moves").await
    }
    pub async fn moves_where(&self, filter: &MoveFilter) -> Result<MoveList, ClientError> {
        self.get_query("/internal/moves", filter).await
    }
    pub async fn get_move(&self, id: &str) -> Result<Move, ClientError> {
        self.get(&format!("/internal/moves/{id}")).await
    }
    pub async fn abort_move(&self, id: &str) -> Result<Move, ClientError> {
        self.post(
            &format!("/internal/moves/{id}/abort"),
            &serde_json::json!({}),
        )
        .await
    }
    pub async fn create_restore(
        &self,
        database_id: &str,
        req: &CreateRestore,
    ) -> Result<Restore, ClientError> {
        self.post(&format!("/internal/databases/{database_id}/restore"), req)
            .await
    }
    pub async fn restores(&self) -> Result<RestoreList, ClientError> {
        self.get("/internal/restores").await
    }
    pub async fn get_restore(&self, id: &str) -> Result<Restore, ClientError> {
        self.get(&format!("/internal/restores/{id}")).await
    }
    pub async fn rebalance(&self, req: &RebalanceRequest) -> Result<RebalanceReply, ClientError> {
        self.post("/internal/rebalance", req).await
    }
    pub async fn databases(&self, shard: Option<&str>) -> Result<DatabaseList, ClientError> {
        match shard {
            Some(s) => {
                let url = self.url("/internal/databases");
                let req = self.http.get(&url).query(&[("shard", s)]);
                self.send(reqwest::Method::GET, url, req).await
            }
            None => self.get("/internal/databases").await,
        }
    }
    pub async fn databases_where(
        &self,
        filter: &DatabaseFilter,
    ) -> Result<DatabaseList, ClientError> {
        self.get_query("/internal/databases", filter).await
    }
    pub async fn database(&self, database_id: &str) -> Result<DatabaseInfo, ClientError> {
        self.get(&format!("/internal/databases/{database_id}"))
            .await
    }
    pub async fn quotas(&self, user_id: &str) -> Result<AccountQuotas, ClientError> {
        self.get(&format!("/internal/users/{user_id}/quotas")).await
    }
    pub async fn set_quotas(
        &self,
        user_id: &str,
        change: &QuotaChange,
    ) -> Result<AccountQuotas, ClientError> {
        let url = self.url(&format!("/internal/users/{user_id}/quotas"));
        let req = self.http.put(&url).json(change);
        self.send(reqwest::Method::PUT, url, req).await
    }
    pub async fn usage(&self, user_id: &str) -> Result<AccountUsage, ClientError> {
        self.get(&format!("/internal/users/{user_id}/usage")).await
    }
    pub async fn top_usage(&self, top: u32, by: UsageMeasure) -> Result<TopUsage, ClientError> {
        let query = [("top", top.to_string()), ("by", by.as_str().to_string())];
        self.get_query("/internal/usage", &query).await
    }
}

fn session(token: &str) -> SessionToken {
    SessionToken {
        token: token.to_owned(),
    }
}
