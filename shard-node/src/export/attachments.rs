//! The export's attachments (part B, Export): the `attachments/` files and
//! the `attachments.csv` list, made in one pass over the registry.
//!
//! The registry is read in keyset pages, oldest first. Each file is
//! streamed from the blob store into its own zip entry
//! (`attachments/<att id>-<filename>`) until the byte ceiling; past it,
//! and for a blob the store does not have, the row is listed with a blank
//! `path`. Since the zip is written in order and the list comes after the
//! files, the list's rows wait in a temporary file (on disk, never in
//! memory), which is then copied into `attachments.csv`. A file the store
//! lacks or could not open becomes a line of README.txt's gaps.
//!
//! Which rows: every placed attachment, trashed records' included (no
//! trash filter). An upload no cell holds yet (unplaced) is not part of
//! the database's content and is left out.

use std::io::{Read, Seek, SeekFrom, Write};

use blobstore::{BlobError, BlobStore, Variant};
use chrono::{DateTime, Datelike, Timelike, Utc};
use futures::StreamExt;
use zip::write::{SimpleFileOptions, StreamWriter};
use zip::{CompressionMethod, ZipWriter};

use super::cells::guard_formula;
use super::PAGE;
use crate::catalog::attachments::{self as registry, Attachment, ExportCursor};

/// The folder of the files inside the zip.
pub const DIR: &str = "attachments/";
pub const HEADER: [&str; 5] = ["id", "record_id", "filename", "size_bytes", "path"];
/// Gap lines listed one by one in README.txt; the rest are counted.
pub const MAX_GAP_LINES: usize = 1000;
/// Bytes of a filename kept in an entry name (most file systems allow 255
/// per name; the id and dash take 17).
const MAX_NAME_BYTES: usize = 200;
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// A filename made safe as the last part of a zip path: `/`, `\`,
/// characters Windows refuses and control characters become `_`, a run of
/// dots becomes one dot (so no `..`), trailing dots and spaces go, and a
/// long name is cut to [`MAX_NAME_BYTES`] keeping its extension. Unicode
/// is kept. `file` when nothing is left.
pub fn safe_filename(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        let c = match c {
            '/' | '\\' | ':' | '*' | '?' | '"' | '<' | '>' | '|' => '_',
            c if c.is_control() => '_',
            c => c,
        };
        if c == '.' && out.ends_with('.') {
            continue;
        }
        out.push(c);
    }
    let trimmed = out.trim_end_matches(|c: char| c == '.' || c.is_whitespace());
    let trimmed = trimmed.trim_start();
    if trimmed.is_empty() || trimmed == "." {
        return "file".to_owned();
    }
    if trimmed.len() <= MAX_NAME_BYTES {
        return trimmed.to_owned();
    }
    let ext = match trimmed.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() && ext.len() <= 16 => ext,
        _ => "",
    };
    let room = MAX_NAME_BYTES - if ext.is_empty() { 0 } else { ext.len() + 1 };
    let mut cut = room;
    while !trimmed.is_char_boundary(cut) {
        cut -= 1;
    }
    let stem = trimmed[..cut].trim_end_matches('.');
    if ext.is_empty() {
        stem.to_owned()
    } else {
        format!("{stem}.{ext}")
    }
}

/// The zip entry of attachment `id` named `filename`.
pub fn entry_name(id: &str, filename: &str) -> String {
    format!("{DIR}{id}-{}", safe_filename(filename))
}

/// Whether the file is already compressed (images, media, archives, office
/// documents), so deflating it again would only cost time.
pub fn already_compressed(content_type: &str, filename: &str) -> bool {
    let ct = content_type.to_ascii_lowercase();
    let ct = ct.split(';').next().unwrap_or("").trim();
    let by_type = matches!(
        ct,
        "image/jpeg"
            | "image/png"
            | "image/gif"
            | "image/webp"
            | "image/avif"
            | "image/heic"
            | "application/pdf"
            | "application/zip"
            | "application/gzip"
            | "application/x-gzip"
            | "application/x-7z-compressed"
            | "application/vnd.rar"
            | "application/x-rar-compressed"
            | "application/x-bzip2"
            | "application/x-xz"
            | "application/zstd"
            | "application/epub+zip"
    ) || ct.starts_with("video/")
        || (ct.starts_with("audio/") && !matches!(ct, "audio/wav" | "audio/x-wav"))
        || ct.starts_with("application/vnd.openxmlformats-officedocument.");
    let ext = filename
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    let by_ext = matches!(
        ext.as_str(),
        "jpg"
            | "jpeg"
            | "png"
            | "gif"
            | "webp"
            | "avif"
            | "heic"
            | "pdf"
            | "zip"
            | "gz"
            | "tgz"
            | "bz2"
            | "xz"
            | "zst"
            | "7z"
            | "rar"
            | "mp3"
            | "m4a"
            | "aac"
            | "ogg"
            | "mp4"
            | "m4v"
            | "mov"
            | "mkv"
            | "webm"
            | "docx"
            | "xlsx"
            | "pptx"
            | "epub"
    );
    by_type || by_ext
}

/// The byte ceiling: files are taken oldest first while their sizes add up
/// to at most the ceiling; from the first that would pass it, none is.
#[derive(Debug, Clone)]
pub struct Budget {
    ceiling: i64,
    used: i64,
    full: bool,
}

impl Budget {
    pub fn new(ceiling: i64) -> Self {
        Self {
            ceiling,
            used: 0,
            full: false,
        }
    }

    /// Whether a file of `size` bytes still fits (and counts it if so).
    pub fn admit(&mut self, size: i64) -> bool {
        if self.full || self.used.saturating_add(size) > self.ceiling {
            self.full = true;
            return false;
        }
        self.used += size;
        true
    }

    /// Gives back a file's bytes that were admitted but not written.
    pub fn refund(&mut self, size: i64) {
        self.used -= size;
    }
}

/// What README.txt says about the attachments.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Gaps {
    /// One line per file not in the archive although it fit.
    pub lines: Vec<String>,
    /// Such files beyond [`MAX_GAP_LINES`].
    pub more: u64,
    /// Files left out because the ceiling was reached.
    pub over_ceiling: u64,
    pub ceiling: i64,
}

impl Gaps {
    fn missing(&mut self, line: String) {
        if self.lines.len() < MAX_GAP_LINES {
            self.lines.push(line);
        } else {
            self.more += 1;
        }
    }

    /// README.txt's lines about the attachments (empty when nothing is
    /// missing).
    pub fn describe(&self) -> String {
        let mut out = String::new();
        if self.over_ceiling > 0 {
            out.push_str(&format!(
                "- {} attachment file(s) are not in attachments/: the files before them already \
                 add up to the export's limit of {} bytes. They are listed in attachments.csv \
                 with a blank path.\n",
                self.over_ceiling, self.ceiling
            ));
        }
        for line in &self.lines {
            out.push_str("- ");
            out.push_str(line);
            out.push('\n');
        }
        if self.more > 0 {
            out.push_str(&format!(
                "- and {} more attachment file(s) missing from the file store.\n",
                self.more
            ));
        }
        out
    }
}

/// Where the files come from and how far they go.
pub struct Source<'a> {
    pub database_id: &'a str,
    pub store: &'a BlobStore,
    pub client: &'a deadpool_postgres::Object,
    pub runtime: &'a tokio::runtime::Handle,
    pub ceiling: i64,
}

/// Writes every file entry, then `attachments.csv`; returns the gaps.
pub fn write<W: Write>(
    zip: &mut ZipWriter<StreamWriter<W>>,
    src: &Source<'_>,
    csv_options: SimpleFileOptions,
) -> anyhow::Result<Gaps> {
    let mut spool = csv::Writer::from_writer(tempfile::tempfile()?);
    spool.write_record(HEADER)?;
    let mut budget = Budget::new(src.ceiling);
    let mut gaps = Gaps {
        ceiling: src.ceiling,
        ..Gaps::default()
    };
    let mut after: Option<ExportCursor> = None;
    loop {
        let page = src.runtime.block_on(registry::export_page(
            src.client,
            src.database_id,
            after.as_ref(),
            PAGE,
        ))?;
        for a in &page {
            let path = if budget.admit(a.size_bytes) {
                let written = write_file(zip, src, a, &mut gaps)?;
                if !written {
                    budget.refund(a.size_bytes);
                }
                written.then(|| entry_name(&a.id, &a.filename))
            } else {
                gaps.over_ceiling += 1;
                None
            };
            spool.write_record([
                a.id.as_str(),
                a.record_id.as_str(),
                guard_formula(&a.filename).as_str(),
                a.size_bytes.to_string().as_str(),
                path.as_deref().unwrap_or(""),
            ])?;
        }
        if (page.len() as i64) < PAGE {
            break;
        }
        after = page.last().map(|a| (a.created_at, a.id.clone()));
    }
    let mut file = spool.into_inner().map_err(|e| e.into_error())?;
    file.seek(SeekFrom::Start(0))?;
    zip.start_file("attachments.csv", csv_options)?;
    zip.write_all(BOM)?;
    std::io::copy(&mut (&mut file as &mut dyn Read), zip)?;
    Ok(gaps)
}

/// Streams one file from the store into its entry; false (and a gap line)
/// when the store has no such blob or could not open it. A failure once
/// bytes are flowing stops the export: half an entry cannot be taken back.
fn write_file<W: Write>(
    zip: &mut ZipWriter<StreamWriter<W>>,
    src: &Source<'_>,
    a: &Attachment,
    gaps: &mut Gaps,
) -> anyhow::Result<bool> {
    let name = entry_name(&a.id, &a.filename);
    let key = blobstore::key(src.database_id, &a.id, Variant::Original)?;
    let blob = match src.runtime.block_on(src.store.get(&key, None)) {
        Ok(blob) => blob,
        Err(BlobError::NotFound) => {
            tracing::warn!(database_id = src.database_id, attachment_id = %a.id, "export: an attachment's file is missing from the blob store");
            gaps.missing(format!(
                "{name}: the file is missing from the file store; listed in attachments.csv with a blank path."
            ));
            return Ok(false);
        }
        Err(e) => {
            tracing::warn!(database_id = src.database_id, attachment_id = %a.id, error = %e, "export: could not open an attachment's file");
            gaps.missing(format!(
                "{name}: the file store could not read the file; listed in attachments.csv with a blank path."
            ));
            return Ok(false);
        }
    };
    let method = if already_compressed(&a.content_type, &a.filename) {
        CompressionMethod::Stored
    } else {
        CompressionMethod::Deflated
    };
    let options = SimpleFileOptions::default()
        .compression_method(method)
        .large_file(blob.size >= u64::from(u32::MAX))
        .last_modified_time(zip_time(a.created_at));
    zip.start_file(name, options)?;
    let mut body = blob.body;
    while let Some(chunk) = src.runtime.block_on(body.next()) {
        zip.write_all(&chunk?)?;
    }
    Ok(true)
}

/// `at` as a zip timestamp (zip's range is 1980 to 2107).
fn zip_time(at: DateTime<Utc>) -> zip::DateTime {
    let year = u16::try_from(at.year()).unwrap_or(1980);
    zip::DateTime::from_date_and_time(
        year,
        at.month() as u8,
        at.day() as u8,
        at.hour() as u8,
        at.minute() as u8,
        at.second() as u8,
    )
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filenames_lose_separators_dot_runs_and_controls_but_keep_unicode() {
        assert_eq!(safe_filename("../../etc/passwd"), "._._etc_passwd");
        assert_eq!(safe_filename("a\\b/c"), "a_b_c");
        assert_eq!(safe_filename("x\u{0}y\ny"), "x_y_y");
        assert_eq!(safe_filename("résumé 日本.pdf"), "résumé 日本.pdf");
        assert_eq!(safe_filename("a..b...c"), "a.b.c");
        assert_eq!(safe_filename("name. . "), "name");
        assert_eq!(safe_filename(".."), "file");
        assert_eq!(safe_filename(""), "file");
        assert_eq!(safe_filename("what?.txt"), "what_.txt");
        for name in ["../../x", "..\\..\\x", "a/../b", "...."] {
            let safe = safe_filename(name);
            assert!(
                !safe.contains(['/', '\\']) && !safe.contains(".."),
                "{name} -> {safe}"
            );
        }
        assert_eq!(
            entry_name("att_AAAAAbcdefgh", "a/b.txt"),
            "attachments/att_AAAAAbcdefgh-a_b.txt"
        );
    }

    #[test]
    fn long_filenames_are_cut_keeping_the_extension_and_char_boundaries() {
        let long = format!("{}.jpeg", "é".repeat(300));
        let safe = safe_filename(&long);
        assert!(safe.len() <= MAX_NAME_BYTES, "{}", safe.len());
        assert!(safe.ends_with(".jpeg"));
        assert!(safe.starts_with('é'));
        let no_ext = "x".repeat(500);
        assert_eq!(safe_filename(&no_ext).len(), MAX_NAME_BYTES);
    }

    #[test]
    fn compressed_formats_are_stored() {
        assert!(already_compressed("image/jpeg", "a.bin"));
        assert!(already_compressed("application/octet-stream", "movie.MP4"));
        assert!(already_compressed("video/quicktime", "clip"));
        assert!(already_compressed(
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            "x"
        ));
        assert!(!already_compressed(
            "text/plain; charset=utf-8",
            "notes.txt"
        ));
        assert!(!already_compressed("image/svg+xml", "logo.svg"));
        assert!(!already_compressed("audio/wav", "a.wav"));
    }

    #[test]
    fn the_ceiling_takes_files_oldest_first_until_one_does_not_fit() {
        let mut b = Budget::new(10);
        assert!(b.admit(4));
        assert!(b.admit(6));
        assert!(!b.admit(1), "the ceiling is reached");
        let mut b = Budget::new(10);
        assert!(b.admit(8));
        assert!(!b.admit(5));
        assert!(!b.admit(1), "nothing after the first file that did not fit");
        let mut b = Budget::new(10);
        assert!(b.admit(8));
        b.refund(8);
        assert!(b.admit(10), "a missing file's bytes are given back");
        assert!(Budget::new(0).admit(0));
    }

    #[test]
    fn gaps_list_missing_files_then_count_the_rest() {
        let mut g = Gaps {
            ceiling: 5,
            over_ceiling: 2,
            ..Gaps::default()
        };
        assert!(g
            .describe()
            .starts_with("- 2 attachment file(s) are not in attachments/"));
        for i in 0..MAX_GAP_LINES + 3 {
            g.missing(format!("file {i}"));
        }
        assert_eq!(g.lines.len(), MAX_GAP_LINES);
        assert_eq!(g.more, 3);
        assert!(g
            .describe()
            .ends_with("- and 3 more attachment file(s) missing from the file store.\n"));
        assert_eq!(Gaps::default().describe(), "");
    }
}
