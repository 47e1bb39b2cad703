//! Part B "Import", the preview branch: `file` alone previews (CSV and the
//! first worksheet of an .xlsx), writes nothing, and does not check
//! membership; bad input is a 400 saying what is wrong.

use e2e_tests::{Api, Person, Reply};
use serde_json::{json, Value};

const BOUNDARY: &str = "e2e-import-boundary-7f3a";

/// A multipart body: `(name, filename, bytes)` per part.
pub(crate) fn multipart(parts: &[(&str, Option<&str>, &[u8])]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, filename, bytes) in parts {
        body.extend_from_slice(format!("--{BOUNDARY}\r\n").as_bytes());
        let disposition = match filename {
            Some(f) => format!("form-data; name=\"{name}\"; filename=\"{f}\""),
            None => format!("form-data; name=\"{name}\""),
        };
        body.extend_from_slice(format!("Content-Disposition: {disposition}\r\n\r\n").as_bytes());
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    body
}

pub(crate) async fn post_import(api: &Api, db_id: &str, body: Vec<u8>) -> Reply {
    api.post_multipart(&format!("/api/databases/{db_id}/import"), BOUNDARY, body)
        .await
}

pub(crate) async fn preview(api: &Api, db_id: &str, filename: &str, bytes: &[u8]) -> Reply {
    post_import(api, db_id, multipart(&[("file", Some(filename), bytes)])).await
}

fn column(reply: &Value, i: usize) -> &Value {
    &reply["columns"][i]
}

#[tokio::test]
async fn csv_preview_guesses_costumes_and_writes_nothing() {
    let owner = Person::new().await;
    let db_id = &owner.api.new_database("import").await;
    let tables = format!("/api/databases/{db_id}/tables");
    let before = owner.api.get(&tables).await.expect_ok().clone();

    let csv = "\u{feff}Name,Amount,Status,Due,Email,Done\n\
               Ann,12.5,Open,2024-01-31,ann@example.com,yes\n\
               Bob,,Done,2024-02-01,bob@example.com,no\n\
               Cy,7,Open,,cy@example.com,yes\n\
               Di,3,Open,2024-03-01,,no\n";
    let reply = preview(&owner.api, db_id, "people.csv", csv.as_bytes()).await;
    let p = reply.expect_ok();
    assert_eq!(p["rowCount"], 4);
    assert_eq!(p["extraSheetsIgnored"], 0);
    assert_eq!(p["columns"].as_array().unwrap().len(), 6);
    // The BOM is not part of the first header.
    assert_eq!(column(p, 0)["sourceHeader"], "Name");
    assert_eq!(column(p, 0)["columnIndex"], 0);
    assert_eq!(column(p, 0)["guessedCostume"], "single_line_text");
    assert_eq!(column(p, 0)["samples"], json!(["Ann", "Bob", "Cy"]));
    assert_eq!(column(p, 1)["guessedCostume"], "number");
    assert_eq!(column(p, 1)["samples"], json!(["12.5", "7", "3"]));
    assert_eq!(column(p, 2)["guessedCostume"], "single_select");
    assert_eq!(
        column(p, 2)["guessedOptions"],
        json!({"choices": [{"name": "Open"}, {"name": "Done"}]})
    );
    assert_eq!(column(p, 3)["guessedCostume"], "date");
    assert_eq!(column(p, 4)["guessedCostume"], "email");
    assert_eq!(column(p, 5)["guessedCostume"], "checkbox");

    let after = owner.api.get(&tables).await.expect_ok().clone();
    assert_eq!(before, after, "a preview writes nothing");
}

#[tokio::test]
async fn xlsx_preview_reads_the_first_sheet_only() {
    use rust_xlsxwriter::Workbook;
    let mut book = Workbook::new();
    let first = book.add_worksheet();
    first.write(0, 0, "Item").unwrap();
    first.write(0, 1, "Qty").unwrap();
    for (row, (item, qty)) in [("Pen", 3.0), ("Ink", 12.0), ("Pad", 5.0), ("Cap", 1.0)]
        .iter()
        .enumerate()
    {
        first.write(row as u32 + 1, 0, *item).unwrap();
        first.write(row as u32 + 1, 1, *qty).unwrap();
    }
    book.add_worksheet().write(0, 0, "ignored").unwrap();
    book.add_worksheet().write(0, 0, "ignored too").unwrap();
    let bytes = book.save_to_buffer().unwrap();

    let owner = Person::new().await;
    let db_id = &owner.api.new_database("import").await;
    let reply = preview(&owner.api, db_id, "stock.xlsx", &bytes).await;
    let p = reply.expect_ok();
    assert_eq!(p["rowCount"], 4);
    assert_eq!(p["extraSheetsIgnored"], 2);
    assert_eq!(column(p, 0)["sourceHeader"], "Item");
    assert_eq!(column(p, 1)["guessedCostume"], "number");
    assert_eq!(column(p, 1)["samples"], json!(["3", "12", "5"]));
}

#[tokio::test]
async fn membership_is_not_checked_but_the_database_must_exist() {
    let owner = Person::new().await;
    let stranger = Person::new().await;
    let db_id = &owner.api.new_database("import").await;
    let reply = preview(&stranger.api, db_id, "a.csv", b"a\n1\n").await;
    assert_eq!(reply.expect_ok()["rowCount"], 1);

    for missing in ["db_000000000000", "not-an-id"] {
        preview(&owner.api, missing, "a.csv", b"a\n1\n")
            .await
            .expect_error(404, "not_found");
    }
}

#[tokio::test]
async fn row_ceiling_is_refused_at_preview() {
    let owner = Person::new().await;
    let db_id = &owner.api.new_database("import").await;
    let mut csv = String::from("n\n");
    for i in 0..50_001 {
        csv.push_str(&format!("{i}\n"));
    }
    let msg = preview(&owner.api, db_id, "big.csv", csv.as_bytes())
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("50,000"), "{msg}");
}

#[tokio::test]
async fn bad_input_is_a_400_saying_what_is_wrong() {
    let owner = Person::new().await;
    let db_id = &owner.api.new_database("import").await;
    let api = &owner.api;
    let bad = |r: Reply| r.expect_error(400, "bad_request");

    let msg = bad(post_import(api, db_id, multipart(&[("other", None, b"x")])).await);
    assert!(msg.contains("\"file\" is missing"), "{msg}");

    let mut truncated = multipart(&[("file", Some("a.csv"), b"a,b\n1,2\n")]);
    truncated.truncate(truncated.len() - 12);
    let msg = bad(post_import(api, db_id, truncated).await);
    assert!(msg.contains("malformed or truncated"), "{msg}");

    let msg = bad(preview(api, db_id, "empty.csv", b"").await);
    assert_eq!(msg, "The file is empty.");
    let msg = bad(preview(api, db_id, "blank.csv", b"\n,,\n").await);
    assert!(msg.contains("no header row"), "{msg}");
    let msg = bad(preview(api, db_id, "ragged.csv", b"a,b\n1,2,3\n").await);
    assert!(msg.contains("Data row 1 has 3 cells"), "{msg}");
    let msg = bad(preview(api, db_id, "fake.xlsx", b"just text").await);
    assert!(msg.contains("could not be read as an .xlsx"), "{msg}");

    let msg = bad(post_import(
        api,
        db_id,
        multipart(&[("file", Some("a.csv"), b"a\n1\n"), ("plan", None, b"[]")]),
    )
    .await);
    assert!(msg.contains("both target and plan"), "{msg}");
}

#[tokio::test]
async fn an_xlsx_that_inflates_too_far_is_refused() {
    // A zip whose one entry inflates to 201 MB of zeros: a few hundred KB.
    let zeros = vec![0u8; 201 * 1024 * 1024];
    let bomb = zip_of("xl/worksheets/sheet1.xml", &zeros);
    let owner = Person::new().await;
    let db_id = &owner.api.new_database("import").await;
    let msg = preview(&owner.api, db_id, "bomb.xlsx", &bomb)
        .await
        .expect_error(400, "bad_request");
    assert!(msg.contains("zip bomb"), "{msg}");
}

/// A one-entry deflated zip.
fn zip_of(name: &str, bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut out = std::io::Cursor::new(Vec::new());
    let mut zip = zip::ZipWriter::new(&mut out);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    zip.start_file(name, options).unwrap();
    zip.write_all(bytes).unwrap();
    zip.finish().unwrap();
    out.into_inner()
}
