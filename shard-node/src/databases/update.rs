//! `PATCH /api/databases/{id}`: rename and/or recolour.
//!
//! Everything is validated before anything is written (a 400 changes
//! nothing); then the name and the colour are written as two separate
//! statements, name first, each bumping `updated_at`/`updated_by` (part B),
//! in one transaction behind the write fence.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Map, Value};

use super::PIGMENTS;
use crate::auth::Editor;
use crate::catalog::databases::{self, Database};
use crate::db::{Db, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::http::body::JsonObject;
use crate::state::AppState;

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(id): Path<String>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let database_id = access.database(&id)?;
    let patch = DatabasePatch::parse(&body)?;
    let database = apply(&state.db, database_id, access.user_id(), &patch).await?;
    Ok(Json(json!({ "database": database })))
}

/// A validated change: `color: Some(None)` clears the colour.
#[derive(Debug, PartialEq)]
pub struct DatabasePatch {
    pub name: Option<String>,
    pub color: Option<Option<&'static str>>,
}

impl DatabasePatch {
    pub fn parse(body: &Map<String, Value>) -> ApiResult<Self> {
        // `name` counts only as a string; null or any other type is absent.
        let name = match body.get("name") {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        let color = match body.get("color") {
            None => None,
            Some(Value::Null) => Some(None),
            Some(v) => {
                let text = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                match PIGMENTS.iter().find(|p| **p == text) {
                    Some(p) => Some(Some(*p)),
                    None => {
                        return Err(ApiError::bad_request(format!(
                            "color {text:?} is not a colour: use null or one of {}.",
                            PIGMENTS.join(", ")
                        )))
                    }
                }
            }
        };
        if name.is_none() && color.is_none() {
            return Err(ApiError::bad_request(
                "Nothing to update: send name (a string) and/or color.",
            ));
        }
        Ok(Self { name, color })
    }
}

/// Writes the patch as part B says: the name, then the colour, as two
/// separate statements (each bumps `updated_at`), not one transaction. Each
/// runs in its own fenced transaction ([`Db::in_transaction`]), so neither
/// lands on a copy a move has fenced. The reply is read after the last write.
pub async fn apply(
    db: &Db,
    database_id: &str,
    user_id: &str,
    patch: &DatabasePatch,
) -> ApiResult<Database> {
    if let Some(name) = &patch.name {
        db.in_transaction(database_id, DbOp::RenameDatabase, async |tx| {
            databases::set_name(tx, database_id, name, user_id).await?;
            Ok(())
        })
        .await?;
    }
    if let Some(color) = patch.color {
        db.in_transaction(database_id, DbOp::RecolorDatabase, async |tx| {
            databases::set_color(tx, database_id, color, user_id).await?;
            Ok(())
        })
        .await?;
    }
    let client = db.client_for(database_id).await?;
    databases::get(&*client, database_id)
        .await?
        .ok_or(ApiError::NotFound)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: Value) -> ApiResult<DatabasePatch> {
        DatabasePatch::parse(v.as_object().unwrap())
    }

    #[test]
    fn name_counts_only_as_a_string() {
        assert!(parse(json!({"name": null})).is_err());
        assert!(parse(json!({"name": 5})).is_err());
        assert!(parse(json!({"other": 1})).is_err());
        assert_eq!(
            parse(json!({"name": ""})).unwrap(),
            DatabasePatch {
                name: Some(String::new()),
                color: None
            }
        );
        assert_eq!(
            parse(json!({"name": 5, "color": null})).unwrap(),
            DatabasePatch {
                name: None,
                color: Some(None)
            }
        );
    }

    #[test]
    fn colour_is_a_pigment_or_null() {
        assert_eq!(
            parse(json!({"color": "nile"})).unwrap().color,
            Some(Some("nile"))
        );
        let err = parse(json!({"name": "x", "color": 5})).unwrap_err();
        assert!(matches!(err, ApiError::BadRequest(m) if m.contains("\"5\"")));
        assert!(parse(json!({"color": "Nile"})).is_err());
        assert!(parse(json!({"color": ["nile"]})).is_err());
    }
}
