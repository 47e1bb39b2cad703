//! Values repeated within the file in a field that must be unique, refused
//! before anything is written (the clash would otherwise only show
//! mid-write).
//!
//! Each unique column's converted values are kept as 64-bit hashes (keyed
//! per run) with their row, sorted, and the earliest repeat found; at most
//! [`ENTRIES_PER_PASS`] are kept at once, so many unique columns take more
//! passes over the file, not more memory.

use std::hash::BuildHasher;

use crate::error::{ApiError, ApiResult};
use crate::fields::options::scalar;
use crate::import::columns::{quote, Column, Converter};
use crate::import::sheet::Sheet;

/// Most (hash, row) entries held at once (16 bytes each).
pub const ENTRIES_PER_PASS: usize = 1_000_000;

fn is_unique(c: &Column) -> bool {
    c.field.costume.supports_unique() && scalar::wants_unique(&c.field.options)
}

/// Refuses the first value (in column order, then row order) that repeats
/// an earlier row's in a unique field; `rows` is the file's data rows.
pub fn refuse(converter: &Converter, sheet: &mut Sheet, rows: usize) -> ApiResult<()> {
    let unique: Vec<&Column> = converter.columns.iter().filter(|c| is_unique(c)).collect();
    if unique.is_empty() || rows < 2 {
        return Ok(());
    }
    let per_pass = (ENTRIES_PER_PASS / rows).max(1);
    let hasher = std::collections::hash_map::RandomState::new();
    for group in unique.chunks(per_pass) {
        let mut seen: Vec<Vec<(u64, u32)>> =
            group.iter().map(|_| Vec::with_capacity(rows)).collect();
        sheet.for_each_row(|r, row| {
            for (k, c) in group.iter().enumerate() {
                let v = converter.value(c, row)?;
                if !v.is_null() {
                    seen[k].push((hasher.hash_one(v.to_string()), r as u32));
                }
            }
            Ok(())
        })?;
        for (c, mut list) in group.iter().zip(seen) {
            if let Some((earlier, later)) = first_repeat(&mut list) {
                let value = sheet.cell(later, c.index)?;
                return Err(ApiError::bad_request(format!(
                    "Data rows {} and {} both hold '{}' in column {} ('{}'), but field '{}' \
                     must be unique.",
                    earlier + 1,
                    later + 1,
                    quote(&value),
                    c.index,
                    c.header,
                    c.field.name
                )));
            }
        }
    }
    Ok(())
}

/// The earliest row whose value an earlier row holds, with that earlier
/// row: `(earlier, later)`.
fn first_repeat(list: &mut [(u64, u32)]) -> Option<(usize, usize)> {
    list.sort_unstable();
    let mut best: Option<(u32, u32)> = None;
    for run in list.chunk_by(|a, b| a.0 == b.0) {
        if let [first, second, ..] = run {
            if best.is_none_or(|(_, later)| second.1 < later) {
                best = Some((first.1, second.1));
            }
        }
    }
    best.map(|(e, l)| (e as usize, l as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_repeat_is_found() {
        let mut list = vec![(7, 4), (3, 0), (9, 1), (7, 2), (3, 5), (9, 3)];
        assert_eq!(first_repeat(&mut list), Some((1, 3)));
        assert_eq!(first_repeat(&mut [(1, 0), (2, 1)]), None);
    }
}
