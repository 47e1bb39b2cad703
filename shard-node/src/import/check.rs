//! The whole file checked before anything is written: every row converts
//! ([`Converter::row`]), and no unique field repeats a value
//! ([`repeats::refuse`]).

use crate::error::ApiResult;
use crate::import::columns::Converter;
use crate::import::repeats;
use crate::import::sheet::Sheet;

/// Every row converted once and checked (nothing kept), then values
/// repeated in a unique field refused ([`repeats`]); returns how many
/// data rows the file has.
pub fn check(converter: &Converter, sheet: &mut Sheet) -> ApiResult<usize> {
    let rows = sheet.for_each_row(|r, row| converter.row(r, row).map(drop))?;
    repeats::refuse(converter, sheet, rows)?;
    Ok(rows)
}
