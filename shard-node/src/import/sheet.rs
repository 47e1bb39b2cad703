//! A spreadsheet read into text cells: the header row and the data rows.
//!
//! Decisions where part B is silent:
//! * CSV: a UTF-8 byte order mark is dropped; bytes that are not valid UTF-8
//!   are read as Windows-1252 (what spreadsheet programs write for "CSV"
//!   on Windows), so such a file previews rather than failing.
//! * Ragged rows: a row shorter than the header is padded with empty cells
//!   (trailing empty cells are often left out); a row longer than the header
//!   is refused, naming the row, since its extra cells would have no column.
//! * `.xlsx`/`.xls`: the first worksheet only; the others are counted in
//!   `extra_sheets`. An `.xlsx` whose parts would inflate beyond
//!   [`MAX_INFLATED_BYTES`] (a zip bomb) is refused before it is read.
//! * Rows whose every cell is empty are left out (blank lines at the end of
//!   a sheet are common).

use std::io::Cursor;

use crate::error::{ApiError, ApiResult};
use crate::import::MAX_ROWS;

/// Most bytes an `.xlsx` may inflate to, all parts together.
pub const MAX_INFLATED_BYTES: u64 = 200 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq)]
pub struct Sheet {
    pub headers: Vec<String>,
    /// Each as wide as `headers`.
    pub rows: Vec<Vec<String>>,
    /// Worksheets after the first, not read.
    pub extra_sheets: usize,
}

/// Reads `bytes` by the extension of `filename`.
pub fn read(filename: &str, bytes: &[u8]) -> ApiResult<Sheet> {
    if bytes.is_empty() {
        return Err(ApiError::bad_request("The file is empty."));
    }
    let lower = filename.to_ascii_lowercase();
    if lower.ends_with(".xlsx") {
        refuse_zip_bomb(bytes)?;
        let book = calamine::open_workbook_from_rs::<calamine::Xlsx<_>, _>(Cursor::new(bytes))
            .map_err(|_| not_a_spreadsheet("xlsx"))?;
        from_workbook::<Cursor<&[u8]>, _>(book, "xlsx")
    } else if lower.ends_with(".xls") {
        let book = calamine::open_workbook_from_rs::<calamine::Xls<_>, _>(Cursor::new(bytes))
            .map_err(|_| not_a_spreadsheet("xls"))?;
        from_workbook::<Cursor<&[u8]>, _>(book, "xls")
    } else {
        read_csv(bytes)
    }
}

fn not_a_spreadsheet(kind: &str) -> ApiError {
    ApiError::bad_request(format!(
        "The file is named .{kind} but could not be read as an .{kind} spreadsheet."
    ))
}

/// Refuses an `.xlsx` (a zip) whose declared inflated size is too large,
/// before any part is inflated.
fn refuse_zip_bomb(bytes: &[u8]) -> ApiResult<()> {
    let mut archive =
        zip::ZipArchive::new(Cursor::new(bytes)).map_err(|_| not_a_spreadsheet("xlsx"))?;
    let mut total: u64 = 0;
    for i in 0..archive.len() {
        let entry = archive
            .by_index_raw(i)
            .map_err(|_| not_a_spreadsheet("xlsx"))?;
        total = total.saturating_add(entry.size());
    }
    if total > MAX_INFLATED_BYTES {
        return Err(ApiError::bad_request(format!(
            "The .xlsx file would inflate to {total} bytes, above the {} MB an import reads; \
             it is refused as a likely zip bomb.",
            MAX_INFLATED_BYTES / (1024 * 1024)
        )));
    }
    Ok(())
}

fn from_workbook<RS, R>(mut book: R, kind: &str) -> ApiResult<Sheet>
where
    RS: std::io::Read + std::io::Seek,
    R: calamine::Reader<RS>,
{
    let sheets = book.sheet_names().len();
    let range = match book.worksheet_range_at(0) {
        None => return Err(ApiError::bad_request("The spreadsheet has no worksheet.")),
        Some(Err(_)) => return Err(not_a_spreadsheet(kind)),
        Some(Ok(range)) => range,
    };
    let raw = range
        .rows()
        .map(|row| row.iter().map(cell_text).collect())
        .collect();
    table_from_rows(raw, sheets.saturating_sub(1))
}

/// A worksheet cell as text: dates as ISO 8601 (date alone at midnight),
/// whole floats without a fraction.
fn cell_text(cell: &calamine::Data) -> String {
    use calamine::{Data, DataType};
    match cell {
        Data::DateTime(_) | Data::DateTimeIso(_) => match cell.as_datetime() {
            Some(at) if at.time() == chrono::NaiveTime::MIN => at.format("%Y-%m-%d").to_string(),
            Some(at) => at.format("%Y-%m-%dT%H:%M:%S").to_string(),
            None => cell.to_string(),
        },
        Data::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", *f as i64),
        Data::Error(_) => String::new(),
        _ => cell.to_string(),
    }
}

/// Reads CSV bytes (see the module notes for encoding and ragged rows).
pub fn read_csv(bytes: &[u8]) -> ApiResult<Sheet> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => {
            encoding_rs::WINDOWS_1252
                .decode_without_bom_handling(bytes)
                .0
        }
    };
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes());
    let mut records = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let record = record.map_err(|e| {
            ApiError::bad_request(format!(
                "The CSV file could not be read at line {}: {e}.",
                i + 1
            ))
        })?;
        records.push(record.iter().map(str::to_owned).collect::<Vec<_>>());
    }
    table_from_rows(records, 0)
}

/// Header row and data rows from raw rows: the first row that is not all
/// empty is the header.
fn table_from_rows(raw: Vec<Vec<String>>, extra_sheets: usize) -> ApiResult<Sheet> {
    let mut rows = raw
        .into_iter()
        .filter(|r| r.iter().any(|c| !c.trim().is_empty()));
    let Some(header) = rows.next() else {
        return Err(ApiError::bad_request(
            "The file has no header row: the first row must name the columns.",
        ));
    };
    let headers: Vec<String> = header.iter().map(|h| h.trim().to_owned()).collect();
    let width = headers.len();
    let mut data = Vec::new();
    for (i, mut row) in rows.enumerate() {
        if data.len() == MAX_ROWS {
            return Err(ApiError::bad_request(format!(
                "The file has more than {} data rows; an import takes at most {}.",
                fmt_thousands(MAX_ROWS),
                fmt_thousands(MAX_ROWS)
            )));
        }
        if row.len() > width {
            return Err(ApiError::bad_request(format!(
                "Data row {} has {} cells but the header names {width} columns.",
                i + 1,
                row.len()
            )));
        }
        row.resize(width, String::new());
        data.push(row);
    }
    Ok(Sheet {
        headers,
        rows: data,
        extra_sheets,
    })
}

fn fmt_thousands(n: usize) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn message(e: ApiError) -> String {
        match e {
            ApiError::BadRequest(m) => m,
            other => panic!("not a 400: {other:?}"),
        }
    }

    #[test]
    fn bom_is_dropped_and_short_rows_padded() {
        let s = read_csv(b"\xEF\xBB\xBFa,b,c\n1,2\n\n3,4,5\n").unwrap();
        assert_eq!(s.headers, ["a", "b", "c"]);
        assert_eq!(s.rows, [vec!["1", "2", ""], vec!["3", "4", "5"]]);
    }

    #[test]
    fn invalid_utf8_is_read_as_windows_1252() {
        let s = read_csv(b"name\ncaf\xE9\n").unwrap();
        assert_eq!(s.rows[0][0], "café");
    }

    #[test]
    fn long_rows_empty_files_and_missing_headers_are_refused() {
        let m = message(read_csv(b"a,b\n1,2,3\n").unwrap_err());
        assert!(m.contains("Data row 1 has 3 cells"), "{m}");
        assert_eq!(
            message(read("x.csv", b"").unwrap_err()),
            "The file is empty."
        );
        assert!(message(read_csv(b"\n,,\n").unwrap_err()).contains("no header row"));
    }

    #[test]
    fn row_ceiling_is_refused_naming_it() {
        let mut csv = String::from("n\n");
        for i in 0..=MAX_ROWS {
            csv.push_str(&format!("{i}\n"));
        }
        let m = message(read_csv(csv.as_bytes()).unwrap_err());
        assert!(m.contains("at most 50,000"), "{m}");
        let exact: String = csv
            .lines()
            .take(MAX_ROWS + 1)
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(read_csv(exact.as_bytes()).unwrap().rows.len(), MAX_ROWS);
    }

    #[test]
    fn a_fake_xlsx_is_refused() {
        let m = message(read("data.XLSX", b"not a zip at all").unwrap_err());
        assert!(m.contains("could not be read as an .xlsx"), "{m}");
    }
}
