//! The table a record request addresses: checked to belong to the caller's
//! database, with its real table's quoted name.

use deadpool_postgres::GenericClient;

use crate::error::{ApiError, ApiResult};
use crate::tenant_schema;

#[derive(Debug, Clone)]
pub struct RecordTable {
    pub database_id: String,
    pub table_id: String,
    /// `"db_..."."tbl_..."`
    pub qualified: String,
    /// The database's routing tag (for new record ids).
    pub tag: String,
    /// The database's timezone (relative dates, bare-date filters).
    pub timezone: String,
}

impl RecordTable {
    /// The table from an already loaded schema model; 404 when the model
    /// has no such table.
    pub fn from_schema(
        schema: &crate::schema::DatabaseSchema,
        table_id: &str,
    ) -> ApiResult<RecordTable> {
        if schema.table(table_id).is_none() {
            return Err(ApiError::NotFound);
        }
        Ok(RecordTable {
            database_id: schema.database_id.clone(),
            table_id: table_id.to_owned(),
            qualified: tenant_schema::table(&schema.database_id, table_id)?,
            tag: cluster_protocol::ids::tag_of(
                cluster_protocol::ids::Kind::Database,
                &schema.database_id,
            )
            .ok_or_else(|| anyhow::anyhow!("database id without a tag"))?
            .to_owned(),
            timezone: schema.timezone.clone(),
        })
    }

    /// The table if it belongs to `database_id`; 404 otherwise.
    pub async fn load(
        c: &impl GenericClient,
        database_id: &str,
        table_id: &str,
    ) -> ApiResult<RecordTable> {
        let row = c
            .query_opt(
                "SELECT d.timezone FROM tables t JOIN databases d ON d.id = t.database_id
                 WHERE t.id = $1 AND t.database_id = $2",
                &[&table_id, &database_id],
            )
            .await?
            .ok_or(ApiError::NotFound)?;
        let timezone: String = row.try_get(0)?;
        Ok(RecordTable {
            database_id: database_id.to_owned(),
            table_id: table_id.to_owned(),
            qualified: tenant_schema::table(database_id, table_id)?,
            tag: cluster_protocol::ids::tag_of(cluster_protocol::ids::Kind::Database, database_id)
                .ok_or_else(|| anyhow::anyhow!("database id without a tag"))?
                .to_owned(),
            timezone,
        })
    }
}
