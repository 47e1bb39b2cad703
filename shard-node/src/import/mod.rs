//! `POST /api/databases/{id}/import` (part B "Import").
//!
//! * [`sheet`]: a spreadsheet read as a stream of text rows, again on
//!   every pass ([`sheet_csv`], [`sheet_xlsx`], [`sheet_xls`] per format,
//!   [`sheet_cells`] what they share):
//!   nothing is held but the file's bytes, the row being read and what
//!   the pass keeps, so memory does not grow with the file's rows;
//! * the preview: [`guess`] (one costume per column) and [`preview`] (the
//!   reply); nothing written;
//! * the run: [`plan`] (the `target` and `plan` parts), [`convert`] (a
//!   text cell as the JSON a record write takes), [`columns`] (the plan
//!   checked against file and table, every cell converted, before any
//!   write), [`repeats`] (values repeated in a unique field), [`check`]
//!   (both over the whole file) and [`run`]
//!   (the writes, converting again batch by batch);
//! * [`api`]: the handler.

pub mod api;
pub mod check;
pub mod columns;
pub mod convert;
pub mod guess;
pub mod plan;
pub mod preview;
pub mod repeats;
pub mod run;
pub mod sheet;
pub mod sheet_cells;
pub mod sheet_csv;
pub mod sheet_xls;
pub mod sheet_xlsx;

/// Largest file an import reads (part B).
pub const MAX_FILE_BYTES: usize = 20 * 1024 * 1024;
/// A declared `Content-Length` above this is refused before the body is read.
pub const MAX_DECLARED_BYTES: u64 = 22 * 1024 * 1024;
/// Most data rows (header excluded) an import takes, refused at preview too.
pub const MAX_ROWS: usize = 50_000;
/// Most columns an import reads: as many as a table has fields. A header
/// row, CSV line or worksheet cell beyond it is refused before it is stored.
pub const MAX_COLUMNS: usize = crate::config::MAX_FIELDS_PER_TABLE as usize;
/// Longest column header (characters).
pub const MAX_HEADER_CHARS: usize = 1_000;
