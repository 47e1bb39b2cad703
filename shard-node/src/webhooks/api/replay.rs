//! `POST /api/webhooks/{id}/deliveries/{deliveryId}/replay` (editor):
//! enqueues the delivery's payload again under a new `delivery_id`, due
//! now, with the normal retries and auto-pause; it is signed with the
//! webhook's secret when sent. The body is the original's with only
//! `delivery_id` replaced (header and body carry the new id). Replies
//! `{delivery: {...}}`, the new log entry. A delivery of another webhook
//! is 404.

use axum::extract::{Path, State};
use axum::Json;
use cluster_protocol::ids::{self, Kind};
use serde_json::{json, Value};

use crate::auth::Editor;
use crate::catalog::deliveries::{self, Delivery, NewDelivery};
use crate::catalog::webhooks;
use crate::db::{Db, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path((id, delivery_id)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let delivery = replay(&state.db, &access.database_id, &id, &delivery_id).await?;
    Ok(Json(json!({ "delivery": delivery })))
}

/// Enqueues a copy of `delivery_id` under a new id and wakes the deliverer.
pub async fn replay(
    db: &Db,
    database_id: &str,
    webhook_id: &str,
    delivery_id: &str,
) -> ApiResult<Delivery> {
    db.in_transaction(database_id, DbOp::ReplayDelivery, async |tx| {
        let webhook = webhooks::get(tx, database_id, webhook_id)
            .await?
            .ok_or(ApiError::NotFound)?;
        let original = deliveries::get(tx, &webhook.id, delivery_id)
            .await?
            .ok_or(ApiError::NotFound)?;
        let tag = ids::tag_of(Kind::Database, database_id).ok_or_else(|| {
            ApiError::Internal(anyhow::anyhow!("database id {database_id} has no tag"))
        })?;
        let id = ids::new_tagged(Kind::Delivery, tag);
        let body = with_delivery_id(&original.body, &id)?;
        let copy = deliveries::insert(
            tx,
            &NewDelivery {
                id: &id,
                database_id,
                webhook_id: &webhook.id,
                event: &original.event,
                record_id: original.record_id.as_deref(),
                body: &body,
                replay_of: Some(&original.id),
            },
        )
        .await?;
        deliveries::notify(tx).await?;
        Ok(copy)
    })
    .await
}

/// `body` with its `delivery_id` set to `id`, everything else as it was
/// (bodies are written compact by serde_json, which writes them back the
/// same).
pub fn with_delivery_id(body: &str, id: &str) -> ApiResult<String> {
    let mut payload: Value = serde_json::from_str(body)
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("stored delivery body: {e}")))?;
    let Some(object) = payload.as_object_mut() else {
        return Err(ApiError::Internal(anyhow::anyhow!(
            "stored delivery body is not an object"
        )));
    };
    object.insert("delivery_id".into(), Value::String(id.to_owned()));
    Ok(payload.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_delivery_id_changes() {
        let original = json!({
            "delivery_id": "dlv_Ab3dZ1234567",
            "event": "record.updated",
            "occurred_at": "2026-03-04T05:06:07.123Z",
            "after": {"fields": {"Name": "Café ☕ \"quoted\"\n", "Price": 12.5, "Big": 12345678901234i64,
                                 "Tags": ["a", "b"], "Empty": null}},
            "test": false
        })
        .to_string();
        let replayed = with_delivery_id(&original, "dlv_Ab3dZ7654321").unwrap();
        assert_eq!(
            replayed,
            original.replace("dlv_Ab3dZ1234567", "dlv_Ab3dZ7654321")
        );
    }

    #[test]
    fn a_body_that_is_not_an_object_is_an_internal_error() {
        assert!(with_delivery_id("[1]", "dlv_x").is_err());
        assert!(with_delivery_id("nope", "dlv_x").is_err());
    }
}
