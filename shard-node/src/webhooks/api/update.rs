//! `PATCH /api/webhooks/{id}` (editor): any key a create takes (checked
//! the same way; `conditions: null` clears them, `table_id: null` makes the
//! webhook database-wide), `is_active` to switch it off or on, and
//! `resume: true` to clear an auto-pause and the failure streak.
//!
//! Match memory (part A "States and transitions / Webhook"): a change of
//! table, trigger or conditions, switching off or on, and resuming a
//! paused webhook delete its `webhook_matches` rows and mark it unrecorded,
//! so the next time-driven pass records what matches without delivering.
//! `resume` on a webhook that is not paused resets the streak only.
//!
//! Everything is checked before anything is written. A change bumps the
//! database's `schema_version` in the same transaction (record writes read
//! webhook rules from the cached schema model); a body that changes
//! nothing writes nothing and replies with the webhook as it is.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use crate::auth::Editor;
use crate::catalog::{databases, webhooks};
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::http::body::JsonObject;
use crate::schema::structural;
use crate::state::AppState;
use crate::webhooks::validate::{self, Changes, Config};

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let mut changes = validate::parse_update(&body)?;
    if let Some(url) = &changes.url {
        changes.url = Some(validate::check_url(&state.egress, url).await?);
    }
    let webhook = update(&state, &access.database_id, &id, &changes).await?;
    Ok(Json(json!({ "webhook": webhook.secret_hidden() })))
}

pub async fn update(
    state: &AppState,
    database_id: &str,
    id: &str,
    changes: &Changes,
) -> ApiResult<webhooks::Webhook> {
    state
        .db
        .in_transaction(database_id, DbOp::UpdateWebhook, async |tx| {
            structural::begin(tx, database_id).await?;
            let current = webhooks::get_for_update(tx, database_id, id)
                .await?
                .ok_or(ApiError::NotFound)?;
            let before = Config::of(&current)?;
            let schema = state.schemas.get_locked(tx, database_id).await?;
            let after = validate::settle(&schema, validate::apply(&before, changes), changes)?;
            let resume = changes.resume
                && (current.paused_at.is_some() || current.consecutive_failures != 0);
            if after == before && !resume {
                return Ok(current);
            }
            let forget = before.clears_matches(&after) || (resume && current.paused_at.is_some());
            let updated = webhooks::update(tx, database_id, id, &after.settings(), resume, forget)
                .await?
                .ok_or(ApiError::NotFound)?;
            if forget {
                webhooks::forget_matches(tx, id).await?;
            }
            databases::bump_schema_version(tx, database_id).await?;
            Ok(updated)
        })
        .await
}
