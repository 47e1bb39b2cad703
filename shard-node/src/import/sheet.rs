//! A spreadsheet read as a stream of text rows: the header row, then the
//! data rows, one at a time. Nothing but the file's bytes and the row being
//! read is held: every pass ([`Sheet::for_each_row`]) reads the file again,
//! so memory does not grow with the file's rows or with what it claims.
//!
//! Decisions where part B is silent:
//! * CSV: a UTF-8 byte order mark is dropped; bytes that are not valid UTF-8
//!   are read as Windows-1252 (what spreadsheet programs write for "CSV"
//!   on Windows), so such a file previews rather than failing.
//! * Ragged rows: a row shorter than the header is padded with empty cells
//!   (trailing empty cells are often left out); a row longer than the header
//!   is refused, naming the row, since its extra cells would have no column.
//! * `.xlsx`/`.xls`: the first worksheet only; the others are counted in
//!   `extra_sheets` (see [`crate::import::sheet_xlsx`] and
//!   [`crate::import::sheet_xls`] for what is refused before reading).
//! * Rows whose every cell is empty are left out (blank lines at the end of
//!   a sheet are common).
//! * At most [`MAX_ROWS`] data rows and [`MAX_COLUMNS`] columns; a header
//!   cell of at most [`MAX_HEADER_CHARS`] characters. The row that breaks a
//!   ceiling is refused as soon as it is read.

use crate::error::{ApiError, ApiResult};
use crate::import::sheet_cells::{fmt_thousands, Rows};
use crate::import::{sheet_csv, sheet_xls, sheet_xlsx, MAX_COLUMNS, MAX_HEADER_CHARS, MAX_ROWS};

/// The file, by kind; each can be read any number of times.
enum Book {
    Csv(sheet_csv::Csv),
    Xlsx(Box<sheet_xlsx::Xlsx>),
    Xls(sheet_xls::Xls),
}

pub struct Sheet {
    pub headers: Vec<String>,
    /// Worksheets after the first, not read.
    pub extra_sheets: usize,
    book: Book,
}

/// Opens `bytes` by the extension of `filename` and reads its header row.
pub fn open(filename: &str, bytes: Vec<u8>) -> ApiResult<Sheet> {
    if bytes.is_empty() {
        return Err(ApiError::bad_request("The file is empty."));
    }
    let lower = filename.to_ascii_lowercase();
    let (book, extra_sheets) = if lower.ends_with(".xlsx") {
        let x = sheet_xlsx::Xlsx::open(bytes)?;
        let extra = x.extra_sheets;
        (Book::Xlsx(Box::new(x)), extra)
    } else if lower.ends_with(".xls") {
        let x = sheet_xls::Xls::open(bytes)?;
        let extra = x.extra_sheets;
        (Book::Xls(x), extra)
    } else {
        (Book::Csv(sheet_csv::Csv::new(bytes)), 0)
    };
    let mut sheet = Sheet {
        headers: Vec::new(),
        extra_sheets,
        book,
    };
    sheet.headers = sheet.read_header()?;
    Ok(sheet)
}

impl Sheet {
    fn rows(&mut self) -> ApiResult<Box<dyn Rows + '_>> {
        Ok(match &mut self.book {
            Book::Csv(c) => Box::new(c.rows()),
            Book::Xlsx(x) => Box::new(x.rows()?),
            Book::Xls(x) => Box::new(x.rows()),
        })
    }

    fn read_header(&mut self) -> ApiResult<Vec<String>> {
        let mut rows = self.rows()?;
        let mut row = Vec::new();
        while rows.next_row(&mut row)? {
            if is_blank(&row) {
                continue;
            }
            if row.len() > MAX_COLUMNS {
                return Err(too_many_columns(row.len()));
            }
            return row
                .iter()
                .enumerate()
                .map(|(i, h)| {
                    let h = h.trim();
                    if h.chars().count() > MAX_HEADER_CHARS {
                        return Err(ApiError::bad_request(format!(
                            "The header of column {i} is longer than {MAX_HEADER_CHARS} \
                             characters; a column header may be at most {MAX_HEADER_CHARS}."
                        )));
                    }
                    Ok(h.to_owned())
                })
                .collect();
        }
        Err(ApiError::bad_request(
            "The file has no header row: the first row must name the columns.",
        ))
    }

    /// Reads the file again and calls `f` with each data row (its index
    /// from 0 and its cells, as many as the header's), in order. The
    /// 50,001st data row and a row longer than the header are refused as
    /// soon as they are read. Returns how many data rows there are.
    pub fn for_each_row(
        &mut self,
        mut f: impl FnMut(usize, &[String]) -> ApiResult<()>,
    ) -> ApiResult<usize> {
        self.pass(|i, row| f(i, row).map(|()| true))
    }

    /// [`Sheet::for_each_row`] until `f` answers `false`.
    fn pass(&mut self, mut f: impl FnMut(usize, &[String]) -> ApiResult<bool>) -> ApiResult<usize> {
        let width = self.headers.len();
        let mut rows = self.rows()?;
        let mut row = Vec::new();
        let mut header_seen = false;
        let mut n = 0;
        while rows.next_row(&mut row)? {
            if is_blank(&row) {
                continue;
            }
            if !header_seen {
                header_seen = true;
                continue;
            }
            if n == MAX_ROWS {
                return Err(too_many_rows());
            }
            if row.len() > width {
                return Err(ApiError::bad_request(format!(
                    "Data row {} has {} cells but the header names {width} columns.",
                    n + 1,
                    row.len()
                )));
            }
            row.resize(width, String::new());
            n += 1;
            if !f(n - 1, &row)? {
                break;
            }
        }
        Ok(n)
    }

    /// How many data rows there are (a pass that keeps nothing).
    pub fn count_rows(&mut self) -> ApiResult<usize> {
        self.for_each_row(|_, _| Ok(()))
    }

    /// The cell of data row `r`, column `c` (a pass up to that row).
    pub fn cell(&mut self, r: usize, c: usize) -> ApiResult<String> {
        let mut found = String::new();
        self.pass(|i, row| {
            if i == r {
                found = row.get(c).cloned().unwrap_or_default();
            }
            Ok(i < r)
        })?;
        Ok(found)
    }
}

fn is_blank(row: &[String]) -> bool {
    row.iter().all(|c| c.trim().is_empty())
}

pub fn too_many_rows() -> ApiError {
    ApiError::bad_request(format!(
        "The file has more than {} data rows; an import takes at most {}.",
        fmt_thousands(MAX_ROWS),
        fmt_thousands(MAX_ROWS)
    ))
}

pub fn too_many_columns(n: usize) -> ApiError {
    ApiError::bad_request(format!(
        "The header row has {} cells; an import reads at most {MAX_COLUMNS} columns (as many as \
         a table has fields).",
        fmt_thousands(n)
    ))
}

#[cfg(test)]
#[path = "sheet_tests.rs"]
mod tests;
