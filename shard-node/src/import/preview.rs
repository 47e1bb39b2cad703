//! The preview reply (part B names its members; the column list's key,
//! `columns`, is ours): `{rowCount, extraSheetsIgnored, columns:[{columnIndex,
//! sourceHeader, guessedCostume, guessedOptions, samples}]}`.

use serde_json::{json, Value};

use crate::import::guess::guess;
use crate::import::sheet::Sheet;

/// Most sample values shown per column.
pub const SAMPLES: usize = 3;

pub fn preview(sheet: &Sheet) -> Value {
    let columns: Vec<Value> = sheet
        .headers
        .iter()
        .enumerate()
        .map(|(i, header)| {
            let values = sheet.rows.iter().map(|r| r[i].as_str());
            let g = guess(values.clone());
            let samples: Vec<&str> = values
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .take(SAMPLES)
                .collect();
            json!({
                "columnIndex": i,
                "sourceHeader": header,
                "guessedCostume": g.costume,
                "guessedOptions": g.options,
                "samples": samples,
            })
        })
        .collect();
    json!({
        "rowCount": sheet.rows.len(),
        "extraSheetsIgnored": sheet.extra_sheets,
        "columns": columns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::sheet::read_csv;

    #[test]
    fn csv_preview_counts_rows_guesses_and_samples() {
        let csv = "\u{feff}Name,Age,Status\nAnn,31,Open\nBob,,Done\nCy,40,Open\nDi,22,Open\n";
        let p = preview(&read_csv(csv.as_bytes()).unwrap());
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
}
