//! `POST /api/databases/{id}/webhooks` (editor): `url` and `trigger_type`
//! required; `name`, `table_id`, `conditions`, `watched_field_ids`,
//! `payload_key`, `is_active` optional (see `webhooks::validate`). Replies
//! `{webhook}` with the new signing secret, the one time besides a
//! regenerate that it is shown.
//!
//! Everything is checked before anything is written; the insert and the
//! `schema_version` bump (record writes read webhook rules from the cached
//! schema model) share one transaction, under the database row's lock.

use axum::extract::{Path, State};
use axum::Json;
use cluster_protocol::ids::{self, Kind};
use serde_json::{json, Value};

use super::secret::new_secret;
use crate::auth::Editor;
use crate::catalog::{databases, webhooks};
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::http::body::JsonObject;
use crate::schema::structural;
use crate::state::AppState;
use crate::webhooks::validate::{self, Changes, Config, MAX_WEBHOOKS_PER_DATABASE};

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let database_id = access.database(&id)?;
    let changes = validate::parse_create(&body)?;
    let mut config = validate::draft_new(&changes);
    config.url = validate::check_url(&state.egress, &config.url).await?;
    let webhook = create(&state, database_id, config, &changes).await?;
    Ok(Json(json!({ "webhook": webhook })))
}

pub async fn create(
    state: &AppState,
    database_id: &str,
    config: Config,
    changes: &Changes,
) -> ApiResult<webhooks::Webhook> {
    state
        .db
        .in_transaction(database_id, DbOp::CreateWebhook, async |tx| {
            let tag = structural::begin(tx, database_id).await?;
            if webhooks::count(tx, database_id).await? >= MAX_WEBHOOKS_PER_DATABASE {
                return Err(ApiError::bad_request(format!(
                    "A database may have at most {MAX_WEBHOOKS_PER_DATABASE} webhooks; \
                     this one has reached the limit."
                )));
            }
            let schema = state.schemas.get_locked(tx, database_id).await?;
            let config = validate::settle(&schema, config, changes)?;
            let id = ids::new_tagged(Kind::Webhook, &tag);
            let webhook =
                webhooks::insert(tx, &id, database_id, &config.settings(), &new_secret()).await?;
            databases::bump_schema_version(tx, database_id).await?;
            Ok(webhook)
        })
        .await
}
