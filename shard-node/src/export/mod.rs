//! `GET /api/databases/{id}/export` (part B, Export): the database as a
//! zip, streamed while it is built. A blocking thread writes the zip
//! (`zip`'s streaming writer, no seeking) into a bounded channel that feeds
//! the reply body; it reads each table's live records in keyset pages of
//! [`PAGE`] through the record read path (`records::cells::read`), so the
//! node holds at most one page and one channel's worth of bytes whatever
//! the database's size. At most `SHARD_MAX_EXPORTS` run at once on a
//! node, and one whose client takes no chunk for
//! `SHARD_EXPORT_SEND_TIMEOUT_MS` is stopped, its session and thread
//! given back ([`limits`]).
//!
//! * [`attachments`]: the `attachments/` files and `attachments.csv`.
//! * [`cells`]: a read cell as CSV text (shapes, formula-injection rule).
//! * [`limits`]: the node's export slots and the send timeout.
//! * [`names`]: entry names (safe, collision suffixes).
//! * [`writer`]: the zip's entries.

pub mod attachments;
pub mod cells;
pub mod limits;
pub mod names;
pub mod writer;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::Poll;

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
    // Taken before the session, given back when the writing thread ends.
    let slot = state.exports.slot()?;
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
    let send_timeout = state.exports.send_timeout;
    let failed = Arc::new(AtomicBool::new(false));
    let stopped = Arc::clone(&failed);
    tokio::task::spawn_blocking(move || {
        let sink = writer::ChannelSink::new(tx.clone(), runtime.clone(), send_timeout);
        let stalled = sink.stalled();
        if let Err(e) = writer::write_zip(sink, &plan, &client, &runtime) {
            stopped.store(true, Ordering::Release);
            let database_id = &plan.schema.database_id;
            if stalled.load(Ordering::Acquire) {
                tracing::warn!(
                    %database_id,
                    send_timeout_ms = send_timeout.as_millis() as u64,
                    "export stopped: its client took no bytes within the send timeout; \
                     its session and thread are released"
                );
            } else {
                tracing::warn!(%database_id, error = %e, "export stopped");
            }
            // Never waits: a client that stopped reading gets the cut
            // below once the channel is drained.
            let _ = tx.try_send(Err(std::io::Error::other(e.to_string())));
        }
        // The session back to the pool, then the slot.
        drop(client);
        drop(slot);
    });
    // A stopped export ends its body with an error (the client sees a cut
    // connection, never a short zip that looks whole).
    let mut ended = false;
    let stream = futures::stream::poll_fn(move |cx| {
        if ended {
            return Poll::Ready(None);
        }
        match rx.poll_recv(cx) {
            Poll::Ready(None) => {
                ended = true;
                if failed.load(Ordering::Acquire) {
                    Poll::Ready(Some(Err(std::io::Error::other("export stopped"))))
                } else {
                    Poll::Ready(None)
                }
            }
            other => other,
        }
    });
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
