//! `GET /api/databases/{id}/export` (part B, Export): the database as a
//! zip, streamed while it is built. A blocking thread writes the zip
//! (`zip`'s streaming writer, no seeking) into a bounded channel that feeds
//! the reply body; it reads each table's live records in keyset pages of
//! [`PAGE`] through the record read path (`records::cells::read`), so the
//! node holds at most one page and one channel's worth of bytes whatever
//! the database's size.
//!
//! * [`attachments`]: the `attachments/` files and `attachments.csv`.
//! * [`cells`]: a read cell as CSV text (shapes, formula-injection rule).
//! * [`names`]: entry names (safe, collision suffixes).
//! * [`writer`]: the zip's entries.

pub mod attachments;
pub mod cells;
pub mod names;
pub mod writer;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use cluster_protocol::control::Role;

use crate::auth::Reader;
use crate::catalog;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// Records per keyset page read from PostgreSQL.
pub const PAGE: i64 = 500;
/// Zip chunks in flight between the writing thread and the body.
const CHUNKS_IN_FLIGHT: usize = 8;

/// The 403 for a browser request made from another site.
pub const CROSS_SITE: &str =
    "Exports cannot be requested from another site; open the export link directly.";

/// Refuses a request whose `Sec-Fetch-Site` is `cross-site` or `same-site`.
pub fn check_fetch_site(headers: &HeaderMap) -> ApiResult<()> {
    match headers.get("sec-fetch-site").map(|v| v.as_bytes()) {
        Some(b"cross-site" | b"same-site") => Err(ApiError::Forbidden(CROSS_SITE)),
        _ => Ok(()),
    }
}

pub async fn handler(
    Reader(access): Reader,
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let database_id = access.database(&id)?.to_owned();
    check_fetch_site(&headers)?;
    let with_comments = matches!(access.principal.role, Some(Role::Editor | Role::Owner));
    let mut client = state.db.client_for(&database_id).await?;
    let schema = state
        .schemas
        .get_at(&mut client, &database_id, access.schema_version)
        .await?;
    let database = catalog::databases::get(&*client, &database_id)
        .await?
        .ok_or(ApiError::NotFound)?;
    let mut views = Vec::new();
    for t in &schema.tables {
        views.push(catalog::views::list_for_table(&*client, &t.id).await?);
    }
    let plan = writer::Plan {
        manifest: writer::manifest(&database, &schema, &views, chrono::Utc::now()),
        schema,
        with_comments,
        blobs: state.blobs.clone(),
        attachment_ceiling: crate::attachments::limits::MAX_DATABASE_BYTES,
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(CHUNKS_IN_FLIGHT);
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let sink = writer::ChannelSink::new(tx.clone());
        if let Err(e) = writer::write_zip(sink, &plan, &client, &runtime) {
            tracing::warn!(database_id = %plan.schema.database_id, error = %e, "export stopped");
            let _ = tx.blocking_send(Err(std::io::Error::other(e.to_string())));
        }
    });
    let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    let filename = format!("export-{database_id}.zip");
    Ok((
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/zip".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{filename}\""),
            ),
            (header::CACHE_CONTROL, "no-store".to_owned()),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}
