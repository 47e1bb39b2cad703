//! `POST /api/webhooks/{id}/secret` (editor): a new signing secret,
//! replacing the old one at once (deliveries are signed when sent, with
//! the secret current then). Replies `{webhook}` showing the new secret.

use axum::extract::{Path, State};
use axum::Json;
use rand::RngCore;
use serde_json::{json, Value};

use crate::auth::Editor;
use crate::catalog::databases;
use crate::catalog::webhooks::{self, SigningSecret, Webhook};
use crate::db::{Db, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::schema::structural;
use crate::state::AppState;

/// Random bytes in a secret (48 hex characters).
const SECRET_BYTES: usize = 24;

/// A fresh secret: 24 bytes from the operating system's CSPRNG, as 48
/// lowercase hex characters.
pub fn new_secret() -> SigningSecret {
    let mut bytes = [0u8; SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    SigningSecret(hex::encode(bytes))
}

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let webhook = regenerate(&state.db, &access.database_id, &id).await?;
    Ok(Json(json!({ "webhook": webhook })))
}

pub async fn regenerate(db: &Db, database_id: &str, id: &str) -> ApiResult<Webhook> {
    db.in_transaction(database_id, DbOp::RegenerateWebhookSecret, async |tx| {
        structural::begin(tx, database_id).await?;
        let webhook = webhooks::set_secret(tx, database_id, id, &new_secret())
            .await?
            .ok_or(ApiError::NotFound)?;
        // Nothing of the rules changed, but a model that carried the
        // secret must not keep the old one.
        databases::bump_schema_version(tx, database_id).await?;
        Ok(webhook)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_48_lowercase_hex_characters_and_differ() {
        let a = new_secret().0;
        let b = new_secret().0;
        assert_eq!(a.len(), 48);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
        assert_ne!(a, b);
        assert_eq!(format!("{:?}", new_secret()), "SigningSecret(..)");
    }
}
