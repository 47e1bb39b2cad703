//! `POST /api/databases/{id}/import` (part B "Import").
//!
//! * [`sheet`]: a spreadsheet read into text cells (CSV or the first
//!   worksheet of an `.xlsx`/`.xls`);
//! * the preview: [`guess`] (one costume per column) and [`preview`] (the
//!   reply); nothing written;
//! * the run: [`plan`] (the `target` and `plan` parts), [`convert`] (a
//!   text cell as the JSON a record write takes), [`columns`] (the plan
//!   checked against file and table, every cell converted, before any
//!   write) and [`run`] (the writes);
//! * [`api`]: the handler.

pub mod api;
pub mod columns;
pub mod convert;
pub mod guess;
pub mod plan;
pub mod preview;
pub mod run;
pub mod sheet;

/// Largest file an import reads (part B).
pub const MAX_FILE_BYTES: usize = 20 * 1024 * 1024;
/// A declared `Content-Length` above this is refused before the body is read.
pub const MAX_DECLARED_BYTES: u64 = 22 * 1024 * 1024;
/// Most data rows (header excluded) an import takes, refused at preview too.
pub const MAX_ROWS: usize = 50_000;
