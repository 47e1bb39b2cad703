//! URL items of attachment cells (part B, "Attachment URLs in cells"):
//! found and counted across the whole write request, then fetched BEFORE
//! the write's transaction opens (no session is held while a remote server
//! answers), anonymously, through the node's egress guard. Redirects are
//! followed here, one hop at a time, so every hop's scheme and address is
//! checked again. Each body streams into the blob store under the file
//! cap and the room left under the database's storage quota (checked
//! before the first fetch, and against every body as it streams: nothing
//! is stored past it). Each URL counts against the account's upload limit
//! ([`fetch_charge`]). Any failure fails the whole batch naming the URL
//! and the reason (never the resolved address or the connection's error
//! chain: those go to the node's log), and every file fetched so far is
//! deleted.

use std::collections::HashMap;
use std::io;

use blobstore::BlobError;
use bytes::Bytes;
use cluster_protocol::ids::{self, Kind};
use serde_json::{Map, Value};
use tokio::time::Instant;
use url::Url;

use super::items::{self, Item};
use super::limits::{
    MAX_DATABASE_BYTES, MAX_FILE_BYTES, MAX_URLS_PER_REQUEST, URL_FETCH_TIMEOUT, URL_FETCH_TOTAL,
};
use super::{fetch_charge, ingest, settings};
use crate::catalog;
use crate::egress::Refusal;
use crate::error::{ApiError, ApiResult};
use crate::records::cells::write::resolve;
use crate::schema::{Family, TableSchema};
use crate::state::AppState;

/// Redirects one URL may take before the fetch gives up.
pub const MAX_REDIRECTS: usize = 5;

/// A URL item of the request: where it is written and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// Position of the record in the batch.
    pub record: usize,
    pub field_id: String,
    /// Position of the item in its cell.
    pub pos: usize,
    pub url: String,
    pub filename: Option<String>,
}

/// A fetched file: its bytes are stored, its registry row is written by
/// the write's transaction (`attachments::place`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedFile {
    pub id: String,
    pub url: String,
    pub filename: String,
    pub content_type: String,
    pub size_bytes: i64,
    pub thumbnails: bool,
}

/// The files one write request fetched, by (record, field, item). Until
/// the write has committed their bytes belong to nobody: a request dropped
/// midway (the client went away) deletes them in the background.
#[derive(Default)]
pub struct Fetched {
    database_id: String,
    files: HashMap<(usize, String, usize), FetchedFile>,
    blobs: Option<blobstore::BlobStore>,
    /// The database's storage quota when files were fetched.
    quota: Option<i64>,
}

impl Drop for Fetched {
    fn drop(&mut self) {
        if self.files.is_empty() {
            return;
        }
        let (Some(blobs), Ok(runtime)) = (self.blobs.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let files = std::mem::take(&mut self.files);
        let database_id = self.database_id.clone();
        runtime.spawn(async move {
            for f in files.into_values() {
                if let Err(e) = blobs.delete_attachment(&database_id, &f.id).await {
                    tracing::warn!(database_id, attachment_id = f.id, error = %e, "could not delete the bytes of a fetched attachment whose write was abandoned");
                }
            }
        });
    }
}

impl Fetched {
    /// The file fetched for item `pos` of `field_id` of record `record`.
    pub fn get(&self, record: usize, field_id: &str, pos: usize) -> Option<&FetchedFile> {
        self.files.get(&(record, field_id.to_owned(), pos))
    }

    /// The storage quota the fetched files are charged against.
    pub fn quota(&self) -> i64 {
        self.quota.unwrap_or(MAX_DATABASE_BYTES)
    }

    /// Passes on the outcome of the write these files were fetched for,
    /// deleting their bytes when it failed (nothing was registered).
    pub async fn after_write<T>(mut self, state: &AppState, outcome: ApiResult<T>) -> ApiResult<T> {
        match outcome {
            Ok(_) => self.files.clear(),
            Err(_) => self.discard(state).await,
        }
        outcome
    }

    /// Deletes every fetched file's bytes (the write did not happen).
    pub async fn discard(mut self, state: &AppState) {
        for f in std::mem::take(&mut self.files).into_values() {
            ingest::discard(state, &self.database_id, &f.id).await;
        }
    }
}

/// The URL items of a batch whose records' `fields` objects are `cells`,
/// in order (cells naming unknown or non-attachment fields are left to the
/// write itself, which refuses them).
pub fn wanted(
    table: &TableSchema,
    cells: &[Option<&Map<String, Value>>],
) -> ApiResult<Vec<Wanted>> {
    let mut out = Vec::new();
    for (record, cells) in cells.iter().enumerate() {
        let Some(cells) = cells else { continue };
        for (key, value) in cells.iter() {
            let Ok(f) = resolve(table, key) else { continue };
            if f.costume.family() != Family::Attachment || !items::may_hold_urls(value) {
                continue;
            }
            let parsed = items::parse_cell(&f.name, value).map_err(|e| at_record(e, record))?;
            for item in parsed {
                if let Item::Url { pos, url, filename } = item {
                    out.push(Wanted {
                        record,
                        field_id: f.id.clone(),
                        pos,
                        url,
                        filename,
                    });
                }
            }
        }
    }
    Ok(out)
}

fn at_record(e: ApiError, i: usize) -> ApiError {
    match e {
        ApiError::BadRequest(m) => ApiError::BadRequest(format!("records[{i}]: {m}")),
        other => other,
    }
}

/// 400 when a request names more URLs than part C allows.
pub fn check_count(n: usize) -> ApiResult<()> {
    if n > MAX_URLS_PER_REQUEST {
        return Err(ApiError::bad_request(format!(
            "A write may fetch at most {MAX_URLS_PER_REQUEST} attachment URLs (across all records and fields); this one names {n}. Nothing was fetched or written."
        )));
    }
    Ok(())
}

/// Finds, counts and fetches the URL items of a write batch on table
/// `table_id`; `cells` are the records' `fields` objects in batch order.
/// Nothing is loaded unless a cell could hold a URL.
pub async fn prefetch(
    state: &AppState,
    database_id: &str,
    table_id: &str,
    cells: &[Option<&Map<String, Value>>],
) -> ApiResult<Fetched> {
    let mut fetched = Fetched {
        database_id: database_id.to_owned(),
        files: HashMap::new(),
        blobs: Some(state.blobs.clone()),
        quota: Some(state.attachment_quota),
    };
    let candidate = cells
        .iter()
        .flatten()
        .any(|c| c.values().any(items::may_hold_urls));
    if !candidate {
        return Ok(fetched);
    }
    let (schema, held) = {
        let mut client = state.db.client_for(database_id).await?;
        let schema = state.schemas.get(&mut client, database_id).await?;
        let held = catalog::attachments::bytes_held(&*client, database_id).await?;
        let quota = super::upload::database_quota(&*client, state, database_id).await?;
        fetched.quota = Some(quota);
        (schema, held)
    };
    let table = schema.table(table_id).ok_or(ApiError::NotFound)?;
    let wanted = wanted(table, cells)?;
    check_count(wanted.len())?;
    if wanted.is_empty() {
        return Ok(fetched);
    }
    let quota = fetched.quota();
    // Before anything is fetched: the room left, then the upload limit.
    if held >= quota {
        return Err(over_quota(quota, None));
    }
    let mut room = (quota - held) as u64;
    fetch_charge::charge(wanted.len())?;
    let tag = ids::tag_of(Kind::Database, database_id)
        .ok_or_else(|| anyhow::anyhow!("database id without a tag"))?;
    let all_by = Instant::now() + URL_FETCH_TOTAL;
    for w in wanted {
        let id = ids::new_tagged(Kind::Attachment, tag);
        let url_by = (Instant::now() + URL_FETCH_TIMEOUT).min(all_by);
        let cap = Cap {
            bytes: room.min(MAX_FILE_BYTES),
            by_quota: room < MAX_FILE_BYTES,
        };
        match fetch_one(state, database_id, &id, &w, (url_by, all_by), cap).await {
            Ok(file) => {
                room = room.saturating_sub(file.size_bytes as u64);
                fetched.files.insert((w.record, w.field_id, w.pos), file);
            }
            Err(e) => {
                fetched.discard(state).await;
                return Err(match e {
                    Failure::OverQuota => over_quota(quota, Some((w.record, &w.url))),
                    Failure::Reason(reason) => ApiError::bad_request(format!(
                        "records[{}]: could not fetch {}: {reason}. Nothing was written.",
                        w.record, w.url
                    )),
                    Failure::Store(e) => ApiError::Internal(
                        anyhow::Error::new(e).context("store a fetched attachment"),
                    ),
                });
            }
        }
    }
    Ok(fetched)
}

/// Why one fetch failed: something about the URL the caller can act on,
/// or the blob store itself.
#[derive(Debug)]
enum Failure {
    Reason(String),
    /// The file would take the database past its storage quota.
    OverQuota,
    Store(BlobError),
}

/// The most bytes one fetch may store: the file cap, or the room left
/// under the database's quota when that is less.
#[derive(Debug, Clone, Copy)]
struct Cap {
    bytes: u64,
    by_quota: bool,
}

impl Cap {
    /// The failure of a body over the cap.
    fn exceeded(self) -> Failure {
        if self.by_quota {
            Failure::OverQuota
        } else {
            reason(too_large())
        }
    }
}

/// 400: the database has no room for (more) fetched files; `at` names the
/// record and URL that would have gone past the quota. Nothing is stored.
fn over_quota(quota: i64, at: Option<(usize, &str)>) -> ApiError {
    let limit = settings::quota_text(quota);
    ApiError::bad_request(match at {
        Some((record, url)) => format!(
            "records[{record}]: could not fetch {url}: it would take this database past its \
             {limit} of attachment storage. Nothing was written."
        ),
        None => format!(
            "This database has reached its {limit} limit of attachment storage: delete \
             attachments before adding more. Nothing was fetched or written."
        ),
    })
}

fn reason(s: impl Into<String>) -> Failure {
    Failure::Reason(s.into())
}

/// What a passed deadline says: the URL's own 30 s or the request's 60 s.
fn timed_out(url_by: Instant, all_by: Instant) -> String {
    if url_by < all_by {
        format!(
            "it took longer than {} s (the limit per URL)",
            URL_FETCH_TIMEOUT.as_secs()
        )
    } else {
        format!(
            "the request's URLs took longer than {} s in all",
            URL_FETCH_TOTAL.as_secs()
        )
    }
}

/// The egress refusal somewhere in `e`'s chain (a host name whose every
/// address the guard refused), if any.
fn refusal_in<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refusal> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<Refusal>() {
            return Some(r);
        }
        cur = err.source();
    }
    None
}

/// What the client reads of a failed request: a refused address or the
/// kind of failure, never the connect/TLS error chain (it would map the
/// internal network's names and ports); the chain goes to the node's log.
fn request_failed(url: &Url, e: &reqwest::Error) -> String {
    let detail = crate::egress::error_chain(e);
    tracing::info!(host = url.host_str().unwrap_or(""), error = %detail, "an attachment URL fetch failed");
    if let Some(r) = refusal_in(e) {
        return r.to_string();
    }
    crate::egress::failure_kind(e).to_owned()
}

/// The response of the last hop of `start`'s redirect chain.
async fn follow(
    state: &AppState,
    start: &str,
    url_by: Instant,
    all_by: Instant,
) -> Result<(Url, reqwest::Response), Failure> {
    let mut url = Url::parse(start).map_err(|e| reason(format!("it is not a URL ({e})")))?;
    for _ in 0..=MAX_REDIRECTS {
        let client = state
            .egress
            .client_for(&url)
            .map_err(|r| {
                tracing::info!(url = %url, reason = r.detail(), "an attachment URL was refused by the egress guard");
                reason(r.to_string())
            })?;
        let response = tokio::time::timeout_at(url_by, client.get(url.clone()).send())
            .await
            .map_err(|_| reason(timed_out(url_by, all_by)))?
            .map_err(|e| reason(request_failed(&url, &e)))?;
        let status = response.status();
        if !status.is_redirection() {
            return Ok((url, response));
        }
        let to = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| reason(format!("the server answered {status} without a Location")))?;
        url = url
            .join(to)
            .map_err(|e| reason(format!("the server redirected to an invalid URL ({e})")))?;
    }
    Err(reason(format!(
        "it redirected more than {MAX_REDIRECTS} times"
    )))
}

/// Fetches one URL item into the store as attachment `id`.
async fn fetch_one(
    state: &AppState,
    database_id: &str,
    id: &str,
    w: &Wanted,
    (url_by, all_by): (Instant, Instant),
    cap: Cap,
) -> Result<FetchedFile, Failure> {
    let (url, response) = follow(state, &w.url, url_by, all_by).await?;
    let status = response.status();
    if !status.is_success() {
        return Err(reason(format!("the server answered {status}")));
    }
    if response
        .content_length()
        .is_some_and(|n| n > MAX_FILE_BYTES)
    {
        return Err(reason(too_large()));
    }
    if response.content_length().is_some_and(|n| n > cap.bytes) {
        return Err(cap.exceeded());
    }
    let header = |name| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let content_type = header(reqwest::header::CONTENT_TYPE)
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| "application/octet-stream".to_owned());
    let disposition = header(reqwest::header::CONTENT_DISPOSITION);
    let filename = items::filename(
        w.filename.as_deref(),
        disposition.as_deref(),
        &url,
        &content_type,
    );
    let body = body_stream(response, url_by, timed_out(url_by, all_by));
    match ingest::store(state, database_id, id, &content_type, body, cap.bytes).await {
        Ok(stored) => Ok(FetchedFile {
            id: id.to_owned(),
            url: w.url.clone(),
            filename,
            content_type,
            size_bytes: stored.size_bytes,
            thumbnails: stored.thumbnails,
        }),
        Err(e) => {
            ingest::discard(state, database_id, id).await;
            match e {
                BlobError::TooLarge { .. } => Err(cap.exceeded()),
                BlobError::Body(e) => {
                    tracing::info!(url = %url, error = %e, "reading a fetched attachment failed");
                    Err(reason(read_failed(&e)))
                }
                other => Err(Failure::Store(other)),
            }
        }
    }
}

/// A body that stopped: the deadline's own words (they say which limit),
/// else no more than that reading failed.
fn read_failed(e: &io::Error) -> String {
    if e.kind() == io::ErrorKind::TimedOut {
        e.to_string()
    } else {
        "reading the file failed (the connection broke off)".to_owned()
    }
}

fn too_large() -> String {
    format!(
        "the file is larger than {} MB (the limit per file)",
        MAX_FILE_BYTES / (1024 * 1024)
    )
}

/// The response body as a stream of chunks that fails (an I/O error
/// saying `late`) once `by` has passed.
fn body_stream(
    response: reqwest::Response,
    by: Instant,
    late: String,
) -> impl futures::Stream<Item = io::Result<Bytes>> + Send {
    futures::stream::unfold(Some(response), move |state| {
        let late = late.clone();
        async move {
            let mut response = state?;
            match tokio::time::timeout_at(by, response.chunk()).await {
                Err(_) => Some((Err(io::Error::new(io::ErrorKind::TimedOut, late)), None)),
                Ok(Err(e)) => Some((Err(io::Error::other(e.to_string())), None)),
                Ok(Ok(None)) => None,
                Ok(Ok(Some(chunk))) => Some((Ok(chunk), Some(response))),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Costume, FieldRow};
    use serde_json::json;

    fn table() -> TableSchema {
        let field = |id: &str, name: &str, costume: Costume| FieldRow {
            id: id.to_owned(),
            table_id: "tbl_Items0000001".to_owned(),
            name: name.to_owned(),
            costume,
            options: Map::new(),
            position: 0,
            sql_type: Some("text[]".to_owned()),
            created_at: chrono::Utc::now(),
        };
        TableSchema {
            id: "tbl_Items0000001".to_owned(),
            database_id: "db_Ab3dZ1234567".to_owned(),
            name: "Items".to_owned(),
            position: 0,
            display_field_id: None,
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
            fields: vec![
                field("fld_Files0000001", "Files", Costume::Attachment),
                field("fld_Pics00000001", "Pics", Costume::Attachment),
                field("fld_Tags00000001", "Tags", Costume::MultiSelect),
            ],
        }
    }

    #[test]
    fn urls_are_found_across_records_and_fields_in_order() {
        let t = table();
        let r0 = json!({
            "Files": ["att_AAAAAbcdefgh", "https://a.example/1", {"url": "https://a.example/2", "filename": "two"}],
            "Tags": ["https://not-a-file.example"],
            "Nope": ["https://unknown.example"]
        });
        let r1 = json!({"fld_Pics00000001": [{"id": "att_AAAAAbcdefgh", "url": "https://a.example/x"}, "https://a.example/3"]});
        let cells = [r0.as_object(), None, r1.as_object()];
        let w = wanted(&t, &cells).unwrap();
        let got: Vec<(usize, &str, usize, &str)> = w
            .iter()
            .map(|w| (w.record, w.field_id.as_str(), w.pos, w.url.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, "fld_Files0000001", 1, "https://a.example/1"),
                (0, "fld_Files0000001", 2, "https://a.example/2"),
                (2, "fld_Pics00000001", 1, "https://a.example/3"),
            ]
        );
        assert_eq!(w[1].filename.as_deref(), Some("two"));
    }

    #[test]
    fn twenty_urls_pass_and_twenty_one_do_not() {
        let t = table();
        let urls: Vec<String> = (0..21).map(|i| format!("https://a.example/{i}")).collect();
        let (a, b) = urls.split_at(11);
        let r0 = json!({"Files": a});
        let r1 = json!({"Pics": b});
        let n = wanted(&t, &[r0.as_object(), r1.as_object()]).unwrap().len();
        assert_eq!(n, 21);
        assert!(check_count(20).is_ok());
        let ApiError::BadRequest(m) = check_count(n).unwrap_err() else {
            panic!()
        };
        assert!(m.contains("at most 20"), "{m}");
    }

    #[test]
    fn a_bad_item_is_refused_with_its_record() {
        let t = table();
        let r0 = json!({"Files": [{"url": "ftp://x"}]});
        let ApiError::BadRequest(m) = wanted(&t, &[r0.as_object()]).unwrap_err() else {
            panic!()
        };
        assert!(m.starts_with("records[0]: Field 'Files'"), "{m}");
    }
}
