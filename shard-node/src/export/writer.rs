//! The zip's entries, written in order into any `Write` (the reply's
//! channel in production): `manifest.json`, one CSV per table,
//! `comments.csv` (editor rank and above), the `attachments/` files and
//! `attachments.csv` ([`super::attachments`]), `README.txt`.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::mpsc::Sender;
use tokio_postgres::types::ToSql;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

use super::{attachments, cells, names, PAGE};
use crate::catalog::databases::Database;
use crate::catalog::views::View;
use crate::json::format_ts;
use crate::records::cells::read;
use crate::records::store;
use crate::schema::DatabaseSchema;
use crate::tenant_schema;

/// What one export writes, read before the first byte is sent.
pub struct Plan {
    pub manifest: Value,
    pub schema: Arc<DatabaseSchema>,
    pub with_comments: bool,
    /// Where the attachment files are read from.
    pub blobs: blobstore::BlobStore,
    /// Bytes of attachment files the archive holds at most
    /// (`attachments::limits::MAX_DATABASE_BYTES`, the storage ceiling).
    pub attachment_ceiling: i64,
}

pub const COMMENTS_HEADER: [&str; 8] = [
    "id",
    "table",
    "record_id",
    "author",
    "author_id",
    "created_at",
    "edited",
    "body",
];
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// README.txt's description of the entries.
pub const README: &str = "\
This archive is an export of one database.

manifest.json    the database, its tables (with display field), fields
                 (storage kind, costume, options) and views (full config).
<table>.csv      one file per table: the record id, then every field in
                 grid order; records in the trash are not included. Link
                 cells hold the linked records' display texts (their ids
                 when they have none), attachment cells their attachment
                 ids, lists are joined with \", \", durations use the
                 field's format, date-times are UTC ISO instants. A value
                 (or field name) that a spreadsheet would run as a formula
                 starts with a single quote (').
comments.csv     record comments, oldest first (only in exports made by
                 editors and owners): id, table name, record id, author
                 (the author's user id: no name is known), author id,
                 created_at (UTC ISO instant), edited (true/false), body.
                 Comments of records in the trash are included.
attachments.csv  every attachment held by a cell, records in the trash
                 included: id, record id, original filename, size in bytes,
                 and the file's path in this archive (blank when the file
                 is not in it; see Gaps).
attachments/     the files, named <attachment id>-<filename> (the filename
                 with characters a file system refuses replaced by _),
                 oldest first while they add up to the export's limit.
";

/// README.txt: the description, then what this archive lacks.
pub fn readme(gaps: &attachments::Gaps) -> String {
    format!("{README}\nGaps:\n{}", gaps.describe())
}

/// The manifest of part B: database, tables, fields, views.
pub fn manifest(
    database: &Database,
    schema: &DatabaseSchema,
    views: &[Vec<View>],
    now: DateTime<Utc>,
) -> Value {
    let tables: Vec<Value> = schema
        .tables
        .iter()
        .zip(views)
        .map(|(t, vs)| {
            json!({
                "id": t.id,
                "name": t.name,
                "display_field_id": t.display_field_id,
                "fields": t.fields.iter().map(|f| json!({
                    "id": f.id,
                    "name": f.name,
                    "storage_kind": f.costume.storage().as_str(),
                    "costume": f.costume.as_str(),
                    "options": f.options,
                })).collect::<Vec<_>>(),
                "views": vs.iter().map(|v| json!({
                    "id": v.id,
                    "name": v.name,
                    "type": v.config.get("type").and_then(Value::as_str).unwrap_or("grid"),
                    "config": v.config,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "exported_at": format_ts(&now),
        "database": {"id": database.id, "name": database.name},
        "tables": tables,
    })
}

/// A `Write` that hands the zip's bytes to the reply body in chunks; a
/// gone client fails the next write (the export stops), and so does a
/// client that takes no chunk for `send_timeout` (marked
/// [`ChannelSink::stalled`]).
pub struct ChannelSink {
    tx: Sender<std::io::Result<Bytes>>,
    buf: Vec<u8>,
    runtime: tokio::runtime::Handle,
    send_timeout: Duration,
    stalled: Arc<AtomicBool>,
}

const CHUNK: usize = 64 * 1024;

impl ChannelSink {
    /// Called off the async runtime (it blocks on `runtime` while the
    /// channel is full).
    pub fn new(
        tx: Sender<std::io::Result<Bytes>>,
        runtime: tokio::runtime::Handle,
        send_timeout: Duration,
    ) -> Self {
        ChannelSink {
            tx,
            buf: Vec::with_capacity(CHUNK),
            runtime,
            send_timeout,
            stalled: Arc::default(),
        }
    }

    /// Set once a write failed because the client took no chunk in time.
    pub fn stalled(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stalled)
    }

    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        let gone = || std::io::Error::new(std::io::ErrorKind::BrokenPipe, "client gone");
        let chunk = match self.tx.try_send(Ok(chunk)) {
            Ok(()) => return Ok(()),
            Err(TrySendError::Closed(_)) => return Err(gone()),
            Err(TrySendError::Full(chunk)) => chunk,
        };
        let waited = self
            .runtime
            .block_on(tokio::time::timeout(self.send_timeout, self.tx.send(chunk)));
        match waited {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(gone()),
            Err(_) => {
                self.stalled.store(true, Ordering::Release);
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the client took no bytes within the export send timeout",
                ))
            }
        }
    }
}

impl Write for ChannelSink {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

fn options() -> SimpleFileOptions {
    SimpleFileOptions::default().compression_method(CompressionMethod::Deflated)
}

/// `comments.csv`: the header, then every comment of the database oldest
/// first, read [`PAGE`] at a time after the last (`created_at`, `id`).
fn write_comments<W: Write>(
    csv: &mut csv::Writer<W>,
    database_id: &str,
    client: &deadpool_postgres::Object,
    runtime: &tokio::runtime::Handle,
) -> anyhow::Result<()> {
    csv.write_record(COMMENTS_HEADER)?;
    let mut after: Option<(DateTime<Utc>, String)> = None;
    loop {
        let rows = runtime.block_on(crate::catalog::comments::export_page(
            client,
            database_id,
            after.clone(),
            PAGE,
        ))?;
        for (c, table) in &rows {
            csv.write_record([
                c.id.as_str(),
                &cells::guard_formula(table),
                &c.record_id,
                &c.author_id,
                &c.author_id,
                &format_ts(&c.created_at),
                if c.edited { "true" } else { "false" },
                &cells::guard_formula(&c.text),
            ])?;
        }
        match rows.last() {
            Some((c, _)) if rows.len() as i64 == PAGE => {
                after = Some((c.created_at, c.id.clone()));
            }
            _ => return Ok(()),
        }
    }
}

/// Writes the whole zip; reads records through `client` on `runtime`
/// (called off the async runtime).
pub fn write_zip<W: Write>(
    sink: W,
    plan: &Plan,
    client: &deadpool_postgres::Object,
    runtime: &tokio::runtime::Handle,
) -> anyhow::Result<()> {
    let mut zip = ZipWriter::new_stream(sink);
    zip.start_file("manifest.json", options())?;
    serde_json::to_writer_pretty(&mut zip, &plan.manifest)?;
    let schema = &plan.schema;
    let entry_names = names::csv_names(schema.tables.iter().map(|t| t.name.as_str()));
    for (table, entry) in schema.tables.iter().zip(&entry_names) {
        zip.start_file(entry.as_str(), options())?;
        zip.write_all(BOM)?;
        let mut csv = csv::Writer::from_writer(&mut zip);
        write_table(&mut csv, schema, table, client, runtime)?;
        csv.flush()?;
    }
    if plan.with_comments {
        zip.start_file("comments.csv", options())?;
        zip.write_all(BOM)?;
        let mut csv = csv::Writer::from_writer(&mut zip);
        write_comments(&mut csv, &schema.database_id, client, runtime)?;
        csv.flush()?;
    }
    let source = attachments::Source {
        database_id: &schema.database_id,
        store: &plan.blobs,
        client,
        runtime,
        ceiling: plan.attachment_ceiling,
    };
    let gaps = attachments::write(&mut zip, &source, options())?;
    zip.start_file("README.txt", options())?;
    zip.write_all(readme(&gaps).as_bytes())?;
    let mut sink = zip.finish()?.into_inner();
    sink.flush()?;
    Ok(())
}

/// One table's CSV rows: the header, then its live records in id order,
/// read [`PAGE`] at a time after the last id written.
fn write_table<W: Write>(
    csv: &mut csv::Writer<W>,
    schema: &DatabaseSchema,
    table: &crate::schema::TableSchema,
    client: &deadpool_postgres::Object,
    runtime: &tokio::runtime::Handle,
) -> anyhow::Result<()> {
    // Grid order: fields by position (the schema model keeps them so).
    csv.write_record(cells::header_cells(&table.fields))?;
    let set = read::read_set(schema, table, None);
    let qualified = tenant_schema::table(&schema.database_id, &table.id)?;
    let sql = format!(
        "SELECT {} FROM {qualified} AS {row} WHERE {row}.deleted_at IS NULL AND {row}.id > ${} \
         ORDER BY {row}.id LIMIT {PAGE}",
        store::select_list(&set.exprs()),
        set.values.len() + 1,
        row = store::ROW,
    );
    let bound = store::bind(&set.values);
    let mut after = String::new();
    loop {
        let rows = runtime.block_on(async {
            let mut refs: Vec<&(dyn ToSql + Sync)> = bound
                .iter()
                .map(|(b, _)| b.as_ref() as &(dyn ToSql + Sync))
                .collect();
            refs.push(&after);
            let statement = client.prepare_cached(&sql).await?;
            client.query(&statement, &refs).await
        })?;
        for row in &rows {
            let rec = store::from_row(row, set.fields.len())?;
            let mut line = Vec::with_capacity(set.fields.len() + 1);
            line.push(rec.id.clone());
            for ((field, read), cell) in table.fields.iter().zip(&set.fields).zip(&rec.cells) {
                line.push(cells::cell_text(
                    field,
                    &read.post,
                    cell.as_ref().unwrap_or(&Value::Null),
                ));
            }
            csv.write_record(&line)?;
            after = rec.id;
        }
        if (rows.len() as i64) < PAGE {
            return Ok(());
        }
    }
}
