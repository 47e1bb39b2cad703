//! The preview reply (part B names its members; the column list's key,
//! `columns`, is ours): `{rowCount, extraSheetsIgnored, columns:[{columnIndex,
//! sourceHeader, guessedCostume, guessedOptions, samples}]}`.
//!
//! One pass over the rows keeps, per column, a [`Guesser`] and at most
//! [`SAMPLES`] samples of at most [`SAMPLE_CHARS`] characters each.

use serde_json::{json, Value};

use crate::error::ApiResult;
use crate::import::guess::Guesser;
use crate::import::sheet::Sheet;

/// Most sample values shown per column.
pub const SAMPLES: usize = 3;
/// Longest sample shown (characters); a longer value is cut to this.
pub const SAMPLE_CHARS: usize = 200;

struct Column {
    guesser: Guesser,
    samples: Vec<String>,
}

pub fn preview(sheet: &mut Sheet) -> ApiResult<Value> {
    let mut columns: Vec<Column> = sheet
        .headers
        .iter()
        .map(|_| Column {
            guesser: Guesser::default(),
            samples: Vec::new(),
        })
        .collect();
    let rows = sheet.for_each_row(|_, row| {
        for (column, value) in columns.iter_mut().zip(row) {
            column.guesser.add(value);
            let value = value.trim();
            if column.samples.len() < SAMPLES && !value.is_empty() {
                column
                    .samples
                    .push(value.chars().take(SAMPLE_CHARS).collect());
            }
        }
        Ok(())
    })?;
    let columns: Vec<Value> = sheet
        .headers
        .iter()
        .zip(columns)
        .enumerate()
        .map(|(i, (header, column))| {
            let g = column.guesser.guess();
            json!({
                "columnIndex": i,
                "sourceHeader": header,
                "guessedCostume": g.costume,
                "guessedOptions": g.options,
                "samples": column.samples,
            })
        })
        .collect();
    Ok(json!({
        "rowCount": rows,
        "extraSheetsIgnored": sheet.extra_sheets,
        "columns": columns,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::sheet::open;

    #[test]
    fn csv_preview_counts_rows_guesses_and_samples() {
        let csv = "\u{feff}Name,Age,Status\nAnn,31,Open\nBob,,Done\nCy,40,Open\nDi,22,Open\n";
        let p = preview(&mut open("a.csv", csv.as_bytes().to_vec()).unwrap()).unwrap();
        assert_eq!(p["rowCount"], 4);
        assert_eq!(p["extraSheetsIgnored"], 0);
        let cols = p["columns"].as_array().unwrap();
        assert_eq!(cols[0]["sourceHeader"], "Name");
        assert_eq!(cols[0]["samples"], json!(["Ann", "Bob", "Cy"]));
        assert_eq!(cols[1]["guessedCostume"], "number");
        assert_eq!(cols[1]["samples"], json!(["31", "40", "22"]));
        assert_eq!(cols[2]["columnIndex"], 2);
        assert_eq!(cols[2]["guessedCostume"], "single_select");
    }

    #[test]
    fn long_samples_are_cut() {
        let long = "x".repeat(SAMPLE_CHARS + 50);
        let csv = format!("Note\n{long}\n");
        let p = preview(&mut open("a.csv", csv.into_bytes()).unwrap()).unwrap();
        let sample = p["columns"][0]["samples"][0].as_str().unwrap();
        assert_eq!(sample.chars().count(), SAMPLE_CHARS);
    }
}
