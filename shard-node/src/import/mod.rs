//! `POST /api/databases/{id}/import` (part B "Import"). This module holds
//! the preview: a spreadsheet read into a [`sheet::Sheet`] (CSV or the first
//! worksheet of an `.xlsx`/`.xls`), one guessed costume per column, and the
//! reply. Nothing here writes; the run branch (`target` + `plan`) is not
//! built yet and answers as the route did before (404).

pub mod api;
pub mod guess;
pub mod preview;
pub mod sheet;

/// Largest file an import reads (part B).
pub const MAX_FILE_BYTES: usize = 20 * 1024 * 1024;
/// A declared `Content-Length` above this is refused before the body is read.
pub const MAX_DECLARED_BYTES: u64 = 22 * 1024 * 1024;
/// Most data rows (header excluded) an import takes, refused at preview too.
pub const MAX_ROWS: usize = 50_000;
