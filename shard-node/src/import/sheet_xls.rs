//! The first worksheet of an `.xls` (BIFF, in a compound file). calamine
//! reads every sheet of an `.xls` whole, each into a rectangle spanning its
//! cells, so before it opens the file [`check_workbook`] walks the workbook
//! stream's records itself and refuses what would not fit a bound: more
//! than [`MAX_XLS_SHEETS`] sheets; a value in the first sheet beyond the
//! row or column ceiling (naming the cell); sheets whose rectangles (as
//! their cells or their declared dimensions span them) add up to more than
//! [`MAX_XLS_CELLS`] cells; a shared-string table over
//! [`MAX_XLS_STRINGS_BYTES`].

use std::io::{Cursor, Read};

use calamine::Reader as _;

use crate::error::{ApiError, ApiResult};
use crate::import::sheet_cells::{cell_text, check_cell, fmt_thousands, not_a_spreadsheet, Rows};

/// Most sheets an `.xls` may have.
pub const MAX_XLS_SHEETS: usize = 100;
/// Most cells the rectangles of all an `.xls`'s sheets may span together.
pub const MAX_XLS_CELLS: u64 = 400_000;
/// Largest shared-string table (all its records) of an `.xls`.
pub const MAX_XLS_STRINGS_BYTES: usize = 4 * 1024 * 1024;

pub struct Xls {
    range: calamine::Range<calamine::Data>,
    pub extra_sheets: usize,
}

impl Xls {
    pub fn open(bytes: Vec<u8>) -> ApiResult<Xls> {
        check_workbook(&bytes)?;
        let mut book: calamine::Xls<_> = calamine::open_workbook_from_rs(Cursor::new(bytes))
            .map_err(|_| not_a_spreadsheet("xls"))?;
        let sheets = book.sheet_names().len();
        let range = match book.worksheet_range_at(0) {
            None => return Err(ApiError::bad_request("The spreadsheet has no worksheet.")),
            Some(Err(_)) => return Err(not_a_spreadsheet("xls")),
            Some(Ok(range)) => range,
        };
        Ok(Xls {
            range,
            extra_sheets: sheets.saturating_sub(1),
        })
    }

    pub fn rows(&self) -> XlsRows<'_> {
        XlsRows {
            rows: self.range.rows(),
        }
    }
}

pub struct XlsRows<'a> {
    rows: calamine::Rows<'a, calamine::Data>,
}

impl Rows for XlsRows<'_> {
    fn next_row(&mut self, out: &mut Vec<String>) -> ApiResult<bool> {
        out.clear();
        let Some(row) = self.rows.next() else {
            return Ok(false);
        };
        out.extend(row.iter().map(cell_text));
        while out.last().is_some_and(String::is_empty) {
            out.pop();
        }
        Ok(true)
    }
}

/// One BIFF record.
struct Record<'a> {
    typ: u16,
    data: &'a [u8],
}

/// The records of `stream` from its start, as calamine splits them.
fn records(mut stream: &[u8]) -> impl Iterator<Item = Record<'_>> {
    std::iter::from_fn(move || {
        if stream.len() < 4 {
            return None;
        }
        let typ = u16::from_le_bytes([stream[0], stream[1]]);
        let len = u16::from_le_bytes([stream[2], stream[3]]) as usize;
        let data = stream.get(4..4 + len)?;
        stream = &stream[4 + len..];
        Some(Record { typ, data })
    })
}

fn u16_at(data: &[u8], at: usize) -> Option<u32> {
    Some(u16::from_le_bytes([*data.get(at)?, *data.get(at + 1)?]) as u32)
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?))
}

/// The workbook stream of the compound file.
fn workbook_stream(bytes: &[u8]) -> ApiResult<Vec<u8>> {
    let mut file =
        cfb::CompoundFile::open(Cursor::new(bytes)).map_err(|_| not_a_spreadsheet("xls"))?;
    let mut stream = file
        .open_stream("/Workbook")
        .or_else(|_| file.open_stream("/Book"))
        .map_err(|_| not_a_spreadsheet("xls"))?;
    let mut out = Vec::new();
    (&mut stream)
        .take(bytes.len() as u64)
        .read_to_end(&mut out)
        .map_err(|_| not_a_spreadsheet("xls"))?;
    Ok(out)
}

/// Refuses an `.xls` calamine could not read within the bounds (see the
/// module notes).
pub fn check_workbook(bytes: &[u8]) -> ApiResult<()> {
    let stream = workbook_stream(bytes)?;
    let mut sheets = Vec::new();
    let mut strings = 0usize;
    let mut in_strings = false;
    for r in records(&stream) {
        match r.typ {
            0x0085 => {
                sheets.push(u32_at(r.data, 0).unwrap_or(u32::MAX) as usize);
                if sheets.len() > MAX_XLS_SHEETS {
                    return Err(ApiError::bad_request(format!(
                        "The .xls file has more than {MAX_XLS_SHEETS} sheets; an import reads \
                         files of at most {MAX_XLS_SHEETS}."
                    )));
                }
            }
            0x00FC => {
                in_strings = true;
                strings += r.data.len();
            }
            0x003C if in_strings => strings += r.data.len(),
            0x000A => break,
            _ => in_strings = false,
        }
        if strings > MAX_XLS_STRINGS_BYTES {
            return Err(ApiError::bad_request(format!(
                "The .xls file's shared strings take more than {} MB; an import reads at most \
                 that much of them. Save the sheet as .xlsx or CSV instead.",
                MAX_XLS_STRINGS_BYTES / (1024 * 1024)
            )));
        }
    }
    let mut cells: u64 = 0;
    for (i, &at) in sheets.iter().enumerate() {
        let Some(sheet) = stream.get(at..) else {
            continue;
        };
        cells = cells.saturating_add(sheet_span(sheet, i == 0)?);
        if cells > MAX_XLS_CELLS {
            return Err(ApiError::bad_request(format!(
                "The .xls file's sheets span more than {} cells; an import reads .xls files of \
                 at most {} cells in all. Save the sheet as .xlsx or CSV instead.",
                fmt_thousands(MAX_XLS_CELLS as usize),
                fmt_thousands(MAX_XLS_CELLS as usize)
            )));
        }
    }
    Ok(())
}

/// The cells of the rectangle calamine builds for the sheet at the start
/// of `sheet` (twice: values and formulas), and the cells its declared
/// dimensions reserve; every value of the first sheet is checked against
/// the ceilings.
fn sheet_span(sheet: &[u8], first: bool) -> ApiResult<u64> {
    let mut extent: Option<(u32, u32, u32, u32)> = None;
    let mut declared: u64 = 0;
    let mut depth = 0usize;
    let mut seen_bof = false;
    let mut note = |row: u32, col: u32| -> ApiResult<()> {
        if first {
            check_cell(row, col)?;
        }
        extent = Some(match extent {
            None => (row, row, col, col),
            Some((r0, r1, c0, c1)) => (r0.min(row), r1.max(row), c0.min(col), c1.max(col)),
        });
        Ok(())
    };
    for r in records(sheet) {
        if depth > 0 {
            match r.typ {
                0x0809 => depth += 1,
                0x000A => depth -= 1,
                _ => {}
            }
            continue;
        }
        match r.typ {
            0x0809 if seen_bof => depth += 1,
            0x0809 => seen_bof = true,
            0x000A => break,
            0x0200 => declared = declared.max(declared_cells(r.data)),
            0x0203 | 0x0204 | 0x00D6 | 0x0205 | 0x027E | 0x00FD | 0x0006 => {
                if let (Some(row), Some(col)) = (u16_at(r.data, 0), u16_at(r.data, 2)) {
                    note(row, col)?;
                }
            }
            0x00BD => {
                let (Some(row), Some(first_col)) = (u16_at(r.data, 0), u16_at(r.data, 2)) else {
                    continue;
                };
                let n = r.data.len().saturating_sub(6) / 6;
                note(row, first_col)?;
                if n > 1 {
                    note(row, first_col + n as u32 - 1)?;
                }
            }
            _ => {}
        }
    }
    let span = extent.map_or(0, |(r0, r1, c0, c1)| {
        (r1 - r0 + 1) as u64 * (c1 - c0 + 1) as u64
    });
    Ok(span.saturating_mul(2).max(declared))
}

/// The cells a DIMENSIONS record declares (as calamine reads it).
fn declared_cells(data: &[u8]) -> u64 {
    let (rf, rl, cf, cl) = match data.len() {
        10 => (
            u16_at(data, 0).unwrap_or(0),
            u16_at(data, 2).unwrap_or(0),
            u16_at(data, 4).unwrap_or(0),
            u16_at(data, 6).unwrap_or(0),
        ),
        14 | 16 => (
            u32_at(data, 0).unwrap_or(0),
            u32_at(data, 4).unwrap_or(0),
            u16_at(data, 8).unwrap_or(0),
            u16_at(data, 10).unwrap_or(0),
        ),
        _ => return 0,
    };
    let cf = if cf > 0xFF || cl < cf { 0 } else { cf };
    if rl < 1 || cl < 1 {
        return 1;
    }
    if rl - 1 < rf || cl - 1 < cf {
        // calamine would compute a negative size: refuse as too large.
        return u64::MAX;
    }
    (rl - rf) as u64 * (cl - cf) as u64
}
