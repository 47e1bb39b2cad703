//! `POST /api/tables/{id}/attachments` (part B "Attachments"): a multipart
//! form with `file`, `field_id` and `record_id` in any order. The file is
//! streamed into the blob store as it arrives (never whole in memory) under
//! a fresh `att_` id; the registry row is written (unplaced: a later cell
//! write places it) and the database charged in one transaction once
//! everything is checked. Any failure after bytes were stored deletes them
//! and writes no row.

use std::io;
use std::time::SystemTime;

use axum::extract::multipart::{Field, MultipartError};
use axum::extract::{FromRequest, Multipart, Path, Request, State};
use axum::http::header::CONTENT_LENGTH;
use axum::http::StatusCode;
use axum::Json;
use blobstore::BlobError;
use cluster_protocol::ids::{self, Kind};
use deadpool_postgres::GenericClient;
use futures::TryStreamExt;
use serde_json::{json, Value};

use super::ingest::{self, Stored};
use super::limits::{MAX_FILE_BYTES, UPLOAD_ENVELOPE_BYTES};
use super::links::Signed;
use super::settings::quota_text;
use crate::auth::{Access, Editor};
use crate::catalog::attachments::{self as registry, Attachment, NewAttachment};
use crate::db::DbOp;
use crate::error::{ApiError, ApiResult};
use crate::records::store;
use crate::records::table::RecordTable;
use crate::schema::{DatabaseSchema, StorageKind};
use crate::state::AppState;

/// Longest `field_id` / `record_id` part read (ids are 16 characters).
const MAX_ID_PART_BYTES: usize = 256;

pub async fn handler(
    Editor(access): Editor,
    State(state): State<AppState>,
    Path(table_id): Path<String>,
    request: Request,
) -> ApiResult<Json<Value>> {
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    check_declared_length(declared)?;
    precheck(&state, &access, &table_id, declared).await?;
    let multipart = Multipart::from_request(request, &state)
        .await
        .map_err(|_| ApiError::bad_request("Request body must be multipart/form-data with the parts file, field_id and record_id."))?;
    let mut kept = Kept {
        state: state.clone(),
        database_id: access.database_id.clone(),
        attachment_id: None,
    };
    let registered = async {
        let form = receive(
            &state,
            &access,
            &table_id,
            multipart,
            &mut kept.attachment_id,
        )
        .await?;
        register(&state, &access, &table_id, &form).await
    }
    .await;
    let row = match registered {
        Ok(row) => {
            kept.attachment_id = None;
            row
        }
        Err(e) => {
            // Deleted before the answer, not after it.
            if let Some(id) = kept.attachment_id.take() {
                ingest::discard(&state, &access.database_id, &id).await;
            }
            return Err(e);
        }
    };
    let signed = state.links.sign(&row, SystemTime::now()).await?;
    Ok(Json(reply(&row, &signed)))
}

/// The bytes an upload stored until its registry row is written: deleted
/// when the upload fails, and also when its request is dropped midway
/// (the client went away), which no error path would see.
struct Kept {
    state: AppState,
    database_id: String,
    attachment_id: Option<String>,
}

impl Drop for Kept {
    fn drop(&mut self) {
        if let Some(id) = self.attachment_id.take() {
            let state = self.state.clone();
            let database_id = std::mem::take(&mut self.database_id);
            tokio::spawn(async move { ingest::discard(&state, &database_id, &id).await });
        }
    }
}

/// The reply (and the attachment object of cells): the registry entry with
/// its three signed links.
pub fn reply(a: &Attachment, links: &Signed) -> Value {
    json!({
        "id": a.id,
        "filename": a.filename,
        "size_bytes": a.size_bytes,
        "content_type": a.content_type,
        "url": links.url,
        "thumb_url": links.thumb_url,
        "card_url": links.card_url,
    })
}

fn too_large() -> ApiError {
    ApiError::bad_request(format!(
        "The file is larger than the {} MB an attachment may have.",
        MAX_FILE_BYTES / (1024 * 1024)
    ))
}

/// The database's storage quota: its owner's (`databases.max_attachment_bytes`)
/// or the node's `ATTACHMENT_QUOTA_BYTES`.
pub async fn database_quota(
    c: &impl GenericClient,
    state: &AppState,
    database_id: &str,
) -> Result<i64, tokio_postgres::Error> {
    let limits = crate::catalog::databases::limits(c, database_id, state.attachment_quota).await?;
    Ok(limits.attachment_bytes)
}

fn over_quota(quota: i64) -> ApiError {
    ApiError::bad_request(format!(
        "This database has reached its {} limit of attachment storage: delete attachments before uploading more.",
        quota_text(quota)
    ))
}

fn truncated() -> ApiError {
    ApiError::bad_request("The multipart body could not be read: it is malformed or truncated.")
}

/// A declared body over the file cap plus the form's slack is refused
/// before a byte of it is read.
pub fn check_declared_length(declared: Option<u64>) -> ApiResult<()> {
    match declared {
        Some(n) if n > MAX_FILE_BYTES + UPLOAD_ENVELOPE_BYTES => Err(too_large()),
        _ => Ok(()),
    }
}

/// Before reading the body: the table is this database's (404), and the
/// database has room for the declared length.
async fn precheck(
    state: &AppState,
    access: &Access,
    table_id: &str,
    declared: Option<u64>,
) -> ApiResult<()> {
    let database_id = access.database_id.as_str();
    state
        .db
        .measured(DbOp::UploadAttachment, async {
            let mut client = state.db.client_for(database_id).await?;
            let schema = state
                .schemas
                .get_at(&mut client, database_id, access.schema_version)
                .await?;
            schema.table(table_id).ok_or(ApiError::NotFound)?;
            let held = registry::bytes_held(&*client, database_id).await?;
            let incoming = declared.unwrap_or(0).min(i64::MAX as u64) as i64;
            let quota = database_quota(&*client, state, database_id).await?;
            if held >= quota || held.saturating_add(incoming) > quota {
                return Err(over_quota(quota));
            }
            Ok(())
        })
        .await
}

/// The form as read: the ids as sent, and the stored file.
#[derive(Debug)]
struct Form {
    field_id: String,
    record_id: String,
    attachment_id: String,
    filename: String,
    stored: Stored,
}

/// Reads the parts in whatever order they come, streaming `file` into the
/// store (its id goes into `kept` as soon as bytes may exist, so the caller
/// deletes them on any failure). When both ids came before the file they
/// are checked before a byte of it is stored.
async fn receive(
    state: &AppState,
    access: &Access,
    table_id: &str,
    mut multipart: Multipart,
    kept: &mut Option<String>,
) -> ApiResult<Form> {
    let mut field_id: Option<String> = None;
    let mut record_id: Option<String> = None;
    let mut file: Option<(String, String, Stored)> = None;
    while let Some(mut part) = multipart.next_field().await.map_err(part_error)? {
        let name = part.name().unwrap_or_default().to_owned();
        match name.as_str() {
            "field_id" | "record_id" => {
                let slot = if name == "field_id" {
                    &mut field_id
                } else {
                    &mut record_id
                };
                if slot.is_some() {
                    return Err(ApiError::bad_request(format!(
                        "The multipart part \"{name}\" was sent twice; send it once."
                    )));
                }
                *slot = Some(id_part(&mut part, &name).await?);
            }
            "file" => {
                if file.is_some() {
                    return Err(ApiError::bad_request(
                        "The multipart part \"file\" was sent twice: upload one file per request.",
                    ));
                }
                let filename = filename_of(part.file_name())?;
                let declared_type = part.content_type().unwrap_or_default().to_owned();
                if let (Some(f), Some(r)) = (&field_id, &record_id) {
                    check_before_streaming(state, access, table_id, f, r).await?;
                }
                let tag = ids::tag_of(Kind::Database, &access.database_id)
                    .ok_or_else(|| anyhow::anyhow!("database id without a tag"))?;
                let attachment_id = ids::new_tagged(Kind::Attachment, tag);
                *kept = Some(attachment_id.clone());
                let body = part.map_err(io::Error::other);
                let stored = ingest::store(
                    state,
                    &access.database_id,
                    &attachment_id,
                    &declared_type,
                    body,
                    MAX_FILE_BYTES,
                )
                .await
                .map_err(blob_error)?;
                file = Some((attachment_id, filename, stored));
            }
            _ => {}
        }
    }
    let missing: Vec<&str> = [
        ("file", file.is_none()),
        ("field_id", field_id.is_none()),
        ("record_id", record_id.is_none()),
    ]
    .into_iter()
    .filter_map(|(n, missing)| missing.then_some(n))
    .collect();
    if !missing.is_empty() {
        return Err(ApiError::bad_request(format!(
            "The multipart part{} {} {} missing: an upload needs file, field_id and record_id.",
            if missing.len() > 1 { "s" } else { "" },
            missing.join(", "),
            if missing.len() > 1 { "are" } else { "is" },
        )));
    }
    let (Some((attachment_id, filename, stored)), Some(field_id), Some(record_id)) =
        (file, field_id, record_id)
    else {
        unreachable!("checked above");
    };
    Ok(Form {
        field_id,
        record_id,
        attachment_id,
        filename,
        stored,
    })
}

/// A multipart error: a body over the route's limit is the size refusal,
/// anything else a malformed or truncated body.
fn part_error(e: MultipartError) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        too_large()
    } else {
        truncated()
    }
}

/// What storing the file answered, as the client sees it.
fn blob_error(e: BlobError) -> ApiError {
    match e {
        BlobError::TooLarge { .. } => too_large(),
        BlobError::Body(io) => match io
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<MultipartError>())
        {
            Some(m) if m.status() == StatusCode::PAYLOAD_TOO_LARGE => too_large(),
            _ => truncated(),
        },
        e @ (BlobError::NotFound
        | BlobError::RangeNotSatisfiable { .. }
        | BlobError::InvalidRange(_)
        | BlobError::InvalidKey(_)
        | BlobError::Store(_)) => {
            ApiError::Internal(anyhow::Error::new(e).context("store an uploaded file"))
        }
    }
}

/// A `field_id` or `record_id` part: short UTF-8 text, trimmed.
async fn id_part(part: &mut Field<'_>, name: &str) -> ApiResult<String> {
    let mut bytes = Vec::new();
    while let Some(chunk) = part.chunk().await.map_err(part_error)? {
        if bytes.len() + chunk.len() > MAX_ID_PART_BYTES {
            return Err(ApiError::bad_request(format!(
                "The multipart part \"{name}\" is too long: it must hold one id."
            )));
        }
        bytes.extend_from_slice(&chunk);
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        ApiError::bad_request(format!("The multipart part \"{name}\" must be UTF-8 text."))
    })?;
    let text = text.trim();
    if text.is_empty() {
        return Err(ApiError::bad_request(format!(
            "The multipart part \"{name}\" is empty: it must hold one id."
        )));
    }
    Ok(text.to_owned())
}

/// The stored filename: the part's, verbatim; `file` when it has none.
pub fn filename_of(given: Option<&str>) -> ApiResult<String> {
    match given {
        None | Some("") => Ok("file".to_owned()),
        Some(name) if name.contains('\0') => Err(ApiError::bad_request(
            "The filename must not contain the NUL character.",
        )),
        Some(name) => Ok(name.to_owned()),
    }
}

/// 400 unless `field_id` is an attachment field of `table_id`, saying
/// what it is instead.
pub fn check_field(schema: &DatabaseSchema, table_id: &str, field_id: &str) -> ApiResult<()> {
    let table = schema.table(table_id).ok_or(ApiError::NotFound)?;
    match table.field(field_id) {
        Some(f) if f.costume.storage() == StorageKind::Attachment => Ok(()),
        Some(f) => Err(ApiError::bad_request(format!(
            "field_id {field_id} is a {} field; attachments go into an attachment field.",
            f.costume.as_str()
        ))),
        None if schema.field(field_id).is_some() => Err(ApiError::bad_request(format!(
            "field_id {field_id} is a field of another table, not of {table_id}."
        ))),
        None => Err(ApiError::bad_request(format!(
            "field_id {field_id} is not a field of table {table_id}."
        ))),
    }
}

/// The field and the record the upload is bound to: the field must be an
/// attachment field of the table (400), the record a live record of it
/// (404; a record of another table is 400 saying so). With `lock`, the
/// record row is locked until the transaction ends (a purge waits).
async fn check_target(
    c: &impl GenericClient,
    schema: &DatabaseSchema,
    table_id: &str,
    field_id: &str,
    record_id: &str,
    lock: bool,
) -> ApiResult<()> {
    check_field(schema, table_id, field_id)?;
    if !ids::is_valid(Kind::Record, record_id) {
        return Err(ApiError::NotFound);
    }
    let rt = RecordTable::from_schema(schema, table_id)?;
    let ids = [record_id.to_owned()];
    let states = store::states(c, &rt, &ids, lock).await?;
    match states.first() {
        Some((_, _, false)) => Ok(()),
        Some((_, _, true)) => Err(ApiError::NotFound),
        None => {
            let others: Vec<String> = schema
                .tables
                .iter()
                .filter(|t| t.id != table_id)
                .map(|t| t.qualified())
                .collect::<anyhow::Result<_>>()?;
            if store::exists_in_any(c, &others, record_id).await? {
                Err(ApiError::bad_request(format!(
                    "record_id {record_id} is a record of another table, not of {table_id}."
                )))
            } else {
                Err(ApiError::NotFound)
            }
        }
    }
}

/// [`check_target`] on a session of its own, returned before the file is
/// read.
async fn check_before_streaming(
    state: &AppState,
    access: &Access,
    table_id: &str,
    field_id: &str,
    record_id: &str,
) -> ApiResult<()> {
    let database_id = access.database_id.as_str();
    state
        .db
        .measured(DbOp::UploadAttachment, async {
            let mut client = state.db.client_for(database_id).await?;
            let schema = state
                .schemas
                .get_at(&mut client, database_id, access.schema_version)
                .await?;
            check_target(&*client, &schema, table_id, field_id, record_id, false).await
        })
        .await
}

/// Checks everything again and writes the registry row, charging the
/// database, in one transaction.
async fn register(
    state: &AppState,
    access: &Access,
    table_id: &str,
    form: &Form,
) -> ApiResult<Attachment> {
    let database_id = access.database_id.as_str();
    state
        .db
        .in_transaction(database_id, DbOp::UploadAttachment, async |tx| {
            let (schema, _) = state.schemas.get_for_write(tx, database_id).await?;
            check_target(tx, &schema, table_id, &form.field_id, &form.record_id, true).await?;
            let size = form.stored.size_bytes;
            let quota = database_quota(tx, state, database_id).await?;
            if !registry::charge(tx, database_id, size, quota).await? {
                return Err(over_quota(quota));
            }
            let row = registry::insert(
                tx,
                &NewAttachment {
                    id: &form.attachment_id,
                    database_id,
                    table_id,
                    field_id: &form.field_id,
                    record_id: &form.record_id,
                    filename: &form.filename,
                    size_bytes: size,
                    content_type: &form.stored.content_type,
                    thumbnails: form.stored.thumbnails,
                    placed: false,
                    created_by: access.user_id(),
                },
            )
            .await?;
            Ok(row)
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(e: ApiError) -> String {
        match e {
            ApiError::BadRequest(m) => m,
            other => panic!("expected 400, got {other:?}"),
        }
    }

    #[test]
    fn a_declared_length_over_the_cap_and_slack_is_refused() {
        assert!(check_declared_length(None).is_ok());
        assert!(check_declared_length(Some(MAX_FILE_BYTES + UPLOAD_ENVELOPE_BYTES)).is_ok());
        let m = message(
            check_declared_length(Some(MAX_FILE_BYTES + UPLOAD_ENVELOPE_BYTES + 1)).unwrap_err(),
        );
        assert_eq!(
            m,
            "The file is larger than the 100 MB an attachment may have."
        );
    }

    #[test]
    fn filenames_are_kept_verbatim() {
        assert_eq!(filename_of(None).unwrap(), "file");
        assert_eq!(filename_of(Some("")).unwrap(), "file");
        assert_eq!(filename_of(Some(" a \"b\".txt ")).unwrap(), " a \"b\".txt ");
        assert!(filename_of(Some("a\0b")).is_err());
    }
}
