//! What the sheet reader and its formats share: the [`Rows`] a format
//! yields, a worksheet cell as text, cell names and the per-cell ceilings.
//! Below both [`crate::import::sheet`] (the dispatcher) and the formats
//! ([`crate::import::sheet_csv`], [`crate::import::sheet_xlsx`],
//! [`crate::import::sheet_xls`]).

use crate::error::{ApiError, ApiResult};
use crate::import::{MAX_COLUMNS, MAX_ROWS};

/// A source of raw rows (cells as read, before the header rules).
pub trait Rows {
    /// Fills `row` with the next row's cells; `false` at the end.
    fn next_row(&mut self, row: &mut Vec<String>) -> ApiResult<bool>;
}

pub fn not_a_spreadsheet(kind: &str) -> ApiError {
    ApiError::bad_request(format!(
        "The file is named .{kind} but could not be read as an .{kind} spreadsheet."
    ))
}

/// A worksheet cell as text: dates as ISO 8601 (date alone at midnight),
/// whole floats without a fraction, errors as nothing.
pub fn cell_text(cell: &calamine::Data) -> String {
    use calamine::{Data, DataType};
    match cell {
        Data::DateTime(_) | Data::DateTimeIso(_) => match cell.as_datetime() {
            Some(at) if at.time() == chrono::NaiveTime::MIN => at.format("%Y-%m-%d").to_string(),
            Some(at) => at.format("%Y-%m-%dT%H:%M:%S").to_string(),
            None => cell.to_string(),
        },
        Data::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", *f as i64),
        Data::Error(_) | Data::Empty => String::new(),
        _ => cell.to_string(),
    }
}

/// The letters of the zero-based column `col` (`0` is `A`, `26` is `AA`).
pub fn column_letters(col: u32) -> String {
    let mut letters = Vec::new();
    let mut c = col as u64 + 1;
    while c > 0 {
        letters.push(char::from(b'A' + ((c - 1) % 26) as u8));
        c = (c - 1) / 26;
    }
    letters.iter().rev().collect()
}

/// `A1`-style name of the zero-based cell `(row, col)`.
pub fn cell_name(row: u32, col: u32) -> String {
    format!("{}{}", column_letters(col), row as u64 + 1)
}

/// Refuses a cell outside the ceilings before it is stored: a row beyond
/// the header plus [`MAX_ROWS`], a column beyond [`MAX_COLUMNS`].
pub fn check_cell(row: u32, col: u32) -> ApiResult<()> {
    if row as usize > MAX_ROWS {
        return Err(ApiError::bad_request(format!(
            "The worksheet has a value in cell {}, beyond row {}: an import takes a header and at \
             most {} data rows.",
            cell_name(row, col),
            fmt_thousands(MAX_ROWS + 1),
            fmt_thousands(MAX_ROWS)
        )));
    }
    if col as usize >= MAX_COLUMNS {
        return Err(ApiError::bad_request(format!(
            "The worksheet has a value in cell {}, beyond column {} ({}): an import reads at most \
             {MAX_COLUMNS} columns.",
            cell_name(row, col),
            column_letters(MAX_COLUMNS as u32 - 1),
            MAX_COLUMNS
        )));
    }
    Ok(())
}

pub fn fmt_thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
