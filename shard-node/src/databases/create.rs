//! `POST /api/databases`: the catalog row, its placement (`owned` at the
//! allocation's epoch) and the tenant schema, in one transaction, from the
//! control plane's allocation.

use axum::extract::State;
use axum::Json;
use cluster_protocol::ids::{self, Kind};
use serde_json::{json, Value};

use crate::auth::Creator;
use crate::catalog::databases::{self, Database, NewDatabase};
use crate::catalog::placements;
use crate::db::{transaction_on, Db, DbOp};
use crate::error::{ApiError, ApiResult};
use crate::http::body::{required_name, JsonObject};
use crate::state::AppState;
use crate::tenant_schema;

pub async fn handler(
    creator: Creator,
    State(state): State<AppState>,
    JsonObject(body): JsonObject,
) -> ApiResult<Json<Value>> {
    let name = required_name(&body, "name")?;
    let database = create(&state.db, &creator, name).await?;
    Ok(Json(json!({ "database": database })))
}

pub async fn create(db: &Db, creator: &Creator, name: &str) -> ApiResult<Database> {
    let allocation = &creator.allocation;
    if ids::tag_of(Kind::Database, &allocation.database_id) != Some(allocation.tag.as_str()) {
        return Err(ApiError::Internal(anyhow::anyhow!(
            "allocation {:?} does not carry tag {:?}",
            allocation.database_id,
            allocation.tag
        )));
    }
    let new = NewDatabase {
        id: &allocation.database_id,
        tag: &allocation.tag,
        name,
        position: allocation.position,
        user_id: &creator.principal.user_id,
        limits: allocation.limits,
    };
    db.measured(DbOp::CreateDatabase, async {
        let mut client = db.client().await?;
        transaction_on(&mut client, async |tx| {
            let Some(database) = databases::insert(tx, &new).await? else {
                return Err(ApiError::Conflict(
                    "A database with this id already exists.".into(),
                ));
            };
            placements::insert_owned(tx, &database.id, allocation.epoch).await?;
            tenant_schema::create_schema(tx, &database.id).await?;
            Ok(database)
        })
        .await
    })
    .await
}
